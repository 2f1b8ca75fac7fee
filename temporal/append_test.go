package temporal_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
)

func userText(text string) anthropic.BetaMessageParam {
	return anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(text))
}

// TestAppendMessagesOnServer: messages appended while a run awaits a
// decision follow the call's result in the request after the decision;
// messages that are not user messages, or over MaxAppendBytes (one
// update, or two together on one turn), are refused by the workflow as by
// the client, and change nothing. The history is the golden
// append-messages.json.
func TestAppendMessagesOnServer(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-append")
	ctx, run, calls, model := startApprovalRun(t, c, queue,
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		toolruntest.Message(toolruntest.Text("Done.")))
	waitFor(t, 30*time.Second, "the call awaiting approval", func() bool {
		p, err := temporal.Pending(ctx, c, queue, nil)
		return err == nil && len(p) == 1
	})
	// send bypasses the client's checks, as another client might.
	send := func(messages ...anthropic.BetaMessageParam) error {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: queue, UpdateName: temporal.AppendUpdate, Args: []any{messages}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		return temporal.FromFailure(err)
	}
	assistant := anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{anthropic.NewBetaTextBlock("I said")}}}
	big := userText(strings.Repeat("x", temporal.MaxAppendBytes))
	for _, tt := range []struct {
		name    string
		err     error
		want    error  // the sentinel, or nil
		wantMsg string // what the error says, if no sentinel
	}{
		{"too large, by the client", temporal.AppendMessages(ctx, c, queue, big), temporal.ErrMessagesTooLarge, ""},
		{"too large, by the workflow", send(big), temporal.ErrMessagesTooLarge, ""},
		{"an assistant message, by the client", temporal.AppendMessages(ctx, c, queue, assistant), nil, "not a user message"},
		{"an assistant message, by the workflow", send(assistant), nil, "not a user message"},
		{"none, by the workflow", send(), nil, "no messages"},
	} {
		switch {
		case tt.err == nil:
			t.Errorf("%s: got no error, want a refusal", tt.name)
		case tt.want != nil && !errors.Is(tt.err, tt.want):
			t.Errorf("%s: got %v, want an error wrapping %v", tt.name, tt.err, tt.want)
		case tt.want == nil && !strings.Contains(tt.err.Error(), tt.wantMsg):
			t.Errorf("%s: got %v, want an error saying %q", tt.name, tt.err, tt.wantMsg)
		}
	}
	first := userText("and then?")
	if err := temporal.AppendMessages(ctx, c, queue, first); err != nil {
		t.Fatalf("a message: %v", err)
	}
	// A message the client lets through, at the bound alone, which with
	// the first is over it.
	size := func(m anthropic.BetaMessageParam) int {
		b, err := json.Marshal([]anthropic.BetaMessageParam{m})
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	second := userText(strings.Repeat("y", temporal.MaxAppendBytes-size(userText(""))))
	if size(second) != temporal.MaxAppendBytes {
		t.Fatalf("the second message is %d bytes, want %d", size(second), temporal.MaxAppendBytes)
	}
	if err := temporal.AppendMessages(ctx, c, queue, second); !errors.Is(err, temporal.ErrMessagesTooLarge) {
		t.Errorf("a message at the bound after another on the same turn: got %v, want ErrMessagesTooLarge", err)
	}
	if err := temporal.Decide(ctx, c, queue, "t1", toolrun.Decision{}, nil); err != nil {
		t.Fatal(err)
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
		t.Fatalf("outcome %q %q, want end_turn Done.", out.StopReason, out.Text)
	}
	if got := calls.all()["write /a"]; got != 1 {
		t.Errorf("the tool ran %d times, want once", got)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	var got []string
	for _, m := range reqs[1].Conversation {
		for _, b := range m.Content {
			s := m.Role + " " + b.Type
			switch b.Type {
			case "text":
				s += " " + b.Text[:min(len(b.Text), 12)]
			case "tool_result":
				s += " " + b.ResultText()
			}
			got = append(got, s)
		}
	}
	want := []string{"user text go", "assistant tool_use", "user tool_result wrote /a", "user text and then?"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the request after the decision (-want +got):\n%s", diff)
	}
	recordHistory(t, c, queue, "append-messages")
}

// TestAppendMessagesTurnInFlight: messages sent while a step's model
// request is in flight are refused with ErrNotAwaiting, and the run does
// not send them.
func TestAppendMessagesTurnInFlight(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-append-busy")
	entered, release := make(chan struct{}), make(chan struct{})
	model := toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		if r.Attempt == 1 {
			select {
			case entered <- struct{}{}:
			default:
			}
		}
		<-release
		return toolruntest.Message(toolruntest.Text("hello"))
	}})
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), nil, &toolrun.Options{Logger: discard()}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the step's request did not reach the model")
	}
	err = temporal.AppendMessages(ctx, c, queue, userText("too soon"))
	close(release)
	if !errors.Is(err, temporal.ErrNotAwaiting) {
		t.Errorf("a message during a turn: got %v, want ErrNotAwaiting", err)
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	for _, r := range model.Requests() {
		for _, m := range r.Conversation {
			for _, b := range m.Content {
				if b.Text == "too soon" {
					t.Fatalf("the refused message reached the model")
				}
			}
		}
	}
}
