package toolrun_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestDraftsRunEndToEnd: a tool whose schema declares draft-04 or 2019-09
// is validated as that draft. Before issue 14, every call of such a tool
// was rejected with "cannot validate version …".
func TestDraftsRunEndToEnd(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		input  any
		want   string // the tool_result's text
		isErr  bool
	}{
		{
			name: "draft-04 valid",
			schema: `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","required":["n"],
				"definitions":{"pos":{"type":"number","minimum":0,"exclusiveMinimum":true}},
				"properties":{"n":{"$ref":"#/definitions/pos"}}}`,
			input: map[string]any{"n": 2},
			want:  `{"n":2}`,
		},
		{
			name: "draft-04 invalid",
			schema: `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","required":["n"],
				"definitions":{"pos":{"type":"number","minimum":0,"exclusiveMinimum":true}},
				"properties":{"n":{"$ref":"#/definitions/pos"}}}`,
			input: map[string]any{"n": 0},
			want:  "invalid input for tool \"t\": 1 problem:\n- /n: expected a number > 0, got 0 (number)",
			isErr: true,
		},
		{
			name: "2019-09 valid",
			schema: `{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object",
				"$recursiveAnchor":true,"properties":{"child":{"$recursiveRef":"#"},"name":{"type":"string"}},
				"dependentRequired":{"child":["name"]}}`,
			input: map[string]any{"name": "a", "child": map[string]any{"name": "b"}},
			want:  `{"child":{"name":"b"},"name":"a"}`,
		},
		{
			name:   "draft-07 without the trailing #",
			schema: `{"$schema":"http://json-schema.org/draft-07/schema","type":"object","properties":{"x":{"const":1}}}`,
			input:  map[string]any{"x": 1},
			want:   `{"x":1}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, err := toolrun.NewRawTool("t", "", []byte(tt.schema), func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
				return in, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("c1", "t", tt.input)),
				toolruntest.Message(toolruntest.Text("done")),
			))
			if _, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{tool}, &toolrun.Options{Logger: discard()}).Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			results := toolResults(s.Requests()[1])
			if len(results) != 1 {
				t.Fatalf("got %d tool results, want 1", len(results))
			}
			type result struct {
				Text  string
				IsErr bool
			}
			got := result{results[0].ResultText(), results[0].IsError}
			if diff := cmp.Diff(result{tt.want, tt.isErr}, got); diff != "" {
				t.Errorf("tool result (-want +got):\n%s", diff)
			}
		})
	}
}
