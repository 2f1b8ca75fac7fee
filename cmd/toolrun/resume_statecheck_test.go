package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// webFetch is the definition of a server tool a saved run may smuggle in.
var webFetch = map[string]any{"type": "web_fetch_20250910", "name": "web_fetch"}

// TestResumeRefusesServerToolsAnywhere edits a saved run to have the API
// run a server tool (web_fetch) from each place a State keeps tools other
// than its request params: the tools added to the run, the tool_addition
// blocks queued for the next request, a tool_addition block in its
// history, and one in the messages the turn appends. A resume with its own
// tools refuses each, as it refuses one in the params, before anything is
// sent.
func TestResumeRefusesServerToolsAnywhere(t *testing.T) {
	_, crash := binaries(t)
	addition := map[string]any{"type": "tool_addition", "tool": map[string]any{"type": "tool_definition", "definition": webFetch}}
	system := map[string]any{"role": "system", "content": []any{addition}}
	tests := []struct {
		name string
		edit func(st map[string]any)
	}{
		{"added tools", func(st map[string]any) {
			st["tools"] = map[string]any{"added": []any{webFetch}}
		}},
		{"queued addition", func(st map[string]any) {
			st["tools"] = map[string]any{"queued": []any{addition}}
		}},
		{"tool_addition in history", func(st map[string]any) {
			p := st["params"].(map[string]any)
			p["messages"] = append(p["messages"].([]any), system)
		}},
		{"tool_addition appended after the turn", func(st map[string]any) {
			st["pending"].(map[string]any)["after"] = []any{system}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			state, _ := suspended(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
			editSaved(t, state, func(m map[string]any) { tt.edit(m["state"].(map[string]any)) })
			got, _ := bin{dir: dir, args: []string{"resume", "--approve", "auto", "--mcp", "tracker=" + crash, state}}.run(t)
			if got.code != exitUsage {
				t.Errorf("exit status %d, want %d (refused); stdout:\n%s\nstderr:\n%s", got.code, exitUsage, got.stdout, got.stderr)
			}
			if want := "names tools: web_fetch_20250910 web_fetch, which the API would reach or run"; !strings.Contains(got.stderr, want) {
				t.Errorf("stderr does not contain %q; got:\n%s", want, got.stderr)
			}
		})
	}
}

// TestResumeRefusesForgedCounters edits a saved run's counters to values
// no run writes: a negative turn count under a limit would lift the limit
// by as much. The resume refuses the file before anything starts.
func TestResumeRefusesForgedCounters(t *testing.T) {
	_, crash := binaries(t)
	tests := []struct {
		key   string
		value any
	}{
		{"turns", -1000000},
		{"tool_calls", -1},
		{"max_turns", -5},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			dir := t.TempDir()
			state, _ := suspended(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
			editSaved(t, state, func(m map[string]any) { m["state"].(map[string]any)[tt.key] = tt.value })
			got, _ := bin{dir: dir, args: []string{"resume", "--mcp", "tracker=" + crash, "--deny", "toolu_01=no", state}}.run(t)
			if got.code != exitError {
				t.Errorf("exit status %d, want %d; stdout:\n%s\nstderr:\n%s", got.code, exitError, got.stdout, got.stderr)
			}
			if want := "toolrun: invalid state: " + tt.key; !strings.Contains(got.stderr, want) {
				t.Errorf("stderr does not contain %q; got:\n%s", want, got.stderr)
			}
			if strings.Contains(got.stdout, "Filed.") {
				t.Errorf("the run went on; stdout:\n%s", got.stdout)
			}
		})
	}
}

// TestResumeBoundsFarTurnLimit edits a saved run's turn limit to a million:
// a resume with its own tools makes no more requests than a run does by
// default, says so, and saves that limit.
func TestResumeBoundsFarTurnLimit(t *testing.T) {
	_, crash := binaries(t)
	dir := t.TempDir()
	state, _ := suspended(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
	editSaved(t, state, func(m map[string]any) { m["state"].(map[string]any)["max_turns"] = 1000000 })
	got, _ := bin{dir: dir, args: []string{"resume", "--mcp", "tracker=" + crash, "--deny", "toolu_01=no", state}}.run(t)
	if got.code != exitOK {
		t.Errorf("exit status %d, want 0; stderr:\n%s", got.code, got.stderr)
	}
	if want := "the saved run allows 999999 more model requests; this resume stops after 25"; !strings.Contains(got.stderr, want) {
		t.Errorf("stderr does not contain %q; got:\n%s", want, got.stderr)
	}
	var m map[string]any
	if err := json.Unmarshal(mustRead(t, state), &m); err != nil {
		t.Fatal(err)
	}
	if got := m["state"].(map[string]any)["max_turns"]; got != float64(1+25) {
		t.Errorf("the saved run's max_turns after the resume = %v, want 26", got)
	}
}

// TestResumeKeepsAdoptedContainer: a run whose response gave a container
// (the API ran code for it) keeps the container's id in its params, as
// the official runner does, and as a plain id: the file is edited to hold
// what that adoption writes (a script's replies carry no container). Its
// own file resumes: an id alone has the API run nothing the file chose.
func TestResumeKeepsAdoptedContainer(t *testing.T) {
	_, crash := binaries(t)
	dir := t.TempDir()
	state, _ := suspended(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
	editSaved(t, state, func(m map[string]any) {
		m["state"].(map[string]any)["params"].(map[string]any)["container"] = "container_01"
	})
	got, _ := bin{dir: dir, args: []string{"resume", "--mcp", "tracker=" + crash, "--deny", "toolu_01=no", state}}.run(t)
	if got.code != exitOK || !strings.Contains(got.stdout, "Filed.") {
		t.Errorf("exit status %d, want 0 and the run finished; stdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
	}
}

// TestResumeRefusesDevice resumes a name that leads to something other
// than a file: a link to /dev/zero (read, it never ends) and a named pipe
// (read, it blocks). The resume refuses each before reading it, and makes
// no lock file beside it.
func TestResumeRefusesDevice(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	zero := filepath.Join(dir, "zero.json")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{zero, fifo} {
		t.Run(filepath.Base(name), func(t *testing.T) {
			got, _ := bin{dir: dir, env: []string{"ANTHROPIC_API_KEY=k"}, args: []string{"resume", name}}.run(t)
			if got.code != exitError {
				t.Errorf("exit status %d, want %d; stderr:\n%s", got.code, exitError, got.stderr)
			}
			if want := "is not a regular file"; !strings.Contains(got.stderr, want) {
				t.Errorf("stderr does not contain %q; got:\n%s", want, got.stderr)
			}
		})
	}
	for _, lock := range []string{"/dev/.zero.lock", filepath.Join(dir, ".pipe.lock")} {
		if _, err := os.Lstat(lock); err == nil {
			t.Errorf("%s was made", lock)
			if lock == "/dev/.zero.lock" {
				os.Remove(lock)
			}
		}
	}
}
