package temporal_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
)

// TestSignalFloodOnServer: 30 decisions of 10 KB sent while no worker
// runs reach the workflow in its first task, 300 KB at once, over the
// 256 KiB the workflow takes in one go; it takes them in steps with a
// pause between (the change toolrun.paced in its history), rather than
// in one run of its code, which the deadlock detector fails on a loaded
// machine, and the run ends normally. Its history is the golden
// signal-flood.json, which TestReplayGoldenHistories replays.
func TestSignalFloodOnServer(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-signal-flood")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	reason := strings.Repeat("r", 10<<10)
	for i := range 30 {
		if err := temporal.DecideBySignal(ctx, c, queue, fmt.Sprintf("bogus-%d", i), policy.Deny(reason), nil); err != nil {
			t.Fatal(err)
		}
	}
	model := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("Done."))))
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), nil, &toolrun.Options{Logger: discard()}))
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("the run has no Outcome: %v", err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
		t.Errorf("got outcome %q (%s) %q, want end_turn %q", out.StopReason, out.Detail, out.Text, "Done.")
	}
	paced := false
	it := c.GetWorkflowHistory(ctx, queue, run.GetRunID(), false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if m := e.GetMarkerRecordedEventAttributes(); m != nil && strings.Contains(m.String(), "toolrun.paced") {
			paced = true
		}
	}
	if !paced {
		t.Error("got no toolrun.paced change in the history, want the workflow to have paused while it took the signals")
	}
	recordHistory(t, c, queue, "signal-flood")
}
