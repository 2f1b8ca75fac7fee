package temporal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// TestStoppingWorkerRunsWhatItPolled: a worker of NewWorker on a plainly
// dialled client, once SIGTERMed, stops polling but lets the polls under
// way end and runs the tasks they bring, on a server that does not
// complete polls on shutdown (pollsKeptNamespace). A run started after
// the worker was asked to stop is taken by it (its first workflow task
// starts on that worker), where a worker that cancels its polls (the
// SDK's default on such a server) takes nothing, and a task the server
// had handed to a cancelled poll is lost.
func TestStoppingWorkerRunsWhatItPolled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	c := dialTemporalIn(t, pollsKeptNamespace)
	dir := t.TempDir()
	model := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("Done."))))
	queue := newQueue("toolrun-drain")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	first := startWorker(t, dir, queue, model.URL, "stopping", identityEnv+"=stopping", inPollsKept)
	polling(t, c, queue, "stopping")
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the worker to begin stopping", func() bool {
		_, err := os.Stat(filepath.Join(dir, "stopping-stopping"))
		return err == nil
	})
	// A worker that cancels its polls has done so within this wait.
	time.Sleep(500 * time.Millisecond)
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Errorf("the stopped worker: %v", err)
	}
	// Whatever the stopping worker did not take, a new one finishes.
	startWorker(t, dir, queue, model.URL, "next", identityEnv+"=next", inPollsKept)
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
		t.Errorf("got outcome %q %q, want end_turn %q", out.StopReason, out.Text, "Done.")
	}
	var took []string
	it := c.GetWorkflowHistory(ctx, queue, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetWorkflowTaskStartedEventAttributes(); a != nil {
			took = append(took, "workflow task by "+a.GetIdentity())
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			took = append(took, "activity task by "+a.GetIdentity())
		}
	}
	if len(took) == 0 || took[0] != "workflow task by stopping" {
		t.Errorf("tasks started %v; want the first workflow task taken by the stopping worker, whose poll was under way", took)
	}
}

// polling waits until the worker whose identity is id polls both queues
// of task queue queue.
func polling(t *testing.T, c client.Client, queue, id string) {
	t.Helper()
	waitFor(t, 30*time.Second, "the worker to poll both queues", func() bool {
		for _, typ := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
			d, err := c.DescribeTaskQueue(t.Context(), queue, typ)
			if err != nil || !slices.ContainsFunc(d.GetPollers(), func(p *taskqueuepb.PollerInfo) bool { return p.GetIdentity() == id }) {
				return false
			}
		}
		return true
	})
}

// TestRegisterRefusesShortStopTimeout: Register refuses, naming NewWorker,
// a worker of worker.New whose WorkerStopTimeout is 0 (the SDK's
// default), which would cancel its running tools at once on a stop, or
// shorter than MinWorkerStopTimeout, whose stop would give up before its
// polls end; and takes one with a long enough stop timeout, as
// NewWorker's.
func TestRegisterRefusesShortStopTimeout(t *testing.T) {
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Logger: nopLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		name    string
		make    func(a *temporal.Activities)
		refused bool
	}{
		{"worker.New", func(a *temporal.Activities) { temporal.Register(worker.New(c, "q", worker.Options{}), a) }, true},
		{"worker.New with a stop timeout shorter than a poll", func(a *temporal.Activities) {
			temporal.Register(worker.New(c, "q", worker.Options{WorkerStopTimeout: 5 * time.Second}), a)
		}, true},
		{"worker.New with a stop timeout", func(a *temporal.Activities) {
			temporal.Register(worker.New(c, "q", worker.Options{WorkerStopTimeout: temporal.MinWorkerStopTimeout}), a)
		}, false},
		{"NewWorker", func(a *temporal.Activities) { temporal.NewWorker(c, "q", a, worker.Options{}) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := temporal.NewActivities(anthropic.Client{}, nil, &toolrun.Options{Logger: discard()})
			err := catch(func() { tc.make(a) })
			if got := err != nil; got != tc.refused {
				t.Fatalf("refused: got %v (%v), want %v", got, err, tc.refused)
			}
			if err != nil && !strings.Contains(err.Error(), "temporal.NewWorker") {
				t.Errorf("got %q, want the refusal to name temporal.NewWorker", err)
			}
		})
	}
}

// TestStoppedWorkerHoldsNoPoll: a worker of NewWorker given a stop timeout
// shorter than a poll (a second), once stopped idle, holds no poll that a
// task could be handed to: its stop returns only once its polls under way
// have ended, so runs started right after it, on another worker, lose no
// workflow task to it. The SDK's stop gives up at the stop timeout and
// leaves such polls open, and the stopped worker drops what they bring:
// the task is lost until its timeout (WorkflowTaskTimedOut).
func TestStoppedWorkerHoldsNoPoll(t *testing.T) {
	c := dialTemporalIn(t, pollsKeptNamespace)
	_, lost := stopIdleThenRun(t, c, "toolrun-stopped", worker.Options{WorkerStopTimeout: time.Second})
	if len(lost) > 0 {
		t.Errorf("tasks lost to the stopped worker's polls:\n%s", strings.Join(lost, "\n"))
	}
}

// TestIdleWorkerStopsPromptly: on a server that ends a stopping worker's
// polls (frontend.enableCancelWorkerPollsOnShutdown, on in the namespace
// "default" of ci.sh's dev server, where the long poll is the server's
// default minute), an idle worker of NewWorker with the default options
// stops within seconds, not at its polls' end a minute later, and runs
// started right after it, on another worker, lose no task to it. Against
// pollsKeptNamespace's server (its long poll 10 s here) the same stop
// takes up to the long poll: the bound below is half a minute, so the
// test fails on a server with the default long poll that does not end
// the polls, and holds on a loaded machine where the stop takes a second.
func TestIdleWorkerStopsPromptly(t *testing.T) {
	c := dialTemporal(t)
	took, lost := stopIdleThenRun(t, c, "toolrun-idle-stop", worker.Options{})
	if took > 30*time.Second {
		t.Errorf("an idle worker took %v to stop, want it within seconds on a server that ends its polls", took)
	}
	if len(lost) > 0 {
		t.Errorf("tasks lost to the stopped worker's polls:\n%s", strings.Join(lost, "\n"))
	}
	t.Logf("an idle worker stopped in %v", took.Round(time.Millisecond))
}

// stopIdleThenRun starts a worker of NewWorker with opts on a new task
// queue, waits until it polls, stops it and measures the stop, then runs
// eight runs to their end on a second worker of the queue, and returns
// the stop's duration with every task the runs lost (a workflow or an
// activity task timed out: handed to a poll nobody read).
func stopIdleThenRun(t *testing.T, c client.Client, prefix string, opts worker.Options) (time.Duration, []string) {
	t.Helper()
	model := toolruntest.New(t, toolruntest.Options{Func: func(*toolruntest.Request) toolruntest.Reply {
		return toolruntest.Message(toolruntest.Text("Done."))
	}})
	queue := newQueue(prefix)
	acts := func() *temporal.Activities {
		return temporal.NewActivities(model.Client(), nil, &toolrun.Options{Logger: discard()})
	}
	opts.Identity = "stopped"
	stopped := temporal.NewWorker(c, queue, acts(), opts)
	if err := stopped.Start(); err != nil {
		t.Fatal(err)
	}
	polling(t, c, queue, "stopped")
	start := time.Now()
	stopped.Stop()
	took := time.Since(start)
	opts.Identity = "next"
	next := temporal.NewWorker(c, queue, acts(), opts)
	if err := next.Start(); err != nil {
		t.Fatal(err)
	}
	defer next.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const runs = 8
	var ids []string
	for i := range runs {
		id := fmt.Sprintf("%s-%d", queue, i)
		if _, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, userParams("go"), nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	var lost []string
	for _, id := range ids {
		var out temporal.Outcome
		if err := c.GetWorkflow(ctx, id, "").Get(ctx, &out); err != nil {
			t.Fatal(err)
		}
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT || e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT {
				lost = append(lost, fmt.Sprintf("%s: event %d %s", id, e.GetEventId(), e.GetEventType()))
			}
		}
	}
	return took, lost
}
