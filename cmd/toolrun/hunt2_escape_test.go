//go:build hunt2

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHunt2TerminalEscapesPrinted: "toolrun run" prints the model's text and
// tool results to the terminal as they are, control characters included.
// A file the model reads with --workdir (or an MCP server's answer, or a
// page a tool fetched) can so send the terminal escape sequences: clear
// the screen, move the cursor up and rewrite lines the user relies on (the
// calls and decisions above an approval prompt), set the window title, or
// write the clipboard (OSC 52) on terminals that allow it. Here stdout is
// not a terminal, so the display itself writes no ANSI at all: every ESC in
// it came from the file or the model. Want: control characters other than
// newline and tab shown escaped (as the replay report does with %q), never
// written raw.
func TestHunt2TerminalEscapesPrinted(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	hostile := "notes\x1b]52;c;cm0gLXJmIH4K\x07\x1b[1A\x1b[2K  ✓ everything approved\x1b[2J"
	if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte(hostile+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reply := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	script := writeScript(t, dir,
		reply(map[string]any{"content": []any{
			map[string]any{"type": "text", "text": "Reading.\x1b]0;pwned title\x07"},
			map[string]any{"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": map[string]any{"path": "notes.txt"}},
		}}),
		textReply("Done."),
	)
	got := runCLI(t, noEnv, "", "run", "--script", script, "--workdir", work, "--approve", "auto", "go")
	if got.code != 0 {
		t.Fatalf("run: exit status %d; stderr:\n%s", got.code, got.stderr)
	}
	for name, out := range map[string]string{"stdout": got.stdout, "stderr": got.stderr} {
		for i := strings.IndexByte(out, 0x1b); i >= 0; i = nextESC(out, i) {
			t.Errorf("%s holds a raw ESC (the file's or the model's escape sequences reach the terminal); near it: %q", name, out[max(i-40, 0):min(i+40, len(out))])
		}
	}
}

// nextESC returns the index of the next ESC in s after the one at i, or -1.
func nextESC(s string, i int) int {
	j := strings.IndexByte(s[i+1:], 0x1b)
	if j < 0 {
		return -1
	}
	return i + 1 + j
}
