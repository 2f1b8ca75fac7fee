package temporal_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// TestToolMaxParallelOnServer checks that the workflow honours a tool's
// ToolConfig.MaxParallel as the runner's executor does: of three calls of
// a tool limited to one at a time, the workflow schedules one, then the
// next when it is done, while a call of another tool of the same group
// goes alongside the first. It reads the schedule from the run's history,
// where each workflow task's commands say which calls went together.
func TestToolMaxParallelOnServer(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-maxparallel")
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(
			toolruntest.ToolUse("a", "one_at_a_time", map[string]any{}),
			toolruntest.ToolUse("b", "one_at_a_time", map[string]any{}),
			toolruntest.ToolUse("c", "one_at_a_time", map[string]any{}),
			toolruntest.ToolUse("d", "free", map[string]any{}),
		),
		toolruntest.Message(toolruntest.Text("Done.")),
	))
	limited := toolrun.NewTool("one_at_a_time", "A tool one call of which runs at once", func(ctx context.Context, in struct{}) (string, error) {
		return "ok", nil
	})
	limited.MaxParallel = 1
	free := toolrun.NewTool("free", "A tool with no bound", func(ctx context.Context, in struct{}) (string, error) {
		return "ok", nil
	})
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{limited, free}, &toolrun.Options{Logger: discard()}))
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
	if out.StopReason != toolrun.StopEndTurn {
		t.Fatalf("StopReason = %q, want end_turn", out.StopReason)
	}
	if diff := cmp.Diff([][]string{{"a", "d"}, {"b"}, {"c"}}, toolWaves(t, c, queue)); diff != "" {
		t.Errorf("tool activities scheduled together (-want +got):\n%s", diff)
	}
}

// toolWaves returns the tool_use ids of the tool activities workflow id
// scheduled, grouped by the workflow task that scheduled them.
func toolWaves(t *testing.T, c client.Client, id string) [][]string {
	t.Helper()
	it := c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var waves [][]string
	task := int64(-1)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		a := e.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityType().GetName() != temporal.ToolActivity {
			continue
		}
		var in temporal.ToolInput
		if err := json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in); err != nil {
			t.Fatal(err)
		}
		if a.GetWorkflowTaskCompletedEventId() != task {
			task = a.GetWorkflowTaskCompletedEventId()
			waves = append(waves, nil)
		}
		waves[len(waves)-1] = append(waves[len(waves)-1], in.ToolUseID)
	}
	return waves
}
