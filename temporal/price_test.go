package temporal_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
)

// syncBuffer is a bytes.Buffer safe for the activities' goroutines.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestOnePriceWarnPerRun: a run of four turns on a model with no price
// logs "no price for the model" once, though each step resumes a runner
// of its own.
func TestOnePriceWarnPerRun(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Options{Func: bigRun(3)})
	var buf syncBuffer
	env := newEnv(t, s, []toolrun.Tool{fetchTool()}, &toolrun.Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("read"), &fastRetries))
	out := outcome(t, env)
	if out.StopReason != toolrun.StopEndTurn || out.State.Turns != 4 {
		t.Fatalf("got %q after %d turns, want end_turn after 4", out.StopReason, out.State.Turns)
	}
	if n := strings.Count(buf.String(), "no price for the model"); n != 1 {
		t.Errorf("got %d price warnings, want 1:\n%s", n, buf.String())
	}
}
