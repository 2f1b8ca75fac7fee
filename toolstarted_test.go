package toolrun_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestToolStartedCarriesTheInputThatRuns checks that ToolStarted carries
// the input the tool runs with, a policy's or a person's edit rather than
// the model's, and that an observer writing into it changes neither what
// the tool gets nor the State.
func TestToolStartedCarriesTheInputThatRuns(t *testing.T) {
	lyon := json.RawMessage(`{"city":"Lyon"}`)
	tests := []struct {
		name   string
		policy toolrun.Policy
		person *toolrun.Decision // the answer to the policy's Defer
	}{
		{name: "policy edit", policy: func(context.Context, toolrun.PolicyCall) toolrun.Decision {
			return toolrun.Decision{Kind: toolrun.Allow, Input: lyon}
		}},
		{name: "person's edit", policy: policy.RequireApproval("check"), person: &toolrun.Decision{Kind: toolrun.Allow, Input: lyon}},
		{name: "no edit", policy: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Paris"})),
				toolruntest.Message(toolruntest.Text("Sunny.")),
			))
			var calls counter
			var started []string
			opts := &toolrun.Options{Logger: discard(), Policy: tt.policy}
			opts.OnEvent = func(ctx context.Context, e toolrun.Event) {
				if e, ok := e.(toolrun.ToolStarted); ok {
					started = append(started, string(e.Call.Input))
					for i := range e.Call.Input {
						e.Call.Input[i] = 'x' // the observer's own bytes
					}
				}
			}
			r := toolrun.New(client(s), userParams("weather?"), []toolrun.Tool{weatherTool(&calls)}, opts)
			res, err := r.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if tt.person != nil {
				if res.StopReason != toolrun.StopAwaitingApproval {
					t.Fatalf("StopReason = %q, want awaiting approval", res.StopReason)
				}
				if err := r.Decide("t1", *tt.person); err != nil {
					t.Fatal(err)
				}
				if res, err = r.Run(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("StopReason = %q, want end_turn", res.StopReason)
			}
			want, ran := `{"city":"Lyon"}`, "t1 error=false sunny in Lyon"
			if tt.name == "no edit" {
				want, ran = `{"city":"Paris"}`, "t1 error=false sunny in Paris"
			}
			if diff := cmp.Diff([]string{want}, started); diff != "" {
				t.Errorf("ToolStarted inputs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{ran}, seenResults(s)); diff != "" {
				t.Errorf("results the model saw (-want +got):\n%s", diff)
			}
		})
	}
}
