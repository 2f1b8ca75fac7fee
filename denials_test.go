package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestToolDenialsCounted: Result.ToolDenials counts the calls denied, by a
// policy or by a person, apart from ToolFailures (a tool's error) and from
// a skip (answered with a result in place of running); the count survives
// a State's round trip through JSON and a resume.
func TestToolDenialsCounted(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(
			toolruntest.ToolUse("d1", "drop_db", map[string]any{}),
			toolruntest.ToolUse("s1", "cached", map[string]any{}),
			toolruntest.ToolUse("f1", "fail", map[string]any{}),
			toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/x", Text: "x"}),
			toolruntest.ToolUse("ok", "cached", map[string]any{}),
		),
		toolruntest.Message(toolruntest.Text("done")),
	))
	empty := func(name string, err error) *toolrun.FuncTool {
		return toolrun.NewTool(name, name, func(context.Context, struct{}) (string, error) { return "ran " + name, err })
	}
	var writes counter
	w := writeTool(&writes)
	w.Policy = policy.RequireApproval("writes need a person")
	tools := []toolrun.Tool{empty("drop_db", nil), empty("cached", nil), empty("fail", errors.New("boom")), w}
	skipFirst := func(_ context.Context, c toolrun.PolicyCall) toolrun.Decision {
		switch {
		case c.Name == "drop_db":
			return policy.Deny("never")
		case c.ID == "s1":
			return toolrun.Decision{Kind: toolrun.Skip, Result: []toolrun.Content{toolrun.Text("cached answer")}}
		}
		return toolrun.Decision{}
	}
	opts := &toolrun.Options{Logger: discard(), Policy: skipFirst}
	r := toolrun.New(client(s), userParams("go"), tools, opts)
	res, err := r.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("Run = %q, %v; want awaiting_approval", res.StopReason, err)
	}
	if err := r.Decide("w1", policy.Deny("not today")); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r.State())
	if err != nil {
		t.Fatal(err)
	}
	var st toolrun.State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	r2, err := toolrun.Resume(client(s), &st, tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err = r2.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run after Resume = %q, %v; want end_turn", res.StopReason, err)
	}
	got := [3]int{res.ToolCalls, res.ToolFailures, res.ToolDenials}
	if want := [3]int{5, 1, 2}; got != want {
		t.Errorf("ToolCalls, ToolFailures, ToolDenials = %v, want %v", got, want)
	}
	b, _ = json.Marshal(r2.State())
	var again toolrun.State
	json.Unmarshal(b, &again)
	if again.ToolDenials != 2 {
		t.Errorf("the State's ToolDenials after a round trip = %d, want 2", again.ToolDenials)
	}
}
