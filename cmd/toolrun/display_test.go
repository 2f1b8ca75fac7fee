package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
)

// visible shows the control characters of a terminal's output.
func visible(s string) string {
	return strings.NewReplacer("\x1b", "␛", "\r", "␍").Replace(s)
}

// clock is a fake clock for the display.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }
func call(id, name, input string) toolrun.ToolCall {
	return toolrun.ToolCall{ID: id, Name: name, Input: json.RawMessage(input)}
}

// TestLiveDisplay feeds a live display the events of a turn, redrawing it
// as its ticker would, and compares what the terminal receives, escape
// codes made visible, with a golden file.
func TestLiveDisplay(t *testing.T) {
	ctx := t.Context()
	var out, logOut bytes.Buffer
	clk := newClock()
	d := &display{w: &out, live: true, color: true, width: fixedWidth(60), logNote: "logged to stderr", now: clk.now, calls: map[string]*callView{}}
	tick := func(after time.Duration) {
		clk.advance(after)
		d.mu.Lock()
		d.drawStatus()
		d.mu.Unlock()
	}
	grep, mcp := call("toolu_1", "grep", `{"pattern":"TODO"}`), call("toolu_2", "tracker__fail", `{"text":"no"}`)
	msg := &anthropic.BetaMessage{Content: []anthropic.BetaContentBlockUnion{{Type: "text", Text: "Looking."}}}

	d.event(ctx, toolrun.RequestSent{Turn: 1})
	tick(1250 * time.Millisecond)
	d.event(ctx, toolrun.ResponseReceived{Turn: 1, Message: msg})
	d.event(ctx, toolrun.ToolDecided{Turn: 1, Call: grep, Decision: toolrun.Decision{}, By: toolrun.ByDefault})
	d.event(ctx, toolrun.ToolDecided{Turn: 1, Call: mcp, Decision: toolrun.Decision{}, By: toolrun.ByDefault})
	d.event(ctx, toolrun.ToolStarted{Turn: 1, Call: grep})
	clk.advance(100 * time.Millisecond)
	d.event(ctx, toolrun.ToolStarted{Turn: 1, Call: mcp})
	tick(300 * time.Millisecond)
	fmt.Fprint(d.writer(&logOut), "level=ERROR msg=\"toolrun: tool call failed\"\n")
	failed := &toolrun.ToolResult{Call: mcp, Ran: true, IsError: true, Err: errors.New("no"), Content: []toolrun.Content{toolrun.Text("no")}, Duration: 400 * time.Millisecond}
	d.event(ctx, toolrun.ToolFinished{Turn: 1, Result: failed})
	tick(2 * time.Second)
	ok := &toolrun.ToolResult{Call: grep, Ran: true, Content: []toolrun.Content{toolrun.Text("a.txt:1: TODO\nb.txt:9: TODO")}, Duration: 2400 * time.Millisecond}
	d.event(ctx, toolrun.ToolFinished{Turn: 1, Result: ok})
	d.event(ctx, toolrun.TurnFinished{Turn: 1, Message: msg, Results: []*toolrun.ToolResult{ok, failed}})
	d.event(ctx, toolrun.RequestSent{Turn: 2})
	d.event(ctx, toolrun.Delta{Turn: 2, Text: "Two "})
	tick(time.Second) // no status line while text streams
	d.event(ctx, toolrun.Delta{Turn: 2, Text: "TODOs.\n"})
	d.event(ctx, toolrun.ResponseReceived{Turn: 2, Message: msg})
	d.event(ctx, toolrun.RunStopped{Turn: 2, Result: &toolrun.Result{StopReason: toolrun.StopEndTurn}})
	d.close()
	d.summary(&toolrun.Result{StopReason: toolrun.StopEndTurn, Turns: 2, ToolCalls: 2, ToolFailures: 1,
		Usage: toolrun.Usage{InputTokens: 1200, OutputTokens: 80}})

	golden(t, "live.golden", visible(out.String()))
	if got, want := logOut.String(), "level=ERROR msg=\"toolrun: tool call failed\"\n"; got != want {
		t.Errorf("log got %q, want %q", got, want)
	}
}

// fixedWidth returns a terminal width that does not change.
func fixedWidth(n int) func() int { return func() int { return n } }

func TestStatusLine(t *testing.T) {
	clk := newClock()
	start := clk.now()
	tests := []struct {
		name    string
		width   int
		waiting bool
		tools   []string
		after   time.Duration
		want    string
	}{
		{name: "idle", width: 80},
		{name: "model", width: 80, waiting: true, after: 0, want: "turn 3  ⠋ model 0.0s"},
		{name: "spinner turns", width: 80, waiting: true, after: 1234 * time.Millisecond, want: "turn 3  ⠹ model 1.2s"},
		{name: "tools", width: 80, tools: []string{"grep", "docs__search"}, after: 5 * time.Second, want: "turn 3  ⠋ grep 5.0s  ⠋ docs__search 5.0s"},
		{name: "cut to the width", width: 24, tools: []string{"grep", "docs__search"}, after: 5 * time.Second, want: "turn 3  ⠋ grep 5.0s  ⠋…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &display{live: true, width: fixedWidth(tt.width), turn: 3}
			if tt.waiting {
				d.waiting = start
			}
			for _, name := range tt.tools {
				d.running = append(d.running, &callView{call: toolrun.ToolCall{Name: name}, started: start})
			}
			if diff := cmp.Diff(tt.want, d.status(start.Add(tt.after))); diff != "" {
				t.Errorf("status line differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTicker checks that the ticker redraws the status line on its own,
// with time made fake by testing/synctest.
func TestTicker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		d := &display{w: &out, live: true, width: fixedWidth(80), now: time.Now, calls: map[string]*callView{}}
		d.start()
		d.event(context.Background(), toolrun.RequestSent{Turn: 1})
		time.Sleep(350 * time.Millisecond)
		d.close()
		got := visible(out.String())
		for _, want := range []string{"␍␛[Kturn 1  ⠙ model 0.1s", "␍␛[Kturn 1  ⠹ model 0.2s", "␍␛[Kturn 1  ⠸ model 0.3s"} {
			if !strings.Contains(got, want) {
				t.Errorf("output does not contain %q; got:\n%s", want, got)
			}
		}
		if !strings.HasSuffix(got, "␍␛[K") {
			t.Errorf("output ends %q, want the status line cleared", got[max(0, len(got)-20):])
		}
	})
}

// TestDisplayCompaction: a compaction's request and response are not a
// turn: the display says the history is being compacted, and neither
// starts a turn nor shows the summary as Claude's reply.
func TestDisplayCompaction(t *testing.T) {
	ctx := t.Context()
	var out bytes.Buffer
	d := &display{w: &out, now: newClock().now, calls: map[string]*callView{}}
	summary := &anthropic.BetaMessage{Content: []anthropic.BetaContentBlockUnion{{Type: "text", Text: "Summary of it all."}}}
	reply := &anthropic.BetaMessage{Content: []anthropic.BetaContentBlockUnion{{Type: "text", Text: "Done."}}}
	d.event(ctx, toolrun.RequestSent{Turn: 2, Attempt: 1, Compaction: true})
	d.event(ctx, toolrun.ResponseReceived{Turn: 2, Message: summary, Compaction: true})
	d.event(ctx, toolrun.RequestSent{Turn: 2, Attempt: 1})
	d.event(ctx, toolrun.ResponseReceived{Turn: 2, Message: reply})
	got := out.String()
	if strings.Contains(got, "Summary of it all.") || strings.Count(got, "turn 2") != 1 || !strings.Contains(got, "compacting the history") || !strings.Contains(got, "Done.") {
		t.Errorf("output:\n%s\nwant one turn 2, the compaction noted, its summary not shown, the reply shown", got)
	}
}

func TestNewDisplay(t *testing.T) {
	tests := []struct {
		name      string
		terminal  bool
		env       map[string]string
		wantLive  bool
		wantColor bool
		size      int // the width the terminal reports; 0: unknown
		wantWidth int
	}{
		{name: "no terminal", env: map[string]string{}},
		{name: "terminal", terminal: true, env: map[string]string{}, wantLive: true, wantColor: true, wantWidth: 80},
		{name: "NO_COLOR", terminal: true, env: map[string]string{"NO_COLOR": "1", "COLUMNS": "120"}, wantLive: true, wantWidth: 120},
		{name: "the terminal's size before COLUMNS", terminal: true, size: 50, env: map[string]string{"COLUMNS": "120"}, wantLive: true, wantColor: true, wantWidth: 50},
		{name: "dumb terminal", terminal: true, env: map[string]string{"TERM": "dumb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cli{stdout: &bytes.Buffer{}, getenv: env(tt.env), stdoutTerminal: tt.terminal,
				terminalWidth: func(io.Writer) int { return tt.size }}
			d := c.newDisplay("")
			width := 0
			if d.width != nil {
				width = d.width()
			}
			if d.live != tt.wantLive || d.color != tt.wantColor || width != tt.wantWidth {
				t.Errorf("live %v, color %v, width %d; want %v, %v, %d", d.live, d.color, width, tt.wantLive, tt.wantColor, tt.wantWidth)
			}
		})
	}
}

// TestDisplaySummary feeds a display the events of runs that end in ways
// its summary must count and word right: a call decided and interrupted
// before its result, a denial (shown once, as it is decided), and one of
// everything (singular nouns).
func TestDisplaySummary(t *testing.T) {
	ctx := t.Context()
	echo := call("toolu_1", "tracker__echo", `{"text":"hi"}`)
	denied := &toolrun.ToolResult{Call: echo, IsError: true, Err: fmt.Errorf("tool call denied: not today: %w", toolrun.ErrDenied), Content: []toolrun.Content{toolrun.Text("tool call denied: not today")}}
	tests := []struct {
		name    string
		events  []toolrun.Event
		res     *toolrun.Result
		want    []string
		notWant []string
	}{
		{
			name: "interrupted",
			events: []toolrun.Event{
				toolrun.RequestSent{Turn: 1},
				toolrun.ToolDecided{Turn: 1, Call: echo, Decision: toolrun.Decision{}, By: "approval"},
				toolrun.ToolStarted{Turn: 1, Call: echo},
				toolrun.RunStopped{Turn: 1, Result: &toolrun.Result{StopReason: toolrun.StopCanceled}},
			},
			res:  &toolrun.Result{StopReason: toolrun.StopCanceled, Turns: 1},
			want: []string{"stopped: canceled after 1 turn, 1 tool call: 1 interrupted\n"},
		},
		{
			name: "denied by a policy",
			events: []toolrun.Event{
				toolrun.RequestSent{Turn: 1},
				toolrun.ToolDecided{Turn: 1, Call: echo, Decision: policy.Deny("not today"), By: "policy"},
				toolrun.TurnFinished{Turn: 1, Results: []*toolrun.ToolResult{denied}},
			},
			res:     &toolrun.Result{StopReason: toolrun.StopEndTurn, Turns: 2},
			want:    []string{"  ✗ tracker__echo denied by policy: not today\n", "stopped: end_turn after 2 turns, 1 tool call: 1 denied\n"},
			notWant: []string{"not run"},
		},
		{
			name:   "one of each",
			events: []toolrun.Event{toolrun.RequestSent{Turn: 1}},
			res:    &toolrun.Result{StopReason: toolrun.StopEndTurn, Turns: 1, Usage: toolrun.Usage{InputTokens: 1, OutputTokens: 1}},
			want:   []string{"stopped: end_turn after 1 turn, 0 tool calls\n", "usage: 1 input token, 1 output token\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			d := &display{w: &out, now: newClock().now, calls: map[string]*callView{}}
			for _, e := range tt.events {
				d.event(ctx, e)
			}
			d.close()
			d.summary(tt.res)
			got := out.String()
			for _, want := range tt.want {
				if !strings.Contains(got, want) {
					t.Errorf("output does not contain %q; got:\n%s", want, got)
				}
			}
			for _, bad := range tt.notWant {
				if strings.Contains(got, bad) {
					t.Errorf("output contains %q; got:\n%s", bad, got)
				}
			}
		})
	}
}

// TestDisplayAnsweredBefore shows a resumed run's turn whose first call
// was answered in the process before: the display neither prints nor
// counts it again, and shows the call answered now.
func TestDisplayAnsweredBefore(t *testing.T) {
	ctx := t.Context()
	first, second := call("toolu_1", "list_files", `{}`), call("toolu_2", "tracker__echo", `{"text":"hi"}`)
	ran := func(c toolrun.ToolCall, text string) *toolrun.ToolResult {
		return &toolrun.ToolResult{Call: c, Ran: true, Content: []toolrun.Content{toolrun.Text(text)}}
	}
	var out bytes.Buffer
	d := &display{w: &out, now: newClock().now, calls: map[string]*callView{}}
	d.calls[first.ID] = &callView{call: first, result: ran(first, "notes.txt"), before: true}
	d.event(ctx, toolrun.ToolDecided{Turn: 1, Call: second, Decision: toolrun.Decision{}, By: "approval"})
	d.event(ctx, toolrun.ToolStarted{Turn: 1, Call: second})
	d.event(ctx, toolrun.TurnFinished{Turn: 1, Results: []*toolrun.ToolResult{ran(first, "notes.txt"), ran(second, "hi")}})
	d.close()
	d.summary(&toolrun.Result{StopReason: toolrun.StopEndTurn, Turns: 2})
	got := out.String()
	if strings.Contains(got, "list_files") || !strings.Contains(got, "  ← tracker__echo (0ms): hi\n") || !strings.Contains(got, "1 tool call: 1 ran\n") {
		t.Errorf("output:\n%s\nwant list_files neither shown nor counted, tracker__echo shown and counted", got)
	}
}

// TestStatusLineNarrowed draws the status line, narrows the terminal below
// its length (a terminal that reflows now shows it on two rows) and draws
// again: the line is cleared from where it starts, every row of it, not
// only the row the cursor is on.
func TestStatusLineNarrowed(t *testing.T) {
	var out bytes.Buffer
	clk := newClock()
	width := 60
	d := &display{w: &out, live: true, width: func() int { return width }, now: clk.now, calls: map[string]*callView{}}
	d.event(t.Context(), toolrun.RequestSent{Turn: 1})
	d.running = append(d.running, &callView{call: call("toolu_1", "docs__search_everything", `{}`), started: clk.now()})
	d.drawStatus()
	if drawn := d.statusCols; drawn < 30 {
		t.Fatalf("status line of %d columns, want more than 30 for the test", drawn)
	}
	out.Reset()
	width = 30
	clk.advance(time.Second)
	d.drawStatus()
	got := visible(out.String())
	if !strings.HasPrefix(got, visible(ansiClearSaved)) {
		t.Errorf("redraw after narrowing starts %q, want the whole old line cleared (%q)", got, visible(ansiClearSaved))
	}
	if d.statusCols >= width {
		t.Errorf("new status line of %d columns in a terminal of %d", d.statusCols, width)
	}
	out.Reset()
	d.drawStatus() // the width holds: the row alone is cleared
	if got := visible(out.String()); strings.Contains(got, visible(ansiClearSaved)) {
		t.Errorf("redraw at the same width %q clears more than the row", got)
	}
}
