package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// editSaved rewrites the saved run in state with edit applied to its JSON
// object, as someone who hands over a state file could.
func editSaved(t *testing.T, state string, edit func(m map[string]any)) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(mustRead(t, state), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestResumeStateIsData edits a saved run's tools.mcp to a command that
// leaves a marker file, and its transcript and log to files of the person
// who resumes it. A resume starts the command and opens the files only
// with --tools-from-state, after printing them; otherwise it refuses
// before anything starts (--approve deny does not change that), or runs
// with the tools of its own command line.
func TestResumeStateIsData(t *testing.T) {
	_, crash := binaries(t)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantMarker bool
		wantStderr []string
		wantStdout []string
		notStdout  []string
		approve    string   // the saved run's approve, if set
		always     []string // the tools the saved run approves always
	}{
		{
			name:     "no flags",
			args:     []string{"--approve", "deny"},
			wantCode: exitUsage,
			wantStderr: []string{
				"toolrun resume: the saved run names the tools: --mcp 'tracker=sh -c ",
				"toolrun resume: none of them is started: a resume runs only the tools of its own flags; give these flags (after reading them), or --tools-from-state to start them as saved, if you trust the file\n",
			},
		},
		{
			name:     "own tools",
			args:     []string{"--approve", "auto", "--mcp", "tracker=" + crash},
			wantCode: 0,
			wantStderr: []string{
				"toolrun resume: not appending to the transcript ",
				" the saved run names: a resume opens them only with --tools-from-state\n",
			},
			wantStdout: []string{"  ← tracker__echo (", "stopped: end_turn after 2 turns, 1 tool call: 1 ran\n"},
		},
		{
			name:       "--tools-from-state",
			args:       []string{"--approve", "auto", "--tools-from-state"},
			wantCode:   0,
			wantMarker: true,
			wantStderr: []string{"toolrun resume: with what the saved run names (--tools-from-state): the tools: --mcp 'tracker=sh -c "},
			wantStdout: []string{"  ← tracker__echo (", "stopped: end_turn after 2 turns, 1 tool call: 1 ran\n"},
		},
		{
			name:     "own tools, saved auto not taken",
			args:     []string{"--mcp", "tracker=" + crash},
			approve:  "auto",
			wantCode: 7,
			wantStderr: []string{
				"toolrun resume: the saved run approves every call (--approve auto); this resume asks instead: give --approve auto, or --tools-from-state, to approve them as saved\n",
				"toolrun resume: no terminal to ask for approval of toolu_01 (tracker__echo)",
			},
			notStdout: []string{"← tracker__echo"},
		},
		{
			name:     "own tools, saved always not taken",
			args:     []string{"--mcp", "tracker=" + crash},
			always:   []string{"tracker__echo"},
			wantCode: 7,
			wantStderr: []string{
				"toolrun resume: the saved run approves every call of tracker__echo (always); this resume asks about them too: give --tools-from-state to approve them as saved\n",
				"toolrun resume: no terminal to ask for approval of toolu_01 (tracker__echo)",
			},
			notStdout: []string{"← tracker__echo"},
		},
		{
			name:     "both",
			args:     []string{"--tools-from-state", "--mcp", "tracker=" + crash},
			wantCode: exitUsage,
			wantStderr: []string{
				"toolrun resume: --tools-from-state and the tool flags exclude each other: give the tools one way\n",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			state, _ := suspended(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
			marker := filepath.Join(dir, "marker")
			victim := filepath.Join(dir, "victim.txt")
			if err := os.WriteFile(victim, []byte("mine\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			victimLog := filepath.Join(dir, "victim.log")
			editSaved(t, state, func(m map[string]any) {
				m["tools"] = map[string]any{"mcp": []string{"tracker=sh -c 'touch " + marker + "; exec " + crash + "'"}}
				m["record"] = victim
				m["log"] = victimLog
				if tt.approve != "" {
					m["approve"] = tt.approve
				}
				if tt.always != nil {
					m["state"].(map[string]any)["always_allow"] = tt.always
				}
			})
			edited := mustRead(t, state)
			got, _ := bin{dir: dir, args: append(append([]string{"resume"}, tt.args...), state)}.run(t)
			if got.code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stdout:\n%s\nstderr:\n%s", got.code, tt.wantCode, got.stdout, got.stderr)
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(got.stderr, want) {
					t.Errorf("stderr does not contain %q; got:\n%s", want, got.stderr)
				}
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(got.stdout, want) {
					t.Errorf("stdout does not contain %q; got:\n%s", want, got.stdout)
				}
			}
			for _, bad := range tt.notStdout {
				if strings.Contains(got.stdout, bad) {
					t.Errorf("stdout contains %q; got:\n%s", bad, got.stdout)
				}
			}
			_, err := os.Stat(marker)
			if ran := err == nil; ran != tt.wantMarker {
				t.Errorf("the state's command ran: %v, want %v", ran, tt.wantMarker)
			}
			if !tt.wantMarker {
				if b := mustRead(t, victim); string(b) != "mine\n" {
					t.Errorf("the transcript the state names was written without --tools-from-state: %q", b)
				}
				if _, err := os.Stat(victimLog); err == nil {
					t.Errorf("the log the state names was created without --tools-from-state")
				}
			} else if b := mustRead(t, victim); len(b) <= len("mine\n") {
				t.Errorf("--tools-from-state did not append to the transcript the state names")
			}
			if tt.wantCode == exitUsage {
				if b := mustRead(t, state); !bytes.Equal(b, edited) {
					t.Errorf("a refused resume changed the file:\n%s", b)
				}
			}
		})
	}
}

// TestResumeThroughSymlink resumes a saved run through a symbolic link to
// it: the saves go to the file the link leads to, the link stays a link,
// and a resume of the file by its own name finds the run finished and runs
// nothing.
func TestResumeThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	state, rec := suspended(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(state, link); err != nil {
		t.Fatal(err)
	}
	got, _ := bin{dir: dir, args: []string{"resume", "--tools-from-state", "--allow", "toolu_01", link}}.run(t)
	if got.code != 0 {
		t.Fatalf("resume through the link: exit status %d, want 0; stderr:\n%s", got.code, got.stderr)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link is no longer a symbolic link (%v, %v)", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".link.json.lock")); err == nil {
		t.Errorf("a lock file was made beside the link, not the file")
	}
	got, _ = bin{dir: dir, args: []string{"resume", "--tools-from-state", "--allow", "toolu_01", state}}.run(t)
	if got.code != exitError || !strings.Contains(got.stderr, "has finished") {
		t.Errorf("resume of the file after the link's: exit status %d, want %d and the run finished; stderr:\n%s", got.code, exitError, got.stderr)
	}
	if n := countStarted(mustRead(t, rec), "toolu_01"); n != 1 {
		t.Errorf("the transcript shows the call started %d times, want 1", n)
	}
}

// TestResumeHardLinks resumes two hard links of one saved run at once:
// each would take the lock of its own name and replace its own name as it
// saves, so both are refused, the file stays as it was and the call never
// runs.
func TestResumeHardLinks(t *testing.T) {
	dir := t.TempDir()
	state, rec := suspended(t, dir, toolUseReply("Waiting on the tracker.", "tracker__hang"), textReply("Done."))
	other := filepath.Join(dir, "other.json")
	if err := os.Link(state, other); err != nil {
		t.Fatal(err)
	}
	before := mustRead(t, state)
	var second result
	first, _ := bin{dir: dir, args: []string{"resume", "--tools-from-state", "--allow", "toolu_01", state}, during: func(*os.Process) {
		second, _ = bin{dir: dir, args: []string{"resume", "--tools-from-state", "--allow", "toolu_01", other}}.run(t)
	}}.run(t)
	for _, r := range []struct {
		name string
		got  result
	}{{state, first}, {other, second}} {
		if r.got.code != exitError || !strings.Contains(r.got.stderr, "toolrun resume: "+r.name+" has other names (hard links): 2 names of one file;") {
			t.Errorf("resume of %s: exit status %d, want %d and the hard links named; stderr:\n%s", r.name, r.got.code, exitError, r.got.stderr)
		}
	}
	if n := countStarted(mustRead(t, rec), "toolu_01"); n != 0 {
		t.Errorf("the transcript shows the call started %d times, want 0", n)
	}
	if after := mustRead(t, other); !bytes.Equal(after, before) {
		t.Errorf("the file changed")
	}
}

// TestResumeShowsOnlyItsCalls suspends a turn whose file tool ran and
// whose MCP call awaits approval, then resumes it: the resume shows and
// counts the call it runs, not again the one that ran before.
func TestResumeShowsOnlyItsCalls(t *testing.T) {
	_, crash := binaries(t)
	dir := project(t)
	script := writeScript(t, dir,
		`{"content":[{"type":"text","text":"Looking, then filing."},{"type":"tool_use","id":"toolu_01","name":"list_files","input":{}},{"type":"tool_use","id":"toolu_02","name":"tracker__echo","input":{"text":"hi"}}]}`,
		textReply("Filed."))
	state := filepath.Join(dir, "saved.json")
	got, _ := bin{dir: dir, args: []string{"run", "--script", script, "--workdir", "work", "--mcp", "tracker=" + crash, "--state", state, "file it"}}.run(t)
	if got.code != 7 || !strings.Contains(got.stdout, "  ← list_files (") {
		t.Fatalf("run: exit status %d, want 7 with list_files run; stdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
	}
	got, _ = bin{dir: dir, args: []string{"resume", "--tools-from-state", "--allow", "toolu_02", state}}.run(t)
	if got.code != 0 {
		t.Fatalf("resume: exit status %d, want 0; stderr:\n%s", got.code, got.stderr)
	}
	if strings.Contains(got.stdout, "list_files (") || strings.Contains(got.stdout, "→ list_files") {
		t.Errorf("resume shows again the call that ran before it; stdout:\n%s", got.stdout)
	}
	for _, want := range []string{"  ← tracker__echo (", "stopped: end_turn after 2 turns, 1 tool call: 1 ran\n"} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("resume: stdout does not contain %q; got:\n%s", want, got.stdout)
		}
	}
}
