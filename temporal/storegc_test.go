package temporal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
)

// TestStoreKeepsLastStates runs eight turns, continuing as new every
// three, with workers that keep states in a Store: each step deletes the
// state that its predecessor started from, so the run leaves two states in
// the Store (the last, which the Outcome names, and the one before it),
// not one per step, and the last loads whole.
func TestStoreKeepsLastStates(t *testing.T) {
	var replies []toolruntest.Reply
	for i := range 7 {
		replies = append(replies, toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", i), "write_file", writeIn{Path: fmt.Sprintf("/%d", i)})))
	}
	replies = append(replies, toolruntest.Message(toolruntest.Text("Done.")))
	model := toolruntest.New(t, toolruntest.Script(replies...))
	c := dialTemporal(t)
	queue := newQueue("toolrun-store-gc")
	dir := t.TempDir()
	store := &toolrun.FileStore{Dir: dir}
	var calls counter
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{writeTool(&calls, nil)}, &toolrun.Options{Logger: discard(), Store: store}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ro := fastRetries
	ro.ContinueAsNewAfter = 3
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &ro)
	if err != nil {
		t.Fatal(err)
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Ref == "" {
		t.Fatalf("got stop %q, ref %q; want end_turn with a ref", out.StopReason, out.Ref)
	}
	states := storedStates(t, dir)
	if len(states) > 2 {
		t.Errorf("the Store holds %d states after 8 turns, want at most 2: %v", len(states), states)
	}
	whole, err := temporal.LoadState(ctx, store, &out)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(whole.Params.Messages), 16; got != want {
		t.Errorf("the last state has %d messages, want %d", got, want)
	}
}

// storedStates lists the state files of a FileStore in dir.
func storedStates(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".state.json") {
			out = append(out, strings.TrimPrefix(path, dir))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
