package toolrun_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestPolicyCannotBeBypassedByName: a tool is found by its exact name only,
// so a model that varies the case of a guarded tool's name, pads it with
// whitespace, or calls a tool that was removed gets an unknown-tool error,
// and nothing runs.
func TestPolicyCannotBeBypassedByName(t *testing.T) {
	names := []string{"WRITE_FILE", "Write_File", " write_file", "write_file ", "write_file\n", "write_file\u200b", "write-file"}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", name, writeIn{Path: "/etc/passwd", Text: "x"})),
				toolruntest.Message(toolruntest.Text("ok")),
			))
			var writes counter
			w := writeTool(&writes)
			w.Policy = func(context.Context, toolrun.PolicyCall) toolrun.Decision {
				return policy.Deny("writes are not allowed")
			}
			res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{w}, &toolrun.Options{Logger: discard()}).Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(writes.n) != 0 {
				t.Fatalf("the guarded tool ran through the name %q", name)
			}
			results := toolResults(s.Requests()[1])
			if len(results) != 1 || !results[0].IsError || !strings.Contains(results[0].ResultText(), "unknown tool") {
				t.Errorf("result = %+v, want an unknown-tool error", results)
			}
			if res.ToolFailures != 1 {
				t.Errorf("ToolFailures = %d, want 1", res.ToolFailures)
			}
		})
	}
}

func TestRemovedToolCannotBeCalled(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
		toolruntest.Message(toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/tmp/x", Text: "y"})),
		toolruntest.Message(toolruntest.Text("ok")),
	))
	var writes, weather counter
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&weather), writeTool(&writes)}, &toolrun.Options{Logger: discard()})
	for turn, err := range r.Turns(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if turn.Number == 1 {
			r.RemoveTools("write_file")
		}
	}
	if len(writes.n) != 0 {
		t.Fatal("a removed tool ran")
	}
	reqs := s.Requests()
	if got := len(reqs[1].Params.Tools); got != 1 || reqs[1].Params.Tools[0].Name != "get_weather" {
		t.Errorf("tools sent after removal = %+v, want only get_weather", reqs[1].Params.Tools)
	}
	results := toolResults(reqs[2])
	if len(results) != 1 || !strings.Contains(results[0].ResultText(), `unknown tool "write_file"; available tools: get_weather`) {
		t.Errorf("result = %+v, want an unknown-tool error listing get_weather", results)
	}
	checkHistory(t, r.Result().Messages)
}

// TestRemovedToolStaysRemovedAfterResume: a tool taken out of a run stays
// out when the run is resumed from its State, even if the tools given to
// Resume include it.
func TestRemovedToolStaysRemovedAfterResume(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/tmp/x", Text: "y"})),
		toolruntest.Message(toolruntest.Text("ok")),
	))
	var writes counter
	w := writeTool(&writes)
	w.Policy = policy.RequireApproval("writes")
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{w}, &toolrun.Options{Logger: discard()})
	if res, _ := r.Run(t.Context()); res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("StopReason = %q, want awaiting_approval", res.StopReason)
	}
	r.RemoveTools("write_file")
	data, _ := json.Marshal(r.State())
	var st toolrun.State
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	r2, err := toolrun.Resume(client(s), &st, []toolrun.Tool{writeTool(&writes)}, &toolrun.Options{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Decide("t1", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(writes.n) != 0 {
		t.Fatal("a tool removed before the run was saved ran after it was resumed")
	}
	if got := toolResults(s.Requests()[1]); len(got) != 1 || !strings.Contains(got[0].ResultText(), "unknown tool") {
		t.Errorf("result = %+v, want an unknown-tool error", got)
	}
}
