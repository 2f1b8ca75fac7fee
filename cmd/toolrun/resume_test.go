package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolrun/toolrun/filelock"
)

// countStarted counts the tool_started lines of call id.
func countStarted(b []byte, id string) int {
	n := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(line, []byte(`"type":"tool_started"`)) && bytes.Contains(line, []byte(`"tool_use_id":"`+id+`"`)) {
			n++
		}
	}
	return n
}

// suspended runs "toolrun run" in dir with the script's replies and the
// crash server's tools, recording to run.jsonl, until it stops awaiting
// approval (exit status 7) with the run saved in saved.json. It returns
// the state file and the transcript.
func suspended(t *testing.T, dir string, replies ...string) (state, rec string) {
	t.Helper()
	_, crash := binaries(t)
	script := writeScript(t, dir, replies...)
	state, rec = filepath.Join(dir, "saved.json"), filepath.Join(dir, "run.jsonl")
	got, _ := bin{dir: dir, args: []string{"run", "--script", script, "--mcp", "tracker=" + crash, "--tool-timeout", "20s", "--record", rec, "--state", state, "file it"}}.run(t)
	if got.code != 7 {
		t.Fatalf("run: exit status %d, want 7; stderr:\n%s", got.code, got.stderr)
	}
	return state, rec
}

// TestResumeTwiceRunsCallOnce resumes a saved run with --allow, then runs
// the same command again (a retry, a shell's history, a script that
// resumes on exit status 7): the first resume runs the call and finishes,
// and leaves the file holding the finished run, so the second says so,
// exits with status 1 and runs nothing.
func TestResumeTwiceRunsCallOnce(t *testing.T) {
	dir := t.TempDir()
	state, rec := suspended(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
	const ran = "← tracker__echo"
	first, _ := bin{dir: dir, args: []string{"resume", "--tools-from-state", "--allow", "toolu_01", state}}.run(t)
	if first.code != 0 || !strings.Contains(first.stdout, ran) {
		t.Fatalf("first resume: exit status %d, want 0 and the call run; stdout:\n%s\nstderr:\n%s", first.code, first.stdout, first.stderr)
	}
	second, _ := bin{dir: dir, args: []string{"resume", "--tools-from-state", "--allow", "toolu_01", state}}.run(t)
	if strings.Contains(second.stdout, ran) {
		t.Errorf("second resume of the same file ran the approved call again; stdout:\n%s", second.stdout)
	}
	if want := "toolrun resume: the run in " + state + " has finished (stopped: end_turn after 2 turns); there is nothing to resume\n"; second.code != exitError || second.stderr != want {
		t.Errorf("second resume: exit status %d, stderr %q; want %d, %q", second.code, second.stderr, exitError, want)
	}
	if n := countStarted(mustRead(t, rec), "toolu_01"); n != 1 {
		t.Errorf("the transcript shows the call started %d times, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(dir, ".saved.json.lock")); err == nil {
		t.Errorf("the lock file is left behind")
	}
}

// TestResumeAfterKill kills a resume (SIGKILL) while the approved call
// runs. The file holds the call as started, so the next resume goes on from
// there without running it again: the model is told it was interrupted,
// the run finishes, and the call started once in all.
func TestResumeAfterKill(t *testing.T) {
	dir := t.TempDir()
	state, rec := suspended(t, dir, toolUseReply("Waiting on the tracker.", "tracker__hang"), textReply("Done."))
	killed, _ := bin{dir: dir, args: []string{"resume", "--tools-from-state", "--allow", "toolu_01", state}, during: func(p *os.Process) {
		deadline := time.Now().Add(5 * time.Minute) // minutes: a loaded machine is slow, only a hang is this slow
		for {
			// The journal says started before the tool is called; the
			// transcript's tool_started line follows, and the tool (which
			// hangs) is running once both are written. Killing the process
			// at the first alone could leave the transcript without its
			// line, and the count below at 0.
			b, _ := os.ReadFile(state)
			r, _ := os.ReadFile(rec)
			if bytes.Contains(b, []byte(`"phase": "started"`)) && countStarted(r, "toolu_01") == 1 {
				if !bytes.Contains(b, []byte(`"kind": "allow"`)) {
					t.Errorf("the file holds the call started without its approval:\n%s", b)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Error("the file did not hold the call as started within 5 minutes: the resumed run hangs before the call")
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		p.Signal(syscall.SIGKILL)
	}}.run(t)
	if killed.code != -1 {
		t.Fatalf("first resume: exit status %d, want it killed; stderr:\n%s", killed.code, killed.stderr)
	}
	got, _ := bin{dir: dir, args: []string{"resume", "--tools-from-state", state}}.run(t)
	if got.code != 0 {
		t.Fatalf("resume after the kill: exit status %d, want 0; stdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
	}
	for _, want := range []string{"the run did not finish: it goes on from its last saved step", "  claude: Done.\n"} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("resume after the kill: stdout does not contain %q; got:\n%s", want, got.stdout)
		}
	}
	if n := countStarted(mustRead(t, rec), "toolu_01"); n != 1 {
		t.Errorf("the transcript shows the call started %d times, want 1", n)
	}
}

// TestResumeKeepsDecisions resumes a run of two pending calls with one
// decided and no terminal for the other: the run stays suspended, and the
// file keeps the decision, so the next resume asks only about the other.
func TestResumeKeepsDecisions(t *testing.T) {
	dir := t.TempDir()
	state, rec := suspended(t, dir, toolUseReply("Filing both.", "tracker__echo", "tracker__echo"), textReply("Filed."))
	got, _ := bin{dir: dir, args: []string{"resume", "--tools-from-state", "--allow", "toolu_01", state}}.run(t)
	if got.code != 7 || !strings.Contains(got.stderr, "no terminal to ask for approval of toolu_02 (tracker__echo)") {
		t.Fatalf("resume with one call decided: exit status %d, want 7 awaiting toolu_02; stderr:\n%s", got.code, got.stderr)
	}
	got, _ = bin{dir: dir, args: []string{"resume", "--tools-from-state", "--deny", "toolu_02=not twice", state}}.run(t)
	if got.code != 0 {
		t.Fatalf("second resume: exit status %d, want 0; stdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
	}
	if strings.Contains(got.stdout, "? toolu_01") || !strings.Contains(got.stdout, "stopped: end_turn after 2 turns, 2 tool calls: 1 ran, 1 denied\n") {
		t.Errorf("second resume: want toolu_01 run as approved before and toolu_02 denied; stdout:\n%s", got.stdout)
	}
	if n := countStarted(mustRead(t, rec), "toolu_01"); n != 1 {
		t.Errorf("the transcript shows toolu_01 started %d times, want 1", n)
	}
}

// TestResumeRefusedWhileAnotherRuns holds the lock of a saved run, as a
// resume in progress does: a second resume is refused before it reads the
// file or starts anything, and the file is left as it was, by whatever
// name the second gives the file: its own, a symbolic link to it, or a
// path relative to its directory.
func TestResumeRefusedWhileAnotherRuns(t *testing.T) {
	tests := []struct {
		name string
		arg  func(t *testing.T, dir, state string) string
	}{
		{"same name", func(_ *testing.T, _, state string) string { return state }},
		{"symbolic link", func(t *testing.T, dir, state string) string {
			link := filepath.Join(t.TempDir(), "link.json")
			if err := os.Symlink(state, link); err != nil {
				t.Fatal(err)
			}
			return link
		}},
		{"relative path", func(_ *testing.T, _, _ string) string { return "./sub/../saved.json" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			state, _ := suspended(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			before := mustRead(t, state)
			lock, err := filelock.TryAcquire(filepath.Join(dir, ".saved.json.lock"), 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Unlock()
			arg := tt.arg(t, dir, state)
			got, _ := bin{dir: dir, args: []string{"resume", "--tools-from-state", "--allow", "toolu_01", arg}}.run(t)
			if want := "toolrun resume: " + arg + ": another toolrun is resuming it; wait for it to finish, then resume again\n"; got.code != exitError || got.stderr != want || got.stdout != "" {
				t.Errorf("resume while locked: exit status %d, stdout %q, stderr %q; want %d, nothing, %q", got.code, got.stdout, got.stderr, exitError, want)
			}
			if after := mustRead(t, state); !bytes.Equal(after, before) {
				t.Errorf("the file changed while another resume held it")
			}
		})
	}
}

// mustRead returns the contents of the file name.
func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
