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

// TestCtrlCAtPrompt runs "toolrun run --state FILE" under a
// pseudo-terminal and types Ctrl-C at the approval prompt, as a person
// does: the terminal sends SIGINT, the run is saved in the file, the
// command says how to continue it and exits with status 130, and the
// resume it names runs the call.
func TestCtrlCAtPrompt(t *testing.T) {
	toolrunBin, crash := binaries(t)
	dir := t.TempDir()
	script := writeScript(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
	state := filepath.Join(dir, "saved.json")
	cmd := exec.CommandContext(t.Context(), toolrunBin, "run", "--script", script, "--mcp", "tracker="+crash, "--state", state, "file it")
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
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "approve [y]es / [n]o / [a]lways? "); {
		if time.Now().After(deadline) {
			t.Fatalf("no approval prompt; output:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := tty.Write([]byte{3}); err != nil { // Ctrl-C: the terminal sends SIGINT
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
	got := strings.ReplaceAll(stripANSI(out.String()), "\r\n", "\n")
	if code != exitInterrupted {
		t.Errorf("exit status %d, want %d; output:\n%s", code, exitInterrupted, got)
	}
	for _, want := range []string{
		"toolrun run: interrupted; the run is saved in " + state + "\n",
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
}
