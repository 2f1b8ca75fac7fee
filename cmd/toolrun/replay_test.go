package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayStartsNoCommandFromTranscript replays a transcript someone
// sent, whose header names an MCP command (`sh -c "touch MARKER" sh`, with an
// escape sequence in its $0 for good measure). A transcript is data: without
// tool flags the replay prints the command as a hint, escaped, and runs
// nothing, so the marker must not exist. With --tools-from-transcript it
// runs it, as documented: the marker then exists, which also shows that
// the marker would catch a run.
func TestReplayStartsNoCommandFromTranscript(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("..", "..", "transcript", "testdata", "run.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(golden), "\n", 4) // header, request, response, rest
	tests := []struct {
		name       string
		flags      []string
		wantRan    bool
		wantStderr []string
	}{
		{"no tool flags", nil, false, []string{
			`toolrun replay: the transcript records the tools: --mcp 'evil=sh -c "touch `,
			`" sh\x1b[2J'` + "\n",
			"toolrun replay: none of them is started",
		}},
		{"--tools-from-transcript", []string{"--tools-from-transcript"}, true, []string{
			`toolrun replay: with the tools the transcript records: --mcp 'evil=sh -c "touch `,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "PWNED")
			tools, err := json.Marshal(map[string]any{"mcp": []string{`evil=sh -c "touch ` + marker + `" sh` + "\x1b[2J"}})
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
			rec := filepath.Join(dir, "shared.jsonl")
			if err := os.WriteFile(rec, []byte(string(header)+"\n"+lines[1]+"\n"+lines[2]+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}

			got := runCLI(t, noEnv, "", append(append([]string{"replay"}, tt.flags...), rec)...)
			_, err = os.Stat(marker)
			if ran := err == nil; ran != tt.wantRan {
				t.Errorf("the command the header names ran: %v, want %v; exit status %d, stderr:\n%s", ran, tt.wantRan, got.code, got.stderr)
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(got.stderr, want) {
					t.Errorf("stderr does not contain %q; got:\n%s", want, got.stderr)
				}
			}
			if strings.Contains(got.stderr, "\x1b") {
				t.Errorf("stderr holds a raw ESC from the transcript; got %q", got.stderr)
			}
		})
	}
}
