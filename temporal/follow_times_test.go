package temporal_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/api/enums/v1"
)

// TestFollowStepTimes: each StepFinished carries its step activity's
// started and completed times as the history records them.
func TestFollowStepTimes(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-follow-times")
	ctx, run, _, _ := startApprovalRun(t, c, queue,
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		toolruntest.Message(toolruntest.Text("Done.")))
	waitFor(t, 30*time.Second, "the call awaiting approval", func() bool {
		p, err := temporal.Pending(ctx, c, queue, nil)
		return err == nil && len(p) == 1
	})
	if err := temporal.Decide(ctx, c, queue, "t1", toolrun.Decision{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}

	type span struct{ Started, Completed time.Time }
	var want []span
	started := map[int64]time.Time{} // by scheduled event
	steps := map[int64]bool{}
	it := c.GetWorkflowHistory(ctx, queue, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == temporal.StepActivity {
			steps[e.GetEventId()] = true
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			started[a.GetScheduledEventId()] = e.GetEventTime().AsTime()
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && steps[a.GetScheduledEventId()] {
			want = append(want, span{started[a.GetScheduledEventId()], e.GetEventTime().AsTime()})
		}
	}
	var got []span
	err := temporal.Follow(ctx, c, queue, run.GetRunID(), 0, func(e temporal.RunEvent) bool {
		if e.Kind == temporal.StepFinished {
			got = append(got, span{e.Started, e.Completed})
		}
		return true
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 3 {
		t.Fatalf("the history has %d steps, want 3 (the call, the decision, the answer)", len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the steps' times (-history +Follow):\n%s", diff)
	}
	for _, s := range got {
		if s.Started.IsZero() || s.Completed.Before(s.Started) {
			t.Errorf("a step started %v and completed %v, want a start and an end not before it", s.Started, s.Completed)
		}
	}
}
