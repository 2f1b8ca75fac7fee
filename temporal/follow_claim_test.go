package temporal_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
)

// TestFollowResolvesClaims follows a run whose 1 MB tool result travels
// as a claim, while the claim is still in the Store (the run waits for a
// person on its next call): given the workers' Store, Follow reports the
// result whole; without it, the claim's mark.
func TestFollowResolvesClaims(t *testing.T) {
	c := dialTemporal(t)
	big := strings.Repeat("y", 1<<20)
	put := toolrun.NewTool("put", "Puts a file", func(ctx context.Context, in bigIn) (string, error) { return big, nil })
	pay := toolrun.NewTool("pay", "Pays", func(ctx context.Context, in bigIn) (string, error) { return "paid", nil })
	pay.Policy = policy.RequireApproval("payments need a person")
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("b1", "put", bigIn{Path: "/a"})),
		toolruntest.Message(toolruntest.ToolUse("b2", "pay", bigIn{Path: "/b"})),
		toolruntest.Message(toolruntest.Text("Done."))))
	store := &filestore.Store{Dir: filepath.Join(t.TempDir(), "store")}
	queue := newQueue("toolrun-follow-claim")
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{put, pay},
		&toolrun.Options{Logger: discard(), Store: store, MaxResultBytes: 2 << 20}))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// resultOf follows the run until it waits, and returns b1's result text.
	resultOf := func(opts *temporal.ClientOptions) string {
		t.Helper()
		var text string
		err := temporal.Follow(ctx, c, queue, run.GetRunID(), 0, func(e temporal.RunEvent) bool {
			if e.Kind == temporal.ToolFinished && e.Result.Call.ID == "b1" {
				for _, b := range e.Result.Content {
					if b.OfText != nil {
						text += b.OfText.Text
					}
				}
			}
			return e.Kind != temporal.Awaiting
		}, opts)
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	if got := resultOf(&temporal.ClientOptions{Store: store}); got != big {
		t.Errorf("with the Store: b1's result is %d bytes, %.60q…; want the %d bytes the tool returned", len(got), got, len(big))
	}
	if got := resultOf(nil); len(got) > 4096 || !strings.Contains(got, "toolrun-claim:") {
		t.Errorf("without the Store: b1's result is %d bytes, %.60q…; want the claim's mark", len(got), got)
	}
	if err := temporal.DecideBySignal(ctx, c, queue, "b2", policy.Deny("no"), nil); err != nil {
		t.Fatal(err)
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
}
