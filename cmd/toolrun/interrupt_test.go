package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// lockedBuffer is a buffer written by one goroutine and read by another.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ctrlCAtPrompt runs toolrun with args in dir under a pseudo-terminal and
// types Ctrl-C at the first approval prompt, as a person does: the
// terminal sends SIGINT. It returns the exit status and the output, its
// escape sequences removed.
func ctrlCAtPrompt(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	toolrunBin, _ := binaries(t)
	cmd := exec.CommandContext(t.Context(), toolrunBin, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANTHROPIC_") && !strings.HasPrefix(kv, "TMPDIR=") && !strings.HasPrefix(kv, "TERM=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "TERM=xterm", "TMPDIR="+dir)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 120, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var out lockedBuffer
	done := make(chan struct{})
	go func() {
		io.Copy(&out, tty) // ends with an error when the process is gone
		close(done)
	}()
	for deadline := time.Now().Add(5 * time.Minute); !strings.Contains(out.String(), "approve [y]es / [n]o / [a]lways? "); {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no approval prompt within 5 minutes: the run hangs before it; output:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := tty.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	code := 0
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatal(err)
		}
		code = exit.ExitCode()
	}
	tty.Close()
	<-done
	return code, strings.ReplaceAll(stripANSI(out.String()), "\r\n", "\n")
}

// TestCtrlCAtPrompt types Ctrl-C at the approval prompt of "toolrun run
// --state FILE" and of "toolrun resume FILE": the run is saved in the
// file, the command says how to continue it and exits with status 130, and
// the resume it names runs the call, once.
func TestCtrlCAtPrompt(t *testing.T) {
	_, crash := binaries(t)
	tests := []struct {
		name    string
		args    func(t *testing.T, dir, state string) []string
		command string
	}{
		{"run", func(t *testing.T, dir, state string) []string {
			script := writeScript(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
			return []string{"run", "--script", script, "--mcp", "tracker=" + crash, "--record", filepath.Join(dir, "run.jsonl"), "--state", state, "file it"}
		}, "run"},
		{"resume", func(t *testing.T, dir, state string) []string {
			suspended(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
			return []string{"resume", "--tools-from-state", "--approve", "ask", state}
		}, "resume"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "saved.json")
			code, got := ctrlCAtPrompt(t, dir, tt.args(t, dir, state)...)
			if code != exitInterrupted {
				t.Errorf("exit status %d, want %d; output:\n%s", code, exitInterrupted, got)
			}
			for _, want := range []string{
				"toolrun " + tt.command + ": interrupted; the run is saved in " + state + "\n",
				"continue it with: toolrun resume --tools-from-state " + state + " ",
			} {
				if !strings.Contains(got, want) {
					t.Errorf("output does not contain %q; got:\n%s", want, got)
				}
			}
			res, _ := bin{dir: dir, args: []string{"resume", "--tools-from-state", "--allow", "toolu_01", state}}.run(t)
			if res.code != 0 || !strings.Contains(res.stdout, "  ← tracker__echo (") {
				t.Errorf("resume of the saved run: exit status %d, want 0 and the call run; stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
			}
			if n := countStarted(mustRead(t, filepath.Join(dir, "run.jsonl")), "toolu_01"); n != 1 {
				t.Errorf("the transcript shows the call started %d times, want 1", n)
			}
		})
	}
}
