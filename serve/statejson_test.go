package serve

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	_ "modernc.org/sqlite"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/toolruntest"
)

// savedStates is a Store that keeps every State saved, in order.
type savedStates struct {
	mu     sync.Mutex
	states []*toolrun.State
	last   map[string]*toolrun.State
}

func (s *savedStates) Save(_ context.Context, id string, st *toolrun.State, prev uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]*toolrun.State{}
	}
	s.states = append(s.states, st)
	s.last[id] = st
	return nil
}

func (s *savedStates) Load(_ context.Context, id string) (*toolrun.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.last[id]; ok {
		return st, nil
	}
	return nil, fmt.Errorf("run %q: %w", id, fs.ErrNotExist)
}

func (s *savedStates) Delete(context.Context, string) error { return nil }

// TestHistoryEncoderIsJSON: a run's States, encoded one after the other
// with their history's messages encoded once, are json.Marshal's bytes,
// through a conversation of text that JSON escapes, tool calls and
// results, and a history replaced (by SetMessages) with one of the same
// length whose first message differs.
func TestHistoryEncoderIsJSON(t *testing.T) {
	turn := 0
	model := toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		turn++
		if turn <= 3 {
			return toolruntest.Message(toolruntest.Text(fmt.Sprintf("<b>step %d</b> & \"quotes\" é 🙂", turn)), toolruntest.ToolUse(fmt.Sprintf("call_%d", turn), "echo", map[string]any{"s": "a<b>&c", "n": turn}))
		}
		return toolruntest.Message(toolruntest.Text("done </script>"))
	}})
	echo := toolrun.NewTool("echo", "Echoes s.", func(_ context.Context, in struct {
		S string `json:"s"`
		N int    `json:"n"`
	}) (string, error) {
		return "echo: " + in.S + " \u2028", nil
	})
	store := &savedStates{}
	params := anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024, Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go <now> & then"))}}
	r := toolrun.New(model.Client(), params, []toolrun.Tool{echo}, &toolrun.Options{Store: store, RunID: "t1"})
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	msgs := r.Messages()
	msgs[0] = anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("another first message"))
	r.SetMessages(msgs)
	r.AppendMessages(anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("and again")))
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	var enc historyEncoder
	for i, st := range store.states {
		got, err := enc.marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("state %d of %d (%d messages):\ngot  %s\nwant %s", i+1, len(store.states), len(st.Params.Messages), got, want)
		}
		sk := driver.Skeleton(st)
		got, err = marshalState(sk)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := json.Marshal(sk); !bytes.Equal(got, want) {
			t.Errorf("the skeleton of state %d of %d:\ngot  %s\nwant %s", i+1, len(store.states), got, want)
		}
	}
	if len(store.states) < 10 {
		t.Errorf("%d saves, want the saves of 5 turns", len(store.states))
	}
}

// loadingStore saves through a run's store and loads each State back at
// once, keeping what differs.
type loadingStore struct {
	*carriedStore
	t *testing.T

	skeletons int
}

func (s *loadingStore) Save(ctx context.Context, id string, st *toolrun.State, prev uint64) error {
	if err := s.carriedStore.Save(ctx, id, st, prev); err != nil {
		return err
	}
	var n int
	if err := s.carriedStore.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM serve_state_skeletons WHERE id = ?`, id).Scan(&n); err != nil {
		return err
	}
	s.skeletons += n
	got, err := s.carriedStore.Load(ctx, id)
	if err != nil {
		return err
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(st)
	if !bytes.Equal(gb, wb) {
		s.t.Errorf("version %d loaded back:\ngot  %s\nwant %s", st.Version, gb, wb)
	}
	return nil
}

// TestStateSavedAsSkeletonLoadsWhole: the saves of a turn's calls store
// the State's skeleton beside the whole State saved before, and every
// State saved loads back as it was saved, byte for byte.
func TestStateSavedAsSkeletonLoadsWhole(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "serve.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	turn := 0
	model := toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		turn++
		if turn <= 3 {
			return toolruntest.Message(toolruntest.Text(fmt.Sprintf("step %d", turn)), toolruntest.ToolUse(fmt.Sprintf("a_%d", turn), "echo", map[string]any{"s": "a"}), toolruntest.ToolUse(fmt.Sprintf("b_%d", turn), "echo", map[string]any{"s": "b"}))
		}
		return toolruntest.Message(toolruntest.Text("done"))
	}})
	h, err := New(t.Context(), Config{Client: model.Client(), Params: anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024}, DB: db})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	echo := toolrun.NewTool("echo", "Echoes s.", func(_ context.Context, in struct {
		S string `json:"s"`
	}) (string, error) {
		return "echo: " + in.S, nil
	})
	store := &loadingStore{carriedStore: &carriedStore{sqlStore: h.store, thread: "t1"}, t: t}
	params := anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024, Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))}}
	r := toolrun.New(model.Client(), params, []toolrun.Tool{echo}, &toolrun.Options{Store: store, RunID: "t1"})
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Turns != 4 {
		t.Errorf("%d turns, want 4", res.Turns)
	}
	if store.skeletons == 0 {
		t.Error("no State was saved as a skeleton")
	}
}
