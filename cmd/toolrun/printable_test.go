package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
)

// hostileText clears the screen, writes the clipboard (OSC 52), moves up a
// line to write a fake approval over it, and sets the window title.
const hostileText = "notes\x1b]52;c;cm0gLXJmIH4K\x07\x1b[1A\x1b[2K  ✓ everything approved\x1b[2J\x1b]0;pwned\x07"

// TestTerminalEscapesPrinted runs "toolrun run" whose model text and
// tool result (a file read with --workdir) carry escape sequences. Stdout
// is not a terminal here, so the display itself writes no ANSI at all:
// every ESC would be the file's or the model's. None may reach stdout or
// stderr raw; they are shown escaped, as %q writes them.
func TestTerminalEscapesPrinted(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte(hostileText+"\n"), 0o644); err != nil {
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
			map[string]any{"type": "text", "text": "Reading.\x1b]0;pwned title\x07\u009b2J"},
			map[string]any{"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": map[string]any{"path": "notes.txt"}},
		}}),
		textReply("Done."),
	)
	got := runCLI(t, noEnv, "", "run", "--script", script, "--workdir", work, "--approve", "auto", "go")
	if got.code != 0 {
		t.Fatalf("run: exit status %d; stderr:\n%s", got.code, got.stderr)
	}
	for name, out := range map[string]string{"stdout": got.stdout, "stderr": got.stderr} {
		for _, c := range []string{"\x1b", "\x07", "\u009b"} {
			if i := strings.Index(out, c); i >= 0 {
				t.Errorf("%s holds a raw %q (the file's or the model's control characters reach the terminal); near it: %q", name, c, out[max(i-40, 0):min(i+40, len(out))])
			}
		}
	}
	for _, want := range []string{
		`  claude: Reading.\x1b]0;pwned title\a\u009b2J` + "\n",
		`  ← read_file (`,
		`: 1 notes\x1b]52;c;cm0gLXJmIH4K\a\x1b[1A\x1b[2K ✓ everything approved\x1b[2J\x1b]0;pwned\a` + "\n",
	} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("stdout does not show %q escaped; got:\n%s", want, got.stdout)
		}
	}
}

// TestLiveDisplayEscapes feeds a live display (a terminal, in colour)
// hostile text in every place it shows text from outside: the model's text,
// streamed or not, a call's name and input, a denial's reason, a result, a
// failure, the log through its writer, the status line. The only escape
// sequences on the terminal are then the display's own.
func TestLiveDisplayEscapes(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	clk := newClock()
	d := &display{w: &out, live: true, color: true, width: fixedWidth(200), logNote: "logged to stderr", now: clk.now, calls: map[string]*callView{}}
	evil := call("toolu_1", "grep\x1b[2J", `{"pattern":"\u001b[1A"}`)
	evil.Input = json.RawMessage("{\"pattern\":\"\u009b1A\"}") // raw C1 in the JSON: valid JSON
	msg := &anthropic.BetaMessage{Content: []anthropic.BetaContentBlockUnion{{Type: "text", Text: "Looking." + hostileText}}}
	d.event(ctx, toolrun.RequestSent{Turn: 1})
	d.event(ctx, toolrun.ResponseReceived{Turn: 1, Message: msg})
	d.event(ctx, toolrun.ToolDecided{Turn: 1, Call: evil, Decision: policy.Defer("needs\x1b[31m approval"), By: toolrun.ByPolicy})
	d.event(ctx, toolrun.ToolStarted{Turn: 1, Call: evil})
	clk.advance(time.Second)
	d.mu.Lock()
	d.drawStatus() // the status line names the running call
	d.mu.Unlock()
	d.writer(&out).Write([]byte("level=WARN msg=" + hostileText + "\n"))
	ok := &toolrun.ToolResult{Call: evil, Ran: true, Content: []toolrun.Content{toolrun.Text(hostileText)}, Duration: time.Second}
	d.event(ctx, toolrun.ToolFinished{Turn: 1, Result: ok})
	failed := &toolrun.ToolResult{Call: call("toolu_2", "x", `{}`), Ran: true, IsError: true, Content: []toolrun.Content{toolrun.Text(hostileText)}}
	d.event(ctx, toolrun.ToolFinished{Turn: 1, Result: failed})
	d.event(ctx, toolrun.RequestSent{Turn: 2})
	d.event(ctx, toolrun.Delta{Turn: 2, Text: "Streamed " + hostileText})
	d.event(ctx, toolrun.RunStopped{Turn: 2, Result: &toolrun.Result{StopReason: toolrun.StopError, Detail: hostileText}})
	d.close()
	d.summary(&toolrun.Result{StopReason: toolrun.StopError, Detail: hostileText})

	own := strings.NewReplacer(ansiClearSaved, "", ansiSave, "", ansiClearLine, "", ansiRed, "", ansiYellow, "", ansiBold, "", ansiReset, "")
	rest := own.Replace(out.String())
	for _, c := range []string{"\x1b", "\x07", "\u009b"} {
		if i := strings.Index(rest, c); i >= 0 {
			t.Errorf("the terminal got a raw %q that is not the display's own; near it: %q", c, rest[max(i-40, 0):min(i+40, len(rest))])
		}
	}
	for _, want := range []string{`grep\x1b[2J`, `needs\x1b[31m approval`, `\u009b1A`, `✓ everything approved\x1b[2J`} {
		if !strings.Contains(rest, want) {
			t.Errorf("the terminal does not show %q escaped; got:\n%s", want, visible(out.String()))
		}
	}
}

// TestPrintable pins what printable keeps and what it escapes.
func TestPrintable(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello, world", "hello, world"},
		{"newlines and tabs", "a\n\tb\n", "a\n\tb\n"},
		{"Unicode text", "Grüße, 世界 ✓ → 🙂 שלום עולם\u200f", "Grüße, 世界 ✓ → 🙂 שלום עולם\u200f"},
		{"CSI", "a\x1b[2Jb", `a\x1b[2Jb`},
		{"OSC 52 ended by BEL", "\x1b]52;c;aGk=\x07", `\x1b]52;c;aGk=\a`},
		{"NUL, backspace, DEL", "a\x00b\bc\x7f", `a\x00b\bc\x7f`},
		{"C1 CSI", "a\u009b2Jb", `a\u009b2Jb`},
		{"C1 NEL", "a\u0085b", `a\u0085b`},
		{"lone CR", "safe\rEVIL", `safe\rEVIL`},
		{"CRLF", "one\r\ntwo\r\n", "one\ntwo\n"},
		{"CR at the end", "a\r", `a\r`},
		{"not UTF-8", "a\x9b2Jb\xff", `a\x9b2Jb\xff`},
		{"bidi override", "ls \u202egnp.exe", `ls \u202egnp.exe`},
		{"bidi isolate", "a\u2066b\u2069", `a\u2066b\u2069`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := printable(tt.in); got != tt.want {
				t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
