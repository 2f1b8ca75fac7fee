package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestDecisionStandsAcrossResume moves a run through four runners, each
// resumed from the last one's State, as a workflow does with one runner per
// activity: the first decides a turn of two calls (t1 allowed, t2 deferred
// to a person), the second runs t1 and suspends, the third steps the
// suspended run, the fourth gets the person's decision for t2 and
// finishes. A decision recorded in the State stands: the policies are
// asked once about t1, and about t2 once for the deferral and once for the
// person's answer (the one decision that is redone), with one ToolDecided
// for each.
func TestDecisionStandsAcrossResume(t *testing.T) {
	tests := []struct {
		name     string
		person   toolrun.Decision
		answered toolrun.Decision // the policy's verdict on t2 once the person answered
		want     []string
		wantSeen []string
	}{
		{
			name:     "allowed",
			person:   toolrun.Decision{},
			answered: policy.Defer("asks a person"),
			want:     []string{"t1 allow policy", "t2 defer policy", "t1 finished", "t2 allow approval", "t2 finished"},
			wantSeen: []string{"t1 error=false sunny in Lyon", "t2 error=false sunny in Paris"},
		},
		{
			// A deny rule still wins over the person's Allow, when the
			// policies take the person's answer.
			name:     "overruled",
			person:   toolrun.Decision{},
			answered: policy.Deny("not any more"),
			want:     []string{"t1 allow policy", "t2 defer policy", "t1 finished", "t2 deny policy", "t2 finished"},
			wantSeen: []string{"t1 error=false sunny in Lyon", "t2 error=true tool call denied: not any more"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(
					toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Paris"}),
					toolruntest.ToolUse("t2", "get_weather", map[string]any{"city": "Paris"}),
				),
				toolruntest.Message(toolruntest.Text("Sunny.")),
			))
			var calls, asked counter
			answered := false // the person has answered
			var events []string
			opts := &toolrun.Options{
				Logger: discard(),
				Policy: func(_ context.Context, c toolrun.PolicyCall) toolrun.Decision {
					asked.inc(c.ID)
					switch {
					case c.ID == "t1":
						return toolrun.Decision{Kind: toolrun.Allow, Input: json.RawMessage(`{"city":"Lyon"}`)}
					case answered:
						return tt.answered
					}
					return policy.Defer("asks a person")
				},
				OnEvent: func(_ context.Context, e toolrun.Event) {
					switch e := e.(type) {
					case toolrun.ToolDecided:
						events = append(events, fmt.Sprintf("%s %s %s", e.Call.ID, e.Decision.Kind, e.By))
					case toolrun.ToolFinished:
						events = append(events, e.Result.Call.ID+" finished")
					}
				},
			}
			tools := []toolrun.Tool{weatherTool(&calls)}
			ctx := t.Context()
			resume := func(st *toolrun.State) *toolrun.Runner {
				t.Helper()
				r, err := toolrun.Resume(client(s), st, tools, opts)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}

			r1 := toolrun.New(client(s), userParams("weather?"), tools, opts)
			plans, err := driver.Advance(ctx, r1)
			if err != nil || len(plans) != 1 || plans[0].Call.ID != "t1" {
				t.Fatalf("Advance = %v, %v; want t1 to run", plans, err)
			}

			r2 := resume(r1.State())
			if _, err := driver.ExecuteCall(ctx, r2, "t1"); err != nil {
				t.Fatal(err)
			}
			if plans, err := driver.Advance(ctx, r2); err != nil || len(plans) != 0 || r2.Result() == nil || r2.Result().StopReason != toolrun.StopAwaitingApproval {
				t.Fatalf("second Advance = %v, %v, %+v; want the run awaiting approval", plans, err, r2.Result())
			}

			r3 := resume(r2.State())
			if res, err := r3.Run(ctx); err != nil || res.StopReason != toolrun.StopAwaitingApproval {
				t.Fatalf("third runner: %v, %v; want awaiting_approval", res.StopReason, err)
			}

			r4 := resume(r3.State())
			if err := r4.Decide("t2", tt.person); err != nil {
				t.Fatal(err)
			}
			if err := r4.Decide("t2", tt.person); !errors.Is(err, toolrun.ErrNotAwaitingApproval) {
				t.Errorf("a second Decide: %v, want ErrNotAwaitingApproval", err)
			}
			answered = true
			res, err := r4.Run(ctx)
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("fourth runner: %v, %v; want end_turn", res.StopReason, err)
			}
			if got := asked.get("t1"); got != 1 {
				t.Errorf("the policy was asked about t1 %d times, want 1", got)
			}
			if got := asked.get("t2"); got != 2 {
				t.Errorf("the policy was asked about t2 %d times, want 2: for the deferral and for the person's answer", got)
			}
			if diff := cmp.Diff(tt.want, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSeen, seenResults(s)); diff != "" {
				t.Errorf("results the model saw (-want +got):\n%s", diff)
			}
		})
	}
}
