package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/fstools"
	"github.com/toolrun/toolrun/transcript"
)

// exitDiverged is the exit status of a replay that diverged from its
// recording.
const exitDiverged = 10

var replayCommand = &command{
	name:    "replay",
	args:    "[flags] run.jsonl",
	summary: "replay a recorded run offline and report where its tools now differ",
	doc: `Replay runs a run recorded with --record again, offline: a local fake server
answers each request with the recorded response, each tool call is decided
as it was, and each call's result is compared with the recorded one. It
prints the report, and exits with status 10 if the replay diverged: a tool
that now returns something else, a failure that no longer happens or a new
one, a call missing, or a run that stops otherwise.

Tools. The replay runs the tools given to it with the --workdir, --mcp and
--mcp-url flags, as "toolrun run" takes them. A transcript is data, written
by whoever made the run, and a replay of it starts no program, opens no
directory and reaches no server it names: without tool flags, the replay
prints the tool flags the transcript records as a hint and runs with no
tools (their calls then diverge), except for a transcript of the demo,
whose tools are built in. --tools-from-transcript starts the recorded
tools instead: it runs the commands the transcript names, with your
rights; use it only for a transcript you made or trust, after reading the
hint. MCP tools run without asking; calls are decided as they were
recorded.

A transcript of a run that was suspended and resumed is compared with its
final stop. "-" reads the transcript from standard input. To replay a run
of your own program, call transcript.Replay with its tools.`,
	exits: []exitStatus{
		{exitOK, "same", "the replay matches the recording"},
		{exitError, "error", "the transcript could not be read or replayed"},
		usageStatus,
		{exitDiverged, "diverged", "the replay diverged from the recording"},
		{exitInterrupted, "canceled", "interrupted by SIGINT; 143 for SIGTERM"},
	},
	setup: func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
		var f toolFlags
		f.define(fs)
		fromTranscript := fs.Bool("tools-from-transcript", false, "start the tools the transcript records: run the MCP commands it names (trusted transcripts only)")
		return func(ctx context.Context, c *cli, args []string) int {
			if len(args) != 1 {
				return c.usageError("replay", "want one transcript file, got %d arguments", len(args))
			}
			if *fromTranscript && f.given() {
				return c.usageError("replay", "--tools-from-transcript and the tool flags exclude each other: give the tools one way")
			}
			return c.replay(ctx, f, *fromTranscript, args[0])
		}
	},
}

// toolFlags are the flags that give a command the tools of "toolrun run".
// They travel as JSON in a transcript's header and a saved run.
type toolFlags struct {
	MCP     listFlag `json:"mcp,omitempty"`
	MCPURL  listFlag `json:"mcp_url,omitempty"`
	Workdir string   `json:"workdir,omitempty"`
	mcpFlags
}

func (f *toolFlags) define(fs *flag.FlagSet) {
	fs.Var(&f.MCP, "mcp", "start the MCP server `\"[name=]command args\"` and use its tools (repeatable)")
	fs.Var(&f.MCPURL, "mcp-url", "use the tools of the MCP server at `\"[name=]URL\"`, over streamable HTTP (repeatable)")
	fs.StringVar(&f.Workdir, "workdir", "", "give the model read-only file tools confined to `dir`")
	f.defineMCP(fs)
}

// given reports whether any tool flag was given.
func (f *toolFlags) given() bool { return len(f.MCP) > 0 || len(f.MCPURL) > 0 || f.Workdir != "" }

// readTranscript reads the transcript name; "-" is stdin.
func (c *cli) readTranscript(name string) (*transcript.Transcript, error) {
	if name == "-" {
		return transcript.Read(c.stdin)
	}
	return transcript.ReadFile(name)
}

// recordedTools returns the tools a transcript's header says its run had:
// the tool flags of "toolrun run", or the demo's tools. ok is false for a
// transcript that does not say, written by a program of its own or an
// older toolrun.
func recordedTools(h transcript.Entry) (f toolFlags, demo, ok bool) {
	if h.Meta["name"] == "toolrun demo" {
		return f, true, true
	}
	if js, found := h.Meta[metaTools]; found {
		if err := json.Unmarshal([]byte(js), &f); err == nil {
			return f, false, true
		}
	}
	if w := h.Meta["workdir"]; w != "" && h.Meta["mcp"] == "" {
		f.Workdir = w
		return f, false, true
	}
	return f, false, false
}

// replay replays the transcript name with the tools of f, or, with
// fromTranscript, those its header records. The header is never trusted
// by default: it is written by whoever made the run, and its --mcp values
// are commands (a transcript someone sent would otherwise run their
// program on this machine), its --mcp-url values servers and its
// --workdir a directory of this machine to read.
func (c *cli) replay(ctx context.Context, f toolFlags, fromTranscript bool, name string) int {
	fail := func(format string, args ...any) int {
		c.errorf("replay", format, args...)
		return exitError
	}
	if _, err := parseMCPSpecs(f.MCP, f.MCPURL); err != nil {
		return c.usageError("replay", "%v", err)
	}
	t, err := c.readTranscript(name)
	if err != nil {
		return fail("%v", err)
	}
	// The tools: those of the flags; else the demo's, built in, for a
	// transcript of the demo; else, with --tools-from-transcript, those
	// the header records. Never the demo's for another run: an unknown
	// tool is then unknown in the replay as it was in the recording.
	demo, unused := false, false
	if !f.given() {
		recorded, isDemo, ok := recordedTools(t.Header)
		demo = isDemo
		switch {
		case !ok:
			c.errorf("replay", "the transcript does not say which tools its run had; give them with --workdir, --mcp and --mcp-url")
		case !recorded.given():
		case fromTranscript:
			c.errorf("replay", "with the tools the transcript records:%s", recorded.commandLine())
			f = recorded
		default:
			c.errorf("replay", "the transcript records the tools:%s", recorded.commandLine())
			c.errorf("replay", "none of them is started: a replay runs only the tools of its own flags; give these flags (after reading them), or --tools-from-transcript to start them as recorded, if you trust the transcript")
			unused = true
		}
	}
	specs, err := parseMCPSpecs(f.MCP, f.MCPURL)
	if err != nil {
		return fail("the transcript's tools: %v", err)
	}
	var tools []toolrun.Tool
	if demo {
		for _, t := range newDemoTools().list() {
			tools = append(tools, t)
		}
	}
	if f.Workdir != "" {
		root, err := fstools.Open(f.Workdir, nil)
		if err != nil {
			return fail("--workdir: %v", err)
		}
		defer root.Close()
		tools = append(tools, root.Tools()...)
	}
	log := c.logger(c.stderr, false)
	if c.getenv("ANTHROPIC_LOG") == "" {
		// The report says how each call went; the runner's records of
		// failures that reproduce would only repeat it.
		log = slog.New(slog.DiscardHandler)
	}
	servers, serverTools, err := connectMCP(ctx, specs, f.mcpFlags, func(string) toolrun.ToolConfig { return toolrun.ToolConfig{} }, log)
	if err != nil {
		return fail("MCP server %v", err)
	}
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	for _, list := range serverTools {
		tools = append(tools, list...)
	}

	rep, err := transcript.Replay(ctx, t, tools, &transcript.ReplayOptions{Options: toolrun.Options{Logger: log}})
	if err != nil {
		return fail("%v", err)
	}
	if ctx.Err() != nil {
		c.errorf("replay", "interrupted")
		return exitInterrupted
	}
	io.WriteString(c.stdout, printable(rep.String()))
	var missing []string
	for _, call := range rep.Calls {
		if !slices.ContainsFunc(tools, func(t toolrun.Tool) bool { return t.Name() == call.Tool }) && !slices.Contains(missing, call.Tool) {
			missing = append(missing, call.Tool)
		}
	}
	if len(missing) > 0 && rep.Diverged() {
		hint := ""
		if unused {
			hint = " (or --tools-from-transcript)"
		}
		c.errorf("replay", "this replay has no tool named %s; give it the --workdir, --mcp and --mcp-url flags of the recorded run%s", strings.Join(missing, ", "), hint)
	}
	if rep.Diverged() {
		return exitDiverged
	}
	return exitOK
}

// commandLine returns the flags f stands for, each with a leading space.
func (f *toolFlags) commandLine() string {
	var b strings.Builder
	if f.Workdir != "" {
		b.WriteString(" --workdir " + shellQuote(f.Workdir))
	}
	for _, m := range f.MCP {
		b.WriteString(" --mcp " + shellQuote(m))
	}
	for _, u := range f.MCPURL {
		b.WriteString(" --mcp-url " + shellQuote(u))
	}
	// The variables handed to the servers are part of what is run: a
	// file may name the resumer's secrets. Names only, as saved.
	for _, name := range f.MCPEnv.names() {
		b.WriteString(" --mcp-env " + shellQuote(name))
	}
	// A server given longer than the default to start needs it again.
	if t := f.MCPTimeout; t != 0 && t != mcpConnectTimeout {
		b.WriteString(" --mcp-timeout " + t.String())
	}
	return b.String()
}

var viewCommand = &command{
	name:    "view",
	args:    "[-o report.html] run.jsonl | --thread ID [-o report.html] dir|run.jsonl...",
	summary: "write a recorded run as a self-contained HTML report",
	doc: `View writes the run recorded in a transcript (--record of run and demo)
as one self-contained HTML page: a timeline of turns with each tool call as
a bar as long as it took, failures with their errors and stacks, tokens per
turn, and the conversation. The page runs no script and loads nothing.
Without -o, the report of run.jsonl is written to run.html. "-" reads the
transcript from standard input, and -o - writes the report to standard
output (as does a transcript read from standard input without -o).

With --thread ID, view writes the story of one thread of "toolrun serve"
instead, from the transcripts its --record wrote, one per run: give the
record directory (view reads the files serve named for the thread) or the
transcripts themselves. The report shows every run of the thread in the
order it started; each call with the decision on it (who, by the name of
the token or login that took it, when, what and why) and its result, which
may come in the run the decision let go on; each run's stop and cost in
dollars (list prices, as pricing.Default has them); and one time
axis with the runs and each wait for a person, from the call's deferral
to the decision. A deny is drawn as the person's decision, not as a
failure. Without -o the report is written to thread-<hash>.html in the
record directory (or beside the first transcript), <hash> as serve names
the thread's files.`,
	exits: []exitStatus{
		{exitOK, "ok", "the report was written"},
		{exitError, "error", "the transcript could not be read, or the report written"},
		usageStatus,
	},
	setup: func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
		out := fs.String("o", "", "write the report to `file`")
		thread := fs.String("thread", "", "write the story of the serve thread `ID` from its runs' transcripts")
		return func(ctx context.Context, c *cli, args []string) int {
			if *thread != "" {
				return c.viewThread(*thread, *out, args)
			}
			if len(args) != 1 {
				return c.usageError("view", "want one transcript file, got %d arguments", len(args))
			}
			dest := *out
			switch {
			case dest != "":
			case args[0] == "-":
				dest = "-"
			default:
				dest = strings.TrimSuffix(args[0], filepath.Ext(args[0])) + ".html"
			}
			if dest == args[0] && dest != "-" {
				return c.usageError("view", "the report would overwrite the transcript; name it with -o")
			}
			t, err := c.readTranscript(args[0])
			if err != nil {
				c.errorf("view", "%v", err)
				return exitError
			}
			var buf bytes.Buffer
			if err := transcript.WriteHTML(&buf, t); err != nil {
				c.errorf("view", "%v", err)
				return exitError
			}
			if dest == "-" {
				if _, err := c.stdout.Write(buf.Bytes()); err != nil {
					c.errorf("view", "%v", err)
					return exitError
				}
				return exitOK
			}
			if err := writeFileAtomic(dest, buf.Bytes()); err != nil {
				c.errorf("view", "%v", err)
				return exitError
			}
			fmt.Fprintf(c.stdout, "wrote %s\n", dest)
			return exitOK
		}
	},
}

// viewThread writes the report of thread from the transcripts of its
// runs (see the view command's doc).
func (c *cli) viewThread(thread, dest string, args []string) int {
	if len(args) == 0 {
		return c.usageError("view", "--thread wants the record directory of toolrun serve, or the thread's transcripts")
	}
	runs, err := c.readThreadRuns(thread, args)
	if err != nil {
		c.errorf("view", "%v", err)
		return exitError
	}
	if dest == "" {
		dir := args[0]
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			dir = filepath.Dir(dir)
		}
		dest = filepath.Join(dir, "thread-"+strings.TrimSuffix(threadFilePrefix(thread), "-")+".html")
	}
	var buf bytes.Buffer
	if err := writeThreadHTML(&buf, thread, runs); err != nil {
		c.errorf("view", "%v", err)
		return exitError
	}
	if dest == "-" {
		if _, err := c.stdout.Write(buf.Bytes()); err != nil {
			c.errorf("view", "%v", err)
			return exitError
		}
		return exitOK
	}
	if err := writeFileAtomic(dest, buf.Bytes()); err != nil {
		c.errorf("view", "%v", err)
		return exitError
	}
	fmt.Fprintf(c.stdout, "wrote %s (%d runs)\n", dest, len(runs))
	return exitOK
}
