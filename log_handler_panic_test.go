package toolrun_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// panickyHandler is a user's slog.Handler that panics on every record, as
// a handler with a bug does.
type panickyHandler struct{ handled *atomic.Int64 }

func (h panickyHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h panickyHandler) Handle(_ context.Context, r slog.Record) error {
	h.handled.Add(1)
	panic("handler bug: " + r.Message + " password=hunter2")
}
func (h panickyHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h panickyHandler) WithGroup(string) slog.Handler      { return h }

// TestLogHandlerPanicChild is the child process of
// TestLogHandlerPanicDoesNotCrash; it does nothing in a normal run. It
// drives a run through Events (so the run itself is on a goroutine toolrun
// started) with parallel calls that succeed, fail and panic (each logged
// from its own goroutine) to a logger whose handler panics on every
// record, and prints the run's end.
func TestLogHandlerPanicChild(t *testing.T) {
	if os.Getenv("TOOLRUN_LOGPANIC_CHILD") == "" {
		t.Skip("helper process for TestLogHandlerPanicDoesNotCrash")
	}
	handled := new(atomic.Int64)
	logger := slog.New(panickyHandler{handled})
	ok := toolrun.NewTool("ok", "", func(context.Context, struct{}) (string, error) { return "fine", nil })
	fails := toolrun.NewTool("fails", "", func(context.Context, struct{}) (string, error) { return "", errors.New("it failed") })
	panics := toolrun.NewTool("panics", "", func(context.Context, struct{}) (string, error) { panic("tool panic") })
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(
			toolruntest.ToolUse("c1", "ok", struct{}{}),
			toolruntest.ToolUse("c2", "fails", struct{}{}),
			toolruntest.ToolUse("c3", "panics", struct{}{}),
		),
		toolruntest.Message(toolruntest.Text("done")),
	))
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{ok, fails, panics}, &toolrun.Options{Logger: logger})
	events := 0
	for _, err := range r.Events(context.Background()) {
		if err != nil {
			fmt.Println("events:", err)
			os.Exit(1)
		}
		events++
	}
	res := r.Result()
	fmt.Printf("stop=%s events>0=%v handled>1=%v\n", res.StopReason, events > 0, handled.Load() > 1)
	os.Exit(0)
}

// TestLogHandlerPanicDoesNotCrash: a user's slog.Handler that panics must
// not end the process from the goroutines toolrun starts (the run under
// Events, each tool call), where the user cannot recover it. The run goes
// on to its end, the records are dropped, and the first panic is reported
// once on standard error, redacted.
func TestLogHandlerPanicDoesNotCrash(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestLogHandlerPanicChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), "TOOLRUN_LOGPANIC_CHILD=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if got, want := stdout.String(), "stop=end_turn events>0=true handled>1=true\n"; got != want {
		t.Errorf("child printed %q, want %q", got, want)
	}
	if got := strings.Count(stderr.String(), "the logger's handler panicked"); got != 1 {
		t.Errorf("standard error reports the panic %d times, want once:\n%s", got, stderr.String())
	}
	if !strings.Contains(stderr.String(), "handler bug") {
		t.Errorf("standard error does not show the panic's value:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "hunter2") {
		t.Errorf("standard error shows a secret:\n%s", stderr.String())
	}
}
