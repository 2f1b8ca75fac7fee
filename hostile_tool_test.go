package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/toolruntest"
)

// panickyStore is a filestore.Store whose Save panics once a call has started:
// the save that journals a call is made on the goroutine that runs it.
type panickyStore struct{ filestore.Store }

func (s *panickyStore) Save(ctx context.Context, id string, st *toolrun.State, prev uint64) error {
	if b, _ := json.Marshal(st); strings.Contains(string(b), `"phase":"started"`) {
		panic("store bug")
	}
	return s.Store.Save(ctx, id, st, prev)
}

// Append panics as Save does: the filestore.Store's own would journal the call
// past the Save that panics.
func (s *panickyStore) Append(ctx context.Context, id string, c *toolrun.StateChange, prev uint64) error {
	if b, _ := json.Marshal(c); strings.Contains(string(b), `"phase":"started"`) {
		panic("store bug")
	}
	return s.Store.Append(ctx, id, c, prev)
}

// TestHostileCodeChild is the child process of TestHostileCodeNeverCrashes;
// it does nothing in a normal run.
func TestHostileCodeChild(t *testing.T) {
	if os.Getenv("TOOLRUN_HOSTILE_CODE_CHILD") == "" {
		t.Skip("helper process for TestHostileCodeNeverCrashes")
	}
	t.Run("store panics journaling a call", func(t *testing.T) {
		s := toolruntest.New(t, toolruntest.Script(
			toolruntest.Message(toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/one", Text: "1"}),
				toolruntest.ToolUse("w2", "write_file", writeIn{Path: "/tmp/two", Text: "2"})),
			toolruntest.Message(toolruntest.Text("done")),
		))
		var writes counter
		store := &panickyStore{filestore.Store{Dir: t.TempDir()}}
		r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{writeTool(&writes)}, &toolrun.Options{Logger: discard(), Store: store, RunID: "r"})
		res, err := r.Run(t.Context())
		var pe *toolrun.PanicError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "store bug") {
			t.Errorf("Run = %v, want an error wrapping the store's *PanicError", err)
		}
		if res.StopReason != toolrun.StopError {
			t.Errorf("StopReason = %q, want error", res.StopReason)
		}
		if len(writes.n) != 0 {
			t.Errorf("writes = %v, want none: no call runs unjournaled", writes.n)
		}
	})
	t.Run("tool calls runtime.Goexit", func(t *testing.T) {
		s := toolruntest.New(t, toolruntest.Script(
			toolruntest.Message(toolruntest.ToolUse("g1", "quit", map[string]any{})),
			toolruntest.Message(toolruntest.Text("done")),
		))
		quit := toolrun.NewTool("quit", "", func(context.Context, struct{}) (string, error) {
			runtime.Goexit()
			return "", nil
		})
		r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{quit}, &toolrun.Options{Logger: discard()})
		res, err := r.Run(t.Context()) // with no tool timeout: it must not wait for ever
		if err != nil || res.StopReason != toolrun.StopEndTurn {
			t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
		}
		results := toolResults(s.Requests()[1])
		if len(results) != 1 || !results[0].IsError || !strings.Contains(results[0].ResultText(), "runtime.Goexit") {
			t.Errorf("results = %+v, want one is_error result naming runtime.Goexit", results)
		}
	})
}

// TestHostileCodeNeverCrashes: code of the caller's that misbehaves on the
// goroutines the runner starts — a Store whose Save panics while a call is
// journaled, a tool that ends its goroutine with runtime.Goexit — stops
// the run with an error or fails the call, and neither crashes the process
// nor hangs the run. It runs in a child process, since a panic on those
// goroutines ends the process.
func TestHostileCodeNeverCrashes(t *testing.T) {
	if os.Getenv("TOOLRUN_HOSTILE_CODE_CHILD") != "" {
		t.Skip("in the child")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run", "^TestHostileCodeChild$", "-test.v", "-test.count=1", "-test.timeout=120s")
	cmd.Env = append(os.Environ(), "TOOLRUN_HOSTILE_CODE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process failed: %v\n%s", err, out)
	}
	if got := strings.Count(string(out), "--- PASS: TestHostileCodeChild/"); got != 2 {
		t.Fatalf("child passed %d cases, want 2:\n%s", got, out)
	}
}
