//go:build hunt

package toolrun_test

import (
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestHuntToolUseIDRepeatedFromAnEarlierTurn: the README promises that a
// response that "repeats a tool_use id ... runs nothing". checkResponse
// (request.go) looks for a repeated id within the one response only: a
// response whose tool_use id is that of a call of an earlier turn (a
// faulty API or proxy replaying a cached response, say) passes, its call
// runs, and its tool_use and tool_result are committed. The history then
// holds one id twice, which the API refuses ("tool_use ids must be
// unique") at every later request: the run stops with StopError, and Run
// again sends the same refused history for ever, a wedged run. What should
// hold: a response whose tool_use id is already in the history is
// malformed like a repeat within it (asked for once more, then
// StopMalformedResponse), nothing of it runs, and the history stays one the
// API accepts.
func TestHuntToolUseIDRepeatedFromAnEarlierTurn(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	var calls counter
	r := toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard()})
	res, err := r.Run(t.Context())
	if got := calls.get("get_weather"); got != 1 {
		t.Errorf("get_weather ran %d times for one tool_use id, want once (stop %q, %v)", got, res.StopReason, err)
	}
	checkHistory(t, res.Messages)
	if res.StopReason == toolrun.StopError {
		// Another Run sends the same history again.
		res2, err2 := r.Run(t.Context())
		t.Errorf("Run stopped with %q, %v; Run again: %q, %v; want StopMalformedResponse, a run that can go on", res.StopReason, err, res2.StopReason, err2)
	}
}
