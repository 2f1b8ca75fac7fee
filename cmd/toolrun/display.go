package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolrun/toolrun"
)

// display prints a run as it happens, from its events: each turn, the
// model's text, each tool call with its input, the decisions that were not
// a plain allow, and each result with how long it ran. Its event method is
// meant for [toolrun.Options.OnEvent].
//
// Without a terminal it prints plain lines, and prints results when their
// turn finishes, in the order of the calls, so that calls run in parallel
// print the same way every time. On a terminal (live) it prints each result
// as it comes, failures in red, and keeps a status line at the bottom, with
// a spinner and the time so far for the model request in flight and for
// each tool running, redrawn in place with \r and an ANSI clear-line.
//
// Everything else written to the terminal while a run goes (the log, the
// approval prompt) must go through [display.writer], so that it does not
// land in the middle of the status line.
//
// Nothing the run brings in reaches the terminal raw: the model's text, the
// tool calls, their results and the failures come from the model, from
// files and from MCP servers, and any of them may hold escape sequences
// that clear the screen, rewrite the lines above an approval prompt or
// write the clipboard. Every path out (line, textDelta, the status line,
// and the writer) passes its text through [printable] first; the display's
// own ANSI sequences are added after.
type display struct {
	mu sync.Mutex // guards all below: events, the ticker and the writers interleave

	w       io.Writer
	live    bool       // a terminal: status line, results as they come
	color   bool       // ANSI colours, when live
	width   func() int // the terminal's width now, for the status line
	logNote string     // where tool failures are logged ("logged to stderr"); empty to say nothing
	now     func() time.Time

	turn     int
	waiting  time.Time // when the request in flight went out; zero if none is
	streamed bool      // the turn's text was printed as it streamed
	calls    map[string]*callView
	order    []*callView // the calls of the turn, in the order they arrived
	running  []*callView // the calls running, in the order they started

	text struct {
		open     bool // a streamed text line is open
		index    int  // its content block
		newlines int  // newlines held back: trailing ones are dropped
	}
	statusShown bool // the status line is on the screen
	statusCols  int  // the columns of the status line shown

	// The calls answered in this process, by how they ended.
	counts struct{ ran, failed, denied, notRun int }

	stop, done chan struct{} // of the ticker
}

type callView struct {
	call    toolrun.ToolCall
	started time.Time
	result  *toolrun.ToolResult
	printed bool
	// denialShown: its denial was printed as it was decided (by a policy,
	// or by the approver), so its result does not say it again.
	denialShown bool
	// before: answered before this process (a resumed run's earlier
	// calls); not printed nor counted again.
	before bool
}

// The ANSI sequences the live display uses.
const (
	ansiClearLine = "\r\x1b[K"
	// ansiSave saves the cursor where the status line starts, and
	// ansiClearSaved goes back there and clears to the end of the screen:
	// a status line that a narrowed terminal wrapped onto more rows is
	// cleared whole, also where the terminal reflows it.
	ansiSave       = "\x1b7"
	ansiClearSaved = "\x1b8\r\x1b[J"
	ansiRed        = "\x1b[31m"
	ansiYellow     = "\x1b[33m"
	ansiBold       = "\x1b[1m"
	ansiReset      = "\x1b[0m"
)

// spinnerFrames turn once a second.
var spinnerFrames = []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")

// tickEvery is how often the live status line is redrawn.
const tickEvery = 100 * time.Millisecond

// maxResultLen bounds the length of a successful result as printed.
const maxResultLen = 100

// newDisplay returns a display that writes to w: live if w is a terminal
// (and TERM is not "dumb"), in colour unless NO_COLOR is set. logNote says
// where tool failures are logged.
func (c *cli) newDisplay(logNote string) *display {
	d := &display{w: c.stdout, logNote: logNote, now: time.Now, calls: map[string]*callView{}}
	if c.stdoutTerminal && c.getenv("TERM") != "dumb" {
		d.live = true
		d.color = c.getenv("NO_COLOR") == ""
		d.width = func() int { return c.width(c.stdout) }
	}
	return d
}

// width returns the width of the terminal w: its size as the terminal
// reports it, else $COLUMNS (which shells rarely export), else 80.
func (c *cli) width(w io.Writer) int {
	if c.terminalWidth != nil {
		if n := c.terminalWidth(w); n > 0 {
			return n
		}
	}
	if n, err := strconv.Atoi(c.getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 80
}

// start starts redrawing the status line, for a live display. Call close
// when the run is over.
func (d *display) start() {
	if !d.live {
		return
	}
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(d.done)
		t := time.NewTicker(tickEvery)
		defer t.Stop()
		for {
			select {
			case <-d.stop:
				return
			case <-t.C:
				d.mu.Lock()
				d.drawStatus()
				d.mu.Unlock()
			}
		}
	}()
}

// close stops the ticker and leaves the terminal at the start of a line.
func (d *display) close() {
	if d.stop != nil {
		close(d.stop)
		<-d.done
		d.stop = nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clearStatus()
	d.endText()
}

// writer returns a writer to w that takes turns with the display: on a
// live display, the status line is cleared before each write and drawn
// again after it.
func (d *display) writer(w io.Writer) io.Writer { return displayWriter{d, w} }

type displayWriter struct {
	d *display
	w io.Writer
}

// Write writes p, through printable: the log and the approval prompt
// write whole lines (slog writes one record a Write), so no character is
// cut in two.
func (x displayWriter) Write(p []byte) (int, error) {
	x.d.mu.Lock()
	defer x.d.mu.Unlock()
	if x.d.live {
		x.d.clearStatus()
		x.d.endText()
		defer x.d.drawStatus()
	}
	if _, err := io.WriteString(x.w, printable(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (d *display) event(_ context.Context, e toolrun.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch e := e.(type) {
	case toolrun.RequestSent:
		if e.Compaction { // not a turn: its summary is not Claude's reply
			d.line("  … compacting the history")
			break
		}
		if e.Attempt > 1 {
			d.colorLine(ansiYellow, fmt.Sprintf("  ↻ the response stream failed; asking again (attempt %d)", e.Attempt))
		}
		if e.Turn != d.turn { // a request asked again keeps its turn
			d.turn, d.streamed, d.order = e.Turn, false, nil
			d.line("")
			d.colorLine(ansiBold, fmt.Sprintf("turn %d", e.Turn))
		}
		d.waiting = d.now()
	case toolrun.Delta:
		if e.Text != "" {
			d.streamed = true
			d.textDelta(e.Index, e.Text)
		}
	case toolrun.ResponseReceived:
		if e.Compaction {
			break
		}
		d.waiting = time.Time{}
		d.endText()
		if !d.streamed {
			for _, b := range e.Message.Content {
				if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
					d.block("  claude: ", b.Text, "")
				}
			}
		}
	case toolrun.ToolDecided:
		v := d.view(e.Call)
		// A denial is printed as it is decided: below, or by the approver.
		v.denialShown = e.Decision.Kind == toolrun.Deny
		switch {
		case e.By == "approval":
			// The approver has printed it as it was given.
		case e.Decision.Kind == toolrun.Defer:
			d.colorLine(ansiYellow, fmt.Sprintf("  ? %s needs approval: %s", e.Call.Name, e.Decision.Reason))
		case e.Decision.Kind == toolrun.Deny:
			d.colorLine(ansiRed, fmt.Sprintf("  ✗ %s denied by %s: %s", e.Call.Name, e.By, e.Decision.Reason))
		case e.Decision.Kind == toolrun.Skip:
			d.line(fmt.Sprintf("  - %s skipped by %s", e.Call.Name, e.By))
		case e.By == "always":
			d.line(fmt.Sprintf("  ✓ %s allowed: approved for the rest of the run", e.Call.Name))
		}
	case toolrun.ToolStarted:
		v := d.view(e.Call)
		v.started = d.now()
		d.running = append(d.running, v)
	case toolrun.ToolFinished:
		v := d.view(e.Result.Call)
		v.result = e.Result
		for i, r := range d.running {
			if r == v {
				d.running = append(d.running[:i], d.running[i+1:]...)
				break
			}
		}
		if d.live {
			d.result(v)
		}
	case toolrun.TurnFinished:
		for _, res := range e.Results {
			v := d.view(res.Call)
			v.result = res
			d.result(v)
		}
	case toolrun.RunStopped:
		// A run that stops with calls answered in a turn it did not
		// finish (awaiting approval, say) shows their results now.
		for _, v := range d.order {
			d.result(v)
		}
		d.waiting, d.running = time.Time{}, nil
	}
	d.drawStatus()
}

// view returns the view of call, making it and printing the call if it is new.
func (d *display) view(call toolrun.ToolCall) *callView {
	v, ok := d.calls[call.ID]
	if !ok {
		v = &callView{call: call}
		d.calls[call.ID] = v
		d.order = append(d.order, v)
		d.line(fmt.Sprintf("  → %s %s", call.Name, call.Input))
	}
	return v
}

// result prints the result of v, once.
func (d *display) result(v *callView) {
	res := v.result
	if res == nil || v.printed || v.before {
		return
	}
	v.printed = true
	switch {
	case !res.IsError:
		d.counts.ran++
	case errors.Is(res.Err, toolrun.ErrDenied):
		d.counts.denied++
	case errors.Is(res.Err, toolrun.ErrNotRun):
		d.counts.notRun++
	default:
		d.counts.failed++
	}
	var notes []string
	if res.Ran {
		notes = append(notes, formatDuration(res.Duration))
	}
	text := resultText(res.Content)
	switch {
	case !res.IsError:
		d.line(fmt.Sprintf("  ← %s%s: %s", res.Call.Name, parens(notes), shorten(text)))
	case errors.Is(res.Err, toolrun.ErrDenied) && v.denialShown:
		// Shown once, as it was decided.
	case errors.Is(res.Err, toolrun.ErrDenied), errors.Is(res.Err, toolrun.ErrNotRun):
		d.block(fmt.Sprintf("  ✗ %s not run: ", res.Call.Name), text, ansiRed)
	default:
		if d.logNote != "" {
			notes = append(notes, d.logNote)
		}
		d.block(fmt.Sprintf("  ✗ %s failed%s: ", res.Call.Name, parens(notes)), text, ansiRed)
	}
}

func parens(notes []string) string {
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, ", ") + ")"
}

// formatDuration rounds d for a person: milliseconds under a second, else
// tenths of seconds.
func formatDuration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// paint returns s in colour, if the display has colours.
func (d *display) paint(color, s string) string {
	if !d.color || color == "" {
		return s
	}
	return color + s + ansiReset
}

// line prints s as a line of its own, below any open text and above the
// status line, through printable.
func (d *display) line(s string) { d.colorLine("", s) }

// colorLine prints s as line does, in color if given (and the display has
// colours): printable first, so the only escape sequences are the
// display's own.
func (d *display) colorLine(color, s string) {
	d.clearStatus()
	d.endText()
	fmt.Fprintln(d.w, d.paint(color, printable(s)))
}

// block prints text after prefix, with its further lines indented under
// it, in color if given.
func (d *display) block(prefix, text, color string) {
	d.colorLine(color, prefix+strings.ReplaceAll(strings.TrimSpace(printable(text)), "\n", "\n      "))
}

// textDelta prints a piece of streamed text, as block would print the
// whole: on a "claude:" line, without leading or trailing blank space,
// further lines indented.
func (d *display) textDelta(index int, s string) {
	if d.text.open && d.text.index != index {
		d.endText()
	}
	if !d.text.open {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return
		}
		d.clearStatus()
		fmt.Fprint(d.w, "  claude: ")
		d.text.open, d.text.index, d.text.newlines = true, index, 0
	}
	s = printable(s)
	body := strings.TrimRight(s, "\n")
	trailing := len(s) - len(body)
	if body == "" {
		d.text.newlines += trailing
		return
	}
	fmt.Fprint(d.w, strings.Repeat("\n      ", d.text.newlines)+strings.ReplaceAll(body, "\n", "\n      "))
	d.text.newlines = trailing
}

// endText ends the open text line, if there is one.
func (d *display) endText() {
	if d.text.open {
		fmt.Fprintln(d.w)
		d.text.open = false
	}
}

// clearStatus erases the status line, if it is shown: the row it is on,
// or, if the terminal has narrowed since and the line no longer fits in
// one row, every row from where it starts.
func (d *display) clearStatus() {
	if !d.statusShown {
		return
	}
	if d.statusCols >= d.termWidth() {
		fmt.Fprint(d.w, ansiClearSaved)
	} else {
		fmt.Fprint(d.w, ansiClearLine)
	}
	d.statusShown = false
}

// termWidth returns the terminal's width now, asked anew each time: the
// window may have been resized.
func (d *display) termWidth() int {
	if d.width != nil {
		return d.width()
	}
	return 80
}

// drawStatus draws the status line of a live display, in place of the
// last one, unless a text line is open or nothing is going on.
func (d *display) drawStatus() {
	if !d.live || d.text.open {
		return
	}
	s := d.status(d.now())
	if s == "" {
		d.clearStatus()
		return
	}
	if d.statusShown && d.statusCols >= d.termWidth() {
		d.clearStatus()
	}
	fmt.Fprint(d.w, "\r"+ansiSave+ansiClearLine+s)
	d.statusShown, d.statusCols = true, utf8.RuneCountInString(s)
}

// status returns the status line at now: the turn, then a spinner and the
// time so far for the request in flight and for each call running, cut to
// the terminal's width. It is empty when nothing is going on.
func (d *display) status(now time.Time) string {
	var parts []string
	item := func(since time.Time, what string) {
		el := max(now.Sub(since), 0)
		frame := spinnerFrames[int(el/tickEvery)%len(spinnerFrames)]
		parts = append(parts, fmt.Sprintf("%c %s %.1fs", frame, what, el.Seconds()))
	}
	if !d.waiting.IsZero() {
		item(d.waiting, "model")
	}
	for _, v := range d.running {
		item(v.started, printable(v.call.Name))
	}
	if len(parts) == 0 {
		return ""
	}
	s := fmt.Sprintf("turn %d  %s", d.turn, strings.Join(parts, "  "))
	// One column short of the width: a line that fills it would wrap on
	// some terminals, and the next redraw would leave it behind.
	width := d.termWidth()
	if r := []rune(s); len(r) > width-1 {
		s = string(r[:max(width-2, 0)]) + "…"
	}
	return s
}

// summary prints how the run ended and what it used.
func (d *display) summary(res *toolrun.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if res == nil {
		return
	}
	stopped := fmt.Sprintf("stopped: %s after %s, %s", res.StopReason, plural(res.Turns, "turn", "turns"), d.callCounts(res.Pending))
	color := ""
	if res.StopReason != toolrun.StopEndTurn {
		color = ansiRed
	}
	d.line("")
	d.colorLine(color, stopped)
	if res.Detail != "" {
		d.line("  " + res.Detail)
	}
	u := res.Usage
	usage := fmt.Sprintf("usage: %s, %s", plural(int(u.InputTokens), "input token", "input tokens"), plural(int(u.OutputTokens), "output token", "output tokens"))
	if u.CacheReadInputTokens > 0 || u.CacheCreationInputTokens > 0 {
		usage += fmt.Sprintf(", %d read from the cache, %d written to it", u.CacheReadInputTokens, u.CacheCreationInputTokens)
	}
	if res.CostUSD > 0 {
		usage += fmt.Sprintf("; about $%.4f", res.CostUSD)
	}
	d.line(usage)
}

// callCounts says how the calls of this process ended, how many were
// interrupted (decided or started, and stopped before their result) and
// how many await approval (pending): "3 tool calls: 1 ran, 1 failed, 1
// denied".
func (d *display) callCounts(pending []toolrun.PendingCall) string {
	c := d.counts
	awaiting := len(pending)
	interrupted := 0
	for _, v := range d.calls {
		if v.result == nil && !v.before && !slices.ContainsFunc(pending, func(p toolrun.PendingCall) bool { return p.Call.ID == v.call.ID }) {
			interrupted++
		}
	}
	total := c.ran + c.failed + c.denied + c.notRun + interrupted + awaiting
	s := plural(total, "tool call", "tool calls")
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{c.ran, "ran"}, {c.failed, "failed"}, {c.denied, "denied"}, {c.notRun, "not run"}, {interrupted, "interrupted"}, {awaiting, "awaiting approval"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	return s
}

// answeredBefore marks the calls of st that have their result as answered
// before this process: a resumed run's display neither prints them nor
// counts them again.
func (d *display) answeredBefore(st *toolrun.State) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, call := range st.Calls() {
		if res, ok := st.CallResult(call.ID); ok {
			d.calls[call.ID] = &callView{call: call, result: res, before: true}
		}
	}
}

// plural returns n and the noun, singular for one.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// resultText returns the text of a result's content, with a placeholder for
// each block that is not text.
func resultText(content []toolrun.Content) string {
	var parts []string
	for _, c := range content {
		switch {
		case c.OfText != nil:
			parts = append(parts, c.OfText.Text)
		case c.OfImage != nil:
			parts = append(parts, "[image]")
		case c.OfDocument != nil:
			parts = append(parts, "[document]")
		default:
			parts = append(parts, "[content]")
		}
	}
	return strings.Join(parts, " ")
}

// shorten returns s on one line, cut to about maxResultLen characters:
// its first line, with the count of the others.
func shorten(s string) string {
	first, rest, multi := strings.Cut(strings.TrimSpace(s), "\n")
	more := ""
	if multi {
		more = fmt.Sprintf(" … (%d lines)", strings.Count(rest, "\n")+2)
	}
	first = strings.Join(strings.Fields(first), " ")
	if r := []rune(first); len(r) > maxResultLen {
		first = string(r[:maxResultLen]) + "…"
	}
	return first + more
}

// printable returns s as it may be written to a terminal: the text as it
// is, newlines and tabs included, with each character that would act on
// the terminal instead of showing written as Go's %q writes it (ESC as
// \x1b, BEL as \a, U+009B as \u009b). It is the one filter of everything
// the CLI prints that came from outside it: the model's text, tool calls,
// tool results, errors, a transcript's or a saved run's contents.
//
// Escaped are the C0 controls but newline and tab (ESC starts the
// sequences that move the cursor, clear the screen, set the window title
// or, with OSC 52, write the clipboard), DEL, the C1 controls U+0080 to
// U+009F (U+009B is CSI on terminals that take 8-bit controls), bytes that
// are not UTF-8 (a lone 0x9B byte is CSI there too), a carriage return not
// followed by a newline (it would let a line be written over with
// another), and the bidirectional embeddings, overrides and isolates
// U+202A to U+202E and U+2066 to U+2069, which reorder what is shown (an
// approval prompt must show the input as the tool gets it). A carriage
// return before a newline is dropped: CRLF text shows as lines. All other
// Unicode text, right-to-left scripts and their marks included, is kept.
//
// A CRLF cut in two by a stream's deltas shows its CR as \r.
func printable(s string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unprintable(r, size) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
			// CRLF: the newline alone.
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unprintable(r, size):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// unprintable reports whether the rune r, of size bytes in its string,
// must not reach a terminal as it is; see printable.
func unprintable(r rune, size int) bool {
	switch {
	case r == '\n', r == '\t':
		return false
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == utf8.RuneError:
		return size == 1
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
