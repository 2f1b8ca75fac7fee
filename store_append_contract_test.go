package toolrun_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolrun/toolrun"
)

// badAppender is a badStore that appends, breaking the contract as its
// fields say: an Append that hangs ignoring its context, or one that says
// it saved and saved nothing (so the store holds an older version than the
// runner was told).
type badAppender struct {
	badStore
	hangAppend chan struct{} // if non-nil, Append waits for it to close, ignoring its context
	dropAppend bool          // Append returns nil and saves nothing
}

func (b *badAppender) Append(ctx context.Context, id string, c *toolrun.StateChange, prev uint64) error {
	if b.hangAppend != nil {
		<-b.hangAppend
	}
	if b.state == nil || b.state.Version != prev {
		return toolrun.ErrRunBusy
	}
	if b.dropAppend {
		return nil
	}
	s := *b.state
	if err := s.Apply(c); err != nil {
		return err
	}
	b.state = &s
	return nil
}

// callThenAnswer answers the first request with two calls of the tool
// "work", and every later one with a final answer.
func callThenAnswer() func(*http.Request) (*http.Response, error) {
	var n atomic.Int32
	return func(req *http.Request) (*http.Response, error) {
		body := `{"id":"msg_2","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":2}}`
		if n.Add(1) == 1 {
			body = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[` +
				`{"type":"tool_use","id":"w1","name":"work","input":{}},{"type":"tool_use","id":"w2","name":"work","input":{}}],` +
				`"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":2}}`
		}
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	}
}

// TestMisbehavingAppender runs a turn of calls, in fake time, over a
// StateAppender that breaks its contract: an Append that hangs and ignores
// its context ends the run with ErrStoreMisbehaved within its deadline and
// cancel grace; an Append that says it saved and did not (the store lies
// about its version) ends it at the next save with ErrRunBusy, having run
// no call past the one whose start it failed to journal.
func TestMisbehavingAppender(t *testing.T) {
	const deadline, grace = 2 * time.Second, time.Second
	tests := []struct {
		name     string
		store    func() *badAppender
		want     error
		maxCalls int32
	}{
		{"Append hangs", func() *badAppender { return &badAppender{hangAppend: make(chan struct{})} }, toolrun.ErrStoreMisbehaved, 0},
		{"Append saves nothing", func() *badAppender { return &badAppender{dropAppend: true} }, toolrun.ErrRunBusy, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := tt.store()
				var calls atomic.Int32
				work := toolrun.NewTool("work", "Work", func(ctx context.Context, in struct{}) (string, error) {
					calls.Add(1)
					return "worked", nil
				})
				api := &hangingAPI{answer: callThenAnswer()}
				runOverStore(t, api, store, []toolrun.Tool{work}, 1, deadline, grace, tt.want)
				if n := calls.Load(); n > tt.maxCalls {
					t.Errorf("%d calls ran, want at most %d: a call ran whose start the store did not journal", n, tt.maxCalls)
				}
				if store.hangAppend != nil {
					close(store.hangAppend)
				}
			})
		})
	}
}
