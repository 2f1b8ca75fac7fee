//go:build hunt2

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestHunt2ResumeTwiceRunsApprovedCallTwice: "toolrun resume state.json
// --allow ID" runs the approved call and the rest of the run, but leaves
// state.json as it was: still suspended, with the call still pending. Run
// the same command again (a retry after an interrupted or failed resume, a
// shell's history, a script that resumes on exit status 7) and the call is
// approved and run a second time. The library keeps this promise with a
// Store and its journal; the CLI uses none, and does not mark the file
// used. Want: the second resume refuses (the run went on from this file)
// or finds no call awaiting approval; the call runs once.
func TestHunt2ResumeTwiceRunsApprovedCallTwice(t *testing.T) {
	_, crash := binaries(t)
	dir := t.TempDir()
	script := writeScript(t, dir, toolUseReply("Filing it.", "tracker__echo"), textReply("Filed."))
	state := filepath.Join(dir, "saved.json")
	if got, _ := (bin{dir: dir, args: []string{"run", "--script", script, "--mcp", "tracker=" + crash, "--state", state, "file it"}}).run(t); got.code != 7 {
		t.Fatalf("run: exit status %d, want 7; stderr:\n%s", got.code, got.stderr)
	}
	const ran = "← tracker__echo"
	first, _ := bin{dir: dir, args: []string{"resume", "--allow", "toolu_01", state}}.run(t)
	if first.code != 0 || !strings.Contains(first.stdout, ran) {
		t.Fatalf("first resume: exit status %d, want 0 and the call run; stdout:\n%s\nstderr:\n%s", first.code, first.stdout, first.stderr)
	}
	second, _ := bin{dir: dir, args: []string{"resume", "--allow", "toolu_01", state}}.run(t)
	if strings.Contains(second.stdout, ran) {
		t.Errorf("second resume of the same file ran the approved call again (exit status %d); stdout:\n%s", second.code, second.stdout)
	}
}
