package temporal_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/testsuite"
)

// decisionMsg is a decision sent to the workflow, by update or signal.
type decisionMsg struct {
	byUpdate bool
	id       string
	d        toolrun.Decision
}

// TestDecisionsStick checks the decided-once rule: the first decision for a
// call is the one that counts, whatever comes after it and by whichever
// path; a later update is rejected with ErrNotAwaitingApproval, and a later
// signal is dropped.
func TestDecisionsStick(t *testing.T) {
	tests := []struct {
		name string
		// early are sent when the workflow starts, before the call
		// exists; late once the call awaits approval.
		early, late  []decisionMsg
		wantRuns     map[string]int
		wantSeen     string
		wantRejected []string // substrings of the rejected updates' errors, in order
	}{
		{
			name: "update then signal",
			late: []decisionMsg{
				{byUpdate: true, id: "t1", d: toolrun.Decision{}},
				{id: "t1", d: policy.Deny("changed my mind")},
			},
			wantRuns: map[string]int{"write /a": 1},
			wantSeen: "t1 error=false wrote /a",
		},
		{
			name: "update then signal with other input",
			late: []decisionMsg{
				{byUpdate: true, id: "t1", d: toolrun.Decision{}},
				{id: "t1", d: toolrun.Decision{Kind: toolrun.Allow, Input: []byte(`{"path":"/etc/passwd"}`)}},
			},
			wantRuns: map[string]int{"write /a": 1},
			wantSeen: "t1 error=false wrote /a",
		},
		{
			name: "signal then update",
			late: []decisionMsg{
				{id: "t1", d: policy.Deny("no")},
				{byUpdate: true, id: "t1", d: toolrun.Decision{}},
			},
			wantRuns:     map[string]int{},
			wantSeen:     "t1 error=true tool call denied: no",
			wantRejected: []string{"not awaiting approval"},
		},
		{
			name: "update then update",
			late: []decisionMsg{
				{byUpdate: true, id: "t1", d: policy.Deny("no")},
				{byUpdate: true, id: "t1", d: toolrun.Decision{}},
			},
			wantRuns:     map[string]int{},
			wantSeen:     "t1 error=true tool call denied: no",
			wantRejected: []string{"not awaiting approval"},
		},
		{
			name: "duplicate signals",
			late: []decisionMsg{
				{id: "t1", d: toolrun.Decision{}},
				{id: "t1", d: policy.Deny("no")},
				{id: "t1", d: toolrun.Decision{}},
			},
			wantRuns: map[string]int{"write /a": 1},
			wantSeen: "t1 error=false wrote /a",
		},
		{
			name: "signals before the call exists",
			early: []decisionMsg{
				{id: "t1", d: policy.Deny("decided early")},
				{id: "t1", d: toolrun.Decision{}},
			},
			wantRuns: map[string]int{},
			wantSeen: "t1 error=true tool call denied: decided early",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
				toolruntest.Message(toolruntest.Text("Done.")),
			))
			var calls counter
			env := newEnv(t, s, []toolrun.Tool{writeTool(&calls, policy.RequireApproval("writes change files"))}, nil)
			var rejected []string
			send := func(msgs []decisionMsg) {
				for i, m := range msgs {
					a := temporal.Approval{ToolUseID: m.id, Decision: m.d}
					if !m.byUpdate {
						env.SignalWorkflow(temporal.DecideSignal, a)
						continue
					}
					env.UpdateWorkflow(temporal.DecideUpdate, tt.name+string(rune('a'+i)), &testsuite.TestUpdateCallback{
						OnReject:   func(err error) { rejected = append(rejected, err.Error()) },
						OnAccept:   func() {},
						OnComplete: func(any, error) {},
					}, a)
				}
			}
			if tt.early != nil {
				env.RegisterDelayedCallback(func() { send(tt.early) }, 0)
			}
			env.RegisterDelayedCallback(func() { send(tt.late) }, time.Hour)
			env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &fastRetries))
			out := outcome(t, env)

			if out.StopReason != toolrun.StopEndTurn {
				t.Errorf("got stop reason %q, want end_turn", out.StopReason)
			}
			if diff := cmp.Diff(tt.wantRuns, calls.all()); diff != "" {
				t.Errorf("tool runs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{tt.wantSeen}, seenResults(s)); diff != "" {
				t.Errorf("results the model saw (-want +got):\n%s", diff)
			}
			if len(rejected) != len(tt.wantRejected) {
				t.Fatalf("got rejected updates %q, want %d rejected with %q", rejected, len(tt.wantRejected), tt.wantRejected)
			}
			for i, want := range tt.wantRejected {
				if !strings.Contains(rejected[i], want) {
					t.Errorf("got update rejected with %q, want %q in it", rejected[i], want)
				}
			}
		})
	}
}
