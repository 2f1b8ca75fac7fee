package temporal_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolrun/toolrun/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplayGoldenHistories replays the histories recorded under
// testdata/histories (go test -update, against a server) with the
// workflow as it is now: a change to the workflow that would break the
// runs in flight (a non-determinism error) fails here. Such a change must
// be guarded with workflow.GetVersion; see the README's upgrade guide.
// The histories of older releases stay, so each release replays them all.
func TestReplayGoldenHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		msg := "no golden histories under testdata/histories; record them with go test -update against a Temporal server"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(temporal.Workflow, workflow.RegisterOptions{Name: temporal.WorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(nopLogger, f); err != nil {
				t.Errorf("got %v, want the history to replay", err)
			}
		})
	}
}
