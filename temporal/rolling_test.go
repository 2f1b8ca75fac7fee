package temporal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
)

// The numbers of TestRollingRestart.
const (
	rollingRuns     = 200 // workflows
	rollingTurns    = 2   // calls of the step tool per workflow, one per turn
	rollingRestarts = 8   // workers SIGTERMed, one after another
	rollingWorkers  = 2   // workers serving the queue at any time
)

// TestRollingRestart runs 200 workflows whose every call is of a tool
// that is not idempotent (step, which journals each start in a file of
// its own) while the workers serving their task queue are restarted one
// after another: 8 times, a new worker process starts and the oldest one
// is SIGTERMed while calls are in flight. The workers are NewWorker's with
// its defaults on a plainly dialled client, on a server that does not
// complete polls on shutdown (pollsKeptNamespace), where the drain is
// what keeps tasks from being lost. It checks that no call is answered
// "interrupted" unless it started (the journal has its start), that no
// task timed out (a task lost by a stopping worker waits out its
// heartbeat or workflow task timeout), that no call started twice, that
// every run finishes as its script says, and that every stopped worker
// exits cleanly. The heartbeat timeout is the default (30 s): a task lost
// by a stopping worker is answered "interrupted" within the test, and a
// worker slowed by a loaded machine is not taken for one that lost it.
func TestRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	c := dialTemporalIn(t, pollsKeptNamespace)
	dir := t.TempDir()
	model := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		msgs := req.Conversation
		name := strings.TrimPrefix(msgs[0].Content[0].Text, "run ")
		if n := len(msgs) / 2; n < rollingTurns {
			return toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("toolu_%s_%d", name, n), "step", map[string]any{"id": fmt.Sprintf("%s-%d", name, n)}))
		}
		return toolruntest.Message(toolruntest.Text("Done " + name + "."))
	}})
	queue := newQueue("toolrun-rolling")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	n := 0
	var timeline []string // when each worker started and was SIGTERMed
	names := map[*exec.Cmd]string{}
	start := func() *exec.Cmd {
		n++
		name := fmt.Sprintf("worker%d", n)
		timeline = append(timeline, fmt.Sprintf("%s %s started", time.Now().Format("15:04:05.000"), name))
		cmd := startWorker(t, dir, queue, model.URL, name, identityEnv+"="+name, inPollsKept)
		names[cmd] = name
		return cmd
	}
	var live []*exec.Cmd
	for range rollingWorkers {
		live = append(live, start())
	}
	opts := &temporal.RunOptions{
		ModelRetry: &sdktemporal.RetryPolicy{InitialInterval: 100 * time.Millisecond},
		ToolRetry:  &sdktemporal.RetryPolicy{InitialInterval: 100 * time.Millisecond},
	}
	began := time.Now()
	var wg sync.WaitGroup
	outs := make([]temporal.Outcome, rollingRuns)
	errs := make([]error, rollingRuns)
	for i := range rollingRuns {
		wg.Go(func() {
			id := fmt.Sprintf("%s-%d", queue, i)
			// A request that timed out (a server slowed by the test's
			// load) is sent again: a start finds the run if it started
			// (running or not), and the wait for its end goes on.
			start := client.StartWorkflowOptions{ID: id, TaskQueue: queue,
				WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
				WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE}
			slow := func(err error) bool {
				_, late := errors.AsType[*serviceerror.DeadlineExceeded](err)
				return (late || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() == nil
			}
			_, err := temporal.Start(ctx, c, start, userParams(fmt.Sprintf("run %d", i)), opts)
			for k := 0; k < 10 && slow(err); k++ {
				_, err = temporal.Start(ctx, c, start, userParams(fmt.Sprintf("run %d", i)), opts)
			}
			if _, ok := errors.AsType[*serviceerror.WorkflowExecutionAlreadyStarted](err); ok {
				err = nil
			}
			if err == nil {
				err = c.GetWorkflow(ctx, id, "").Get(ctx, &outs[i])
				for k := 0; k < 10 && slow(err); k++ {
					err = c.GetWorkflow(ctx, id, "").Get(ctx, &outs[i])
				}
			}
			errs[i] = err
		})
	}
	// The restarts: each once more calls have started, so that every
	// SIGTERM finds calls in flight and tasks on their way.
	var stopped []*exec.Cmd
	var stopErrs []error
	var stopMu sync.Mutex
	var stopWG sync.WaitGroup
	for k := range rollingRestarts {
		want := (k + 1) * rollingRuns * rollingTurns / (rollingRestarts + 2)
		waitFor(t, 2*time.Minute, fmt.Sprintf("%d calls started before restart %d", want, k+1), func() bool { return started(dir) >= want })
		live = append(live, start())
		old := live[0]
		live = live[1:]
		if err := old.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		timeline = append(timeline, fmt.Sprintf("%s %s SIGTERMed", time.Now().Format("15:04:05.000"), names[old]))
		stopped = append(stopped, old)
		name := names[old]
		stopWG.Go(func() {
			if err := old.Wait(); err != nil {
				stopMu.Lock()
				stopErrs = append(stopErrs, fmt.Errorf("%s: %w", name, err))
				stopMu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)

	for i := range rollingRuns {
		if errs[i] != nil {
			t.Errorf("run %d: %v", i, errs[i])
			continue
		}
		if want := fmt.Sprintf("Done %d.", i); outs[i].StopReason != toolrun.StopEndTurn || outs[i].Text != want {
			t.Errorf("run %d: got %q %q, want end_turn %q", i, outs[i].StopReason, outs[i].Text, want)
		}
	}
	// A result names its call by tool_use id, toolu_<run>_<turn>; the
	// journal, by the step's input, <run>-<turn>.
	interrupted, falseInterrupted := 0, 0
	for _, r := range seenResults(model) {
		if !strings.Contains(r, "interrupted") {
			continue
		}
		interrupted++
		id, _, _ := strings.Cut(r, " ")
		run, turn, _ := strings.Cut(strings.TrimPrefix(id, "toolu_"), "_")
		if marks(dir, "calls-"+run+"-"+turn) == 0 {
			falseInterrupted++
			t.Errorf("call %s answered %q, but it never started; its activity tasks: %s", id, r, activityStarts(t, c, fmt.Sprintf("%s-%s", queue, run)))
		}
	}
	timedOut := 0
	for i := range rollingRuns {
		id := fmt.Sprintf("%s-%d", queue, i)
		if lost := lostTasks(t, c, id); len(lost) > 0 {
			timedOut += len(lost)
			t.Errorf("run %d: %d tasks timed out (%s); its activity tasks: %s", i, len(lost), strings.Join(lost, "; "), activityStarts(t, c, id))
		}
	}
	twice := 0
	for _, name := range journal(dir) {
		if k := marks(dir, name); k > 1 {
			twice++
			t.Errorf("call %s started %d times, want at most 1", strings.TrimPrefix(name, "calls-"), k)
		}
	}
	// Each stopped worker ends its last polls and exits.
	stopWG.Wait()
	for _, err := range stopErrs {
		t.Errorf("a stopped worker: %v", err)
	}
	if t.Failed() {
		t.Logf("workers:\n%s", strings.Join(timeline, "\n"))
	}
	t.Logf("rolling restart: %d workflows of %d calls, %d workers SIGTERMed in turn, runs done in %s: %d calls started, %d answered interrupted (%d of them never started), %d tasks timed out, %d started twice",
		rollingRuns, rollingTurns, len(stopped), elapsed.Round(time.Millisecond), started(dir), interrupted, falseInterrupted, timedOut, twice)
}

// journal lists the step tool's journal files in dir, one per call.
func journal(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "calls-") {
			names = append(names, e.Name())
		}
	}
	return names
}

// started counts the calls of the step tool that have started.
func started(dir string) int { return len(journal(dir)) }

// lostTasks returns the tasks of workflow id (every run of its chain)
// that a worker took and never ran, which then timed out, each as its
// event's time, type and the worker that had taken it: the activities
// that failed so, the activity attempts whose retry started after a
// timeout (the history records only an activity's last attempt, with the
// failure of the one before), and the workflow tasks that timed out once
// started.
func lostTasks(t *testing.T, c client.Client, id string) []string {
	t.Helper()
	var lost []string
	startedBy := map[int64]string{} // a workflow task's started event: its worker
	add := func(e *historypb.HistoryEvent, by string) {
		lost = append(lost, fmt.Sprintf("%s %s (taken by %s)", e.GetEventTime().AsTime().Format("15:04:05.000"), e.GetEventType(), by))
	}
	it := c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Errorf("history of %s: %v", id, err)
			return lost
		}
		if a := e.GetWorkflowTaskStartedEventAttributes(); a != nil {
			startedBy[e.GetEventId()] = a.GetIdentity()
		}
		if e.GetActivityTaskTimedOutEventAttributes() != nil {
			add(e, "an activity worker")
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && a.GetLastFailure().GetTimeoutFailureInfo() != nil {
			add(e, "the attempt before "+a.GetIdentity()+"'s")
		}
		if a := e.GetWorkflowTaskTimedOutEventAttributes(); a != nil && a.GetTimeoutType() == enumspb.TIMEOUT_TYPE_START_TO_CLOSE {
			add(e, startedBy[a.GetStartedEventId()]) // a workflow task handed to a worker that never ran it
		}
	}
	return lost
}

// activityStarts describes the activity tasks started in the history of
// workflow id (every run of its chain): when, by whom, which attempt.
func activityStarts(t *testing.T, c client.Client, id string) string {
	t.Helper()
	var out []string
	it := c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return err.Error()
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			out = append(out, fmt.Sprintf("%s started by %s (attempt %d)", e.GetEventTime().AsTime().Format("15:04:05.000"), a.GetIdentity(), a.GetAttempt()))
		}
		if a := e.GetActivityTaskTimedOutEventAttributes(); a != nil {
			out = append(out, fmt.Sprintf("%s timed out", e.GetEventTime().AsTime().Format("15:04:05.000")))
		}
	}
	return strings.Join(out, "; ")
}
