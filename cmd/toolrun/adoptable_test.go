package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun/transcript"
)

// bin is one run of the built binary.
type bin struct {
	dir    string    // the working directory; a new one if ""
	tmp    string    // its TMPDIR; a new one if ""
	env    []string  // more variables; no ANTHROPIC_ variable is inherited
	stdin  io.Reader // nil: the null device
	args   []string
	during func(p *os.Process) // called once it has started
}

// run runs b and returns what it did and its peak memory in KiB.
func (b bin) run(t *testing.T) (result, int64) {
	t.Helper()
	toolrunBin, _ := binaries(t)
	cmd := exec.CommandContext(t.Context(), toolrunBin, b.args...)
	cmd.Dir = b.dir
	if cmd.Dir == "" {
		cmd.Dir = t.TempDir()
	}
	tmp := b.tmp
	if tmp == "" {
		tmp = t.TempDir()
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANTHROPIC_") && !strings.HasPrefix(kv, "TMPDIR=") && !strings.HasPrefix(kv, "COLUMNS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, "TMPDIR="+tmp), b.env...)
	cmd.Stdin = b.stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if b.during != nil {
		b.during(cmd.Process)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("toolrun %q: %v", b.args, err)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}, rss
}

// writeScript writes a script for --script: one reply a line.
func writeScript(t *testing.T, dir string, replies ...string) string {
	t.Helper()
	name := filepath.Join(dir, "replies.jsonl")
	if err := os.WriteFile(name, []byte(strings.Join(replies, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// toolUseReply is a script line that calls the tools named, with ids
// toolu_01, toolu_02….
func toolUseReply(text string, tools ...string) string {
	blocks := []string{fmt.Sprintf(`{"type":"text","text":%q}`, text)}
	for i, name := range tools {
		input := `{"text":"hi"}`
		if strings.HasSuffix(name, "__hang") {
			input = `{}`
		}
		blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":"toolu_%02d","name":%q,"input":%s}`, i+1, name, input))
	}
	return `{"content":[` + strings.Join(blocks, ",") + `]}`
}

// textReply is a script line that answers text.
func textReply(text string) string {
	return fmt.Sprintf(`{"content":[{"type":"text","text":%q}]}`, text)
}

// readTranscript reads a transcript and fails the test if it is not valid.
func readTranscript(t *testing.T, name string) *transcript.Transcript {
	t.Helper()
	tr, err := transcript.ReadFile(name)
	if err != nil {
		t.Fatalf("transcript %s: %v", name, err)
	}
	if tr.Torn != "" {
		t.Errorf("transcript %s ends with a torn line %q", name, tr.Torn)
	}
	return tr
}

// TestConcurrentDemos runs two demos at once with the same temporary
// directory: each records to a transcript of its own, and both are whole.
func TestConcurrentDemos(t *testing.T) {
	tmp := t.TempDir()
	var wg sync.WaitGroup
	results := make([]result, 2)
	for i := range results {
		wg.Go(func() {
			results[i], _ = bin{tmp: tmp, args: []string{"demo", "--yes"}}.run(t)
		})
	}
	wg.Wait()
	var names []string
	for i, got := range results {
		if got.code != 0 {
			t.Fatalf("demo %d: exit status %d, want 0; stderr:\n%s", i, got.code, got.stderr)
		}
		m := regexp.MustCompile(`(?m)^record: (.*)$`).FindStringSubmatch(got.stdout)
		if m == nil {
			t.Fatalf("demo %d names no transcript; stdout:\n%s", i, got.stdout)
		}
		names = append(names, m[1])
	}
	if names[0] == names[1] {
		t.Fatalf("both demos recorded to %s", names[0])
	}
	for _, name := range names {
		if filepath.Dir(name) != tmp {
			t.Errorf("transcript %s, want it in $TMPDIR %s", name, tmp)
		}
		tr := readTranscript(t, name)
		if got, want := tr.Stop().StopReason, "end_turn"; string(got) != want {
			t.Errorf("%s: stop %q, want %q", name, got, want)
		}
		if got, _ := (bin{args: []string{"replay", name}}).run(t); got.code != 0 {
			t.Errorf("replay %s: exit status %d, want 0; stdout:\n%s", name, got.code, got.stdout)
		}
	}
}

// TestDevZeroStdin gives the demo /dev/zero as stdin: it is no terminal,
// so nobody is asked, and memory stays bounded.
func TestDevZeroStdin(t *testing.T) {
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Skip(err)
	}
	defer zero.Close()
	got, rssKiB := bin{stdin: zero, args: []string{"demo", "--record", "off"}}.run(t)
	if got.code != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", got.code, got.stderr)
	}
	if !strings.Contains(got.stdout, "  ✗ send_report denied: no terminal to ask for approval") {
		t.Errorf("stdout does not show the call denied for want of a terminal; got:\n%s", got.stdout)
	}
	const limit = 200 << 10
	if rssKiB > limit {
		t.Errorf("peak memory %d KiB, want at most %d KiB", rssKiB, limit)
	}
}

// TestPromptBounded feeds the approval prompt a line with no end: the
// call is denied, and the prompt does not read it all into memory.
func TestPromptBounded(t *testing.T) {
	endless := io.MultiReader(strings.NewReader(strings.Repeat("y", maxAnswer*4)), strings.NewReader("\n"))
	var stdout, stderr bytes.Buffer
	c := &cli{stdin: endless, stdout: &stdout, stderr: &stderr, getenv: noEnv, interactive: true, tempDir: t.TempDir()}
	if code := c.run(t.Context(), []string{"demo", "--record", "off"}); code != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", code, stderr.String())
	}
	if want := "  ✗ send_report denied: " + noAnswerReason; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout does not contain %q; got:\n%s", want, stdout.String())
	}
}

// childrenOf returns the ids of the processes whose parent is pid.
func childrenOf(pid int) []int {
	var kids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		id, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces, so cut at the last ")".
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			kids = append(kids, id)
		}
	}
	return kids
}

// alive reports whether the process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// TestSignalDuringMCPCall stops a run with SIGTERM and with SIGINT while
// an MCP tool call hangs: the run stops cleanly (summary, run_stopped in
// the transcript), the MCP server is stopped, and the exit status says
// which signal it was.
func TestSignalDuringMCPCall(t *testing.T) {
	_, crash := binaries(t)
	tests := []struct {
		name     string
		sig      syscall.Signal
		wantCode int
		times    int
	}{
		{"SIGTERM", syscall.SIGTERM, exitTerminated, 1},
		{"SIGINT", syscall.SIGINT, exitInterrupted, 1},
		// As timeout(1) sends it: to the process, then to its group.
		{"SIGTERM twice", syscall.SIGTERM, exitTerminated, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			script := writeScript(t, dir, toolUseReply("Waiting on the tracker.", "tracker__hang"), textReply("never sent"))
			rec, state := filepath.Join(dir, "run.jsonl"), filepath.Join(dir, "saved.json")
			var kids []int
			got, _ := bin{dir: dir, args: []string{"run", "--script", script, "--mcp", "tracker=" + crash, "--approve", "auto", "--tool-timeout", "0", "--record", rec, "--state", state, "hang"},
				during: func(p *os.Process) {
					// Wait until the call has started, as the transcript says.
					deadline := time.Now().Add(5 * time.Minute) // minutes: a loaded machine is slow, only a hang is this slow
					for {
						b, _ := os.ReadFile(rec)
						if bytes.Contains(b, []byte(`"type":"tool_started"`)) {
							break
						}
						if bytes.Contains(b, []byte(`"type":"run_stopped"`)) || time.Now().After(deadline) {
							t.Errorf("the call did not start (the run stopped, or 5 minutes passed); transcript:\n%s", b)
							break
						}
						time.Sleep(10 * time.Millisecond)
					}
					kids = childrenOf(p.Pid)
					for range tt.times {
						p.Signal(tt.sig)
					}
				}}.run(t)
			if got.code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", got.code, tt.wantCode, got.stderr)
			}
			if !strings.Contains(got.stdout, "stopped: canceled after 1 turn, 1 tool call: 1 interrupted\n") {
				t.Errorf("stdout has no summary of the canceled run; got:\n%s", got.stdout)
			}
			if strings.Count(got.stderr, "toolrun run: interrupted; the run is saved in "+state+"\n") != 1 ||
				!strings.Contains(got.stderr, "continue it with: toolrun resume --tools-from-state "+state+" ") {
				t.Errorf("stderr does not say once that the run was interrupted and saved, and how to continue it; got:\n%s", got.stderr)
			}
			tr := readTranscript(t, rec)
			if stop := tr.Stop(); stop == nil || stop.StopReason != "canceled" {
				t.Errorf("transcript stop %+v, want run_stopped canceled", stop)
			}
			if len(kids) == 0 {
				t.Fatal("the MCP server was not running during the call")
			}
			for _, pid := range kids {
				if alive(pid) {
					t.Errorf("MCP server %d still runs after toolrun exited", pid)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			// The saved run goes on, and the call that was under way is
			// not run again: the model is told it was interrupted.
			got, _ = bin{dir: dir, args: []string{"resume", "--tools-from-state", "--approve", "auto", state}}.run(t)
			if got.code != 0 || !strings.Contains(got.stdout, "claude: never sent") {
				t.Errorf("resume of the interrupted run: exit status %d, want 0 and the run finished; stdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
			}
			if !strings.Contains(got.stdout, "tool call interrupted: it started but did not finish") {
				t.Errorf("resume of the interrupted run: the model is not told the call was interrupted; stdout:\n%s", got.stdout)
			}
			if n := countStarted(mustRead(t, rec), "toolu_01"); n != 1 {
				t.Errorf("the transcript shows the call started %d times, want 1", n)
			}
		})
	}
}

// TestMissingKey runs "toolrun run" with no API key: one error and a hint,
// before any MCP server starts or the banner is printed.
func TestMissingKey(t *testing.T) {
	_, crash := binaries(t)
	got, _ := bin{args: []string{"run", "--mcp", "tracker=" + crash, "hello"}}.run(t)
	if got.code != exitError {
		t.Errorf("exit status %d, want %d", got.code, exitError)
	}
	if got.stdout != "" {
		t.Errorf("stdout = %q, want nothing: the run must not start", got.stdout)
	}
	want := "toolrun run: no API key: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN\n" + noKeyHint + "\n"
	if diff := cmp.Diff(want, got.stderr); diff != "" {
		t.Errorf("stderr differs (-want +got):\n%s", diff)
	}
}

// TestScriptOffline runs "toolrun run --script" with no key and no
// network: the real file tools and MCP server answer a scripted model.
func TestScriptOffline(t *testing.T) {
	_, crash := binaries(t)
	dir := project(t)
	lines := []string{
		`{"content":[{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_01","name":"read_file","input":{"path":"notes.txt"}},{"type":"tool_use","id":"toolu_02","name":"tracker__echo","input":{"text":"filed"}}]}`,
		textReply("Done."),
	}
	script := writeScript(t, dir, lines...)
	tests := []struct {
		name  string
		args  []string
		stdin io.Reader
	}{
		{"file", []string{"run", "--script", script, "--workdir", "work", "--mcp", "tracker=" + crash, "--approve", "auto", "notes?"}, nil},
		{"stdin", []string{"run", "--script", "-", "--workdir", "work", "--mcp", "tracker=" + crash, "--approve", "auto", "notes?"}, strings.NewReader(strings.Join(lines, "\n"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := bin{dir: dir, stdin: tt.stdin, args: tt.args}.run(t)
			if got.code != 0 {
				t.Fatalf("exit status %d, want 0; stderr:\n%s", got.code, got.stderr)
			}
			for _, want := range []string{
				"toolrun run: model claude-sonnet-5-5 (offline: a scripted model, 2 replies)\n",
				"  ← read_file (",
				"  ← tracker__echo (",
				"  claude: Done.\n",
				"stopped: end_turn after 2 turns, 2 tool calls: 2 ran\n",
			} {
				if !strings.Contains(got.stdout, want) {
					t.Errorf("stdout does not contain %q; got:\n%s", want, got.stdout)
				}
			}
		})
	}
}

// TestResumeAfterExit7 suspends a run that awaits approval with no
// terminal (exit status 7), then continues it with "toolrun resume" as the
// message says, into the same transcript, which then replays as a whole.
func TestResumeAfterExit7(t *testing.T) {
	_, crash := binaries(t)
	tests := []struct {
		name       string
		decide     []string
		wantStdout []string
		stateFlag  bool
	}{
		{"allow", []string{"--allow", "toolu_01"}, []string{"  ✓ toolu_01 approved (--allow)\n", "  ← tracker__echo (", "stopped: end_turn after 2 turns, 1 tool call: 1 ran\n"}, false},
		{"deny", []string{"--deny", "toolu_01=not today"}, []string{"  ✗ toolu_01 denied: not today\n", "stopped: end_turn after 2 turns, 1 tool call: 1 denied\n"}, true},
		{"approve auto", []string{"--approve", "auto"}, []string{"  ✓ tracker__echo approved (--approve auto)\n", "stopped: end_turn after 2 turns, 1 tool call: 1 ran\n"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			script := writeScript(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
			rec := filepath.Join(dir, "run.jsonl")
			args := []string{"run", "--script", script, "--mcp", "tracker=" + crash, "--record", rec}
			if tt.stateFlag {
				args = append(args, "--state", filepath.Join(dir, "saved.json"))
			}
			got, _ := bin{dir: dir, tmp: dir, args: append(args, "file it")}.run(t)
			if got.code != 7 {
				t.Fatalf("run: exit status %d, want 7; stderr:\n%s", got.code, got.stderr)
			}
			m := regexp.MustCompile(`(?m)^continue it with: toolrun resume --tools-from-state (\S+) `).FindStringSubmatch(got.stderr)
			if m == nil {
				t.Fatalf("run: stderr names no command to continue; got:\n%s", got.stderr)
			}
			if tt.stateFlag && m[1] != filepath.Join(dir, "saved.json") {
				t.Errorf("run saved to %s, want the --state file", m[1])
			}
			got, _ = bin{dir: dir, args: append(append([]string{"resume", "--tools-from-state"}, tt.decide...), m[1])}.run(t)
			if got.code != 0 {
				t.Fatalf("resume: exit status %d, want 0; stdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
			}
			for _, want := range append([]string{"  ? toolu_01 tracker__echo {\"text\":\"hi\"}", "record: " + rec + " (appending)\n"}, tt.wantStdout...) {
				if !strings.Contains(got.stdout, want) {
					t.Errorf("resume: stdout does not contain %q; got:\n%s", want, got.stdout)
				}
			}
			tr := readTranscript(t, rec)
			if got, want := tr.Stop().StopReason, "end_turn"; string(got) != want {
				t.Errorf("transcript's final stop %q, want %q", got, want)
			}
			got, _ = bin{dir: dir, args: []string{"replay", "--tools-from-transcript", rec}}.run(t)
			if got.code != 0 || !strings.Contains(got.stdout, "stop: recorded end_turn, replayed end_turn") {
				t.Errorf("replay: exit status %d, want 0 and the final stop compared; stdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
			}
		})
	}
}

// TestResumeStillNoTerminal resumes with no decision and no terminal: the
// run stays suspended, saved in the same file.
func TestResumeStillNoTerminal(t *testing.T) {
	_, crash := binaries(t)
	dir := t.TempDir()
	script := writeScript(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
	state := filepath.Join(dir, "saved.json")
	if got, _ := (bin{dir: dir, args: []string{"run", "--script", script, "--mcp", "tracker=" + crash, "--state", state, "file it"}}).run(t); got.code != 7 {
		t.Fatalf("run: exit status %d, want 7; stderr:\n%s", got.code, got.stderr)
	}
	got, _ := bin{dir: dir, args: []string{"resume", "--tools-from-state", state}}.run(t)
	if got.code != 7 || !strings.Contains(got.stderr, "continue it with: toolrun resume --tools-from-state "+state+" ") {
		t.Errorf("resume: exit status %d, want 7 and the same file to continue; stderr:\n%s", got.code, got.stderr)
	}
	if got, _ := (bin{dir: dir, args: []string{"resume", "--tools-from-state", "--allow", "toolu_09", state}}).run(t); got.code != exitUsage || !strings.Contains(got.stderr, "--allow toolu_09: no such call awaits approval; the pending calls: toolu_01") {
		t.Errorf("resume --allow of an unknown call: exit status %d, want %d; stderr:\n%s", got.code, exitUsage, got.stderr)
	}
}

// TestDashForStdio checks that "-" names stdin or stdout wherever a file
// is named.
func TestDashForStdio(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "demo.jsonl")
	if got, _ := (bin{dir: dir, args: []string{"demo", "--yes", "--record", rec}}).run(t); got.code != 0 {
		t.Fatalf("demo: exit status %d; stderr:\n%s", got.code, got.stderr)
	}
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      []string
		stdin     bool
		wantCode  int
		wantStart string // of stdout
		noFile    string // a file that must not be made
	}{
		{"view -", []string{"view", "-"}, true, 0, "<!DOCTYPE html>", "-"},
		{"view -o -", []string{"view", rec, "-o", "-"}, false, 0, "<!DOCTYPE html>", "-"},
		{"view - -o -", []string{"view", "-o", "-", "-"}, true, 0, "<!DOCTYPE html>", "-"},
		{"replay -", []string{"replay", "-"}, true, 0, "replay matches the recording: 6 tool calls", ""},
		{"demo --record -", []string{"demo", "--yes", "--record", "-"}, false, 0, `{"type":"header"`, "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bin{dir: dir, args: tt.args}
			if tt.stdin {
				b.stdin = bytes.NewReader(data)
			}
			got, _ := b.run(t)
			if got.code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", got.code, tt.wantCode, got.stderr)
			}
			if !strings.HasPrefix(got.stdout, tt.wantStart) {
				t.Errorf("stdout starts %q, want %q", got.stdout[:min(len(got.stdout), 60)], tt.wantStart)
			}
			if tt.noFile != "" {
				if _, err := os.Stat(filepath.Join(dir, tt.noFile)); err == nil {
					t.Errorf("made a file named %q", tt.noFile)
				}
			}
		})
	}
	// The transcript on stdout is whole, and the display went to stderr.
	got, _ := bin{dir: dir, args: []string{"demo", "--yes", "--record", "-"}}.run(t)
	tr, err := transcript.Read(strings.NewReader(got.stdout))
	if err != nil || tr.Stop() == nil {
		t.Errorf("demo --record -: stdout is not a whole transcript (%v)", err)
	}
	if !strings.Contains(got.stderr, "stopped: end_turn after 5 turns") {
		t.Errorf("demo --record -: the display is not on stderr; got:\n%s", got.stderr)
	}
}

// TestReplayOwnTools replays a run of "toolrun run" with no tool flags:
// the replay starts none of the tools the transcript's header records and
// prints them as a hint, so every call diverges; with
// --tools-from-transcript it starts them, and never the demo's, so a call
// of a tool the run did not have (named like a demo tool) stays unknown,
// as recorded.
func TestReplayOwnTools(t *testing.T) {
	_, crash := binaries(t)
	dir := project(t)
	script := writeScript(t, dir,
		`{"content":[{"type":"tool_use","id":"toolu_01","name":"read_file","input":{"path":"notes.txt"}},{"type":"tool_use","id":"toolu_02","name":"fetch_rates","input":{"base":"EUR"}},{"type":"tool_use","id":"toolu_03","name":"tracker__echo","input":{"text":"x"}}]}`,
		textReply("Done."))
	rec := filepath.Join(dir, "run.jsonl")
	if got, _ := (bin{dir: dir, args: []string{"run", "--script", script, "--workdir", "work", "--mcp", "tracker=" + crash, "--approve", "auto", "--record", rec, "go"}}).run(t); got.code != 0 {
		t.Fatalf("run: exit status %d; stderr:\n%s", got.code, got.stderr)
	}
	hint := "toolrun replay: the transcript records the tools: --workdir work --mcp tracker=" + crash + "\n"
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
		notStderr  []string
	}{
		{
			name:       "no tool flags",
			args:       []string{"replay", rec},
			wantCode:   exitDiverged,
			wantStdout: []string{"! turn 1  toolu_01  read_file: decided differently", "! turn 1  toolu_03  tracker__echo: decided differently"},
			wantStderr: []string{hint, "none of them is started", "give it the --workdir, --mcp and --mcp-url flags of the recorded run (or --tools-from-transcript)"},
			notStderr:  []string{"with the tools the transcript records"},
		},
		{
			name:       "--tools-from-transcript",
			args:       []string{"replay", "--tools-from-transcript", rec},
			wantCode:   exitOK,
			wantStdout: []string{"  turn 1  toolu_01  read_file: same", "  turn 1  toolu_02  fetch_rates: failure reproduces", "  turn 1  toolu_03  tracker__echo: same"},
			wantStderr: []string{"toolrun replay: with the tools the transcript records: --workdir work --mcp tracker=" + crash + "\n"},
			notStderr:  []string{"none of them is started"},
		},
		{
			name:       "--tools-from-transcript with tool flags",
			args:       []string{"replay", "--tools-from-transcript", "--workdir", "work", rec},
			wantCode:   exitUsage,
			wantStderr: []string{"toolrun replay: --tools-from-transcript and the tool flags exclude each other"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := bin{dir: dir, args: tt.args}.run(t)
			checkOutput(t, got, tt.wantCode, tt.wantStdout, tt.wantStderr)
			for _, not := range tt.notStderr {
				if strings.Contains(got.stderr, not) {
					t.Errorf("stderr contains %q; got:\n%s", not, got.stderr)
				}
			}
		})
	}
}

// TestNarrowTerminal runs under a pseudo-terminal 50 columns wide, with
// COLUMNS unset as shells leave it: every redraw of the status line fits
// in the width, so none wraps.
func TestNarrowTerminal(t *testing.T) {
	_, crash := binaries(t)
	toolrunBin, _ := binaries(t)
	dir := t.TempDir()
	script := writeScript(t, dir, toolUseReply("Three slow calls.", "tracker__hang", "tracker__hang", "tracker__hang"), textReply("Done."))
	cmd := exec.CommandContext(t.Context(), toolrunBin, "run", "--script", script, "--mcp", "tracker="+crash, "--approve", "auto", "--tool-timeout", "700ms", "hang")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANTHROPIC_") && !strings.HasPrefix(kv, "COLUMNS=") && !strings.HasPrefix(kv, "TMPDIR=") && !strings.HasPrefix(kv, "TERM=") && !strings.HasPrefix(kv, "NO_COLOR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "TERM=xterm", "TMPDIR="+dir)
	const width = 50
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: width, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		io.Copy(&out, tty) // ends with an error when the process is gone
		close(done)
	}()
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatal(err)
		}
	}
	tty.Close()
	<-done
	got := out.String()
	if !strings.Contains(got, "stopped: end_turn") {
		t.Fatalf("the run did not finish; output:\n%s", got)
	}
	statuses := 0
	for _, seg := range strings.Split(got, ansiClearLine) {
		line, _, _ := strings.Cut(seg, "\r")
		line, _, _ = strings.Cut(line, "\n")
		if !strings.HasPrefix(line, "turn ") {
			continue
		}
		statuses++
		if n := len([]rune(stripANSI(line))); n >= width {
			t.Errorf("status line of %d columns in a terminal of %d: %q", n, width, line)
		}
	}
	if statuses == 0 {
		t.Errorf("no status line drawn; output:\n%s", got)
	}
}

var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

func stripANSI(s string) string { return ansiRE.ReplaceAllString(s, "") }

// TestVersion checks what "toolrun version" says of a build.
func TestVersion(t *testing.T) {
	got, _ := bin{args: []string{"version"}}.run(t)
	if got.code != 0 || !regexp.MustCompile(`^toolrun \S+ go1\.\d+\S* \w+/\w+\n`).MatchString(got.stdout) {
		t.Errorf("exit status %d, stdout %q; want 0 and \"toolrun <version> <go version> <os>/<arch>\"", got.code, got.stdout)
	}
}
