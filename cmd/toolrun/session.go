package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/fstools"
	"github.com/toolrun/toolrun/toolruntest"
)

// metaTools is the transcript header's key for the tool flags of a run, as
// JSON: "toolrun replay" starts the same tools from it.
const metaTools = "toolrun.tools"

// savedRunVersion is the version of the format of a saved run.
const savedRunVersion = 1

// savedRun is a run suspended by "toolrun run", as --state saves it: the
// run's state and what "toolrun resume" needs to continue it as it was set
// up (the model, the tools, the transcript, the script).
type savedRun struct {
	Version     int         `json:"toolrun_saved_run"`
	Model       string      `json:"model"`
	MaxTokens   int         `json:"max_tokens"`
	Tools       toolFlags   `json:"tools"`
	Approve     approveMode `json:"approve"`
	Stream      bool        `json:"stream,omitempty"`
	Log         string      `json:"log,omitempty"`
	ToolTimeout string      `json:"tool_timeout"`
	// Record is the transcript the run records to, "" if none.
	Record string `json:"record,omitempty"`
	// Script is the whole script of a run with --script, one reply a
	// line; a resumed run is served the replies after State.Turns.
	Script []json.RawMessage `json:"script,omitempty"`
	State  *toolrun.State    `json:"state"`
}

// session is what a run of "toolrun run" or "toolrun resume" runs with:
// its display and log, the client, the tools and the transcript.
type session struct {
	c         *cli
	cmd       string
	saved     *savedRun
	d         *display
	log       *slog.Logger
	client    anthropic.Client
	modelNote string // after the model's name, for a scripted model
	tools     []toolrun.Tool
	toolLines []string
	tf        *transcriptFile
	closers   []func()
	// journal is the file a resumed run is saved to as it goes, nil for a
	// new run or one resumed from stdin.
	journal *stateFile
}

// startSession sets up the session of the saved run, or prints why it
// cannot and returns nil and the exit status. The tool flags' workdir and
// MCP servers are opened; close closes them.
func (c *cli) startSession(ctx context.Context, cmd string, saved *savedRun, specs []mcpSpec) (*session, int) {
	s := &session{c: c, cmd: cmd, saved: saved}
	fail := func(format string, args ...any) (*session, int) {
		c.errorf(cmd, format, args...)
		s.close()
		return nil, exitError
	}
	logNote, logOut := "logged to stderr", io.Writer(c.stderr)
	if saved.Log != "" && saved.Log != "-" {
		lf, err := os.OpenFile(saved.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fail("--log: %v", err)
		}
		s.closers = append(s.closers, func() { lf.Close() })
		logNote, logOut = "logged to "+saved.Log, lf
	}
	d := c.newDisplay(logNote)
	// On a live display the failures it shows are not logged again, unless
	// --log or ANTHROPIC_LOG asks.
	shown := d.live && saved.Log == ""
	if shown {
		d.logNote = ""
	}
	if saved.Log == "" || saved.Log == "-" {
		logOut = d.writer(c.stderr)
	}
	s.d, s.log = d, c.logger(logOut, shown)

	if saved.Script != nil {
		replies, err := scriptReplies(saved.Script)
		if err != nil {
			return fail("--script: %v", err)
		}
		if saved.State != nil {
			replies = replies[min(saved.State.Turns, len(replies)):]
		}
		srv := toolruntest.New(nil, toolruntest.Script(replies...))
		s.closers = append(s.closers, srv.Close)
		s.client = srv.Client()
		s.modelNote = fmt.Sprintf(" (offline: a scripted model, %s)", plural(len(saved.Script), "reply", "replies"))
	} else {
		s.client = c.client()
	}

	if w := saved.Tools.Workdir; w != "" {
		root, err := fstools.Open(w, nil)
		if err != nil {
			return fail("--workdir: %v", err)
		}
		s.closers = append(s.closers, func() { root.Close() })
		var names []string
		for _, t := range root.Tools() {
			s.tools = append(s.tools, t)
			names = append(names, t.Name())
		}
		s.toolLines = append(s.toolLines, fmt.Sprintf("%s (read-only, in %s)", strings.Join(names, ", "), w))
	}
	mcpNote := map[approveMode]string{
		approveAsk:  "each call needs approval",
		approveAuto: "approved: --approve auto",
		approveDeny: "denied: --approve deny",
	}[saved.Approve]
	servers, serverTools, err := connectMCP(ctx, specs, saved.Tools.mcpFlags, saved.Approve.mcpConfig, s.log)
	if err != nil && ctx.Err() != nil {
		c.errorf(cmd, "MCP server %v", err)
		s.close()
		return nil, exitInterrupted
	}
	if err != nil {
		return fail("MCP server %v", err)
	}
	s.closers = append(s.closers, func() {
		for _, srv := range servers {
			srv.Close()
		}
	})
	for i, list := range serverTools {
		var names []string
		for _, t := range list {
			s.tools = append(s.tools, t)
			names = append(names, t.Name())
		}
		if len(names) == 0 {
			names = []string{"no tools"}
		}
		s.toolLines = append(s.toolLines, fmt.Sprintf("%s (MCP server %q; %s)", strings.Join(names, ", "), specs[i].name, mcpNote))
	}
	return s, exitOK
}

// close closes what the session opened, last first.
func (s *session) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// printSetup prints the tools and where the log goes.
func (s *session) printSetup() {
	c := s.c
	lines := s.toolLines
	if len(lines) == 0 {
		lines = []string{"none (give --workdir, --mcp or --mcp-url)"}
	}
	fmt.Fprintf(c.stdout, "tools: %s\n", printable(strings.Join(lines, "\n       ")))
	switch {
	case s.saved.Log != "" && s.saved.Log != "-":
		fmt.Fprintf(c.stdout, "log: warnings and tool failures go to %s\n", s.saved.Log)
	case s.d.live:
		fmt.Fprintln(c.stdout, "log: warnings go to stderr")
	default:
		fmt.Fprintln(c.stdout, "log: warnings and tool failures go to stderr")
	}
}

// record records the session's run to tf.
func (s *session) record(tf *transcriptFile) { s.tf = tf }

// options returns the runner's options.
func (s *session) options(maxTurns int) *toolrun.Options {
	timeout, _ := time.ParseDuration(s.saved.ToolTimeout)
	opts := &toolrun.Options{
		Logger:   s.log,
		MaxTurns: maxTurns,
		Stream:   s.saved.Stream,
		Timeouts: toolrun.Timeouts{Tool: timeout}, // zero: no limit
		OnEvent:  s.d.event,
	}
	if s.tf != nil {
		rec := s.tf.rec
		opts.OnEvent = func(ctx context.Context, e toolrun.Event) {
			rec.Observe(ctx, e)
			s.d.event(ctx, e)
		}
	}
	return opts
}

// finish runs r to its end with the approver a, prints the summary, saves
// the run to stateFile (or a new file if "") if it stops awaiting
// approval, and returns the exit status.
func (s *session) finish(ctx context.Context, r *toolrun.Runner, a approver, stateFile string) int {
	c := s.c
	s.d.start()
	res, err := runWithApproval(ctx, r, a)
	s.d.close()
	s.d.summary(res)
	switch {
	case ctx.Err() != nil:
		return s.interrupted(r, stateFile)
	case res == nil:
		c.errorf(s.cmd, "%v", err)
		return exitError
	case err != nil && res.Detail != "" && strings.HasSuffix(err.Error(), res.Detail):
		// The error is the stop reason's sentinel and the detail: the
		// detail alone says it ("turn limit of 3 reached", not "turn limit
		// reached: turn limit of 3 reached").
		c.errorf(s.cmd, "%s", res.Detail)
	case err != nil:
		c.errorf(s.cmd, "%v", err)
	case res.StopReason == toolrun.StopError && res.Err != nil:
		c.errorf(s.cmd, "%v", res.Err)
	case res.StopReason == toolrun.StopAwaitingApproval:
		return s.suspend(ctx, r, res.Pending, a == nil, stateFile)
	}
	return exitCode(res.StopReason)
}

// suspend saves a run that awaits approval of the calls pending to
// stateFile, or to a new file if "", and says how to continue it.
// noTerminal says why nobody was asked.
func (s *session) suspend(ctx context.Context, r *toolrun.Runner, pending []toolrun.PendingCall, noTerminal bool, stateFile string) int {
	c := s.c
	saved, err := s.save(r, stateFile)
	if err != nil {
		c.errorf(s.cmd, "saving the run: %v", err)
		return exitError
	}
	var ids []string
	for _, p := range pending {
		ids = append(ids, fmt.Sprintf("%s (%s)", p.Call.ID, p.Call.Name))
	}
	why := "awaiting approval of"
	if noTerminal {
		why = "no terminal to ask for approval of"
	}
	c.errorf(s.cmd, "%s %s; the run is saved in %s", why, strings.Join(ids, ", "), displayName(saved))
	s.printContinue(saved)
	return exitCode(toolrun.StopAwaitingApproval)
}

// interrupted saves a run stopped by a signal (Ctrl-C at the prompt, or
// SIGTERM while a call or a request is under way) to stateFile, or to a
// new file if "", and says how to continue it: a signal stops the run, it
// does not lose it. A call that had started is not run again by the
// resume (the model is told it was interrupted).
func (s *session) interrupted(r *toolrun.Runner, stateFile string) int {
	c := s.c
	saved, err := s.save(r, stateFile)
	if err != nil {
		c.errorf(s.cmd, "interrupted, and the run could not be saved: %v", err)
		return exitInterrupted
	}
	c.errorf(s.cmd, "interrupted; the run is saved in %s", displayName(saved))
	s.printContinue(saved)
	return exitInterrupted
}

// save saves the run of r to stateFile, or to a new file if "", and
// returns the file's name. A resumed run with a journal is saved there: by
// the runner as it went, or here, with the decisions given, if it never
// ran.
func (s *session) save(r *toolrun.Runner, stateFile string) (string, error) {
	c := s.c
	s.saved.State = r.State()
	b, err := json.MarshalIndent(s.saved, "", "  ")
	if err != nil {
		return "", err
	}
	b = append(b, '\n')
	switch {
	case s.journal != nil && stateFile == s.journal.name:
		if st := s.saved.State; st.Version == s.journal.opened {
			// The runner never stepped, so never saved it: saved here,
			// with the decisions given, as the next version.
			prev := st.Version
			st.Version++
			// Saved whatever the run's context says: a signal stops the
			// run, not its save.
			err = s.journal.Save(context.Background(), s.journal.name, st, prev)
		}
	case stateFile == "-":
		_, err = c.realStdout().Write(b)
	case stateFile == "":
		var f *os.File
		f, err = os.CreateTemp(c.tempDir, "toolrun-state-"+time.Now().UTC().Format("20060102T150405")+"-*.json")
		if err == nil {
			stateFile = f.Name()
			_, err = f.Write(b)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	default:
		err = writeFileAtomic(stateFile, b)
	}
	return stateFile, err
}

// printContinue prints the command that continues the run saved in
// stateFile.
func (s *session) printContinue(stateFile string) {
	resumeArg := stateFile
	if stateFile == "-" {
		resumeArg = "FILE"
	}
	fmt.Fprintf(s.c.stderr, "continue it with: %s resume %s%s (at a terminal, or with --allow ID, --deny ID=reason, --approve auto or --approve deny)\n", selfCommand(), s.resumeFlags(), shellQuote(resumeArg))
}

// resumeFlags returns the flags that resume the saved run with its tools,
// transcript and log: --tools-from-state if it names any, as the person
// who made the run trusts what it wrote.
func (s *session) resumeFlags() string {
	if sv := s.saved; sv.Tools.given() || (sv.Record != "" && sv.Record != "-") || (sv.Log != "" && sv.Log != "-") {
		return "--tools-from-state "
	}
	return ""
}

// realStdout returns the standard output, also when the display moved to
// stderr.
func (c *cli) realStdout() io.Writer {
	if c.out != nil {
		return c.out
	}
	return c.stdout
}

// displayName names a file for a message: "-" is stdout.
func displayName(name string) string {
	if name == "-" {
		return "standard output"
	}
	return name
}

// shellQuote quotes s for a POSIX shell, if it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// writeFileAtomic writes b to name through a temporary file in the same
// directory, synced before it is renamed over name, so that name holds the
// old content or the new, never a mix, also after a crash of the machine:
// a saved run is a journal (see stateFile).
func writeFileAtomic(name string, b []byte) error {
	dir := filepath.Dir(name)
	f, err := os.CreateTemp(dir, "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	// Sync the directory so the rename itself lasts.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// maxScriptLine bounds a line of a script.
const maxScriptLine = 16 << 20

// readScript reads the script name ("-": stdin): JSON Lines, one model
// reply a line, as the Messages API sends a message: at least "content",
// an array of content blocks (text, tool_use, thinking), and optionally
// "stop_reason" and "usage". Blank lines are skipped.
func (c *cli) readScript(name string) ([]json.RawMessage, error) {
	var r io.Reader = c.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	return parseScript(r)
}

// parseScript reads a script; see readScript.
func parseScript(r io.Reader) ([]json.RawMessage, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxScriptLine)
	var lines []json.RawMessage
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if _, err := scriptReply(line); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, line); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		lines = append(lines, buf.Bytes())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		return nil, errors.New("no replies")
	}
	return lines, nil
}

// scriptLine is a line of a script.
type scriptLine struct {
	Content    []json.RawMessage `json:"content"`
	StopReason string            `json:"stop_reason"`
	Usage      *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
}

// scriptError says what is wrong with a script line that does not decode,
// in the terms of the script's format, not of the Go type it decodes to.
func scriptError(err error) error {
	var ute *json.UnmarshalTypeError
	if !errors.As(err, &ute) {
		return err
	}
	want := map[string]string{
		"":                    `a reply, a JSON object such as {"content": [{"type": "text", "text": "Hi."}]}`,
		"content":             "an array of content blocks",
		"stop_reason":         "a string",
		"usage":               `an object such as {"input_tokens": 10, "output_tokens": 5}`,
		"usage.input_tokens":  "a whole number",
		"usage.output_tokens": "a whole number",
	}[ute.Field]
	if want == "" {
		want = "another type"
	}
	if ute.Field == "" {
		return fmt.Errorf("want %s, got a JSON %s", want, ute.Value)
	}
	return fmt.Errorf("%q: want %s, got a JSON %s", ute.Field, want, ute.Value)
}

// scriptReply returns the fake server's reply for a line of a script.
func scriptReply(line []byte) (toolruntest.Reply, error) {
	var l scriptLine
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&l); err != nil {
		return toolruntest.Reply{}, scriptError(err)
	}
	if len(l.Content) == 0 {
		return toolruntest.Reply{}, errors.New(`want a reply with "content", an array of content blocks`)
	}
	reply := toolruntest.Reply{StopReason: l.StopReason}
	toolUse := false
	for i, raw := range l.Content {
		var b struct {
			Type string `json:"type"`
			ID   string `json:"id"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &b); err != nil || b.Type == "" {
			return toolruntest.Reply{}, fmt.Errorf("content block %d: want an object with a \"type\"", i)
		}
		if b.Type == "tool_use" {
			if b.ID == "" || b.Name == "" {
				return toolruntest.Reply{}, fmt.Errorf("content block %d: a tool_use needs an \"id\" and a \"name\"", i)
			}
			toolUse = true
		}
		reply.Content = append(reply.Content, toolruntest.Block{Raw: raw})
	}
	if reply.StopReason == "" {
		reply.StopReason = "end_turn"
		if toolUse {
			reply.StopReason = "tool_use"
		}
	}
	if l.Usage != nil {
		reply.Usage = &toolruntest.Usage{InputTokens: l.Usage.InputTokens, OutputTokens: l.Usage.OutputTokens}
	}
	return reply, nil
}

// scriptReplies returns the fake server's replies for the lines of a
// script.
func scriptReplies(lines []json.RawMessage) ([]toolruntest.Reply, error) {
	var replies []toolruntest.Reply
	for i, l := range lines {
		r, err := scriptReply(l)
		if err != nil {
			return nil, fmt.Errorf("reply %d: %w", i+1, err)
		}
		replies = append(replies, r)
	}
	return replies, nil
}
