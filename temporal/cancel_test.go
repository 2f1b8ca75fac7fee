package temporal_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
)

// TestCancelReachesRunningToolOnServer cancels a run while its tool runs:
// the tool's context is cancelled, through the activity's heartbeats,
// although the tool would run for ten minutes and its activity's timeout
// is longer. RunOptions.HeartbeatTimeout bounds how soon (see its doc);
// the test sets it to two seconds and waits at most a minute.
func TestCancelReachesRunningToolOnServer(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-cancel-tool")
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "wait", map[string]any{})),
		toolruntest.Message(toolruntest.Text("Done.")),
	))
	started, cancelled := make(chan struct{}), make(chan struct{})
	wait := toolrun.NewTool("wait", "Waits ten minutes", func(ctx context.Context, in struct{}) (string, error) {
		close(started)
		select {
		case <-ctx.Done():
			close(cancelled)
			return "", ctx.Err()
		case <-time.After(10 * time.Minute):
			return "waited", nil
		}
	})
	wait.Timeout = 10 * time.Minute
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{wait}, &toolrun.Options{Logger: discard()}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ro := fastRetries
	ro.HeartbeatTimeout = 2 * time.Second
	if _, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &ro); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the tool never started")
	}
	if err := c.CancelWorkflow(ctx, queue, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cancelled:
	case <-ctx.Done():
		t.Fatal("the run's cancellation never reached the running tool")
	}
}
