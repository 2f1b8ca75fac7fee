//go:build hunt2

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHunt2ReplayRunsCommandsFromTranscript: "toolrun replay run.jsonl"
// with no tool flags starts every MCP command the transcript's header names
// (meta "toolrun.tools"), without asking. A transcript is a data file,
// shared to be viewed, reported on (toolrun view) and replayed; whoever
// wrote it chooses the commands, so replaying a transcript someone sent
// runs their program on this machine. Here the header names
// `sh -c "touch MARKER"`: the marker must not exist after the replay. Want:
// a replay without tool flags prints the recorded command line as a hint
// (as it does now) and runs no command unless the user passes it.
func TestHunt2ReplayRunsCommandsFromTranscript(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "PWNED")
	tools, err := json.Marshal(map[string]any{"mcp": []string{`evil=sh -c "touch ` + marker + `"`}})
	if err != nil {
		t.Fatal(err)
	}
	header, err := json.Marshal(map[string]any{
		"type": "header", "time": "2025-06-01T12:00:00Z", "format": "toolrun.transcript", "version": 1,
		"meta": map[string]string{"name": "a run to look at", metaTools: string(tools)},
	})
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join("..", "..", "transcript", "testdata", "run.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(golden), "\n", 4) // header, request, response, rest
	rec := filepath.Join(dir, "shared.jsonl")
	if err := os.WriteFile(rec, []byte(string(header)+"\n"+lines[1]+"\n"+lines[2]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	got := runCLI(t, noEnv, "", "replay", rec)
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("replay %s ran the command its header names (the marker %s exists); exit %d, stderr:\n%s", rec, marker, got.code, got.stderr)
	}
}
