package toolrun_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/toolruntest"
)

// editState returns st as JSON, edited by edit as a generic map, decoded
// again: a State file a person or an attacker changed by hand.
func editState(t *testing.T, st *toolrun.State, edit func(m map[string]any)) *toolrun.State {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(mustJSON(t, st), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	var out toolrun.State
	if err := json.Unmarshal(mustJSON(t, m), &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// pendingCalls returns the calls of the turn in progress of m, a State as
// a generic map.
func pendingCalls(m map[string]any) []any {
	return m["pending"].(map[string]any)["calls"].([]any)
}

// TestResumeRefusesInconsistentTurn: a State whose turn in progress has
// calls that cannot each get the one tool_result the API wants — two calls
// of one id, a call without an id, calls that are not the response's
// tool_use blocks — is refused by Resume with an error that says so.
// Taken, such a State left a call no Decide could reach (its id was
// another's) and a run stuck awaiting approval for good, or a history the
// API refused at every later request.
func TestResumeRefusesInconsistentTurn(t *testing.T) {
	tests := []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"two calls of one id", func(m map[string]any) {
			pendingCalls(m)[2].(map[string]any)["call"].(map[string]any)["id"] = "r1"
		}, `two calls of turn 1 share the id "r1"`},
		{"a call without an id", func(m map[string]any) {
			pendingCalls(m)[2].(map[string]any)["call"].(map[string]any)["id"] = ""
		}, `a call of tool "write_file" of turn 1 has no id`},
		{"no calls for the response's tool_use blocks", func(m map[string]any) {
			m["pending"].(map[string]any)["calls"] = []any{}
		}, "are not the tool_use blocks of its response"},
		{"a call renamed", func(m map[string]any) {
			pendingCalls(m)[2].(map[string]any)["call"].(map[string]any)["name"] = "read_file"
		}, "are not the tool_use blocks of its response"},
		{"a call more than the blocks", func(m map[string]any) {
			calls := pendingCalls(m)
			extra := map[string]any{"call": map[string]any{"id": "x9", "name": "write_file", "input": map[string]any{}}, "phase": "new"}
			m["pending"].(map[string]any)["calls"] = append(calls, extra)
		}, "has 4 calls for 3 tool_use blocks"},
		{"calls reordered", func(m map[string]any) {
			calls := pendingCalls(m)
			calls[0], calls[2] = calls[2], calls[0]
		}, "are not the tool_use blocks of its response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, st, _, _ := awaitingState(t)
			bad := editState(t, st, tt.edit)
			s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
			var reads, writes counter
			_, err := toolrun.Resume(client(s), bad, []toolrun.Tool{readPathTool(&reads), writeTool(&writes)}, &toolrun.Options{Logger: discard()})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Resume = %v, want an error containing %q", err, tt.want)
			}
			if len(s.Requests()) != 0 || len(writes.n) != 0 {
				t.Errorf("Resume sent %d requests and wrote %v, want nothing", len(s.Requests()), writes.n)
			}
		})
	}
	t.Run("skeleton", func(t *testing.T) {
		// A skeleton has no response to match; its calls' ids are checked.
		_, st, _, _ := awaitingState(t)
		s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
		var reads, writes counter
		tools := []toolrun.Tool{readPathTool(&reads), writeTool(&writes)}
		if _, err := toolrun.Resume(client(s), driver.ForCall(st, "w1"), tools, &toolrun.Options{Logger: discard()}); err != nil {
			t.Errorf("Resume of a skeleton = %v, want nil", err)
		}
		bad := editState(t, driver.Skeleton(st), func(m map[string]any) {
			pendingCalls(m)[1].(map[string]any)["call"].(map[string]any)["id"] = "r1"
		})
		if _, err := toolrun.Resume(client(s), bad, tools, &toolrun.Options{Logger: discard()}); err == nil {
			t.Error("Resume of a skeleton with two calls of one id = nil, want an error")
		}
	})
}
