package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// countingStore is a filestore.Store that counts the bytes of what the runner
// hands it to save: a whole State for Save, a StateChange for Append.
type countingStore struct {
	*filestore.Store
	mu      sync.Mutex // guards the counts
	saves   int
	appends int
	bytes   int
	// appended is the bytes handed to Append alone
	appended int
}

func (s *countingStore) count(v any, append bool) {
	b, _ := json.Marshal(v)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bytes += len(b)
	if append {
		s.appends++
		s.appended += len(b)
	} else {
		s.saves++
	}
}

func (s *countingStore) Save(ctx context.Context, id string, st *toolrun.State, prev uint64) error {
	s.count(st, false)
	return s.Store.Save(ctx, id, st, prev)
}

func (s *countingStore) Append(ctx context.Context, id string, c *toolrun.StateChange, prev uint64) error {
	s.count(c, true)
	return s.Store.Append(ctx, id, c, prev)
}

// turnOfCalls runs one turn of n calls of a tool whose result is 200
// bytes, the last call deferred to a person, signed with key if set, and
// returns the runner, stopped awaiting approval, and its fake server.
func turnOfCalls(t *testing.T, n int, store toolrun.Store, key []byte) (*toolrun.Runner, *toolruntest.Server, []toolrun.Tool) {
	return turnOfCallsAfter(t, n, store, key, "go")
}

// turnOfCallsAfter is turnOfCalls with a first message of its own.
func turnOfCallsAfter(t *testing.T, n int, store toolrun.Store, key []byte, first string) (*toolrun.Runner, *toolruntest.Server, []toolrun.Tool) {
	t.Helper()
	reply := func(req *toolruntest.Request) toolruntest.Reply {
		if len(req.Conversation) > 1 {
			return toolruntest.Message(toolruntest.Text("done"))
		}
		var blocks []toolruntest.Block
		for i := range n {
			name := "echo"
			if i == n-1 {
				name = "approve"
			}
			blocks = append(blocks, toolruntest.ToolUse(fmt.Sprintf("c%d", i), name, map[string]int{"i": i}))
		}
		return toolruntest.Message(blocks...)
	}
	type in struct {
		I int `json:"i"`
	}
	echo := toolrun.NewTool("echo", "Echo", func(ctx context.Context, in in) (string, error) {
		return fmt.Sprintf("%d %s", in.I, strings.Repeat("x", 200)), nil
	})
	approve := toolrun.NewTool("approve", "Needs a person", func(ctx context.Context, in in) (string, error) {
		return "approved", nil
	})
	approve.Policy = policy.RequireApproval("asks")
	tools := []toolrun.Tool{echo, approve}
	s := toolruntest.New(t, toolruntest.Options{Func: reply})
	r, err := toolrun.Open(t.Context(), client(s), userParams(first), tools, &toolrun.Options{Logger: discard(), Store: store, RunID: "many", StateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("Run = %q, %v; want awaiting_approval", res.StopReason, err)
	}
	return r, s, tools
}

// TestATurnOfCallsSavesWhatItAdds: with a store that appends, the saves
// of a turn of n calls hand the store bytes that grow with n, not n²: 4
// times the calls cost at most 4.5 times the bytes. Saving the whole
// state at every step made it about 16 times.
func TestATurnOfCallsSavesWhatItAdds(t *testing.T) {
	var bytes [2]int
	for i, n := range []int{25, 100} {
		store := &countingStore{Store: &filestore.Store{Dir: t.TempDir()}}
		turnOfCalls(t, n, store, nil)
		if store.appends < n {
			t.Errorf("%d calls: got %d appends and %d saves, want an append for each call at least", n, store.appends, store.saves)
		}
		bytes[i] = store.bytes
	}
	if got := float64(bytes[1]) / float64(bytes[0]); got > 4.5 {
		t.Errorf("4× the calls: got %.1f× the bytes saved (%d, %d), want at most 4.5×", got, bytes[0], bytes[1])
	}
}

// TestATurnOfCallsAppendsNotTheHistory: after a 256 KB first message,
// the appends of a turn of 40 calls carry the calls, not the history:
// a snapshot's history is a copy of the runner's, and a history told
// apart by its slice was appended whole with every call (80 times 256
// KB).
func TestATurnOfCallsAppendsNotTheHistory(t *testing.T) {
	for _, key := range [][]byte{nil, []byte("a key of the test's own, 32 bytes")} {
		store := &countingStore{Store: &filestore.Store{Dir: t.TempDir()}}
		turnOfCallsAfter(t, 40, store, key, strings.Repeat("a", 256<<10))
		if store.appends < 40 || store.appended > 128<<10 {
			t.Errorf("signed %v: %d appends of %d bytes in all, want 40 or more of less than 128 KiB in all", key != nil, store.appends, store.appended)
		}
	}
}

// TestAppendedStateLoadsAsTheRunHeldIt: a run saved by appends loads from
// its filestore.Store as the runner holds it, and resumes from there to its end
// with each call run once.
func TestAppendedStateLoadsAsTheRunHeldIt(t *testing.T) {
	fs := &filestore.Store{Dir: t.TempDir()}
	store := &countingStore{Store: fs}
	r, s, tools := turnOfCalls(t, 10, store, nil)
	if store.appends == 0 {
		t.Fatalf("got no appends, want the calls' saves appended")
	}
	loaded, err := fs.Load(t.Context(), "many")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(r.State())
	got, _ := json.Marshal(loaded)
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("the loaded state differs from the runner's (-runner +loaded):\n%s", diff)
	}

	r2, err := toolrun.Open(t.Context(), client(s), userParams("go"), tools, &toolrun.Options{Logger: discard(), Store: fs, RunID: "many"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Decide("c9", toolrun.Decision{Kind: toolrun.Allow}); err != nil {
		t.Fatal(err)
	}
	res, err := r2.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("resumed Run = %q, %v; want end_turn", res.StopReason, err)
	}
	if res.ToolCalls != 10 {
		t.Errorf("got %d calls answered, want 10", res.ToolCalls)
	}
	// Every call's result reached the model once.
	last := s.Requests()[len(s.Requests())-1]
	ids := map[string]int{}
	for _, b := range toolResults(last) {
		ids[b.ToolUseID]++
	}
	for i := range 10 {
		if id := fmt.Sprintf("c%d", i); ids[id] != 1 {
			t.Errorf("the last request has %d results for %s, want 1", ids[id], id)
		}
	}
}

// TestSignedTurnSavesWhatItAdds: a signed run (Options.StateKey) is saved
// by appends too, each carrying the signature of the whole state, and
// computing it costs what the step changed: over a turn of 40 calls after
// a 256 KB first message, the runner canonicalizes for its signatures
// about the state once, not the whole state at each of the turn's 80
// saves (which signing the whole state made 80 times). The run loads
// from the store with its signature checked, resumes and ends; a change
// written over in the store is refused with ErrStateSignature.
func TestSignedTurnSavesWhatItAdds(t *testing.T) {
	key := []byte("a key of the test's own, 32 bytes")
	fs := &filestore.Store{Dir: t.TempDir()}
	store := &countingStore{Store: fs}
	first := strings.Repeat("a", 256<<10)
	before := toolrun.CanonicalBytes()
	r, s, tools := turnOfCallsAfter(t, 40, store, key, first)
	canonical := toolrun.CanonicalBytes() - before
	if store.appends < 40 {
		t.Errorf("got %d appends and %d saves, want an append for each call at least", store.appends, store.saves)
	}
	if limit := int64(4 * len(first)); canonical > limit {
		t.Errorf("signing the turn's %d saves canonicalized %d bytes, want at most %d (the 256 KB message about once, not at every save)", store.appends+store.saves, canonical, limit)
	}
	if sig := r.State().Signature; sig == "" {
		t.Fatal("the runner's state is not signed")
	}

	r2, err := toolrun.Open(t.Context(), client(s), userParams(first), tools, &toolrun.Options{Logger: discard(), Store: fs, RunID: "many", StateKey: key})
	if err != nil {
		t.Fatalf("Open of the appended signed run: %v", err)
	}
	if err := r2.Decide("c39", toolrun.Decision{Kind: toolrun.Allow}); err != nil {
		t.Fatal(err)
	}
	if res, err := r2.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn || res.ToolCalls != 40 {
		t.Fatalf("resumed Run = %q, %d calls, %v; want end_turn after 40", res.StopReason, res.ToolCalls, err)
	}

	// A store whose last change was written over: the same change with
	// another call's result.
	fs2 := &filestore.Store{Dir: t.TempDir()}
	turnOfCalls(t, 5, fs2, key)
	changes := filepath.Join(fs2.Dir, "many.changes.jsonl")
	b, err := os.ReadFile(changes)
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(b), "xxxx", "yyyy", 1)
	if forged == string(b) {
		t.Fatalf("no result to change in %s", changes)
	}
	if err := os.WriteFile(changes, []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = toolrun.Open(t.Context(), client(s), userParams("go"), tools, &toolrun.Options{Logger: discard(), Store: fs2, RunID: "many", StateKey: key})
	if !errors.Is(err, toolrun.ErrStateSignature) {
		t.Fatalf("Open of a changed change: %v, want ErrStateSignature", err)
	}
}
