package temporal_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"
)

var update = flag.Bool("update", false, "record the golden histories under testdata/histories from the Temporal server")

// newQueue returns a task queue name of its own.
func newQueue(prefix string) string {
	id := make([]byte, 6)
	rand.Read(id)
	return prefix + "-" + hex.EncodeToString(id)
}

// inProcessWorker starts a worker in the test's process.
func inProcessWorker(t *testing.T, c client.Client, queue string, acts *temporal.Activities) {
	t.Helper()
	w := temporal.NewWorker(c, queue, acts, worker.Options{WorkerStopTimeout: 5 * time.Second})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

// recordHistory writes the history of workflow id to
// testdata/histories/name.json, for TestReplayGoldenHistories.
func recordHistory(t *testing.T, c client.Client, id, name string) {
	t.Helper()
	recordRunHistory(t, c, id, "", name)
}

// recordRunHistory writes the history of the execution runID of workflow
// id (its last if runID is empty) to testdata/histories/name.json.
func recordRunHistory(t *testing.T, c client.Client, id, runID, name string) {
	t.Helper()
	if !*update {
		return
	}
	it := c.GetWorkflowHistory(t.Context(), id, runID, false, 0)
	var raw []byte
	raw = append(raw, `{"events":[`...)
	for i := 0; it.HasNext(); i++ {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, err := protojson.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			raw = append(raw, ',')
		}
		raw = append(raw, b...)
	}
	raw = append(raw, "]}\n"...)
	path := filepath.Join("testdata", "histories", name+".json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// startApprovalRun starts a run on queue, served by an in-process worker
// whose write_file tool needs a person's approval, against a model that
// answers replies. It returns a context bounded to a minute, the run, the
// tool's counter and the model.
func startApprovalRun(t *testing.T, c client.Client, queue string, replies ...toolruntest.Reply) (context.Context, client.WorkflowRun, *counter, *toolruntest.Server) {
	t.Helper()
	model := toolruntest.New(t, toolruntest.Script(replies...))
	calls := &counter{}
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{writeTool(calls, policy.RequireApproval("writes change files"))}, &toolrun.Options{
		Logger: discard(),
		Store:  &filestore.Store{Dir: t.TempDir()},
	}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, run, calls, model
}

// TestApprovalOnServer runs approvals on a real server: the run is found
// by its search attributes while it waits, the update that approves the
// call succeeds, a later signal that would deny it is dropped, and the
// call runs once with its approved input.
func TestApprovalOnServer(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-approval")
	ctx, run, calls, model := startApprovalRun(t, c, queue,
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		toolruntest.Message(toolruntest.Text("Done.")))
	waitFor(t, 30*time.Second, "the run in ListAwaitingApproval", func() bool {
		runs, err := temporal.ListAwaitingApproval(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(runs, func(r temporal.AwaitingRun) bool {
			return r.WorkflowID == queue && r.Model == "claude-test" && r.Turns == 1
		})
	})
	if err := temporal.Decide(ctx, c, queue, "t1", toolrun.Decision{}, nil); err != nil {
		t.Fatalf("update: %v", err)
	}
	if err := c.SignalWorkflow(ctx, queue, "", temporal.DecideSignal, temporal.Approval{ToolUseID: "t1", Decision: policy.Deny("too late")}); err != nil {
		t.Fatal(err)
	}
	err := temporal.Decide(ctx, c, queue, "t1", toolrun.Decision{Kind: toolrun.Allow, Input: []byte(`{"path":"/etc/passwd"}`)}, nil)
	if !errors.Is(err, toolrun.ErrNotAwaitingApproval) {
		t.Errorf("got a second update's error %v, want one wrapping toolrun.ErrNotAwaitingApproval", err)
	}
	var ae *sdktemporal.ApplicationError
	if !errors.As(err, &ae) {
		t.Errorf("the refusal %v does not hold the update's ApplicationError", err)
	}
	// A call the run does not have is refused with the same sentinel.
	if err := temporal.Decide(ctx, c, queue, "no-such-call", toolrun.Decision{}, nil); !errors.Is(err, toolrun.ErrNotAwaitingApproval) {
		t.Errorf("a decision for an unknown call: %v, want one wrapping toolrun.ErrNotAwaitingApproval", err)
	}
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
	desc, err := c.DescribeWorkflow(ctx, queue, "")
	if err != nil {
		t.Fatal(err)
	}
	status, _ := desc.TypedSearchAttributes.GetKeyword(temporal.StatusAttribute)
	if status != string(toolrun.StopEndTurn) {
		t.Errorf("got %s %q, want %q", temporal.StatusAttribute.GetName(), status, toolrun.StopEndTurn)
	}
	recordHistory(t, c, queue, "approval")
}

// TestCanceledOnServer cancels a run on a real server while it awaits
// approval: the run ends as a cancelled workflow, and visibility then
// finds it as cancelled, not awaiting approval, even with a query that
// does not filter on ExecutionStatus; ListAwaitingApproval leaves it out,
// and its memo lists no call.
func TestCanceledOnServer(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-canceled")
	ctx, run, calls, _ := startApprovalRun(t, c, queue,
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})))
	listed := func() bool {
		runs, err := temporal.ListAwaitingApproval(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(runs, func(r temporal.AwaitingRun) bool { return r.WorkflowID == queue })
	}
	// count returns how many executions of the run query q finds.
	count := func(q string) int {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = %q AND %s", queue, q)})
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.GetExecutions())
	}
	waitFor(t, 30*time.Second, "the run in ListAwaitingApproval", listed)

	if err := c.CancelWorkflow(ctx, queue, ""); err != nil {
		t.Fatal(err)
	}
	var ce *sdktemporal.CanceledError
	if err := run.Get(ctx, nil); !errors.As(err, &ce) {
		t.Fatalf("got %v from the cancelled run, want a CanceledError", err)
	}
	waitFor(t, 30*time.Second, `the run in visibility as "canceled"`, func() bool {
		return count(`ToolrunStatus = "canceled" AND ToolrunAwaitingApproval = false AND ExecutionStatus = "Canceled"`) == 1
	})
	if n := count("ToolrunAwaitingApproval = true"); n != 0 {
		t.Errorf("got %d executions of the cancelled run awaiting approval, want 0", n)
	}
	if listed() {
		t.Error("got the cancelled run in ListAwaitingApproval, want it left out")
	}
	desc, err := c.DescribeWorkflowExecution(ctx, queue, "")
	if err != nil {
		t.Fatal(err)
	}
	var memo temporal.PendingApprovals
	if err := converter.GetDefaultDataConverter().FromPayload(desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[temporal.PendingMemo], &memo); err != nil {
		t.Fatal(err)
	}
	if len(memo.Calls) != 0 || memo.More != 0 {
		t.Errorf("got memo %+v after the cancel, want no calls", memo)
	}
	if n := len(calls.all()); n != 0 {
		t.Errorf("got %d tool runs, want 0", n)
	}
	recordHistory(t, c, queue, "approval-canceled")
}

// TestContinueAsNewOnServer records a run that continues as new, with
// its state in a Store, for the golden histories.
func TestContinueAsNewOnServer(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-can")
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", cityIn{City: "Paris"}), toolruntest.ToolUse("t2", "get_weather", cityIn{City: "Oslo"})),
		toolruntest.Message(toolruntest.ToolUse("t3", "get_weather", cityIn{City: "Rome"})),
		toolruntest.Message(toolruntest.Text("Sunny everywhere.")),
	))
	var calls counter
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
		Logger: discard(),
		Store:  &filestore.Store{Dir: t.TempDir()},
	}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &temporal.RunOptions{ContinueAsNewAfter: 1})
	if err != nil {
		t.Fatal(err)
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Sunny everywhere." {
		t.Errorf("got outcome %q %q, want end_turn", out.StopReason, out.Text)
	}
	if diff := cmp.Diff(map[string]int{"weather Paris": 1, "weather Oslo": 1, "weather Rome": 1}, calls.all()); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
	// The first run of the chain: a step, two calls, a step, continue-as-new.
	recordHistory(t, c, queue, "tools-continue-as-new")
}

// TestAfterToolStopOnServer ends a run on a real server with AfterTool's
// StopRun after the first of two calls of an exclusive tool: the second
// call does not run, and stays unanswered in the outcome's state. Its
// history is golden (after-tool-stop.json, with the toolrun.stop-calls
// marker); after-tool-stop-v0.json is the same run recorded by the
// workflow before that rule, which scheduled the second call, and must
// replay too (TestReplayGoldenHistories).
func TestAfterToolStopOnServer(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-stop-calls")
	model := toolruntest.New(t, toolruntest.Script(toolruntest.Message(
		toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/build"}),
		toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/src"}),
	)))
	var calls counter
	tool := writeTool(&calls, nil)
	tool.Exclusive = true
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{tool}, &toolrun.Options{
		Logger: discard(),
		AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
			return toolrun.StopRun("the operator saw enough after one write")
		},
	}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	recordHistory(t, c, queue, "after-tool-stop")
	if out.StopReason != toolrun.StopHook {
		t.Errorf("got outcome %q, want hook", out.StopReason)
	}
	if diff := cmp.Diff(map[string]int{"write /build": 1}, calls.all()); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
	if res, ok := out.State.CallResult("t2"); ok {
		t.Errorf("t2 answered with %+v, want it unanswered", res)
	}
}

// TestSIGTERMLetsToolsFinish stops a worker with SIGTERM while a call of a
// tool that is not idempotent runs: the worker lets it finish (its stop
// timeout, from NewWorker), so the call is not interrupted and the run
// does not wait out a heartbeat timeout; another worker takes the next
// step.
func TestSIGTERMLetsToolsFinish(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	c := dialTemporal(t)
	dir := t.TempDir()
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_charge", "charge", map[string]any{})),
		toolruntest.Message(toolruntest.Text("Charged.")),
	))
	queue := newQueue("toolrun-sigterm")
	first := startWorker(t, dir, queue, model.URL, "worker1")
	const heartbeat = 20 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &temporal.RunOptions{HeartbeatTimeout: heartbeat})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "charge to start", func() bool { return marks(dir, "runs-charge") == 1 })
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	startWorker(t, dir, queue, model.URL, "worker2")
	time.Sleep(time.Second) // the tool is still running as the worker stops
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	// The stopped worker exits once its polls under way have ended: on a
	// server that does not complete them on shutdown, up to its long poll,
	// a minute, which the run does not wait for.
	if err := first.Wait(); err != nil {
		t.Errorf("the stopped worker: %v", err)
	}
	if out.StopReason != toolrun.StopEndTurn {
		t.Errorf("got stop reason %q (%s), want end_turn", out.StopReason, out.Detail)
	}
	if diff := cmp.Diff([]string{"toolu_charge error=false charge done"}, seenResults(model)); diff != "" {
		t.Errorf("results the model saw (-want +got):\n%s", diff)
	}
	if got := marks(dir, "runs-charge"); got != 1 {
		t.Errorf("charge ran %d times, want 1", got)
	}
	if took >= heartbeat {
		t.Errorf("the run took %s, want less than the heartbeat timeout %s: no call waited it out", took.Round(time.Millisecond), heartbeat)
	}
}

// TestScaleSmoke runs 50 workflows on two worker processes, SIGKILLs one
// of them mid-run, and checks that every run finishes and no call of the
// tool (not idempotent) ran twice. It logs the throughput and the p95
// latency as figures; it asserts neither.
func TestScaleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	c := dialTemporal(t)
	dir := t.TempDir()
	const runs, turns = 50, 3
	// The model calls step once per turn, with an id that names the run
	// and the turn, then answers.
	model := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		msgs := req.Conversation
		name := strings.TrimPrefix(msgs[0].Content[0].Text, "run ")
		if n := len(msgs) / 2; n < turns {
			return toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("toolu_%s_%d", name, n), "step", map[string]any{"id": fmt.Sprintf("%s-%d", name, n)}))
		}
		return toolruntest.Message(toolruntest.Text("Done " + name + "."))
	}})
	queue := newQueue("toolrun-scale")
	victim := startWorker(t, dir, queue, model.URL, "worker1")
	startWorker(t, dir, queue, model.URL, "worker2")
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	opts := &temporal.RunOptions{
		HeartbeatTimeout: 2 * time.Second,
		ModelRetry:       &sdktemporal.RetryPolicy{InitialInterval: 100 * time.Millisecond},
		ToolRetry:        &sdktemporal.RetryPolicy{InitialInterval: 100 * time.Millisecond},
	}
	start := time.Now()
	var wg sync.WaitGroup
	latencies := make([]time.Duration, runs)
	outs := make([]temporal.Outcome, runs)
	errs := make([]error, runs)
	for i := range runs {
		wg.Go(func() {
			begin := time.Now()
			id := fmt.Sprintf("%s-%d", queue, i)
			run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, userParams(fmt.Sprintf("run %d", i)), opts)
			if err == nil {
				err = run.Get(ctx, &outs[i])
			}
			errs[i], latencies[i] = err, time.Since(begin)
		})
	}
	waitFor(t, 30*time.Second, "calls in flight", func() bool {
		entries, _ := os.ReadDir(dir)
		n := 0
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "calls-") {
				n++
			}
		}
		return n >= runs/2
	})
	if err := victim.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	elapsed := time.Since(start)

	interrupted := 0
	for i := range runs {
		if errs[i] != nil {
			t.Errorf("run %d: %v", i, errs[i])
			continue
		}
		if want := fmt.Sprintf("Done %d.", i); outs[i].StopReason != toolrun.StopEndTurn || outs[i].Text != want {
			t.Errorf("run %d: got %q %q, want end_turn %q", i, outs[i].StopReason, outs[i].Text, want)
		}
	}
	for _, r := range seenResults(model) {
		if strings.Contains(r, "interrupted") {
			interrupted++
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	twice := 0
	for _, e := range entries {
		if name, ok := strings.CutPrefix(e.Name(), "calls-"); ok {
			if n := marks(dir, e.Name()); n > 1 {
				twice++
				t.Errorf("call %s ran %d times, want at most 1", name, n)
			}
		}
	}
	slices.Sort(latencies)
	p95 := latencies[len(latencies)*95/100]
	t.Logf("scale smoke: %d workflows of %d turns in %s: %.1f workflows/s, p95 latency %s; a worker SIGKILLed mid-run: %d calls answered as interrupted, %d ran twice",
		runs, turns+1, elapsed.Round(time.Millisecond), float64(runs)/elapsed.Seconds(), p95.Round(time.Millisecond), interrupted, twice)
}
