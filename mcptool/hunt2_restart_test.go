//go:build hunt2

package mcptool_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolrun/toolrun/mcptool"
)

// TestHunt2RestartHangsPastCallTimeout: a server restarted for a call that
// hangs on initialize is not bounded by Options.CallTimeout. The first
// connection crashes mid-call; the restart's server reads the initialize
// request and never answers. With CallTimeout 1s, the next call should fail
// with a ServerError (the server did not answer) well inside its 5s ctx;
// instead it waits for the restart until its ctx is done, holding the
// restart token so that every other call of the server waits as well. A
// runner without a per-tool timeout (the default) would hang for good.
func TestHunt2RestartHangsPastCallTimeout(t *testing.T) {
	f := newFaulty()
	var (
		mu    sync.Mutex
		dials int
	)
	dial := func(ctx context.Context) (mcp.Transport, error) {
		tr, err := f.dial(ctx)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		dials++
		n := dials
		mu.Unlock()
		if n > 1 {
			f.conn().freeze() // the restarted server never answers initialize
		}
		return tr, nil
	}
	s := connect(t, "s", dial, &mcptool.Options{CallTimeout: time.Second, Restart: mcptool.RestartPolicy{MaxRestarts: 1}})
	ts := tools(t, s)
	runSteps(t, ts, "s", []step{{tool: "die",
		want:    `MCP server "s" closed the connection while handling "die"; it will be restarted for the next call (restart 1 of 1)`,
		wantErr: mcptool.ErrServerExited}})

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := find(t, ts, "s__ping").Run(ctx, nil)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call whose restart hung: error = %v; want a *mcptool.ServerError within CallTimeout (1s), not a wait until the caller's 5s deadline", err)
	}
	var se *mcptool.ServerError
	if !errors.As(err, &se) {
		t.Errorf("call whose restart hung: error = %v, want a *mcptool.ServerError", err)
	}
}
