package toolrun_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestAppendMessagesToolResultOfPendingCall: a client that answers a call
// awaiting approval itself, with a tool_result in messages it appends,
// answers the call: the tool never runs, a later approval is refused
// (ErrNotAwaitingApproval), and the next request holds one result for the
// call, the client's. A tool_result for a call allowed already is dropped:
// the call's own result is the one sent.
func TestAppendMessagesToolResultOfPendingCall(t *testing.T) {
	for _, tt := range []struct {
		name       string
		allowFirst bool // the call is allowed before the messages come
		want       string
		wantRuns   int
	}{
		{name: "awaiting approval", want: "the client's answer"},
		{name: "allowed", allowFirst: true, want: "echo x", wantRuns: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("c1", "echo", map[string]string{"s": "x"})),
				toolruntest.Message(toolruntest.Text("done")),
			))
			runs := 0
			echo := toolrun.NewTool("echo", "echoes", func(ctx context.Context, in struct {
				S string `json:"s"`
			}) (string, error) {
				runs++
				return "echo " + in.S, nil
			})
			opts := &toolrun.Options{Policy: policy.RequireApproval("a person decides"), Logger: slog.New(slog.DiscardHandler)}
			r := toolrun.New(s.Client(), userParams("go"), []toolrun.Tool{echo}, opts)
			res, err := r.Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
				t.Fatalf("got %v, %v; want awaiting approval", res.StopReason, err)
			}
			if tt.allowFirst {
				if err := r.Decide("c1", toolrun.Decision{}); err != nil {
					t.Fatal(err)
				}
			}
			r.AppendMessages(anthropic.NewBetaUserMessage(
				anthropic.NewBetaToolResultBlock("c1", "the client's answer", false),
				anthropic.NewBetaTextBlock("and more"),
			))
			if !tt.allowFirst {
				if err := r.Decide("c1", toolrun.Decision{}); !errors.Is(err, toolrun.ErrNotAwaitingApproval) {
					t.Errorf("Decide after the client answered the call: %v, want ErrNotAwaitingApproval", err)
				}
			}
			if res, err = r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("got %v, %v; want end_turn", res.StopReason, err)
			}
			if runs != tt.wantRuns {
				t.Errorf("the tool ran %d times, want %d", runs, tt.wantRuns)
			}
			reqs := s.Requests()
			var got []string
			for _, m := range reqs[len(reqs)-1].Conversation {
				for _, b := range m.Content {
					if b.Type == "tool_result" && b.ToolUseID == "c1" {
						got = append(got, b.ResultText())
					}
				}
			}
			if diff := cmp.Diff([]string{tt.want}, got); diff != "" {
				t.Errorf("the results of c1 in the last request (-want +got):\n%s", diff)
			}
		})
	}
}
