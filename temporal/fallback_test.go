package temporal_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestWorkflowFallbackDeclinedCallsNotRun checks that over Temporal, as in
// process, the calls before a response's last fallback block (the declined
// attempt's) are never scheduled as activities nor answered, streamed or not.
func TestWorkflowFallbackDeclinedCallsNotRun(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "whole"
		if stream {
			name = "streamed"
		}
		t.Run(name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(
					toolruntest.ToolUse("t_declined", "get_weather", cityIn{City: "Paris"}),
					toolruntest.Fallback("claude-test", "claude-fallback"),
					toolruntest.ToolUse("t2", "get_weather", cityIn{City: "Oslo"})),
				toolruntest.Message(toolruntest.Text("Sunny in Oslo.")),
			))
			var calls counter
			env := newEnv(t, s, []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Stream: stream})
			ro := fastRetries
			env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &ro))
			out := outcome(t, env)
			if out.StopReason != toolrun.StopEndTurn {
				t.Errorf("outcome = %q (%s), want end_turn", out.StopReason, out.Detail)
			}
			if diff := cmp.Diff(calls.all(), map[string]int{"weather Oslo": 1}); diff != "" {
				t.Errorf("tool runs (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(seenResults(s), []string{"t2 error=false sunny in Oslo"}); diff != "" {
				t.Errorf("results the model saw (-got +want):\n%s", diff)
			}
			if errs := s.Errors(); len(errs) > 0 {
				t.Errorf("the fake refused a request: %v", errs)
			}
		})
	}
}
