package mcptool_test

import (
	"context"
	"errors"
	"os/exec"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolrun/toolrun/mcptool"
)

// hangOnRestart returns a Dial of f whose connections after the first
// never answer anything, initialize included: a server that hangs when
// restarted.
func hangOnRestart(f *faulty) mcptool.Dial {
	var (
		mu    sync.Mutex
		dials int
	)
	return func(ctx context.Context) (mcp.Transport, error) {
		tr, err := f.dial(ctx)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		dials++
		n := dials
		mu.Unlock()
		if n > 1 {
			f.conn().freeze()
		}
		return tr, nil
	}
}

const died = `MCP server "s" closed the connection while handling "die"; `

// TestRestartHangs: a restarted server that never answers its initialize
// request fails the call that restarted it within Options.CallTimeout, with
// a ServerError, not the caller's context error: neither that call nor the
// ones behind it wait for their contexts to end. The caller's deadline here
// is 10s, the timeout 1s (not less: see TestCallTimeout).
func TestRestartHangs(t *testing.T) {
	f := newFaulty()
	s := connect(t, "s", hangOnRestart(f), &mcptool.Options{CallTimeout: time.Second, Restart: mcptool.RestartPolicy{MaxRestarts: 1}})
	ts := tools(t, s)
	runSteps(t, ts, "s", []step{{tool: "die", want: died + `it will be restarted for the next call (restart 1 of 1)`, wantErr: mcptool.ErrServerExited}})

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := find(t, ts, "s__ping").Run(ctx, nil)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call whose restart hung: error = %v; want a *mcptool.ServerError after CallTimeout (1s), not the wait for the caller's deadline (10s)", err)
	}
	const want = `MCP server "s" could not be restarted: it did not connect and initialize within 1s, and was stopped; ` +
		`it is not restarted: it failed 2 times in a row, and its restart policy allows 1 restarts`
	var se *mcptool.ServerError
	if !errors.As(err, &se) || !errors.Is(err, mcptool.ErrServerDown) || err.Error() != want {
		t.Fatalf("call whose restart hung: error = %v, want a *mcptool.ServerError of kind ErrServerDown: %s", err, want)
	}
	if got := f.dialCount(); got != 2 {
		t.Errorf("dialled %d times, want 2", got)
	}
}

// TestRestartHangsDefaultBound: with no CallTimeout, a restart that hangs
// is bounded all the same, by a minute, and the call that waited behind it
// fails with its failure as soon as it fails, without a restart of its own
// although the policy would allow one. Time is synctest's.
func TestRestartHangsDefaultBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFaulty()
		s := connect(t, "s", hangOnRestart(f), &mcptool.Options{Restart: mcptool.RestartPolicy{MaxRestarts: 3}})
		ts := tools(t, s)
		runSteps(t, ts, "s", []step{{tool: "die", want: died + `it will be restarted for the next call (restart 1 of 3)`, wantErr: mcptool.ErrServerExited}})

		start := time.Now()
		type outcome struct {
			err   error
			after time.Duration
		}
		first, second := make(chan outcome, 1), make(chan outcome, 1)
		call := func(out chan<- outcome) {
			_, err := find(t, ts, "s__ping").Run(t.Context(), nil)
			out <- outcome{err, time.Since(start)}
		}
		go call(first)
		synctest.Wait() // the first call is restarting the server, which hangs
		go call(second)
		synctest.Wait() // the second waits behind it

		const want = `MCP server "s" could not be restarted: it did not connect and initialize within 1m0s, and was stopped; ` +
			`it will be restarted for the next call (restart 2 of 3)`
		for i, ch := range []chan outcome{first, second} {
			o := <-ch
			if !errors.Is(o.err, mcptool.ErrServerDown) || o.err.Error() != want {
				t.Errorf("call %d: error = %v, want ErrServerDown: %s", i+1, o.err, want)
			}
			if o.after != time.Minute {
				t.Errorf("call %d failed after %s, want 1m0s", i+1, o.after)
			}
		}
		if got := f.dialCount(); got != 2 {
			t.Errorf("dialled %d times, want 2: the waiting call restarted the server again", got)
		}
	})
}

// TestRestartHangsProcess: a command restarted for a call that never
// answers its initialize request is stopped when the restart times out,
// not left running.
func TestRestartHangsProcess(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command:", err)
	}
	f := newFaulty()
	var (
		mu      sync.Mutex
		dials   int
		hanging *exec.Cmd
	)
	dial := func(ctx context.Context) (mcp.Transport, error) {
		mu.Lock()
		defer mu.Unlock()
		dials++
		if dials == 1 {
			return f.dial(ctx)
		}
		// A process that reads nothing and answers nothing.
		hanging = exec.Command(sleep, "60")
		return &mcp.CommandTransport{Command: hanging}, nil
	}
	s := connect(t, "s", dial, &mcptool.Options{CallTimeout: time.Second, Restart: mcptool.RestartPolicy{MaxRestarts: 1}})
	ts := tools(t, s)
	runSteps(t, ts, "s", []step{{tool: "die", want: died + `it will be restarted for the next call (restart 1 of 1)`, wantErr: mcptool.ErrServerExited}})

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := find(t, ts, "s__ping").Run(ctx, nil); !errors.Is(err, mcptool.ErrServerDown) {
		t.Fatalf("call whose restart hung: error = %v, want ErrServerDown", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if hanging == nil || hanging.Process == nil {
		t.Fatal("the restart did not start the command")
	}
	if hanging.ProcessState == nil {
		hanging.Process.Kill()
		t.Fatalf("the command of the restart that hung (pid %d) was left running", hanging.Process.Pid)
	}
}
