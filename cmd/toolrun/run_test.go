package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolrun/toolrun/toolruntest"
)

// binDir holds the binaries the tests build, once per test run.
var binDir struct {
	once sync.Once
	dir  string
	err  error
}

// pathOnce puts binDir on the PATH, once.
var pathOnce sync.Once

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir.dir != "" {
		os.RemoveAll(binDir.dir)
	}
	os.Exit(code)
}

// binaries builds toolrun and the MCP test server crashserver, once, and
// returns their paths.
func binaries(t *testing.T) (toolrunBin, crashserver string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	binDir.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			binDir.err = err
			return
		}
		binDir.dir, binDir.err = os.MkdirTemp("", "toolrun-cli-test")
		if binDir.err != nil {
			return
		}
		for out, pkg := range map[string]string{"toolrun": ".", "crashserver": "../../mcptool/testdata/crashserver"} {
			b, err := exec.Command(goTool, "build", "-o", filepath.Join(binDir.dir, out), pkg).CombinedOutput()
			if err != nil {
				binDir.err = errors.New("go build " + pkg + ": " + err.Error() + "\n" + string(b))
				return
			}
		}
	})
	if binDir.err != nil {
		t.Fatal(binDir.err)
	}
	pathOnce.Do(func() {
		// On the PATH, as after "go install": the commands toolrun prints
		// to run next name it "toolrun" (see selfCommand).
		os.Setenv("PATH", binDir.dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	})
	return filepath.Join(binDir.dir, "toolrun"), filepath.Join(binDir.dir, "crashserver")
}

// project makes the directory a run works in: work/ is the --workdir of
// the tests, secret.txt is beside it, out of the model's reach.
func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"secret.txt":       "the launch codes\n",
		"work/notes.txt":   "Release notes\n\nTODO: write the changelog\nTODO: tag v1.2.0\n",
		"work/src/main.go": "package main\n\nfunc main() {} // TODO: flags\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runBinary runs the built toolrun in dir with args, against the fake
// server s, with no terminal anywhere. started, if non-nil, is called once
// the process has started.
func runBinary(t *testing.T, dir string, s *toolruntest.Server, args []string, started func(*os.Process)) result {
	t.Helper()
	bin, _ := binaries(t)
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANTHROPIC_") && !strings.HasPrefix(kv, "TMPDIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// What the command writes unasked (transcripts, saved runs) stays in
	// the test's directory.
	cmd.Env = append(cmd.Env, "TMPDIR="+t.TempDir())
	if s != nil {
		cmd.Env = append(cmd.Env, "ANTHROPIC_BASE_URL="+s.URL, "ANTHROPIC_API_KEY="+toolruntest.TestAPIKey)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if started != nil {
		started(cmd.Process)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("toolrun %q: %v", args, err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// durationRE matches the durations the display prints.
var durationRE = regexp.MustCompile(`\b\d+(ms|\.\d+s)\b`)

// uniqueRE matches the files the command names uniquely in the temporary
// directory.
var uniqueRE = regexp.MustCompile(`\S*/(toolrun-(?:demo|run|state))-\d{8}T\d{6}-\d+\.(jsonl|json)`)

// normalize replaces what varies from run to run in out: durations, and
// the unique names of the files the command makes in the temporary
// directory.
func normalize(out string) string {
	out = uniqueRE.ReplaceAllString(out, "$$TMPDIR/$1-<time>-<id>.$2")
	return durationRE.ReplaceAllString(out, "<dur>")
}

// runScript is the model's side of the run the README shows: it lists and
// reads files, greps, tries a file outside the working directory, and
// calls an MCP tool that works and one that fails.
func runScript() []toolruntest.Reply {
	return []toolruntest.Reply{
		toolruntest.Message(
			toolruntest.Text("I'll look at the project's files first."),
			toolruntest.ToolUse("toolu_01", "list_files", map[string]any{"recursive": true}),
			toolruntest.ToolUse("toolu_02", "read_file", map[string]any{"path": "notes.txt"}),
		),
		toolruntest.Message(
			toolruntest.Text("Now the TODOs, and the file the notes mention."),
			toolruntest.ToolUse("toolu_03", "grep", map[string]any{"pattern": "TODO"}),
			toolruntest.ToolUse("toolu_04", "read_file", map[string]any{"path": "../secret.txt"}),
		),
		toolruntest.Message(
			toolruntest.Text("I'll pass the list to the tracker."),
			toolruntest.ToolUse("toolu_05", "tracker__echo", map[string]any{"text": "3 TODOs: changelog, tag v1.2.0, flags"}),
			toolruntest.ToolUse("toolu_06", "tracker__fail", map[string]any{"text": "tracker is read-only"}),
		),
		toolruntest.Message(
			toolruntest.Text("There are 3 TODOs: write the changelog, tag v1.2.0 (notes.txt) and flags (src/main.go).\nThe tracker took the list; its second call failed, as its log says."),
		),
	}
}

// runPrompt is the prompt of the runs of runScript.
const runPrompt = "What is left to do before the release?"

// TestRunGolden runs the built binary against the fake server, with the
// file tools and an MCP server, and compares its plain output with a golden
// file. The streamed run prints the same lines.
func TestRunGolden(t *testing.T) {
	tests := []struct {
		name  string
		extra []string
	}{
		{"json", nil},
		{"stream", []string{"--stream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, crash := binaries(t)
			dir := project(t)
			s := toolruntest.New(nil, toolruntest.Script(runScript()...))
			t.Cleanup(s.Close)
			args := append([]string{"run", "--workdir", "work", "--mcp", "tracker=" + crash, "--approve", "auto"}, tt.extra...)
			got := runBinary(t, dir, s, append(args, runPrompt), nil)
			if got.code != 0 {
				t.Errorf("exit status %d, want 0; stderr:\n%s", got.code, got.stderr)
			}
			golden(t, "run.golden", normalize(got.stdout))
			for _, want := range []string{
				`level=ERROR msg="toolrun: tool call failed" tool=read_file tool_use_id=toolu_04`,
				`level=ERROR msg="toolrun: tool call failed" tool=tracker__fail tool_use_id=toolu_06`,
			} {
				if !strings.Contains(got.stderr, want) {
					t.Errorf("stderr does not contain %q; got:\n%s", want, got.stderr)
				}
			}
			if err := errors.Join(s.Errors()...); err != nil {
				t.Errorf("fake server: %v", err)
			}
			reqs := s.Requests()
			if len(reqs) != 4 {
				t.Fatalf("got %d requests, want 4", len(reqs))
			}
			if got, want := reqs[0].Stream, tt.name == "stream"; got != want {
				t.Errorf("request streamed = %v, want %v", got, want)
			}
			// What the model was told of the path outside the directory.
			msgs := reqs[2].Conversation
			last := msgs[len(msgs)-1]
			if got, want := last.Content[1].ResultText(), `path "../secret.txt" is outside the working directory`; !strings.HasPrefix(got, want) || strings.Contains(got, "launch codes") {
				t.Errorf("read_file ../secret.txt gave the model %q, want an error starting %q", got, want)
			}
		})
	}
}

// TestRunExitCodes runs the built binary to each way a run can end.
func TestRunExitCodes(t *testing.T) {
	_, crash := binaries(t)
	refusal := toolruntest.Reply{Content: []toolruntest.Block{toolruntest.Text("I can't help with that.")}, StopReason: "refusal"}
	tests := []struct {
		name       string
		args       []string
		replies    []toolruntest.Reply
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{
			name:       "end_turn",
			args:       []string{"run", "hello"},
			replies:    []toolruntest.Reply{toolruntest.Message(toolruntest.Text("Hello!"))},
			wantCode:   0,
			wantStdout: []string{"tools: none", "  claude: Hello!\n", "stopped: end_turn after 1 turn"},
		},
		{
			name:       "max_turns",
			args:       []string{"run", "--workdir", "work", "--max-turns", "1", "list"},
			replies:    runScript(),
			wantCode:   3,
			wantStdout: []string{"stopped: max_turns after 1 turn", "turn limit of 1 reached; 2 tool calls of turn 1 not run"},
			// Said once, not "turn limit reached: turn limit of 1 reached".
			wantStderr: []string{"toolrun run: turn limit of 1 reached; 2 tool calls of turn 1 not run\n"},
		},
		{
			name:       "max_tokens",
			args:       []string{"run", "write a lot"},
			replies:    []toolruntest.Reply{{Content: []toolruntest.Block{toolruntest.Text("Once upon")}, StopReason: "max_tokens"}},
			wantCode:   4,
			wantStdout: []string{"stopped: max_tokens after 1 turn", "cut off at max_tokens"},
		},
		{
			name:       "refusal",
			args:       []string{"run", "--stream", "something bad"},
			replies:    []toolruntest.Reply{refusal},
			wantCode:   5,
			wantStdout: []string{"  claude: I can't help with that.\n", "stopped: refusal after 1 turn"},
		},
		{
			name:       "context window",
			args:       []string{"run", "a long one"},
			replies:    []toolruntest.Reply{{Content: []toolruntest.Block{toolruntest.Text("…")}, StopReason: "model_context_window_exceeded"}},
			wantCode:   6,
			wantStdout: []string{"stopped: model_context_window_exceeded after 1 turn"},
		},
		{
			name:     "awaiting approval without a terminal",
			args:     []string{"run", "--workdir", "work", "--mcp", "tracker=" + crash, "file it"},
			replies:  []toolruntest.Reply{toolruntest.Message(toolruntest.ToolUse("toolu_01", "list_files", nil), toolruntest.ToolUse("toolu_02", "tracker__echo", map[string]any{"text": "hi"}))},
			wantCode: 7,
			wantStdout: []string{
				`tracker__crash, tracker__echo, tracker__fail, tracker__hang (MCP server "tracker"; each call needs approval)`,
				`  ? tracker__echo needs approval: a tool of MCP server "tracker"`,
				"  ← list_files (", // the call that ran is shown, though its turn is not over
				"stopped: awaiting_approval after 1 turn, 2 tool calls: 1 ran, 1 awaiting approval",
			},
			wantStderr: []string{"toolrun run: no terminal to ask for approval of toolu_02 (tracker__echo); the run is saved in ", "continue it with: toolrun resume "},
		},
		{
			name: "deny",
			args: []string{"run", "--mcp", "tracker=" + crash, "--approve", "deny", "file it"},
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("toolu_01", "tracker__echo", map[string]any{"text": "hi"})),
				toolruntest.Message(toolruntest.Text("I could not file it.")),
			},
			wantCode: 0,
			wantStdout: []string{
				"(MCP server \"tracker\"; denied: --approve deny)",
				"  ✗ tracker__echo denied by policy: calls that need approval are denied in this run (--approve deny)",
				"stopped: end_turn after 2 turns, 1 tool call: 1 denied",
			},
		},
		{
			name: "request rejected",
			args: []string{"run", "hello"},
			// twice: a 400 to the first request on a message thread is tried
			// once more without the thread, and a bad model is bad there too
			replies:    slicesRepeat(toolruntest.Reply{Fault: toolruntest.Fault{Status: 400, Message: "bad model"}}, 2),
			wantCode:   1,
			wantStdout: []string{"stopped: error after 0 turns"},
			wantStderr: []string{"toolrun run: ", "bad model"},
		},
		{
			name:       "server error after retries",
			args:       []string{"run", "hello"},
			replies:    slicesRepeat(toolruntest.Reply{Fault: toolruntest.Fault{Status: 500, RetryAfter: time.Millisecond}}, 3),
			wantCode:   1,
			wantStdout: []string{"stopped: error after 0 turns"},
			wantStderr: []string{"500 Internal Server Error"},
		},
		{
			name:       "no prompt",
			args:       []string{"run", "--workdir", "work"},
			wantCode:   2,
			wantStderr: []string{"toolrun run: no prompt given", `run "toolrun run --help" for usage`},
		},
		{
			name:       "bad approve",
			args:       []string{"run", "--approve", "maybe", "hi"},
			wantCode:   2,
			wantStderr: []string{`invalid value "maybe" for flag -approve: want ask, auto or deny`},
		},
		{
			name:       "two servers with one name",
			args:       []string{"run", "--mcp", crash, "--mcp", crash + " -v", "hi"},
			wantCode:   2,
			wantStderr: []string{`two MCP servers are named "crashserver"; name them apart with name=`},
		},
		{
			name:       "missing workdir",
			args:       []string{"run", "--workdir", "nowhere", "hi"},
			wantCode:   1,
			wantStderr: []string{"toolrun run: --workdir: fstools: lstat"},
		},
		{
			name:       "MCP server that exits",
			args:       []string{"run", "--mcp", crash + " -exit", "hi"},
			wantCode:   1,
			wantStderr: []string{"toolrun run: MCP server ", "-exit: mcptool: connecting to MCP server \"crashserver\""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := project(t)
			s := toolruntest.New(nil, toolruntest.Script(tt.replies...))
			t.Cleanup(s.Close)
			got := runBinary(t, dir, s, tt.args, nil)
			checkOutput(t, got, tt.wantCode, tt.wantStdout, tt.wantStderr)
			if strings.Contains(got.stdout+got.stderr, toolruntest.TestAPIKey) {
				t.Errorf("the API key was printed")
			}
		})
	}
}

func slicesRepeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestRunInterrupted interrupts the binary while it waits for the model.
func TestRunInterrupted(t *testing.T) {
	arrived := make(chan struct{})
	var once sync.Once
	s := toolruntest.New(nil, toolruntest.Options{Func: func(*toolruntest.Request) toolruntest.Reply {
		once.Do(func() { close(arrived) })
		// The reply waits until the client goes away.
		return toolruntest.Reply{Content: []toolruntest.Block{toolruntest.Text("late")}, Fault: toolruntest.Fault{EventDelay: time.Hour}}
	}})
	t.Cleanup(s.Close)
	got := runBinary(t, project(t), s, []string{"run", "hello"}, func(p *os.Process) {
		select {
		case <-arrived:
		case <-t.Context().Done():
		}
		p.Signal(syscall.SIGINT)
	})
	if got.code != 130 {
		t.Errorf("exit status %d, want 130; stderr:\n%s", got.code, got.stderr)
	}
	if !strings.Contains(got.stdout, "stopped: canceled after 0 turns") || !strings.Contains(got.stderr, "toolrun run: interrupted") {
		t.Errorf("stdout:\n%s\nstderr:\n%s\nwant the run stopped as canceled", got.stdout, got.stderr)
	}
}

// TestRecordReplayView records a run, replays it (unchanged and after a
// file changed) and writes its report, all with the built binary.
func TestRecordReplayView(t *testing.T) {
	_, crash := binaries(t)
	dir := project(t)
	s := toolruntest.New(nil, toolruntest.Script(runScript()...))
	t.Cleanup(s.Close)
	rec := filepath.Join(dir, "run.jsonl")
	got := runBinary(t, dir, s, []string{"run", "--workdir", "work", "--mcp", "tracker=" + crash, "--approve", "auto", "--record", rec, runPrompt}, nil)
	if got.code != 0 {
		t.Fatalf("run: exit status %d; stderr:\n%s", got.code, got.stderr)
	}
	if !strings.Contains(got.stdout, "record: "+rec+"\n") {
		t.Errorf("stdout does not name the record; got:\n%s", got.stdout)
	}

	tests := []struct {
		name       string
		args       []string
		change     func(t *testing.T)
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{
			name:       "same",
			args:       []string{"replay", "--workdir", "work", "--mcp", "tracker=" + crash, rec},
			wantCode:   0,
			wantStdout: []string{"replay matches the recording: 6 tool calls", "  turn 2  toolu_04  read_file: failure reproduces"},
		},
		{
			name:       "without the MCP server",
			args:       []string{"replay", rec, "--workdir", "work"},
			wantCode:   10,
			wantStdout: []string{"replay DIVERGED from the recording", "! turn 3  toolu_05  tracker__echo: decided differently"},
			wantStderr: []string{"toolrun replay: this replay has no tool named tracker__echo, tracker__fail; give it the --workdir, --mcp and --mcp-url flags of the recorded run"},
		},
		{
			name: "a file changed",
			args: []string{"replay", "--workdir", "work", "--mcp", "tracker=" + crash, rec},
			change: func(t *testing.T) {
				if err := os.WriteFile(filepath.Join(dir, "work", "notes.txt"), []byte("Release notes\n\nAll done.\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			wantCode:   10,
			wantStdout: []string{"! turn 1  toolu_02  read_file: output differs"},
		},
		{
			name:       "view",
			args:       []string{"view", rec, "-o", "report.html"},
			wantCode:   0,
			wantStdout: []string{"wrote report.html\n"},
		},
		{
			name:       "view next to the transcript",
			args:       []string{"view", rec},
			wantCode:   0,
			wantStdout: []string{"wrote " + filepath.Join(dir, "run.html") + "\n"},
		},
		{
			name:       "replay a missing file",
			args:       []string{"replay", filepath.Join(dir, "nope.jsonl")},
			wantCode:   1,
			wantStderr: []string{"toolrun replay: "},
		},
		{
			name:       "view without a file",
			args:       []string{"view", "-o", "x.html"},
			wantCode:   2,
			wantStderr: []string{"toolrun view: want one transcript file, got 0 arguments"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.change != nil {
				tt.change(t)
			}
			got := runBinary(t, dir, nil, tt.args, nil)
			checkOutput(t, got, tt.wantCode, tt.wantStdout, tt.wantStderr)
		})
	}
	for _, name := range []string{filepath.Join(dir, "report.html"), filepath.Join(dir, "run.html")} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("<html")) || !bytes.Contains(b, []byte("tracker__fail")) {
			t.Errorf("%s is not the run's report", name)
		}
	}
}

func TestParseMCPSpecs(t *testing.T) {
	tests := []struct {
		name     string
		commands []string
		urls     []string
		want     []mcpSpec
		wantErr  string
	}{
		{
			name:     "command",
			commands: []string{"/usr/bin/github-mcp-server stdio --read-only"},
			want:     []mcpSpec{{name: "github-mcp-server", argv: []string{"/usr/bin/github-mcp-server", "stdio", "--read-only"}}},
		},
		{
			name:     "named, with quotes",
			commands: []string{`docs=npx -y "@acme/docs server" --root 'My Docs' a\ b "say \"hi\""`},
			want:     []mcpSpec{{name: "docs", argv: []string{"npx", "-y", "@acme/docs server", "--root", "My Docs", "a b", `say "hi"`}}},
		},
		{
			name:     "an = later is no name",
			commands: []string{"server --opt=1"},
			want:     []mcpSpec{{name: "server", argv: []string{"server", "--opt=1"}}},
		},
		{
			name: "URLs",
			urls: []string{"https://mcp.example.com/mcp?x=1", "local=http://127.0.0.1:8080/mcp"},
			want: []mcpSpec{{name: "mcp.example.com", url: "https://mcp.example.com/mcp?x=1"}, {name: "local", url: "http://127.0.0.1:8080/mcp"}},
		},
		{name: "empty", commands: []string{"  "}, wantErr: `--mcp "  ": no command`},
		{name: "unterminated", commands: []string{`x "a`}, wantErr: `--mcp "x \"a": unterminated " quote`},
		{name: "not a URL", urls: []string{"mcp.example.com"}, wantErr: `--mcp-url "mcp.example.com": want an http:// or https:// URL`},
		{name: "same name", commands: []string{"a", "b/a.sh"}, wantErr: `two MCP servers are named "a"; name them apart with name=, as in --mcp "docs=b/a.sh"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMCPSpecs(tt.commands, tt.urls)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(mcpSpec{})); diff != "" {
				t.Errorf("specs differ (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunPrompt runs "toolrun run" in-process as if a person sat at a
// terminal: the approval prompt decides the MCP tool's calls, and the
// progress is shown live.
func TestRunPrompt(t *testing.T) {
	_, crash := binaries(t)
	tests := []struct {
		name       string
		input      string
		wantStdout []string
		notStdout  []string
		notStderr  []string
	}{
		{
			name:  "yes",
			input: "y\ny\n",
			wantStdout: []string{
				`␛[33m  ? tracker__echo needs approval: a tool of MCP server "tracker"␛[0m`,
				"  ✓ tracker__echo approved\n",
				"  ← tracker__echo (<dur>): 3 TODOs: changelog, tag v1.2.0, flags\n",
				"␛[31m  ✗ tracker__fail failed (<dur>): tracker is read-only␛[0m",
			},
			// The display shows each failure; the log does not repeat it.
			notStderr: []string{"tool call failed", "tracker is read-only"},
		},
		{
			name:  "no",
			input: "n\nnot today\nn\n\n",
			wantStdout: []string{
				"  ✗ tracker__echo denied: not today\n",
				"  ✗ tracker__fail denied: the user denied it\n",
				"stopped: end_turn after 4 turns, 6 tool calls: 3 ran, 1 failed, 2 denied\n",
			},
			// Each denial shows once, as it is given.
			notStdout: []string{"3 TODOs: changelog, tag v1.2.0, flags\n", "not run: tool call denied"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := project(t)
			s := toolruntest.New(nil, toolruntest.Script(runScript()...))
			t.Cleanup(s.Close)
			var stdout, stderr bytes.Buffer
			c := &cli{
				stdin: strings.NewReader(tt.input), stdout: &stdout, stderr: &stderr,
				getenv:      env(map[string]string{"ANTHROPIC_BASE_URL": s.URL, "ANTHROPIC_API_KEY": toolruntest.TestAPIKey}),
				interactive: true, stdoutTerminal: true,
			}
			code := c.run(t.Context(), []string{"run", "--workdir", filepath.Join(dir, "work"), "--mcp", "tracker=" + crash, runPrompt})
			if code != 0 {
				t.Errorf("exit status %d, want 0; stderr:\n%s", code, stderr.String())
			}
			got := normalize(visible(stdout.String()))
			for _, want := range tt.wantStdout {
				if !strings.Contains(got, want) {
					t.Errorf("stdout does not contain %q; got:\n%s", want, got)
				}
			}
			for _, bad := range tt.notStdout {
				if strings.Contains(got, bad) {
					t.Errorf("stdout contains %q; got:\n%s", bad, got)
				}
			}
			for _, bad := range tt.notStderr {
				if strings.Contains(stderr.String(), bad) {
					t.Errorf("stderr contains %q; got:\n%s", bad, stderr.String())
				}
			}
			if n := strings.Count(stderr.String(), "approve [y]es / [n]o / [a]lways? "); n != 2 {
				t.Errorf("asked %d times, want 2; stderr:\n%s", n, stderr.String())
			}
		})
	}
}

// TestDemoRecordReplay records the demo and replays it in-process: the
// demo's tools behave as recorded, so the replay matches.
func TestDemoRecordReplay(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "demo.jsonl")
	if got := runCLI(t, noEnv, "", "demo", "--yes", "--record", rec); got.code != 0 || !strings.Contains(got.stdout, "record: "+rec+"\n") {
		t.Fatalf("demo: exit status %d; stdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
	}
	got := runCLI(t, noEnv, "", "replay", rec)
	if got.code != 0 {
		t.Errorf("replay: exit status %d, want 0; stdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
	}
	for _, want := range []string{"replay matches the recording: 6 tool calls\n", "  turn 1  toolu_01  fetch_rates: failure reproduces\n"} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("replay: stdout does not contain %q; got:\n%s", want, got.stdout)
		}
	}
}

// TestRunMCPURL runs the built binary with an MCP server reached over
// streamable HTTP.
func TestRunMCPURL(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "v1"}, nil)
	type searchIn struct {
		Query string `json:"query"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "search", Description: "Searches the docs."},
		func(ctx context.Context, req *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "3 pages mention " + in.Query}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)

	s := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_01", "docs__search", map[string]any{"query": "retries"})),
		toolruntest.Message(toolruntest.Text("Three pages cover retries.")),
	))
	t.Cleanup(s.Close)
	got := runBinary(t, t.TempDir(), s, []string{"run", "--mcp-url", "docs=" + hs.URL, "--approve", "auto", "What do the docs say about retries?"}, nil)
	if got.code != 0 {
		t.Errorf("exit status %d, want 0; stderr:\n%s", got.code, got.stderr)
	}
	for _, want := range []string{
		`tools: docs__search (MCP server "docs"; approved: --approve auto)`,
		"  ← docs__search (<dur>): 3 pages mention retries\n",
		"  claude: Three pages cover retries.\n",
	} {
		if !strings.Contains(normalize(got.stdout), want) {
			t.Errorf("stdout does not contain %q; got:\n%s", want, got.stdout)
		}
	}
}
