package toolrun_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolrun/toolrun"
)

// badStore breaks the Store contract as its fields say; the rest of it
// keeps one run's state in memory.
type badStore struct {
	hangSave, hangLoad chan struct{} // if non-nil, Save or Load waits for it to close, ignoring its context
	loadNothing        bool          // Load returns nil, nil
	loadVersion        uint64        // if non-zero, Load says the state is at this version
	state              *toolrun.State
}

func (b *badStore) Save(ctx context.Context, id string, s *toolrun.State, prev uint64) error {
	if b.hangSave != nil {
		<-b.hangSave
	}
	cur := uint64(0)
	if b.state != nil {
		cur = b.state.Version
	}
	if cur != prev {
		return toolrun.ErrRunBusy
	}
	b.state = s
	return nil
}

func (b *badStore) Load(ctx context.Context, id string) (*toolrun.State, error) {
	if b.hangLoad != nil {
		<-b.hangLoad
	}
	switch {
	case b.loadNothing:
		return nil, nil
	case b.state == nil:
		return nil, fs.ErrNotExist
	}
	s := *b.state
	if b.loadVersion != 0 {
		s.Version = b.loadVersion
	}
	return &s, nil
}

func (b *badStore) Delete(ctx context.Context, id string) error { b.state = nil; return nil }

// finalAnswer answers every request with a final text answer.
func finalAnswer(req *http.Request) (*http.Response, error) {
	const ok = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":2}}`
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(ok)), Request: req}, nil
}

// TestMisbehavingStore runs a turn, in fake time, over a Store that breaks
// its contract: a Save or a Load that hangs and ignores its context, a
// Load that returns neither a state nor an error, a Load that says the
// run is at another version than it is. Each ends the run (or Open) with a
// typed error within the run's deadline and its cancel grace, and nothing
// panics.
func TestMisbehavingStore(t *testing.T) {
	const deadline, grace = 2 * time.Second, time.Second
	saved := func(b *badStore) {
		b.state = &toolrun.State{Format: 2, Version: 5, Params: userParams("Hello?"), MaxTurns: 3}
	}
	tests := []struct {
		name  string
		store func() *badStore
		want  error
	}{
		{"Save hangs", func() *badStore { return &badStore{hangSave: make(chan struct{})} }, toolrun.ErrStoreMisbehaved},
		{"Load hangs", func() *badStore { return &badStore{hangLoad: make(chan struct{})} }, toolrun.ErrStoreMisbehaved},
		{"Load returns nothing", func() *badStore { return &badStore{loadNothing: true} }, toolrun.ErrStoreMisbehaved},
		{"Load says an older version", func() *badStore { b := &badStore{loadVersion: 3}; saved(b); return b }, toolrun.ErrRunBusy},
		{"Load says a newer version", func() *badStore { b := &badStore{loadVersion: 9}; saved(b); return b }, toolrun.ErrRunBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := tt.store()
				api := &hangingAPI{answer: finalAnswer}
				runOverStore(t, api, store, nil, 0, deadline, grace, tt.want)
				if n := api.attempts.Load(); n != 0 {
					t.Errorf("%d requests were sent over a store that misbehaved, want 0", n)
				}
				for _, ch := range []chan struct{}{store.hangSave, store.hangLoad} {
					if ch != nil {
						close(ch)
					}
				}
			})
		})
	}
}

// runOverStore opens and runs run-1 over store, with api as the Messages
// API and tools at most parallel at once (0: the default), and checks that
// the run ends with an error wrapping want within its deadline and cancel
// grace, on the clock of the synctest bubble it runs in.
func runOverStore(t *testing.T, api *hangingAPI, store toolrun.Store, tools []toolrun.Tool, parallel int, deadline, grace time.Duration, want error) {
	t.Helper()
	c := anthropic.NewClient(option.WithAPIKey("test"), option.WithBaseURL("http://api.invalid"),
		option.WithHTTPClient(&http.Client{Transport: api}))
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	start := time.Now()
	opts := &toolrun.Options{Logger: discard(), NoThread: true, Store: store, RunID: "run-1", MaxParallelTools: parallel,
		Timeouts: toolrun.Timeouts{CancelGrace: grace}}
	r, err := toolrun.Open(ctx, c, userParams("Hello?"), tools, opts)
	if err == nil {
		_, err = r.Run(ctx)
	}
	took := time.Since(start)
	if !errors.Is(err, want) {
		t.Errorf("err = %v, want it to wrap %v", err, want)
	}
	if took > deadline+grace {
		t.Errorf("the run ended after %v, want within %v (its deadline and cancel grace)", took, deadline+grace)
	}
}
