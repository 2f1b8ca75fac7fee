package sqlitestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/sqlitestore"
	"github.com/toolrun/toolrun/storetest"
	"github.com/toolrun/toolrun/toolruntest"
)

func openStore(dir string) (toolrun.Store, error) {
	return sqlitestore.Open(filepath.Join(dir, "runs.db"))
}

func TestMain(m *testing.M) {
	storetest.Child(openStore)
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) {
	s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := storetest.Run(t.Context(), s); err != nil {
		t.Error(err)
	}
}

func TestConformanceAcrossProcesses(t *testing.T) {
	if err := storetest.RunProcesses(t.Context(), t.TempDir(), openStore); err != nil {
		t.Error(err)
	}
}

// TestAnyPath: a path is a file name, whatever its characters; before, '?'
// cut the name short and '#' or '%' opened another file or failed.
func TestAnyPath(t *testing.T) {
	for _, tt := range []struct{ name, file string }{
		{"plain", "runs.db"},
		{"space", "my runs.db"},
		{"hash", "runs#1.db"},
		{"percent", "runs%20.db"},
		{"question mark", "runs?mode=ro.db"},
		{"all of them", "a b#c%41?d=e&f.db"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tt.file)
			s, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Save(t.Context(), "run-1", &toolrun.State{Format: toolrun.StateFormat, Version: 1, Turns: 7}, 0); err != nil {
				t.Fatal(err)
			}
			var files []string
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				files = append(files, e.Name())
			}
			// The database and its WAL files, all named as given.
			if diff := cmp.Diff([]string{tt.file, tt.file + "-shm", tt.file + "-wal"}, files); diff != "" {
				t.Errorf("files in the directory (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSurvivesReopen: a state saved by one process is there for the next,
// with its version.
func TestSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.db")
	s, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st := &toolrun.State{Format: toolrun.StateFormat, Version: 1, Turns: 7}
	if err := s.Save(t.Context(), "run-1", st, 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Load(t.Context(), "run-1")
	if err != nil || got.Turns != 7 || got.Version != 1 {
		t.Fatalf("Load after reopening = %+v, %v; want the saved state at version 1", got, err)
	}
}

// The resumer test runs two child processes (this test binary, re-run with
// TOOLRUN_RESUMER_DIR set) that resume one suspended run at the same time,
// as toolrun's own TestTwoResumersRunACallOnce does with FileStore.

const resumerRunID = "resumer-run"

func appendTool(dir string) toolrun.Tool {
	type in struct {
		ID string `json:"id"`
	}
	t := toolrun.NewTool("append", "Append a line (not idempotent)", func(ctx context.Context, in in) (string, error) {
		f, err := os.OpenFile(filepath.Join(dir, "executions"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return "", err
		}
		defer f.Close()
		_, err = fmt.Fprintf(f, "append %s\n", in.ID)
		return "appended " + in.ID, err
	})
	t.Policy = toolrun.RequireApproval("appends")
	return t
}

func params() anthropic.BetaMessageNewParams {
	return anthropic.BetaMessageNewParams{Model: "claude-test", MaxTokens: 1024,
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))}}
}

func options(t *testing.T, dir string) *toolrun.Options {
	s, err := sqlitestore.Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &toolrun.Options{Logger: slog.New(slog.DiscardHandler), Store: s, RunID: resumerRunID}
}

// TestResumerChild is the child process; it does nothing in a normal run.
func TestResumerChild(t *testing.T) {
	dir := os.Getenv("TOOLRUN_RESUMER_DIR")
	if dir == "" {
		t.Skip("helper process for the resumer tests")
	}
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
	tools := []toolrun.Tool{appendTool(dir)}
	var r *toolrun.Runner
	var err error
	if os.Getenv("TOOLRUN_RESUMER_MODE") == "resume" {
		var st toolrun.State
		data, rerr := os.ReadFile(filepath.Join(dir, "state.json"))
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err := json.Unmarshal(data, &st); err != nil {
			t.Fatal(err)
		}
		r, err = toolrun.Resume(s.Client(), &st, tools, options(t, dir))
	} else {
		r, err = toolrun.Open(t.Context(), s.Client(), params(), tools, options(t, dir))
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Decide("a1", toolrun.AllowCall()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ready-"+os.Getenv("TOOLRUN_RESUMER_NAME")), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, os.Stdin)
	res, err := r.Run(t.Context())
	fmt.Printf("error: %v\nstop=%s busy=%t\n", err, res.StopReason, errors.Is(err, toolrun.ErrRunBusy))
}

// TestTwoResumersRunACallOnce: two processes that resume one suspended run
// at once run its non-idempotent call once between them; the other is
// refused with ErrRunBusy before running anything.
func TestTwoResumersRunACallOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, mode := range []string{"open", "resume"} {
		t.Run(mode, func(t *testing.T) {
			for rep := range 10 {
				dir := t.TempDir()
				srv := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("a1", "append", map[string]string{"id": "a1"}))))
				r, err := toolrun.Open(t.Context(), srv.Client(), params(), []toolrun.Tool{appendTool(dir)}, options(t, dir))
				if err != nil {
					t.Fatal(err)
				}
				if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopAwaitingApproval {
					t.Fatalf("Run = %q, %v; want awaiting_approval", res.StopReason, err)
				}
				data, err := json.Marshal(r.State())
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "state.json"), data, 0o644); err != nil {
					t.Fatal(err)
				}
				got := map[string]int{}
				outs := runResumers(t, dir, mode)
				for _, out := range outs {
					for line := range strings.Lines(out) {
						if strings.HasPrefix(line, "stop=") {
							got[strings.TrimSpace(line)]++
						}
					}
				}
				want := map[string]int{"stop=end_turn busy=false": 1, "stop=error busy=true": 1}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("repetition %d: how the children stopped (-want +got):\n%s\n%s", rep, diff, strings.Join(outs, "\n"))
				}
				execs, err := os.ReadFile(filepath.Join(dir, "executions"))
				if err != nil {
					t.Fatal(err)
				}
				if got, want := string(execs), "append a1\n"; got != want {
					t.Fatalf("repetition %d: executions: got %q, want %q", rep, got, want)
				}
			}
		})
	}
}

// runResumers runs two TestResumerChild processes on dir, lets them run at
// the same moment, and returns their outputs.
func runResumers(t *testing.T, dir, mode string) []string {
	t.Helper()
	var cmds []*exec.Cmd
	var stdins []io.WriteCloser
	var outs []*bytes.Buffer
	for i := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestResumerChild$", "-test.v=false")
		cmd.Env = append(os.Environ(), "TOOLRUN_RESUMER_DIR="+dir, "TOOLRUN_RESUMER_MODE="+mode, fmt.Sprintf("TOOLRUN_RESUMER_NAME=%d", i))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, stdins, outs = append(cmds, cmd), append(stdins, stdin), append(outs, &out)
	}
	// The children signal readiness with files; the parent polls for them,
	// with a generous bound so that a broken child cannot hang CI.
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < len(cmds); {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("ready-%d", i))); err == nil {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d never got ready:\n%s", i, outs[i])
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, stdin := range stdins {
		stdin.Close()
	}
	var res []string
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
		res = append(res, outs[i].String())
	}
	return res
}
