package toolrun_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/toolruntest"
)

// savesKept is a filestore.Store that keeps the bytes of each state file it
// writes, as anyone who can read the store's directory (a backup, a
// snapshot) has them.
type savesKept struct {
	filestore.Store
	mu    sync.Mutex
	files [][]byte // the state file after each save, in order
}

func (s *savesKept) Save(ctx context.Context, id string, st *toolrun.State, prev uint64) error {
	if err := s.Store.Save(ctx, id, st, prev); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(s.Dir, id+".state.json"))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.files = append(s.files, b)
	s.mu.Unlock()
	return nil
}

// TestSignedStateOfAnotherRunIsRefused: with Options.StateKey, a state
// carries its RunID under the signature, and Open refuses a signed state
// its store holds under another id (a store writer moved it there from
// another run) with an error wrapping ErrStateSignature; nothing runs.
// Before, the signature did not cover the run, and the moved state was
// resumed: its non-idempotent call ran in a second run. (An earlier state
// of the same run put back is a limit the StateKey docs state: nothing in
// the state can tell it from the latest.)
func TestSignedStateOfAnotherRunIsRefused(t *testing.T) {
	key := []byte("a state key of 32 bytes, exactly")
	store := &savesKept{Store: filestore.Store{Dir: t.TempDir()}}
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "charge", map[string]any{})),
		toolruntest.Message(toolruntest.Text("Charged.")),
		toolruntest.Message(toolruntest.Text("Charged.")),
	))
	var charges atomic.Int32
	charge := toolrun.NewTool("charge", "Charges the card once", func(ctx context.Context, in struct{}) (string, error) {
		charges.Add(1)
		return "charged", nil
	})
	opts := func(id string) *toolrun.Options {
		return &toolrun.Options{Logger: discard(), Store: store, RunID: id, StateKey: key}
	}
	r, err := toolrun.Open(t.Context(), client(s), userParams("Charge it."), []toolrun.Tool{charge}, opts("order-42"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %v, %v; want end_turn", res, err)
	}
	if st := r.State(); st.RunID != "order-42" {
		t.Errorf("State().RunID = %q, want order-42", st.RunID)
	}
	store.mu.Lock()
	files := append([][]byte(nil), store.files...)
	store.mu.Unlock()
	if len(files) < 2 {
		t.Fatalf("%d saves kept, want several", len(files))
	}
	// The state saved when the response arrived, before the call ran, is
	// moved to another run's place in the store.
	if err := os.WriteFile(filepath.Join(store.Dir, "order-43.state.json"), files[1], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = toolrun.Open(t.Context(), client(s), userParams("Charge it."), []toolrun.Tool{charge}, opts("order-43"))
	if !errors.Is(err, toolrun.ErrStateSignature) || !strings.Contains(err.Error(), `run "order-42"`) {
		t.Errorf("Open of another run's signed state = %v, want an error wrapping ErrStateSignature naming order-42", err)
	}
	if n := charges.Load(); n != 1 {
		t.Errorf("the call ran %d times, want once", n)
	}
	// Without a key the state is trusted as it is, but Open still refuses
	// a state its store holds under another id.
	_, err = toolrun.Open(t.Context(), client(s), userParams("Charge it."), []toolrun.Tool{charge}, &toolrun.Options{Logger: discard(), Store: store, RunID: "order-43"})
	if err == nil || errors.Is(err, toolrun.ErrStateSignature) {
		t.Errorf("Open without a key = %v, want a plain error", err)
	}
	// Resume takes a state of any run: a copy under a new id is the
	// caller's to make.
	st := r.State()
	if _, err := toolrun.Resume(client(s), st, []toolrun.Tool{charge}, opts("order-44")); err != nil {
		t.Errorf("Resume of a signed state under another RunID = %v, want a copy of the run", err)
	}
}
