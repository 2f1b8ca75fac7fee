package main

import (
	"context"
	"flag"
	"fmt"
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

The replay has the demo's tools, and the tools of the --workdir, --mcp and
--mcp-url flags given to it: to replay a "toolrun run", give it the same
tool flags as the recorded run (its transcript's header lists them). MCP
tools run without asking; calls are decided as they were recorded. To replay
a run of your own program, call transcript.Replay with its tools.`,
	exits: []exitStatus{
		{exitOK, "same", "the replay matches the recording"},
		{exitError, "error", "the transcript could not be read or replayed"},
		usageStatus,
		{exitDiverged, "diverged", "the replay diverged from the recording"},
		{exitCode(toolrun.StopCanceled), "canceled", "interrupted"},
	},
	setup: func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
		var f toolFlags
		f.define(fs)
		return func(ctx context.Context, c *cli, args []string) int {
			if len(args) != 1 {
				return c.usageError("replay", "want one transcript file, got %d arguments", len(args))
			}
			return c.replay(ctx, f, args[0])
		}
	},
}

// toolFlags are the flags that give a command the tools of "toolrun run".
type toolFlags struct {
	mcp, mcpURL listFlag
	workdir     string
}

func (f *toolFlags) define(fs *flag.FlagSet) {
	fs.Var(&f.mcp, "mcp", "start the MCP server `\"[name=]command args\"` and use its tools (repeatable)")
	fs.Var(&f.mcpURL, "mcp-url", "use the tools of the MCP server at `\"[name=]URL\"` (repeatable)")
	fs.StringVar(&f.workdir, "workdir", "", "use the read-only file tools confined to `dir`")
}

func (c *cli) replay(ctx context.Context, f toolFlags, name string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(c.stderr, "toolrun replay: "+format+"\n", args...)
		return exitError
	}
	specs, err := parseMCPSpecs(f.mcp, f.mcpURL)
	if err != nil {
		return c.usageError("replay", "%v", err)
	}
	var tools []toolrun.Tool
	for _, t := range newDemoTools().list() {
		tools = append(tools, t)
	}
	if f.workdir != "" {
		root, err := fstools.Open(f.workdir, nil)
		if err != nil {
			return fail("--workdir: %v", err)
		}
		defer root.Close()
		tools = append(tools, root.Tools()...)
	}
	log := c.logger(c.stderr)
	servers, serverTools, err := connectMCP(ctx, specs, func(string) toolrun.ToolConfig { return toolrun.ToolConfig{} }, log)
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

	rep, err := transcript.ReplayFile(ctx, name, tools, c.stdout)
	if err != nil {
		return fail("%v", err)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(c.stderr, "toolrun replay: interrupted")
		return exitCode(toolrun.StopCanceled)
	}
	var missing []string
	for _, call := range rep.Calls {
		if !slices.ContainsFunc(tools, func(t toolrun.Tool) bool { return t.Name() == call.Tool }) && !slices.Contains(missing, call.Tool) {
			missing = append(missing, call.Tool)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(c.stderr, "toolrun replay: this replay has no tool named %s; give it the --workdir, --mcp and --mcp-url flags of the recorded run\n", strings.Join(missing, ", "))
	}
	if rep.Diverged() {
		return exitDiverged
	}
	return exitOK
}

var viewCommand = &command{
	name:    "view",
	args:    "[-o report.html] run.jsonl",
	summary: "write a recorded run as a self-contained HTML report",
	doc: `View writes the run recorded in a transcript (--record of run and demo)
as one self-contained HTML page: a timeline of turns with each tool call as
a bar as long as it took, failures with their errors and stacks, tokens per
turn, and the conversation. The page runs no script and loads nothing.
Without -o, the report of run.jsonl is written to run.html.`,
	exits: []exitStatus{
		{exitOK, "ok", "the report was written"},
		{exitError, "error", "the transcript could not be read, or the report written"},
		usageStatus,
	},
	setup: func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
		out := fs.String("o", "", "write the report to `file`")
		return func(ctx context.Context, c *cli, args []string) int {
			if len(args) != 1 {
				return c.usageError("view", "want one transcript file, got %d arguments", len(args))
			}
			dest := *out
			if dest == "" {
				dest = strings.TrimSuffix(args[0], filepath.Ext(args[0])) + ".html"
			}
			if dest == args[0] {
				return c.usageError("view", "the report would overwrite the transcript; name it with -o")
			}
			if err := transcript.ViewFile(args[0], dest); err != nil {
				fmt.Fprintf(c.stderr, "toolrun view: %v\n", err)
				return exitError
			}
			fmt.Fprintf(c.stdout, "wrote %s\n", dest)
			return exitOK
		}
	},
}
