package driver_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
)

// TestBatchesToolsets checks the groups of calls that may run at once:
// a toolset's calls run one at a time in the model's order, beside the
// calls of tools of their own and of other toolsets, and an exclusive
// call is a group of its own.
func TestBatchesToolsets(t *testing.T) {
	call := func(id, toolset string, exclusive bool) driver.PlannedCall {
		return driver.PlannedCall{Call: toolrun.ToolCall{ID: id, Name: "navigate", Toolset: toolset}, Exclusive: exclusive}
	}
	tests := []struct {
		name  string
		calls []driver.PlannedCall
		want  [][]string
	}{
		{"tools of their own", []driver.PlannedCall{call("a", "", false), call("b", "", false)}, [][]string{{"a", "b"}}},
		{"one toolset", []driver.PlannedCall{call("a", "browser", false), call("b", "browser", false), call("c", "browser", false)},
			[][]string{{"a"}, {"b"}, {"c"}}},
		{"two toolsets and a tool", []driver.PlannedCall{call("a", "browser", false), call("b", "computer", false), call("c", "", false), call("d", "browser", false), call("e", "computer", false)},
			[][]string{{"a", "b", "c"}, {"d", "e"}}},
		{"exclusive", []driver.PlannedCall{call("a", "browser", false), call("b", "", true), call("c", "browser", false)},
			[][]string{{"a"}, {"b"}, {"c"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got [][]string
			for _, g := range driver.Batches(tc.calls) {
				var ids []string
				for _, c := range g {
					ids = append(ids, c.Call.ID)
				}
				got = append(got, ids)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("groups (-got +want):\n%s", diff)
			}
		})
	}
}
