package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
)

var resumeCommand = &command{
	name:    "resume",
	args:    "[flags] state.json",
	summary: "continue a saved run: one that stopped awaiting approval or was interrupted",
	doc: `Resume continues a run of "toolrun run" that stopped awaiting approval
(exit status 7) or was interrupted (Ctrl-C, SIGTERM: exit status 130 or
143), from the file it was saved to (--state, or the file the run named). It lists the calls that await a decision, takes the decisions
and runs on, with the run's model, tools and MCP servers, recording into
the run's transcript if it had one. "-" reads the saved run from standard
input.

Decisions. --allow ID approves the call ID; --deny ID=reason denies it and
tells the model why; both may be repeated. The calls left are decided as
--approve says: ask at the terminal, auto (approve) or deny. With no
terminal and calls left undecided, the run stays suspended: it is saved
again to the same file, with the decisions given, and resume exits with
status 7 again.

The file. A resume saves the run back to its file as it goes: with the
decisions before any call starts, each call as started before it runs
and with its result after, and the run as it stops. So a call runs once,
however often the same command is run again:
  finished    the file holds the finished run; resuming it again says so
              and exits with status 1, running nothing
  suspended   the file holds the run awaiting its next approvals
  killed      the file holds the run as far as it got: resumed again, it
              goes on from there, and a call that had started and not
              finished is not run again (the model is told it was
              interrupted)
One resume at a time: a second resume of a file while one runs is
refused. A saved run read from standard input ("-") is not written back:
resuming the same saved run twice from standard input runs its approved
calls twice.

The tools. A saved run is data, as a transcript is: whoever wrote the file
chose the MCP commands, servers, directory, transcript and log it names,
and a resume starts, reaches and opens none of them unless asked. Give the
tools with --workdir, --mcp and --mcp-url, as "toolrun run" takes them; or
--tools-from-state to use the ones the file names (it runs the commands
the file names, with your rights: use it only for a file you made or
trust). Without either, a saved run that names tools is refused, with the
tool flags it names, before anything starts. --tools-from-state also
appends to the transcript and the log the file names (without it, the
rest of the run is not recorded and warnings go to stderr) and decides the
calls as the file says (without it, a file's --approve auto, the tools
it approves "always" and its approvals of calls not yet started are not
taken: the calls are asked about unless --approve says otherwise); what
it uses is printed to stderr first. A saved run whose request names what
the API itself would reach or run (mcp_servers, server tools, a
container) is refused without --tools-from-state.

A run with --script resumes with the rest of its script. Other runs need
the API key, as "toolrun run" does.`,
	setup: func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
		var f resumeFlags
		fs.Var(&f.approve, "approve", "who decides the calls no --allow or --deny decides: `ask` at the terminal, auto (approve) or deny (default: as the run was)")
		fs.Var(&f.allow, "allow", "approve the pending call `ID` (repeatable)")
		fs.Var(&f.deny, "deny", "deny the pending call with `ID=reason`, telling the model the reason (repeatable)")
		fs.IntVar(&f.maxTurns, "max-turns", 0, "stop after `n` more model requests (default: the run's limit)")
		f.tools.define(fs)
		fs.BoolVar(&f.fromState, "tools-from-state", false, "use the tools, transcript and log the saved run names: run the MCP commands it names (trusted files only)")
		return func(ctx context.Context, c *cli, args []string) int {
			if len(args) != 1 {
				return c.usageError("resume", "want one saved run, got %d arguments", len(args))
			}
			if f.fromState && f.tools.given() {
				return c.usageError("resume", "--tools-from-state and the tool flags exclude each other: give the tools one way")
			}
			if _, err := parseMCPSpecs(f.tools.MCP, f.tools.MCPURL); err != nil {
				return c.usageError("resume", "%v", err)
			}
			for _, d := range f.deny {
				if id, _, ok := strings.Cut(d, "="); !ok || id == "" {
					return c.usageError("resume", "--deny %q: want ID=reason", d)
				}
			}
			return c.resume(ctx, f, args[0])
		}
	},
}

type resumeFlags struct {
	approve     approveMode
	allow, deny listFlag
	maxTurns    int
	tools       toolFlags // the tools to resume with, instead of the saved run's
	fromState   bool      // use the tools, transcript and log the saved run names
}

// maxSavedRun bounds a saved run read from a file.
const maxSavedRun = 256 << 20

// readSavedRun reads the run saved in name ("-": stdin).
func (c *cli) readSavedRun(name string) (*savedRun, error) {
	var r io.Reader = c.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if err := savedRunFile(name, fi); err != nil {
			return nil, err
		}
		r = f
	}
	b, err := readAtMost(r, maxSavedRun)
	if errors.Is(err, errTooLong) {
		return nil, fmt.Errorf("%s %w", displayName(name), err)
	}
	if err != nil {
		return nil, err
	}
	var s savedRun
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s is not a saved run: %w", displayName(name), err)
	}
	if s.Version != savedRunVersion || s.State == nil {
		return nil, fmt.Errorf("%s is not a saved run of this toolrun (format %d, want %d)", displayName(name), s.Version, savedRunVersion)
	}
	return &s, nil
}

// savedRunFile fails, before anything reads name, if fi (name's, links
// followed) is not a regular file of at most maxSavedRun bytes: a device
// (/dev/zero), a pipe or a directory is no saved run, and reading one
// could take all memory or never end. Standard input ("-") is read with
// the bound alone.
func savedRunFile(name string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%v), so not a saved run", displayName(name), fi.Mode().Type())
	}
	if fi.Size() > maxSavedRun {
		return fmt.Errorf("%s %w of %d MiB", displayName(name), errTooLong, maxSavedRun>>20)
	}
	return nil
}

func (c *cli) resume(ctx context.Context, f resumeFlags, name string) int {
	fail := func(format string, args ...any) int {
		c.errorf("resume", format, args...)
		return exitError
	}
	// A file is the run's journal (see stateFile): locked for this
	// process, read, and saved as the run goes. Standard input is read
	// once and journals nothing.
	var (
		saved *savedRun
		sf    *stateFile
		err   error
	)
	if name == "-" {
		saved, err = c.readSavedRun(name)
	} else {
		sf, saved, err = c.openStateFile(name)
	}
	if errors.Is(err, errStateFileBusy) {
		return fail("%v; wait for it to finish, then resume again", err)
	}
	if err != nil {
		return fail("%v", err)
	}
	if sf != nil {
		defer sf.close()
	}
	if err := saved.State.Check(); err != nil {
		// Checked before anything starts, as the rest of the file's word.
		return fail("the saved run in %s: %v", displayName(name), err)
	}
	if st := saved.State; finished(st.StopReason) {
		// Checked before anything starts: no MCP server, no API key.
		return fail("the run in %s has finished (stopped: %s after %s); there is nothing to resume", displayName(name), st.StopReason, plural(st.Turns, "turn", "turns"))
	}
	if saved.Script == nil && !c.hasKey() {
		c.errorf("resume", "%v", errNoKey)
		fmt.Fprintln(c.stderr, "hint: export ANTHROPIC_API_KEY=... as for the run")
		return exitError
	}
	if f.approve != "" {
		saved.Approve = f.approve
	}
	// The file keeps naming its transcript and log, used or not.
	namedRecord, namedLog := saved.Record, saved.Log
	if code := c.trustSaved(f, saved); code != exitOK {
		return code
	}
	mode := saved.Approve
	specs, err := parseMCPSpecs(saved.Tools.MCP, saved.Tools.MCPURL)
	if err != nil {
		return fail("the saved run's tools: %v", err)
	}
	if name == "-" && mode == approveAsk {
		// stdin held the saved run; nobody can answer there.
		c.interactive = false
	}

	s, code := c.startSession(ctx, "resume", saved, specs)
	if s == nil {
		return code
	}
	defer s.close()
	fmt.Fprintf(c.stdout, "toolrun resume: model %s%s\n", printable(saved.Model), s.modelNote)
	s.printSetup()
	if saved.Record != "" && saved.Record != "-" {
		tf, err := c.appendTranscript(saved.Record)
		if err != nil {
			return fail("the run's transcript: %v", err)
		}
		defer tf.close(c, "resume")
		s.record(tf)
		fmt.Fprintf(c.stdout, "record: %s (appending)\n", printable(saved.Record))
	}

	maxTurns := saved.State.MaxTurns
	switch {
	case f.maxTurns > 0:
		maxTurns = saved.State.Turns + f.maxTurns
	case maxTurns < 0 && !f.fromState:
		// toolrun run never saves a run without a turn limit (its
		// --max-turns is at least 1): a file that says so was changed,
		// and its word is data, as its approvals are.
		maxTurns = saved.State.Turns + toolrun.DefaultMaxTurns
		c.errorf("resume", "the saved run has no turn limit; this resume stops after %d more model requests: give --max-turns for more, or --tools-from-state to run as saved", toolrun.DefaultMaxTurns)
	case maxTurns-saved.State.Turns > toolrun.DefaultMaxTurns && !f.fromState:
		// So is a limit far ahead: the requests are made, and paid, by
		// whoever resumes. Without a word from them a resume makes as
		// many as a run does by default.
		c.errorf("resume", "the saved run allows %d more model requests; this resume stops after %d: give --max-turns for more, or --tools-from-state to run as saved", maxTurns-saved.State.Turns, toolrun.DefaultMaxTurns)
		maxTurns = saved.State.Turns + toolrun.DefaultMaxTurns
	}
	opts := s.options(maxTurns)
	if sf != nil {
		setup := *saved
		setup.Record, setup.Log = namedRecord, namedLog
		sf.setSetup(setup)
		s.journal = sf
		opts.Store, opts.RunID = sf, name
	}
	r, err := toolrun.Resume(s.client, saved.State, s.tools, opts)
	if err != nil {
		return fail("%v", err)
	}
	if saved.State.MaxTurns != 0 && maxTurns != saved.State.MaxTurns {
		// A limit the State holds (set by an earlier resume, or in the
		// file) wins over Options.MaxTurns: the one chosen here is set.
		r.SetMaxTurns(maxTurns)
	}
	// The calls answered in the first process were shown there.
	s.d.answeredBefore(saved.State)
	var pending []toolrun.PendingCall
	if res := r.Result(); res != nil && res.StopReason == toolrun.StopAwaitingApproval {
		pending = res.Pending
	}
	if len(pending) == 0 && (len(f.allow) > 0 || len(f.deny) > 0) {
		return c.usageError("resume", "no call of this run awaits approval")
	}
	if r.Result() == nil {
		// Saved as it went by a resume that did not get to its end
		// (killed, interrupted or failed): it goes on from its last step.
		fmt.Fprintln(c.stdout, "\nthe run did not finish: it goes on from its last saved step; a call that had started is not run again")
	}
	var ids []string
	for _, p := range pending {
		ids = append(ids, p.Call.ID)
	}
	decided := map[string]bool{}
	decide := func(id string, d toolrun.Decision, flag string) int {
		if !slices.Contains(ids, id) {
			return c.usageError("resume", "%s %s: no such call awaits approval; the pending calls: %s", flag, id, strings.Join(ids, ", "))
		}
		if decided[id] {
			return c.usageError("resume", "%s %s: the call is decided twice", flag, id)
		}
		decided[id] = true
		if err := r.Decide(id, d); err != nil {
			return fail("%v", err)
		}
		return exitOK
	}
	if len(pending) > 0 {
		fmt.Fprintf(c.stdout, "\nawaiting approval:\n")
		for _, p := range pending {
			input := p.Call.Input
			var buf bytes.Buffer
			if json.Compact(&buf, input) == nil {
				input = buf.Bytes()
			}
			line := fmt.Sprintf("  ? %s %s %s", p.Call.ID, p.Call.Name, input)
			if p.Reason != "" {
				line += fmt.Sprintf(" (%s)", p.Reason)
			}
			fmt.Fprintln(c.stdout, printable(line))
		}
	}
	for _, id := range f.allow {
		if code := decide(id, toolrun.Decision{}, "--allow"); code != exitOK {
			return code
		}
		fmt.Fprintf(c.stdout, "  ✓ %s approved (--allow)\n", printable(id))
	}
	for _, d := range f.deny {
		id, reason, _ := strings.Cut(d, "=")
		if reason == "" {
			reason = "the user denied it"
		}
		if code := decide(id, policy.Deny(reason), "--deny"); code != exitOK {
			return code
		}
		fmt.Fprintf(c.stdout, "  ✗ %s denied: %s\n", printable(id), printable(reason))
	}
	a := c.newApprover(mode, "--approve auto", "", s.d.writer(c.stdout), s.d.writer(c.stderr))
	var left []toolrun.PendingCall
	for _, p := range pending {
		if !decided[p.Call.ID] {
			left = append(left, p)
		}
	}
	if len(left) > 0 && a != nil {
		for _, p := range left {
			fmt.Fprintln(c.stdout, printable(fmt.Sprintf("  %s %s", p.Call.ID, p.Call.Name)))
			d, err := a.approve(ctx, p)
			if err != nil {
				if ctx.Err() != nil {
					return s.interrupted(r, stateFileFor(name))
				}
				return fail("%v", err)
			}
			if err := r.Decide(p.Call.ID, d); err != nil {
				return fail("%v", err)
			}
		}
		left = nil
	}
	if len(left) > 0 {
		// Nobody to ask: the run stays suspended where it was saved, with
		// the decisions given (saved for the next resume).
		stateFile := name
		if name == "-" {
			stateFile = ""
		}
		return s.suspend(ctx, r, left, true, stateFile)
	}
	return s.finish(ctx, r, a, stateFileFor(name))
}

// trustSaved sets the tools, transcript and log saved resumes with. A
// saved run is data: its MCP commands would run with the rights of whoever
// resumes it, its URLs reach servers, its workdir opens a directory to the
// model, and its transcript and log are files to append to. So they are
// used only with --tools-from-state, after they are printed; else the tools
// are those of the command line, and a saved run that names tools and is
// given none is refused, with what it names, before anything starts.
func (c *cli) trustSaved(f resumeFlags, saved *savedRun) int {
	named := saved.Tools
	if f.fromState {
		var uses []string
		if named.given() {
			uses = append(uses, "the tools:"+named.commandLine())
		}
		uses = append(uses, namedFiles(saved)...)
		if len(uses) > 0 {
			c.errorf("resume", "with what the saved run names (--tools-from-state): %s", strings.Join(uses, "; "))
		}
		return exitOK
	}
	if named.given() && !f.tools.given() {
		c.errorf("resume", "the saved run names the tools:%s", named.commandLine())
		c.errorf("resume", "none of them is started: a resume runs only the tools of its own flags; give these flags (after reading them), or --tools-from-state to start them as saved, if you trust the file")
		return exitUsage
	}
	if reach := saved.State.Reaches(); len(reach) > 0 {
		// The run's data is the file's too: its params, the tools added
		// to it, those queued to be added and the tool_addition blocks of
		// its history make the API itself reach a server, run a tool or
		// load skills the file chooses, with the conversation.
		c.errorf("resume", "the saved run's request names %s, which the API would reach or run with the conversation; toolrun run never saves these: give --tools-from-state to send them, if you trust the file", strings.Join(reach, "; "))
		return exitUsage
	}
	if f.approve == "" && saved.Approve == approveAuto {
		// Who decides the calls is part of the file too: a file that says
		// auto would have the calls it holds run on the tools given here
		// without a word.
		c.errorf("resume", "the saved run approves every call (--approve auto); this resume asks instead: give --approve auto, or --tools-from-state, to approve them as saved")
		saved.Approve = approveAsk
	}
	if st := saved.State; len(st.AlwaysAllow) > 0 {
		// So are the tools a person approved "always": the file may name
		// any.
		c.errorf("resume", "the saved run approves every call of %s (always); this resume asks about them too: give --tools-from-state to approve them as saved", strings.Join(st.AlwaysAllow, ", "))
		st.AlwaysAllow = nil
	}
	// And so are the approvals it holds for calls not yet started: a
	// person's "yes" in the file is the word of whoever wrote it.
	dropped, err := dropApprovals(saved.State)
	if err != nil {
		c.errorf("resume", "the saved run: %v", err)
		return exitError
	}
	for _, d := range dropped {
		c.errorf("resume", "the saved run holds an approval of %s; this resume asks about it again: give --tools-from-state to take the file's decisions", printable(d))
	}
	saved.Tools = f.tools
	if w := saved.Tools.Workdir; w != "" {
		if abs, err := filepath.Abs(w); err == nil {
			saved.Tools.Workdir = abs // saved so, for a resume in another directory
		}
	}
	if unused := namedFiles(saved); len(unused) > 0 {
		c.errorf("resume", "not appending to %s the saved run names: a resume opens them only with --tools-from-state", strings.Join(unused, " and "))
	}
	saved.Record, saved.Log = "", ""
	return exitOK
}

// namedFiles describes the transcript and the log that saved names, for
// the messages that say whether a resume opens them.
func namedFiles(saved *savedRun) []string {
	var out []string
	if saved.Record != "" && saved.Record != "-" {
		out = append(out, "the transcript "+shellQuote(saved.Record))
	}
	if saved.Log != "" && saved.Log != "-" {
		out = append(out, "the log "+shellQuote(saved.Log))
	}
	return out
}

// dropApprovals turns the Allow decisions st holds for calls not yet
// started back into undecided calls, so that this resume's rules decide
// them (a decision the State records stands otherwise); it returns each
// one a person or an "always" gave as "ID (tool)". A
// denial or a skip is kept: neither runs anything. The State has no method
// to take back a decision, so this edits its JSON form, which is the form
// the file gave.
func dropApprovals(st *toolrun.State) ([]string, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var pending map[string]json.RawMessage
	if raw, ok := m["pending"]; !ok || json.Unmarshal(raw, &pending) != nil || pending == nil {
		return nil, nil
	}
	var calls []map[string]json.RawMessage
	if err := json.Unmarshal(pending["calls"], &calls); err != nil {
		return nil, nil
	}
	var dropped []string
	changed := false
	for _, c := range calls {
		var phase, by string
		var d struct {
			Kind toolrun.DecisionKind `json:"kind"`
		}
		var call toolrun.ToolCall
		json.Unmarshal(c["phase"], &phase)
		json.Unmarshal(c["decided_by"], &by)
		json.Unmarshal(c["call"], &call)
		// A person's answer awaits the rules in phase new; an Allow the
		// rules took (decided) stands across a resume unless dropped, so
		// the saved run's own rules' are dropped too, silently: this
		// resume's rules decide the call again.
		if (phase != "decided" && phase != "new") || c["decision"] == nil || json.Unmarshal(c["decision"], &d) != nil || d.Kind != toolrun.Allow {
			continue
		}
		c["phase"] = json.RawMessage(`"new"`)
		delete(c, "decision")
		delete(c, "decided_by")
		if by == string(toolrun.ByApproval) || by == string(toolrun.ByAlways) {
			dropped = append(dropped, fmt.Sprintf("%s (%s)", call.ID, call.Name))
		}
		changed = true
	}
	if !changed {
		return nil, nil
	}
	if pending["calls"], err = json.Marshal(calls); err != nil {
		return nil, err
	}
	if m["pending"], err = json.Marshal(pending); err != nil {
		return nil, err
	}
	if b, err = json.Marshal(m); err != nil {
		return nil, err
	}
	fresh := new(toolrun.State)
	if err := json.Unmarshal(b, fresh); err != nil {
		return nil, err
	}
	*st = *fresh
	return dropped, nil
}

// stateFileFor returns where a resumed run that stops awaiting approval
// again is saved: the file it was resumed from, or a new one.
func stateFileFor(name string) string {
	if name == "-" {
		return ""
	}
	return name
}

// finished reports whether a run saved with the stop reason has finished:
// it stopped, and not awaiting approval or on a failure (an error, an
// interruption), which the runner tries again from where it stopped.
func finished(reason toolrun.StopReason) bool {
	switch reason {
	case "", toolrun.StopAwaitingApproval, toolrun.StopError, toolrun.StopCanceled,
		"malformed_response": // what an earlier toolrun wrote for StopError
		return false
	}
	return true
}
