package toolrun_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestHugeSchemaBounds: a length, item or property bound too large for an
// int still means what it says. Read by its low 64 bits, minLength 1e300
// became 0 and let every input through to the tool, and maxLength 1e300
// became 0 and refused every input.
func TestHugeSchemaBounds(t *testing.T) {
	tests := []struct {
		name, schema, input string
		wantRun             bool
	}{
		{"minLength 1e300", `{"type":"object","properties":{"a":{"minLength":1e300}}}`, `{"a":"x"}`, false},
		{"maxLength 1e300", `{"type":"object","properties":{"a":{"maxLength":1e300}}}`, `{"a":"x"}`, true},
		{"minLength 2^64", `{"type":"object","properties":{"a":{"minLength":18446744073709551616}}}`, `{"a":"x"}`, false},
		{"maxLength 1e19", `{"type":"object","properties":{"a":{"maxLength":1e19}}}`, `{"a":"x"}`, true},
		{"minItems 2^64+1", `{"type":"object","properties":{"a":{"minItems":18446744073709551617}}}`, `{"a":[1]}`, false},
		{"maxItems 2^64", `{"type":"object","properties":{"a":{"maxItems":18446744073709551616}}}`, `{"a":[1]}`, true},
		{"minProperties 2^64", `{"type":"object","minProperties":18446744073709551616}`, `{"a":1}`, false},
		{"maxProperties 2^64", `{"type":"object","maxProperties":18446744073709551616}`, `{"a":1}`, true},
		{"minContains 1e30", `{"type":"object","properties":{"a":{"contains":{"type":"integer"},"minContains":1e30}}}`, `{"a":[1]}`, false},
		{"maxContains 1e30", `{"type":"object","properties":{"a":{"contains":{"type":"integer"},"maxContains":1e30}}}`, `{"a":[1]}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := false
			tool, err := toolrun.NewRawTool("t", "", []byte(tt.schema), func(context.Context, json.RawMessage) (string, error) {
				ran = true
				return "ran", nil
			})
			if err != nil {
				t.Fatal(err)
			}
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("c1", "t", json.RawMessage(tt.input))),
				toolruntest.Message(toolruntest.Text("done")),
			))
			res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{tool}, &toolrun.Options{Logger: discard()}).Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
			}
			if ran != tt.wantRun {
				t.Errorf("the tool ran = %v, want %v (result %q)", ran, tt.wantRun, toolResults(s.Requests()[1])[0].ResultText())
			}
		})
	}
}
