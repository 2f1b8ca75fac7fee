package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// noEnv is an environment with no API key: the demo runs offline.
func noEnv(string) string { return "" }

// env returns an environment with the variables of vars.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// result is what one run of the command produced.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the command in-process like main does, with stdin a reader
// that is not a terminal.
func runCLI(t *testing.T, getenv func(string) string, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := &cli{stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr, getenv: getenv, tempDir: t.TempDir()}
	code := c.run(t.Context(), args)
	return result{code, stdout.String(), stderr.String()}
}

// checkOutput fails the test if got exited otherwise than with code, or
// if its stdout or stderr lacks one of the wanted substrings.
func checkOutput(t *testing.T, got result, code int, stdout, stderr []string) {
	t.Helper()
	if got.code != code {
		t.Errorf("exit status %d, want %d; stdout:\n%s\nstderr:\n%s", got.code, code, got.stdout, got.stderr)
	}
	for _, want := range stdout {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("stdout does not contain %q; got:\n%s", want, got.stdout)
		}
	}
	for _, want := range stderr {
		if !strings.Contains(got.stderr, want) {
			t.Errorf("stderr does not contain %q; got:\n%s", want, got.stderr)
		}
	}
}

// runInteractive runs the command as if stdin were a terminal at which a
// person types input.
func runInteractive(t *testing.T, input string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := &cli{stdin: strings.NewReader(input), stdout: &stdout, stderr: &stderr, getenv: noEnv, interactive: true, tempDir: t.TempDir()}
	code := c.run(t.Context(), args)
	return result{code, stdout.String(), stderr.String()}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("output differs from %s (-want +got):\n%s", path, diff)
	}
}

func TestDemoOffline(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		golden     string
		wantStderr []string // substrings of the log
	}{
		{
			name:   "yes approves",
			args:   []string{"demo", "--yes"},
			golden: "demo_yes.golden",
			wantStderr: []string{
				`level=ERROR msg="toolrun: tool call failed" tool=fetch_rates tool_use_id=toolu_01`,
				`error="upstream timeout"`,
				`level=ERROR msg="toolrun: tool call failed" tool=convert_currency tool_use_id=toolu_04`,
			},
		},
		{
			name:   "no terminal denies",
			args:   []string{"demo"},
			golden: "demo_no_terminal.golden",
			wantStderr: []string{
				`error="upstream timeout"`,
				`level=WARN msg="toolrun: tool call denied" tool=send_report tool_use_id=toolu_06`,
				`reason="no terminal to ask for approval; rerun with --approve auto"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCLI(t, noEnv, "", tt.args...)
			if got.code != 0 {
				t.Errorf("exit status %d, want 0; stderr:\n%s", got.code, got.stderr)
			}
			golden(t, tt.golden, normalize(got.stdout))
			for _, want := range tt.wantStderr {
				if !strings.Contains(got.stderr, want) {
					t.Errorf("stderr does not contain %q; got:\n%s", want, got.stderr)
				}
			}
		})
	}
}

// TestDemoPrompt drives the approval prompt as a person at a terminal would.
func TestDemoPrompt(t *testing.T) {
	tests := []struct {
		name       string
		input      string
		wantStdout []string
		wantStderr []string
		notStdout  []string
	}{
		{
			name:  "yes",
			input: "y\n",
			wantStdout: []string{
				"  ✓ send_report approved\n",
				`  ← send_report (<dur>): report "25,000 JPY in Lisbon" accepted for me@example.com`,
				"6 tool calls: 4 ran, 2 failed\n",
			},
		},
		{
			name:  "no with a reason",
			input: "n\nnot now\n",
			wantStdout: []string{
				"  ✗ send_report denied: not now\n",
				"6 tool calls: 3 ran, 2 failed, 1 denied\n",
			},
			wantStderr: []string{"reason, sent to the model (optional): "},
			// The denial shows once, as it is given.
			notStdout: []string{"accepted for", "send_report not run"},
		},
		{
			name:       "no without a reason",
			input:      "no\n\n",
			wantStdout: []string{"  ✗ send_report denied: the user denied it\n"},
			notStdout:  []string{"accepted for", "send_report not run"},
		},
		{
			name:  "always",
			input: "a\n",
			wantStdout: []string{
				"  ✓ send_report approved, and every later call of it in this run\n",
				"  ← send_report (<dur>): report",
			},
		},
		{
			name:       "asks again after a wrong answer",
			input:      "maybe\nYES\n",
			wantStdout: []string{"  ✓ send_report approved\n", "  ← send_report (<dur>): report"},
			wantStderr: []string{"please answer y, n or a"},
		},
		{
			name:       "end of input denies",
			input:      "",
			wantStdout: []string{"  ✗ send_report denied: no answer at the approval prompt\n"},
			notStdout:  []string{"accepted for", "send_report not run"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runInteractive(t, tt.input, "demo")
			if got.code != 0 {
				t.Errorf("exit status %d, want 0; stderr:\n%s", got.code, got.stderr)
			}
			wantStderr := append([]string{"  approve [y]es / [n]o / [a]lways? "}, tt.wantStderr...)
			for _, want := range wantStderr {
				if !strings.Contains(got.stderr, want) {
					t.Errorf("stderr does not contain %q; got:\n%s", want, got.stderr)
				}
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(normalize(got.stdout), want) {
					t.Errorf("stdout does not contain %q; got:\n%s", want, got.stdout)
				}
			}
			for _, bad := range tt.notStdout {
				if strings.Contains(got.stdout, bad) {
					t.Errorf("stdout contains %q; got:\n%s", bad, got.stdout)
				}
			}
			if strings.Contains(got.stdout, "approve [y]es") {
				t.Errorf("the prompt went to stdout, want stderr; stdout:\n%s", got.stdout)
			}
		})
	}
}

func TestPromptCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// A reader that never returns stands for a person who does not answer.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var out, ask bytes.Buffer
	p := &prompt{in: bufio.NewReader(r), out: &out, ask: &ask}
	_, err = p.approve(ctx, toolrun.PendingCall{Call: toolrun.ToolCall{ID: "toolu_1", Name: "send_report"}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("approve: got error %v, want context.Canceled", err)
	}
	if out.Len() != 0 {
		t.Errorf("printed %q, want no decision", out.String())
	}
}

// TestDemoWithKey runs the demo the way it runs against the API, with the
// key and base URL from the environment pointing at a fake server.
func TestDemoWithKey(t *testing.T) {
	const key = "sk-ant-secret-0123456789"
	tests := []struct {
		name     string
		args     []string
		replies  []toolruntest.Reply
		wantCode int
		wantOut  []string
	}{
		{
			name:     "end_turn",
			args:     []string{"demo", "--yes", "--model", "claude-test"},
			replies:  demoReplies(),
			wantCode: 0,
			wantOut:  []string{"toolrun demo: the Anthropic API, model claude-test\n", "stopped: end_turn after 5 turns, 6 tool calls: 4 ran, 2 failed"},
		},
		{
			name:     "refusal",
			args:     []string{"demo"},
			replies:  []toolruntest.Reply{{Content: []toolruntest.Block{toolruntest.Text("I can't help with that.")}, StopReason: "refusal"}},
			wantCode: 5,
			wantOut:  []string{"stopped: refusal after 1 turn"},
		},
		{
			name:     "max_tokens",
			args:     []string{"demo"},
			replies:  []toolruntest.Reply{{Content: []toolruntest.Block{toolruntest.Text("25,000 yen is")}, StopReason: "max_tokens"}},
			wantCode: 4,
			wantOut:  []string{"stopped: max_tokens after 1 turn", "cut off at max_tokens"},
		},
		{
			name: "request error",
			args: []string{"demo"},
			// twice: a 400 to the first request on a message thread is tried
			// once more without the thread, and a bad model is bad there too
			replies:  slicesRepeat(toolruntest.Reply{Fault: toolruntest.Fault{Status: 400, Message: "bad model"}}, 2),
			wantCode: 1,
			wantOut:  []string{"stopped: error after 0 turns"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(nil, toolruntest.Script(tt.replies...))
			t.Cleanup(s.Close)
			got := runCLI(t, env(map[string]string{"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": s.URL}), "", tt.args...)
			if got.code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", got.code, tt.wantCode, got.stderr)
			}
			for _, want := range tt.wantOut {
				if !strings.Contains(got.stdout, want) {
					t.Errorf("stdout does not contain %q; got:\n%s", want, got.stdout)
				}
			}
			if strings.Contains(got.stdout+got.stderr, key) {
				t.Errorf("the API key was printed; stdout:\n%s\nstderr:\n%s", got.stdout, got.stderr)
			}
			if err := errors.Join(s.Errors()...); err != nil {
				t.Errorf("fake server: %v", err)
			}
			reqs := s.Requests()
			if len(reqs) == 0 {
				t.Fatal("got no requests, want the demo to call the server")
			}
			// The SDK sends the key as x-api-key or as a bearer token,
			// depending on its version.
			if h := reqs[0].Header; h.Get("X-Api-Key") != key && h.Get("Authorization") != "Bearer "+key {
				t.Errorf("request headers %v, want the key from ANTHROPIC_API_KEY", h)
			}
		})
	}
}

func TestDemoExitCodes(t *testing.T) {
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		args     []string
		wantCode int
		wantOut  string
	}{
		{"end_turn", t.Context(), []string{"demo", "--yes"}, 0, "stopped: end_turn after 5 turns"},
		{"max_turns", t.Context(), []string{"demo", "--yes", "--max-turns", "2"}, 3, "stopped: max_turns after 2 turns"},
		{"canceled", canceled, []string{"demo", "--yes"}, 130, "stopped: canceled after 0 turns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.ctx, tt.args, strings.NewReader(""), &stdout, &stderr, noEnv)
			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantOut) {
				t.Errorf("stdout does not contain %q; got:\n%s", tt.wantOut, stdout.String())
			}
		})
	}
}

func TestExitCodesDistinct(t *testing.T) {
	reasons := []toolrun.StopReason{
		toolrun.StopEndTurn, toolrun.StopMaxTurns, toolrun.StopMaxTokens, toolrun.StopRefusal,
		toolrun.StopContextWindow, toolrun.StopAwaitingApproval, toolrun.StopHook, toolrun.StopCanceled, toolrun.StopError,
	}
	seen := map[int]toolrun.StopReason{exitUsage: "usage"}
	for _, r := range reasons {
		code := exitCode(r)
		if other, dup := seen[code]; dup {
			t.Errorf("exitCode(%q) = %d, the code of %q too", r, code, other)
		}
		seen[code] = r
		if (code == 0) != (r == toolrun.StopEndTurn) {
			t.Errorf("exitCode(%q) = %d, want 0 for end_turn only", r, code)
		}
	}
	if got, want := exitCode("some_future_reason"), exitError; got != want {
		t.Errorf("exitCode of an unknown reason = %d, want %d", got, want)
	}
}

func TestHelp(t *testing.T) {
	t.Run("toolrun", func(t *testing.T) {
		for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
			got := runCLI(t, noEnv, "", args...)
			if got.code != 0 || got.stderr != "" {
				t.Errorf("%q: exit status %d, stderr %q; want 0 and nothing", args, got.code, got.stderr)
			}
			golden(t, "help.golden", got.stdout)
		}
	})
	for _, cmd := range commands {
		t.Run(cmd.name, func(t *testing.T) {
			for _, args := range [][]string{{cmd.name, "--help"}, {cmd.name, "-h"}, {"help", cmd.name}} {
				got := runCLI(t, noEnv, "", args...)
				if got.code != 0 || got.stderr != "" {
					t.Errorf("%q: exit status %d, stderr %q; want 0 and nothing", args, got.code, got.stderr)
				}
				golden(t, "help_"+cmd.name+".golden", got.stdout)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStderr []string
		wantLines  int // the lines of stderr, if not 0
	}{
		{"no command", nil, []string{"no command given", "usage:\n  toolrun <command> [flags]"}, 0},
		{"unknown command", []string{"frobnicate"}, []string{"toolrun: unknown command \"frobnicate\"\nrun \"toolrun help\" for the commands\n"}, 2},
		{"help for unknown command", []string{"help", "frobnicate"}, []string{"toolrun help: unknown command \"frobnicate\"\n"}, 2},
		{"unknown flag", []string{"demo", "--bogus"}, []string{"toolrun demo: flag provided but not defined: -bogus\nrun \"toolrun demo --help\" for usage\n"}, 2},
		{"bad flag value", []string{"run", "--max-turns", "x", "hi"}, []string{"toolrun run: invalid value \"x\" for flag -max-turns"}, 2},
		{"resume without a file", []string{"resume"}, []string{"toolrun resume: want one saved run, got 0 arguments"}, 2},
		{"resume with a bad --deny", []string{"resume", "--deny", "toolu_01", "s.json"}, []string{`toolrun resume: --deny "toolu_01": want ID=reason`}, 2},
		{"version with an argument", []string{"version", "x"}, []string{"toolrun version: unexpected arguments: x"}, 2},
		{"record and state both on stdout", []string{"run", "--record", "-", "--state", "-", "hi"}, []string{"toolrun run: --record and --state cannot both be standard output"}, 2},
		{"argument", []string{"demo", "extra"}, []string{"toolrun demo: unexpected arguments: extra"}, 0},
		{"bad max turns", []string{"demo", "--max-turns", "0"}, []string{"--max-turns must be at least 1"}, 0},
		{"yes and deny", []string{"demo", "--yes", "--approve", "deny"}, []string{"--yes and --approve deny contradict each other"}, 0},
		{"run without a prompt", []string{"run"}, []string{"toolrun run: no prompt given"}, 0},
		{"run with two prompts", []string{"run", "list", "files"}, []string{"toolrun run: the prompt is one argument, got 2; quote it"}, 0},
		{"run with an empty prompt", []string{"run", " "}, []string{"toolrun run: the prompt is empty"}, 0},
		{"run with a flag after the prompt", []string{"run", "hi", "--max-turns", "0"}, []string{"--max-turns must be at least 1"}, 0},
		{"run with a bad MCP command", []string{"run", "--mcp", `x "a`, "hi"}, []string{`toolrun run: --mcp "x \"a": unterminated " quote`}, 0},
		{"run with a bad MCP URL", []string{"run", "--mcp-url", "ftp://x", "hi"}, []string{`--mcp-url "ftp://x": want an http:// or https:// URL`}, 0},
		{"replay without a file", []string{"replay"}, []string{"toolrun replay: want one transcript file, got 0 arguments"}, 0},
		{"view with two files", []string{"view", "a.jsonl", "b.jsonl"}, []string{"toolrun view: want one transcript file, got 2 arguments"}, 0},
		{"view over the transcript", []string{"view", "run.html"}, []string{"toolrun view: the report would overwrite the transcript; name it with -o"}, 0},
		{"arguments after --", []string{"view", "-o", "r.html", "--", "-x.jsonl", "-y"}, []string{"toolrun view: want one transcript file, got 2 arguments"}, 0},
	}
	for i := range tests {
		if tests[i].wantLines == 0 && tests[i].name != "no command" {
			tests[i].wantLines = 2
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCLI(t, noEnv, "", tt.args...)
			if got.code != exitUsage {
				t.Errorf("exit status %d, want %d", got.code, exitUsage)
			}
			if got.stdout != "" {
				t.Errorf("stdout = %q, want nothing", got.stdout)
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(got.stderr, want) {
					t.Errorf("stderr does not contain %q; got:\n%s", want, got.stderr)
				}
			}
			if n := strings.Count(got.stderr, "\n"); tt.wantLines > 0 && n != tt.wantLines {
				t.Errorf("stderr has %d lines, want %d: one error and a hint; got:\n%s", n, tt.wantLines, got.stderr)
			}
		})
	}
}

func TestIsTerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	tests := []struct {
		name string
		in   io.Reader
	}{
		{"null device", null},
		{"regular file", file},
		{"pipe", r},
		{"reader", strings.NewReader("y\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if isTerminal(tt.in) {
				t.Errorf("isTerminal = true, want false")
			}
		})
	}
}

// TestBinary runs the demo with the built command, as a user would.
func TestBinary(t *testing.T) {
	got := runBinary(t, t.TempDir(), nil, []string{"demo", "--yes"}, nil)
	if got.code != 0 {
		t.Fatalf("toolrun demo --yes: exit status %d\nstderr:\n%s", got.code, got.stderr)
	}
	if !*update {
		golden(t, "demo_yes.golden", normalize(got.stdout))
	}
}

// TestBinaryDoesNotLinkTesting checks that the command, which links
// toolruntest for its offline demo and scripts, does not link package
// testing through it, or through any package of this repository. The
// Temporal SDK's internal package (for "toolrun serve --temporal")
// imports testing for its test suite's types; testing registers no flag
// and runs nothing unless a test binary calls it, so that import changes
// nothing the command does, and it is the one allowed.
func TestBinaryDoesNotLinkTesting(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{"go.temporal.io/sdk/internal": true}
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || allowed[fields[0]] {
			continue
		}
		if slices.Contains(fields[1:], "testing") {
			t.Errorf("cmd/toolrun links package testing through %s", fields[0])
		}
	}
}
