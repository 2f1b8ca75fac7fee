package toolrun_test

import (
	"context"
	"encoding/json"
	"fmt"
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
}

func (s *countingStore) count(v any, append bool) {
	b, _ := json.Marshal(v)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bytes += len(b)
	if append {
		s.appends++
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
// bytes, the last call deferred to a person, and returns the runner,
// stopped awaiting approval, and its fake server.
func turnOfCalls(t *testing.T, n int, store toolrun.Store) (*toolrun.Runner, *toolruntest.Server, []toolrun.Tool) {
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
	r, err := toolrun.Open(t.Context(), client(s), userParams("go"), tools, &toolrun.Options{Logger: discard(), Store: store, RunID: "many"})
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
		turnOfCalls(t, n, store)
		if store.appends < n {
			t.Errorf("%d calls: got %d appends and %d saves, want an append for each call at least", n, store.appends, store.saves)
		}
		bytes[i] = store.bytes
	}
	if got := float64(bytes[1]) / float64(bytes[0]); got > 4.5 {
		t.Errorf("4× the calls: got %.1f× the bytes saved (%d, %d), want at most 4.5×", got, bytes[0], bytes[1])
	}
}

// TestAppendedStateLoadsAsTheRunHeldIt: a run saved by appends loads from
// its filestore.Store as the runner holds it, and resumes from there to its end
// with each call run once.
func TestAppendedStateLoadsAsTheRunHeldIt(t *testing.T) {
	fs := &filestore.Store{Dir: t.TempDir()}
	store := &countingStore{Store: fs}
	r, s, tools := turnOfCalls(t, 10, store)
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
