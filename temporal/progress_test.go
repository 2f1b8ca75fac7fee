package temporal_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
)

// TestReportProgress checks that what a tool reports with ReportProgress
// reaches Temporal as its activity's heartbeat details.
func TestReportProgress(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "copy", map[string]any{})),
		toolruntest.Message(toolruntest.Text("Copied.")),
	))
	// Each report waits until Temporal has it: heartbeats are throttled,
	// and a report made in the meantime replaces the one not sent yet.
	seen := make(chan string, 10)
	copyTool := toolrun.NewTool("copy", "Copies files", func(ctx context.Context, in struct{}) (string, error) {
		for _, p := range []string{"1/3", "2/3", "3/3"} {
			temporal.ReportProgress(ctx, p)
			for got := ""; got != p; {
				select {
				case got = <-seen:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
		}
		return "copied", nil
	})
	env := newEnv(t, s, []toolrun.Tool{copyTool}, nil)
	var got []string
	env.SetOnActivityHeartbeatListener(func(info *activity.Info, details converter.EncodedValues) {
		if info.ActivityType.Name != temporal.ToolActivity || !details.HasValues() {
			return
		}
		var p string
		if err := details.Get(&p); err == nil && (len(got) == 0 || got[len(got)-1] != p) {
			got = append(got, p)
			seen <- p
		}
	})
	ro := fastRetries
	ro.HeartbeatTimeout = time.Second
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("copy"), &ro))
	if out := outcome(t, env); out.StopReason != toolrun.StopEndTurn {
		t.Errorf("got stop reason %q, want end_turn", out.StopReason)
	}
	if diff := cmp.Diff([]string{"1/3", "2/3", "3/3"}, got); diff != "" {
		t.Errorf("heartbeat details (-want +got):\n%s", diff)
	}
}
