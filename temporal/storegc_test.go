package temporal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
)

// TestStoreKeepsLastStates runs eight turns, continuing as new every
// three, with workers that keep states in a Store: each step deletes the
// state that its predecessor started from, and the step that ends the run
// the one it started from, so the run leaves one state in the Store, the
// last, which the Outcome names, not one per step, and it loads whole.
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
	store := &filestore.Store{Dir: dir}
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
	if len(states) != 1 {
		t.Errorf("the Store holds %d states after the run, want 1, the last: %v", len(states), states)
	}
	whole, err := temporal.LoadState(ctx, store, &out)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(whole.Params.Messages), 16; got != want {
		t.Errorf("the last state has %d messages, want %d", got, want)
	}
}

// storedStates lists the state files of a filestore.Store in dir.
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

// lostStore is a filestore.Store whose first Delete waits, once it has deleted
// the state, until the step's context is done: the step attempt that
// deleted it goes on past its timeout, so that the server never records
// its result, as when a worker's completion is lost.
type lostStore struct {
	filestore.Store
	once sync.Once
}

func (s *lostStore) Delete(ctx context.Context, id string) error {
	err := s.Store.Delete(ctx, id)
	{
		s.once.Do(func() { <-ctx.Done() })
	}
	return err
}

// TestStoreEndRetried loses the result of the step that ends a run, after
// that step deleted the state it started from: the step's retry finds the
// state gone and the result of the attempt that ended the run, and ends
// the run with it (end_turn, the last state under the Outcome's Ref),
// without asking the model again; the Store is left with that state.
func TestStoreEndRetried(t *testing.T) {
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t0", "write_file", writeIn{Path: "/0"})),
		toolruntest.Message(toolruntest.Text("Done."))))
	c := dialTemporal(t)
	queue := newQueue("toolrun-store-end")
	dir := t.TempDir()
	// The first Delete is the second step's, which ends the run, of the
	// first step's state.
	store := &lostStore{Store: filestore.Store{Dir: dir}}
	var calls counter
	acts := temporal.NewActivities(model.Client(), []toolrun.Tool{writeTool(&calls, nil)}, &toolrun.Options{Logger: discard(), Store: store})
	inProcessWorker(t, c, queue, acts)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ro := fastRetries
	ro.StepTimeout = 2 * time.Second
	ro.ModelRetry = &sdktemporal.RetryPolicy{InitialInterval: 10 * time.Millisecond, MaximumAttempts: 3}
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &ro)
	if err != nil {
		t.Fatal(err)
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
		t.Fatalf("got outcome %q %q (%s), want end_turn %q", out.StopReason, out.Text, out.Detail, "Done.")
	}
	if n := len(model.Requests()); n != 2 {
		t.Errorf("the model got %d requests, want 2", n)
	}
	whole, err := temporal.LoadState(ctx, store, &out)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(whole.Params.Messages), 4; got != want {
		t.Errorf("the last state has %d messages, want %d", got, want)
	}
	if states := storedStates(t, dir); len(states) != 1 {
		t.Errorf("the Store holds %d states after the run, want 1: %v", len(states), states)
	}
}
