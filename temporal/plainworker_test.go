package temporal_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
)

// errorLog counts the records at ERROR level or above, with their messages.
type errorLog struct {
	mu   sync.Mutex
	msgs []string
}

func (h *errorLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *errorLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *errorLog) WithGroup(string) slog.Handler            { return h }
func (h *errorLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelError {
		return nil
	}
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h.mu.Lock()
	h.msgs = append(h.msgs, b.String())
	h.mu.Unlock()
	return nil
}

func (h *errorLog) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}

// TestPlainWorker: a worker built with worker.New (with a stop timeout)
// and given the activities with Register works as one of NewWorker:
// every step misses the worker's state cache (turned off), and without a
// Store each asks the workflow for the history it lacks, so no step
// attempt fails for want of it (an activity failure, logged at ERROR by
// the SDK, and a second step with the whole state in the history).
func TestPlainWorker(t *testing.T) {
	base := dialTemporal(t)
	errs := &errorLog{}
	c, err := client.NewClientFromExisting(base, client.Options{Logger: log.NewStructuredLogger(slog.New(errs))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	queue := newQueue("toolrun-plain")
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", cityIn{City: "Paris"})),
		toolruntest.Message(toolruntest.ToolUse("t2", "get_weather", cityIn{City: "Rome"})),
		toolruntest.Message(toolruntest.ToolUse("t3", "get_weather", cityIn{City: "Oslo"})),
		toolruntest.Message(toolruntest.Text("Done."))))
	calls := &counter{}
	acts := temporal.NewActivities(model.Client(), []toolrun.Tool{weatherTool(calls)}, &toolrun.Options{Logger: discard()})
	acts.SetStateCacheRuns(-1)
	w := worker.New(c, queue, worker.Options{WorkerStopTimeout: temporal.MinWorkerStopTimeout})
	temporal.Register(w, acts)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("weather?"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
		t.Errorf("got outcome %q (%s) %q, want end_turn %q", out.StopReason, out.Detail, out.Text, "Done.")
	}
	var failed []string
	steps := 0
	it := c.GetWorkflowHistory(ctx, queue, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && (a.GetActivityType().GetName() == temporal.StepActivity || a.GetActivityType().GetName() == temporal.StepDeltaActivity) {
			steps++
		}
		if a := e.GetActivityTaskFailedEventAttributes(); a != nil {
			failed = append(failed, a.GetFailure().GetApplicationFailureInfo().GetType()+": "+a.GetFailure().GetMessage())
		}
	}
	if len(failed) > 0 {
		t.Errorf("activities failed: %q", failed)
	}
	if steps != 4 {
		t.Errorf("got %d steps scheduled, want 4, one per turn", steps)
	}
	if got := errs.all(); len(got) > 0 {
		t.Errorf("the worker logged at ERROR:\n%s", strings.Join(got, "\n"))
	}
	if diff := cmp.Diff(map[string]int{"weather Paris": 1, "weather Rome": 1, "weather Oslo": 1}, calls.all()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
