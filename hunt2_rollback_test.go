//go:build hunt2

package toolrun_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// savesKept is a FileStore that keeps the bytes of each state file it
// writes, as anyone who can read the store's directory (a backup, a
// snapshot) has them.
type savesKept struct {
	toolrun.FileStore
	mu    sync.Mutex
	files [][]byte // the state file after each save, in order
}

func (s *savesKept) Save(ctx context.Context, id string, st *toolrun.State, prev uint64) error {
	if err := s.FileStore.Save(ctx, id, st, prev); err != nil {
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

// TestHunt2SignedStateRolledBack: with Options.StateKey, Open refuses a
// saved state that was changed, so that "whoever can write a saved state"
// can no longer change what a resumed run does. But a state the runner
// itself signed earlier in the run is accepted as it is: one who can write
// the store puts back the state saved when the model's response arrived
// (before the journal of the started call), and the next Open decides and
// runs the non-idempotent call again. The signature binds neither the
// version a run has reached nor the RunID (a signed state of another run
// is accepted as well). Want: Open refuses a state older than one the
// runner saved (or the StateKey docs say the signature cannot stop a
// rollback or a state moved from another run, so that a store writer can
// still run a call twice).
func TestHunt2SignedStateRolledBack(t *testing.T) {
	key := []byte("a state key of 32 bytes, exactly")
	store := &savesKept{FileStore: toolrun.FileStore{Dir: t.TempDir()}}
	replies := []toolruntest.Reply{toolruntest.Message(toolruntest.ToolUse("toolu_1", "charge", map[string]any{}))}
	for range 20 {
		replies = append(replies, toolruntest.Message(toolruntest.Text("Charged.")))
	}
	s := toolruntest.New(t, toolruntest.Script(replies...))
	var charges atomic.Int32
	charge := toolrun.NewTool("charge", "Charges the card once", func(ctx context.Context, in struct{}) (string, error) {
		charges.Add(1)
		return "charged", nil
	})
	opts := func() *toolrun.Options {
		return &toolrun.Options{Logger: discard(), Store: store, RunID: "order-42", StateKey: key}
	}
	r, err := toolrun.Open(t.Context(), client(s), userParams("Charge it."), []toolrun.Tool{charge}, opts())
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %v, %v; want end_turn", res, err)
	}
	if n := charges.Load(); n != 1 {
		t.Fatalf("the first run charged %d times, want 1", n)
	}
	store.mu.Lock()
	files := append([][]byte(nil), store.files...)
	store.mu.Unlock()
	path := filepath.Join(store.Dir, "order-42.state.json")
	for i, old := range files {
		// Put an earlier state back, as a store writer (or a restored
		// backup) would, and resume the run.
		if err := os.WriteFile(path, old, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := toolrun.Open(t.Context(), client(s), userParams("Charge it."), []toolrun.Tool{charge}, opts())
		if err != nil {
			continue // refused: what the signature should do
		}
		r.Run(t.Context())
		if n := charges.Load(); n > 1 {
			t.Fatalf("Open accepted the signed state of save %d of %d, an earlier state of the run, and the non-idempotent call ran %d times", i+1, len(files), n)
		}
	}
}
