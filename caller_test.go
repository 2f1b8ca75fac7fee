package toolrun_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestCallerAndToolsetSeen checks that how a call was made (from code the
// model ran, as a member of a toolset) reaches the policy, the State and
// the log, so that a rule can treat such a call apart.
func TestCallerAndToolsetSeen(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{
		"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": map[string]any{"city": "Paris"},
		"caller":       map[string]any{"type": "code_execution_20260120", "tool_id": "srvtoolu_1"},
		"toolset_name": "weather",
	})
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.Block{Type: "tool_use", Raw: raw}),
		toolruntest.Message(toolruntest.Text("Sunny.")),
	))
	var seen []toolrun.ToolCall
	var logs logBuffer
	var calls counter
	opts := &toolrun.Options{
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Policy: func(_ context.Context, c toolrun.PolicyCall) toolrun.Decision {
			c.Input = nil
			seen = append(seen, c.ToolCall)
			return toolrun.Decision{}
		},
	}
	weather := weatherTool(&calls)
	weather.Toolset = "weather" // the call is one of the weather toolset's
	r := toolrun.New(client(s), userParams("Weather?"), []toolrun.Tool{weather}, opts)
	if _, err := r.Run(bounded(t)); err != nil {
		t.Fatal(err)
	}
	want := []toolrun.ToolCall{{ID: "toolu_1", Name: "get_weather", Toolset: "weather", Caller: "code_execution_20260120", CallerToolID: "srvtoolu_1"}}
	if diff := cmp.Diff(seen, want); diff != "" {
		t.Errorf("calls the policy saw (-got +want):\n%s", diff)
	}
	var logged bool
	for _, rec := range logs.records(t) {
		if rec["msg"] == "toolrun: tool call finished" {
			logged = rec["caller"] == "code_execution_20260120" && rec["caller_tool_id"] == "srvtoolu_1" && rec["toolset"] == "weather"
		}
	}
	if !logged {
		t.Errorf("no log record of the finished call names its caller and toolset: %v", logs.records(t))
	}
}
