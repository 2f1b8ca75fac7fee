package mcptool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/mcptool"
)

// newFaulty returns an in-memory MCP server with the tools ping (answers
// pong), die (the server's connection drops mid-call, as when a process
// crashes), slow (never answers, but the server still answers pings) and
// freeze (the server stops answering anything).
func newFaulty() *faulty {
	f := &faulty{server: newMCPServer("faulty", nil)}
	addTool(f.server, "ping", returns(text("pong")))
	addTool(f.server, "die", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		f.conn().Close()
		<-ctx.Done()
		return nil, ctx.Err()
	})
	addTool(f.server, "slow", blocks)
	addTool(f.server, "freeze", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		f.conn().freeze()
		<-ctx.Done()
		return nil, ctx.Err()
	})
	return f
}

// step is one call of a tool and what it should return.
type step struct {
	tool    string
	want    string // the text of the result, or the error's message
	wantErr error  // the error's kind, or nil
}

// runSteps calls the tools of steps, of the named server, in turn.
func runSteps(t *testing.T, ts []toolrun.Tool, server string, steps []step) {
	t.Helper()
	for i, st := range steps {
		content, err := find(t, ts, mcptool.ToolName(server, st.tool)).Run(t.Context(), nil)
		if st.wantErr != nil {
			if !errors.Is(err, st.wantErr) || err.Error() != st.want {
				t.Errorf("step %d, %s: error = %v, want %v: %s", i, st.tool, err, st.wantErr, st.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("step %d, %s: %v", i, st.tool, err)
			continue
		}
		if len(content) != 1 || content[0].OfText == nil || content[0].OfText.Text != st.want {
			t.Errorf("step %d, %s: content = %+v, want %q", i, st.tool, content, st.want)
		}
	}
}

func TestCrash(t *testing.T) {
	const (
		died      = `MCP server "s" closed the connection while handling "die"; `
		never     = `it is not restarted, as its restart policy allows no restarts`
		twice     = `it is not restarted: it failed 2 times in a row, and its restart policy allows 1 restarts`
		restart1  = `it will be restarted for the next call (restart 1 of 1)`
		downNever = `MCP server "s" is down: it closed the connection, and ` + never
		downTwice = `MCP server "s" is down: it closed the connection, and ` + twice
	)
	tests := []struct {
		name      string
		restart   mcptool.RestartPolicy
		steps     []step
		wantDials int
	}{
		{
			name:    "never restarted",
			restart: mcptool.RestartPolicy{},
			steps: []step{
				{tool: "ping", want: "pong"},
				{tool: "die", want: died + never, wantErr: mcptool.ErrServerExited},
				{tool: "ping", want: downNever, wantErr: mcptool.ErrServerDown},
				{tool: "ping", want: downNever, wantErr: mcptool.ErrServerDown},
			},
			wantDials: 1,
		},
		{
			name:    "restarted by the next call",
			restart: mcptool.RestartPolicy{MaxRestarts: 1},
			steps: []step{
				{tool: "die", want: died + restart1, wantErr: mcptool.ErrServerExited},
				{tool: "ping", want: "pong"},
			},
			wantDials: 2,
		},
		{
			name:    "restarts in a row bounded",
			restart: mcptool.RestartPolicy{MaxRestarts: 1},
			steps: []step{
				{tool: "die", want: died + restart1, wantErr: mcptool.ErrServerExited},
				{tool: "die", want: died + twice, wantErr: mcptool.ErrServerExited},
				{tool: "ping", want: downTwice, wantErr: mcptool.ErrServerDown},
			},
			wantDials: 2,
		},
		{
			name:    "a call that succeeds starts the count again",
			restart: mcptool.RestartPolicy{MaxRestarts: 1},
			steps: []step{
				{tool: "die", want: died + restart1, wantErr: mcptool.ErrServerExited},
				{tool: "ping", want: "pong"},
				{tool: "die", want: died + restart1, wantErr: mcptool.ErrServerExited},
				{tool: "ping", want: "pong"},
			},
			wantDials: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFaulty()
			log, logs := newLogger()
			s := connect(t, "s", f.dial, &mcptool.Options{Logger: log, Restart: tt.restart})
			runSteps(t, tools(t, s), "s", tt.steps)
			if got := f.dialCount(); got != tt.wantDials {
				t.Errorf("dialled %d times, want %d", got, tt.wantDials)
			}
			recs := logs.records(t, "mcptool: MCP server connection lost")
			if len(recs) == 0 || recs[0]["level"] != "ERROR" || recs[0]["server"] != "s" {
				t.Fatalf("log records = %v, want an error record for server s", recs)
			}
			check(t, "in_flight", recs[0]["in_flight"], any([]any{"die"}))
		})
	}
}

// TestRestartFails makes the restarts fail: each counts as a failure in a
// row.
func TestRestartFails(t *testing.T) {
	f := newFaulty()
	log, logs := newLogger()
	s := connect(t, "s", f.dial, &mcptool.Options{Logger: log, Restart: mcptool.RestartPolicy{MaxRestarts: 2}})
	ts := tools(t, s)
	f.failDials(errors.New("no route to server"))
	const cannot = `MCP server "s" could not be restarted (no route to server); `
	runSteps(t, ts, "s", []step{
		{tool: "die", want: `MCP server "s" closed the connection while handling "die"; it will be restarted for the next call (restart 1 of 2)`, wantErr: mcptool.ErrServerExited},
		{tool: "ping", want: cannot + `it will be restarted for the next call (restart 2 of 2)`, wantErr: mcptool.ErrServerDown},
		{tool: "ping", want: cannot + `it is not restarted: it failed 3 times in a row, and its restart policy allows 2 restarts`, wantErr: mcptool.ErrServerDown},
		{tool: "ping", want: `MCP server "s" is down: it could not be restarted (no route to server), and it is not restarted: it failed 3 times in a row, and its restart policy allows 2 restarts`, wantErr: mcptool.ErrServerDown},
	})
	if got := f.dialCount(); got != 3 {
		t.Errorf("dialled %d times, want 3", got)
	}
	if got := len(logs.records(t, "mcptool: MCP server could not be restarted")); got != 2 {
		t.Errorf("got %d records of failed restarts, want 2", got)
	}
}

// TestCrashWhileIdle drops the connection between calls: the next call
// restarts the server.
func TestCrashWhileIdle(t *testing.T) {
	f := newFaulty()
	log, logs := newLogger()
	s := connect(t, "s", f.dial, &mcptool.Options{Logger: log, Restart: mcptool.RestartPolicy{MaxRestarts: 1}})
	ts := tools(t, s)
	lost := logs.await("mcptool: MCP server connection lost")
	f.conn().Close()
	<-lost
	runSteps(t, ts, "s", []step{{tool: "ping", want: "pong"}})
	if got := f.dialCount(); got != 2 {
		t.Errorf("dialled %d times, want 2", got)
	}
	check(t, "in_flight", logs.records(t, "mcptool: MCP server connection lost")[0]["in_flight"], any(nil))
}

// TestCallTimeout: a call the server does not answer in time fails, and a
// server that does not answer the ping after it either is restarted. The
// timeout is 1 s, not less: under -race on a loaded machine a freshly
// restarted server took over 200 ms to answer its first ping.
func TestCallTimeout(t *testing.T) {
	tests := []struct {
		name      string
		steps     []step
		wantDials int
		wantLog   bool
	}{
		{
			name: "slow call, server alive",
			steps: []step{
				{tool: "slow", want: `MCP server "s" did not answer the call of "slow" within 1s; the call was cancelled`, wantErr: mcptool.ErrNoAnswer},
				{tool: "ping", want: "pong"},
			},
			wantDials: 1,
		},
		{
			name: "server hung",
			steps: []step{
				{tool: "freeze", want: `MCP server "s" did not answer the call of "freeze" within 1s, nor a ping after it, and was stopped; it will be restarted for the next call (restart 1 of 1)`, wantErr: mcptool.ErrNoAnswer},
				{tool: "ping", want: "pong"},
			},
			wantDials: 2,
			wantLog:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFaulty()
			log, logs := newLogger()
			s := connect(t, "s", f.dial, &mcptool.Options{Logger: log, CallTimeout: time.Second, Restart: mcptool.RestartPolicy{MaxRestarts: 1}})
			runSteps(t, tools(t, s), "s", tt.steps)
			if got := f.dialCount(); got != tt.wantDials {
				t.Errorf("dialled %d times, want %d", got, tt.wantDials)
			}
			if got := len(logs.records(t, "mcptool: MCP server hung and was stopped")); got != 0 != tt.wantLog {
				t.Errorf("got %d records of a hung server, want them: %t", got, tt.wantLog)
			}
		})
	}
}

// TestBackoff shows that a restart waits for its backoff, as long as the
// call's ctx allows.
func TestBackoff(t *testing.T) {
	f := newFaulty()
	s := connect(t, "s", f.dial, &mcptool.Options{Restart: mcptool.RestartPolicy{MaxRestarts: 1, Backoff: time.Hour}})
	ts := tools(t, s)
	runSteps(t, ts, "s", []step{{tool: "die", want: `MCP server "s" closed the connection while handling "die"; it will be restarted for the next call (restart 1 of 1)`, wantErr: mcptool.ErrServerExited}})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := find(t, ts, "s__ping").Run(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call during the backoff: error = %v, want %v", err, context.DeadlineExceeded)
	}
	if got := f.dialCount(); got != 1 {
		t.Errorf("dialled %d times during the backoff, want 1", got)
	}
}

func TestClose(t *testing.T) {
	f := newFaulty()
	s := connect(t, "s", f.dial, nil)
	ts := tools(t, s)
	slow := make(chan error, 1)
	started := make(chan struct{})
	f.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				close(started)
			}
			return next(ctx, method, req)
		}
	})
	go func() {
		_, err := find(t, ts, "s__slow").Run(context.Background(), nil)
		slow <- err
	}()
	<-started
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	const closed = `MCP server "s" is closed`
	if err := <-slow; !errors.Is(err, mcptool.ErrClosed) || err.Error() != closed {
		t.Errorf("call in flight: error = %v, want %s", err, closed)
	}
	if _, err := find(t, ts, "s__ping").Run(t.Context(), nil); !errors.Is(err, mcptool.ErrClosed) {
		t.Errorf("call after Close: error = %v, want %v", err, mcptool.ErrClosed)
	}
	if _, err := s.Tools(t.Context()); !errors.Is(err, mcptool.ErrClosed) {
		t.Errorf("Tools after Close: error = %v, want %v", err, mcptool.ErrClosed)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
}

// TestRejectedCall calls a tool that the server removed after listing it:
// the server answers with an error, and stays up.
func TestRejectedCall(t *testing.T) {
	f := newFaulty()
	s := connect(t, "s", f.dial, nil)
	ts := tools(t, s)
	f.server.RemoveTools("slow")
	_, err := find(t, ts, "s__slow").Run(t.Context(), nil)
	const want = `MCP server "s" rejected the call of "slow": unknown tool "slow"`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
	runSteps(t, ts, "s", []step{{tool: "ping", want: "pong"}})
}
