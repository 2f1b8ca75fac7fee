package toolrun_test

import (
	"context"
	"log/slog"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestRunnerSetResult runs a turn's call on a runner resumed from the
// run's State, as a worker does, records its result on the runner that
// holds the run with SetResult, and checks that the next request carries
// that result, and that a second result for the call, or one for a call
// the turn does not have, is refused.
func TestRunnerSetResult(t *testing.T) {
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "echo", map[string]string{"text": "hi"})),
		toolruntest.Message(toolruntest.Text("Done."))))
	type echoIn struct {
		Text string `json:"text"`
	}
	ran := 0
	tools := []toolrun.Tool{toolrun.NewTool("echo", "Echo the text", func(ctx context.Context, in echoIn) (string, error) {
		ran++
		return "echo: " + in.Text, nil
	})}
	opts := &toolrun.Options{Logger: slog.New(slog.DiscardHandler)}
	params := anthropic.BetaMessageNewParams{Model: "claude-test", MaxTokens: 1024, Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))}}
	r := toolrun.New(model.Client(), params, tools, opts)
	calls, err := driver.Advance(t.Context(), r)
	if err != nil || len(calls) != 1 {
		t.Fatalf("got calls %v, %v; want one", calls, err)
	}
	other, err := toolrun.Resume(model.Client(), r.State(), tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := driver.ExecuteCall(t.Context(), other, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetResult("t1", res); err != nil {
		t.Fatal(err)
	}
	if err := r.SetResult("t1", res); err == nil {
		t.Error("a second result for t1 was taken, want an error")
	}
	if err := r.SetResult("t9", res); err == nil {
		t.Error("a result for a call the turn does not have was taken, want an error")
	}
	if calls, err := driver.Advance(t.Context(), r); err != nil || len(calls) != 0 {
		t.Fatalf("got calls %v, %v; want none", calls, err)
	}
	if ran != 1 {
		t.Errorf("the tool ran %d times, want 1", ran)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("got %d requests, want 2", len(reqs))
	}
	conv := reqs[1].Conversation
	last := conv[len(conv)-1].Content
	if len(last) != 1 || last[0].Type != "tool_result" || last[0].ToolUseID != "t1" || last[0].ResultText() != "echo: hi" {
		t.Errorf("got last message %+v, want t1's result %q", last, "echo: hi")
	}
}
