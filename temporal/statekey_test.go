package temporal_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestStateKeyOnWorkers: options shared with in-process runners may carry
// a StateKey; the workflow's activities do not use it (the workflow
// changes the state between steps and holds no key), say so once with a
// Warn, and the run goes on as without it, rather than failing its first
// step on a state that no one could have signed.
func TestStateKeyOnWorkers(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", cityIn{City: "Paris"})),
		toolruntest.Message(toolruntest.ToolUse("t2", "get_weather", cityIn{City: "Oslo"})),
		toolruntest.Message(toolruntest.Text("Sunny."))))
	var logs bytes.Buffer
	calls := &counter{}
	env := newEnv(t, s, []toolrun.Tool{weatherTool(calls)}, &toolrun.Options{
		StateKey: []byte("0123456789abcdef0123456789abcdef"),
		Logger:   slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &fastRetries))
	out := outcome(t, env)
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Sunny." {
		t.Fatalf("got %q %q (%s), want end_turn %q", out.StopReason, out.Text, out.Detail, "Sunny.")
	}
	if diff := cmp.Diff(map[string]int{"weather Paris": 1, "weather Oslo": 1}, calls.all()); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
	if n := strings.Count(logs.String(), "StateKey is not used"); n != 1 {
		t.Errorf("%d Warn records about StateKey, want 1:\n%s", n, logs.String())
	}
}
