//go:build review

// These tests fail on purpose: each pins a defect whose fix belongs in
// engine.go, which another change is editing. Run them with
// go test -tags review -run 'TestPending' .

package toolrun_test

import (
	"encoding/json"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestPendingStateOfUnencodableRunSharesNothing: Runner.State says it
// "shares nothing with the runner", but when the run's data does not
// encode (here a history the caller gave with a tool_use input that is not
// JSON) it silently returns the shallow clone, whose messages' blocks are
// the runner's own: writing into the copy changes the run's history.
// It should say so (an error or a log) and still share nothing.
func TestPendingStateOfUnencodableRunSharesNothing(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
	p := userParams("go")
	p.Messages = append(p.Messages,
		anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{
			{OfText: &anthropic.BetaTextBlockParam{Text: "thinking aloud"}},
			{OfToolUse: &anthropic.BetaToolUseBlockParam{ID: "x1", Name: "write_file", Input: json.RawMessage(`{"path":`)}},
		}}})
	r := toolrun.New(client(s), p, nil, &toolrun.Options{Logger: discard()})
	st := r.State()
	st.Params.Messages[1].OfAssistant.Content[0].OfText.Text = "forged"
	if got := r.Messages()[1].OfAssistant.Content[0].OfText.Text; got != "thinking aloud" {
		t.Errorf("the runner's history changed through Runner.State's copy: %q", got)
	}
}

// TestPendingExecuteCallResultSharesNothing: the result ExecuteCall returns
// is the runner's own (r.live), whose content blocks the State's result
// shares: writing into it after the fact, around AfterTool, changes what
// the model receives.
func TestPendingExecuteCallResultSharesNothing(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/one", Text: "1"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	var writes counter
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{writeTool(&writes)}, &toolrun.Options{Logger: discard()})
	calls, err := r.Advance(t.Context())
	if err != nil || len(calls) != 1 {
		t.Fatalf("Advance = %v, %v; want w1", calls, err)
	}
	res, err := r.ExecuteCall(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	res.Content[0].OfText.Text = "forged"
	for {
		calls, err := r.Advance(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(calls) == 0 && r.Result() != nil {
			break
		}
	}
	if got := toolruntest.ResultTexts(r.Messages())["w1"]; got != "wrote /tmp/one" {
		t.Errorf("the model got %q for w1, want the tool's own result", got)
	}
}
