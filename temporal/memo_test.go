package temporal_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// memoIDs lists the calls a memo shows as "id tool reason input", and
// its More count.
func memoIDs(p temporal.PendingApprovals) []string {
	var out []string
	for _, c := range p.Calls {
		out = append(out, fmt.Sprintf("%s %s %s %s", c.Call.ID, c.Call.Name, c.Reason, c.Call.Input))
	}
	if p.More > 0 {
		out = append(out, fmt.Sprintf("+%d", p.More))
	}
	return out
}

// TestPendingMemo checks that the memo temporal.PendingMemo follows the
// calls awaiting approval: none as the run starts, the turn's deferred
// calls (within the memo's bounds: at most MemoMaxCalls, no input over
// MemoMaxInput, reasons cut at MemoMaxReason) while the run waits, fewer
// as decisions arrive, none at the end; and that it is upserted only when
// what it shows changes.
func TestPendingMemo(t *testing.T) {
	long := strings.Repeat("é", temporal.MemoMaxReason) // two bytes each
	var blocks []toolruntest.Block
	for i := range temporal.MemoMaxCalls + 2 {
		in := writeIn{Path: fmt.Sprintf("/%d", i)}
		if i == 1 {
			in.Path = "/" + strings.Repeat("x", temporal.MemoMaxInput)
		}
		blocks = append(blocks, toolruntest.ToolUse(fmt.Sprintf("t%02d", i), "write_file", in))
	}
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(blocks...), toolruntest.Message(toolruntest.Text("Done."))))
	var calls counter
	env := newEnv(t, s, []toolrun.Tool{writeTool(&calls, policy.RequireApproval(long))}, nil)
	var memos [][]string
	env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
		m := args.Get(0).(map[string]any)
		memos = append(memos, memoIDs(m[temporal.PendingMemo].(temporal.PendingApprovals)))
	}).Return(nil)
	// Once the calls wait, a decision a minute, each in a workflow task
	// of its own: t00 allowed, the others denied.
	for i := range temporal.MemoMaxCalls + 2 {
		d := policy.Deny("no")
		if i == 0 {
			d = toolrun.Decision{}
		}
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(temporal.DecideSignal, temporal.Approval{ToolUseID: fmt.Sprintf("t%02d", i), Decision: d})
		}, time.Hour+time.Duration(i)*time.Minute)
	}
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &fastRetries))
	out := outcome(t, env)
	if out.StopReason != toolrun.StopEndTurn {
		t.Errorf("got stop reason %q, want end_turn", out.StopReason)
	}

	cutReason := strings.Repeat("é", (temporal.MemoMaxReason-len("…"))/2) + "…"
	waiting := func(from int) []string {
		var want []string
		for i := from; i < temporal.MemoMaxCalls+2 && len(want) < temporal.MemoMaxCalls; i++ {
			input := fmt.Sprintf(`{"path":"/%d"}`, i)
			if i == 1 {
				input = ""
			}
			want = append(want, fmt.Sprintf("t%02d write_file %s %s", i, cutReason, input))
		}
		if n := temporal.MemoMaxCalls + 2 - from - temporal.MemoMaxCalls; n > 0 {
			want = append(want, fmt.Sprintf("+%d", n))
		}
		return want
	}
	want := [][]string{nil} // the run starts
	for i := range temporal.MemoMaxCalls + 2 {
		want = append(want, waiting(i)) // the turn's calls wait, then one fewer a decision
	}
	want = append(want, nil) // the last one decided; the run ends with the memo as it is
	if diff := cmp.Diff(want, memos); diff != "" {
		t.Errorf("memos upserted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"write /0": 1}, calls.all()); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
}

// TestPendingWithNoWorkerOnServer checks, against a real server, what a
// person's client can do while no worker runs: Pending answers from the
// memo at once (a query would fail after the server's 10 s wait: the test
// gives Pending 5 s), a decision by signal is accepted, and a decision by
// update blocks until its context ends. Then a worker starts, and the run
// finishes with the signalled decision applied.
func TestPendingWithNoWorkerOnServer(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-noworker")
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		toolruntest.Message(toolruntest.Text("Done.")),
	))
	var calls counter
	acts := temporal.NewActivities(model.Client(), []toolrun.Tool{writeTool(&calls, policy.RequireApproval("writes change files"))}, &toolrun.Options{
		Logger: discard(),
		Store:  &filestore.Store{Dir: t.TempDir()},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// Before any worker: the memo Start set says nothing awaits.
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	pending := func() []toolrun.PendingCall {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		p, err := temporal.Pending(pctx, c, queue, nil)
		if err != nil {
			t.Fatalf("Pending with no worker: %v", err)
		}
		return p
	}
	if p := pending(); len(p) != 0 {
		t.Errorf("got %v pending before the first turn, want none", p)
	}

	// A worker runs the first turn, and stops once the call waits.
	w := temporal.NewWorker(c, queue, acts, worker.Options{WorkerStopTimeout: 5 * time.Second})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "t1 in Pending", func() bool { return len(pending()) == 1 })
	w.Stop()

	got := pending()
	want := []toolrun.PendingCall{{Call: toolrun.ToolCall{ID: "t1", Name: "write_file", Input: []byte(`{"path":"/a"}`)}, Reason: "writes change files"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Pending with no worker (-want +got):\n%s", diff)
	}
	if err := temporal.DecideBySignal(ctx, c, queue, "t1", toolrun.Decision{}, nil); err != nil {
		t.Fatalf("DecideBySignal with no worker: %v", err)
	}
	// The same decision by update: the server may hand it to the next
	// worker, in the same workflow task as the signal, in either order.
	// The server passes the deadline on and may answer "deadline exceeded"
	// a moment before the client's own timer ends uctx, so the check is
	// that Decide failed and blocked for most of the 2 s.
	uctx, ucancel := context.WithTimeout(ctx, 2*time.Second)
	began := time.Now()
	err = temporal.Decide(uctx, c, queue, "t1", toolrun.Decision{}, nil)
	if took := time.Since(began); err == nil || took < 1500*time.Millisecond {
		t.Errorf("Decide with no worker returned %v after %v, want it to block until its context ends (2s)", err, took)
	}
	ucancel()
	if n := len(calls.all()); n != 0 {
		t.Errorf("got %d tool runs before a worker, want 0", n)
	}

	// A worker again: the decision is applied, and the run finishes.
	inProcessWorker(t, c, queue, acts)
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
		t.Errorf("got outcome %q %q, want end_turn %q", out.StopReason, out.Text, "Done.")
	}
	if diff := cmp.Diff(map[string]int{"write /a": 1}, calls.all()); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"t1 error=false wrote /a"}, seenResults(model)); diff != "" {
		t.Errorf("results the model saw (-want +got):\n%s", diff)
	}
	if p := pending(); len(p) != 0 {
		t.Errorf("got %v pending after the run, want none", p)
	}
	recordHistory(t, c, queue, "approval-no-worker")
}
