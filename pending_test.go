package toolrun_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// pendingIDs returns the ids of the calls listed in pending.
func pendingIDs(pending []toolrun.PendingCall) []string {
	var ids []string
	for _, p := range pending {
		ids = append(ids, p.Call.ID)
	}
	return ids
}

// TestResultPendingListsOnlyUndecided: of a parallel pair deferred to a
// person, once one is decided and the run stops again awaiting the other,
// Result.Pending lists only the other, as State.AwaitingApproval does: in
// the runner that was held, in the Result of a runner resumed from the
// State, and in the RunStopped event of a run driven through Events.
func TestResultPendingListsOnlyUndecided(t *testing.T) {
	pair := func(t *testing.T) (*toolrun.Runner, *toolruntest.Server, *counter, *toolrun.FuncTool) {
		s := toolruntest.New(t, toolruntest.Script(
			toolruntest.Message(
				toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/one", Text: "1"}),
				toolruntest.ToolUse("w2", "write_file", writeIn{Path: "/tmp/two", Text: "2"}),
			),
			toolruntest.Message(toolruntest.Text("done")),
		))
		var writes counter
		w := writeTool(&writes)
		w.Policy = policy.RequireApproval("writes need a person")
		r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{w}, &toolrun.Options{Logger: discard()})
		res, err := r.Run(t.Context())
		if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
			t.Fatalf("Run = %q, %v; want awaiting_approval", res.StopReason, err)
		}
		if diff := cmp.Diff(pendingIDs(res.Pending), []string{"w1", "w2"}); diff != "" {
			t.Fatalf("first stop's Pending (-got +want):\n%s", diff)
		}
		if err := r.Decide("w1", toolrun.Decision{}); err != nil {
			t.Fatal(err)
		}
		return r, s, &writes, w
	}
	want := []string{"w2"}

	t.Run("held runner", func(t *testing.T) {
		r, _, writes, _ := pair(t)
		res, err := r.Run(t.Context())
		if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
			t.Fatalf("Run = %q, %v; want awaiting_approval", res.StopReason, err)
		}
		if diff := cmp.Diff(pendingIDs(res.Pending), want); diff != "" {
			t.Errorf("Run's Pending (-got +want):\n%s", diff)
		}
		if diff := cmp.Diff(pendingIDs(r.Result().Pending), want); diff != "" {
			t.Errorf("Result().Pending (-got +want):\n%s", diff)
		}
		if n := writes.get("/tmp/one"); n != 0 {
			t.Errorf("w1 ran %d times while w2 awaits, want 0", n)
		}
	})
	t.Run("resumed", func(t *testing.T) {
		r, s, writes, w := pair(t)
		b, err := json.Marshal(r.State())
		if err != nil {
			t.Fatal(err)
		}
		var st toolrun.State
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		r2, err := toolrun.Resume(client(s), &st, []toolrun.Tool{w}, &toolrun.Options{Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(pendingIDs(r2.Result().Pending), want); diff != "" {
			t.Errorf("resumed Result().Pending (-got +want):\n%s", diff)
		}
		res, err := r2.Run(t.Context())
		if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
			t.Fatalf("Run = %q, %v; want awaiting_approval", res.StopReason, err)
		}
		if diff := cmp.Diff(pendingIDs(res.Pending), want); diff != "" {
			t.Errorf("resumed Run's Pending (-got +want):\n%s", diff)
		}
		if err := r2.Decide("w2", policy.Deny("no")); err != nil {
			t.Fatal(err)
		}
		res, err = r2.Run(t.Context())
		if err != nil || res.StopReason != toolrun.StopEndTurn || len(res.Pending) != 0 {
			t.Fatalf("Run = %q, %v with %d pending; want end_turn and none", res.StopReason, err, len(res.Pending))
		}
		if writes.get("/tmp/one") != 1 || writes.get("/tmp/two") != 0 {
			t.Errorf("writes = %v, want /tmp/one once", writes.n)
		}
	})
}
