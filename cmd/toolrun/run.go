package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/fstools"
	"github.com/toolrun/toolrun/transcript"
)

var runCommand = &command{
	name:    "run",
	args:    "[flags] prompt",
	summary: "run a prompt against the API, with MCP servers and read-only file tools",
	doc: `Run sends the prompt to the model and runs the tool-use loop to its end:
it runs the tools the model asks for, sends their results back, and repeats
until the model answers without tools or a limit stops it. The prompt is one
argument; "-" reads it from standard input.

The API key and base URL come from the environment, as the anthropic client
reads them: ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN, and
ANTHROPIC_BASE_URL.

Tools. --workdir DIR gives the model list_files, read_file and grep,
read-only and confined to DIR: a path outside it ("..", an absolute path
elsewhere, a symbolic link that leads out) is refused. --mcp starts an MCP
server and talks to it over stdio: --mcp "[name=]command args", quoted as
for a shell. --mcp-url "[name=]URL" reaches one over streamable HTTP. Both
may be repeated. The model sees each MCP tool as name__tool, where the name
is the command's base name or the URL's host unless given. MCP servers do
not inherit ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN.

Approval. The file tools only read and never need it. MCP tools are other
people's code, so each of their calls needs approval, as --approve says:
  ask   ask at the terminal: yes, no (with a reason for the model), or
        always for that tool; with no terminal at stdin, the run stops
        awaiting approval (exit status 7)
  auto  run every call without asking
  deny  deny every call; the model is told why

Output. On a terminal, progress is live: the turn, a spinner with the time
so far for the model and for each tool running, failures in red, usage at
the end. Otherwise, plain lines. Warnings and tool failures are logged to
stderr, or to the --log file. --record writes a JSON Lines transcript of
the run for "toolrun replay" and "toolrun view".`,
	setup: func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
		f := runFlags{approve: approveAsk}
		fs.StringVar(&f.model, "model", string(anthropic.ModelClaudeSonnet5_5), "the `model` to ask")
		fs.IntVar(&f.maxTurns, "max-turns", toolrun.DefaultMaxTurns, "stop after `n` model requests")
		fs.IntVar(&f.maxTokens, "max-tokens", 4096, "the most tokens of each response, `n`")
		fs.Var(&f.mcp, "mcp", "start the MCP server `\"[name=]command args\"` and use its tools (repeatable)")
		fs.Var(&f.mcpURL, "mcp-url", "use the tools of the MCP server at `\"[name=]URL\"`, over streamable HTTP (repeatable)")
		fs.StringVar(&f.workdir, "workdir", "", "give the model read-only file tools confined to `dir`")
		fs.Var(&f.approve, "approve", "who decides the calls that need approval (MCP tools): `ask` at the terminal, auto (approve) or deny")
		fs.StringVar(&f.record, "record", "", "record the run to `file`, a JSON Lines transcript for replay and view")
		fs.BoolVar(&f.stream, "stream", false, "stream each response, showing its text as it arrives")
		fs.StringVar(&f.log, "log", "", "append warnings and tool failures to `file` instead of stderr")
		fs.DurationVar(&f.toolTimeout, "tool-timeout", 5*time.Minute, "cancel a tool call that runs longer than `duration` (0: no limit)")
		return func(ctx context.Context, c *cli, args []string) int {
			switch {
			case len(args) == 0:
				return c.usageError("run", "no prompt given")
			case len(args) > 1:
				return c.usageError("run", "the prompt is one argument, got %d; quote it", len(args))
			case f.maxTurns < 1:
				return c.usageError("run", "--max-turns must be at least 1")
			case f.maxTokens < 1:
				return c.usageError("run", "--max-tokens must be at least 1")
			case f.toolTimeout < 0:
				return c.usageError("run", "--tool-timeout must not be negative")
			}
			specs, err := parseMCPSpecs(f.mcp, f.mcpURL)
			if err != nil {
				return c.usageError("run", "%v", err)
			}
			prompt := args[0]
			if prompt == "-" {
				b, err := io.ReadAll(c.stdin)
				if err != nil {
					fmt.Fprintf(c.stderr, "toolrun run: reading the prompt: %v\n", err)
					return exitError
				}
				prompt = string(b)
			}
			if strings.TrimSpace(prompt) == "" {
				return c.usageError("run", "the prompt is empty")
			}
			return c.runPrompt(ctx, f, specs, prompt)
		}
	},
}

type runFlags struct {
	model       string
	maxTurns    int
	maxTokens   int
	mcp, mcpURL listFlag
	workdir     string
	approve     approveMode
	record      string
	stream      bool
	log         string
	toolTimeout time.Duration
}

// client returns a client configured from the environment, as
// anthropic.NewClient configures itself, with c's environment taking
// precedence, so tests can set it.
func (c *cli) client() anthropic.Client {
	var opts []option.RequestOption
	if u := c.getenv("ANTHROPIC_BASE_URL"); u != "" {
		opts = append(opts, option.WithBaseURL(u))
	}
	if k := c.getenv("ANTHROPIC_API_KEY"); k != "" {
		opts = append(opts, option.WithAPIKey(k))
	} else if t := c.getenv("ANTHROPIC_AUTH_TOKEN"); t != "" {
		opts = append(opts, option.WithAuthToken(t))
	}
	return anthropic.NewClient(opts...)
}

// logger returns the logger of a run, writing text records to w: warnings
// and tool failures, or more if ANTHROPIC_LOG asks.
func (c *cli) logger(w io.Writer) *slog.Logger {
	level := slog.LevelWarn
	switch c.getenv(toolrun.LogEnv) {
	case "info":
		level = slog.LevelInfo
	case "debug":
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// record creates the transcript file name and returns a recorder writing
// to it, and the function that closes it and reports a transcript that
// could not be written in full.
func (c *cli) record(name string, meta map[string]string) (*transcript.Recorder, func(cmd string), error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, nil, err
	}
	rec := transcript.NewRecorder(f, &transcript.RecorderOptions{Meta: meta})
	return rec, func(cmd string) {
		err := rec.Err()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			fmt.Fprintf(c.stderr, "toolrun %s: the transcript %s is incomplete: %v\n", cmd, name, err)
		}
	}, nil
}

func (c *cli) runPrompt(ctx context.Context, f runFlags, specs []mcpSpec, prompt string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(c.stderr, "toolrun run: "+format+"\n", args...)
		return exitError
	}

	logNote, logOut := "logged to stderr", io.Writer(c.stderr)
	if f.log != "" {
		lf, err := os.OpenFile(f.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fail("%v", err)
		}
		defer lf.Close()
		logNote, logOut = "logged to "+f.log, lf
	}
	d := c.newDisplay(logNote)
	if f.log == "" {
		logOut = d.writer(c.stderr)
	}
	log := c.logger(logOut)

	var tools []toolrun.Tool
	var toolLines []string
	if f.workdir != "" {
		root, err := fstools.Open(f.workdir, nil)
		if err != nil {
			return fail("--workdir: %v", err)
		}
		defer root.Close()
		var names []string
		for _, t := range root.Tools() {
			tools = append(tools, t)
			names = append(names, t.Name())
		}
		toolLines = append(toolLines, fmt.Sprintf("%s (read-only, in %s)", strings.Join(names, ", "), f.workdir))
	}
	mcpNote := map[approveMode]string{
		approveAsk:  "each call needs approval",
		approveAuto: "approved: --approve auto",
		approveDeny: "denied: --approve deny",
	}[f.approve]
	servers, serverTools, err := connectMCP(ctx, specs, func(name string) toolrun.ToolConfig {
		switch f.approve {
		case approveAsk:
			return toolrun.ToolConfig{Policy: toolrun.RequireApproval(fmt.Sprintf("a tool of MCP server %q", name))}
		case approveDeny:
			return toolrun.ToolConfig{Policy: toolrun.Never(denyFlagReason)}
		}
		return toolrun.ToolConfig{}
	}, log)
	if err != nil {
		return fail("MCP server %v", err)
	}
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	for i, list := range serverTools {
		var names []string
		for _, t := range list {
			tools = append(tools, t)
			names = append(names, t.Name())
		}
		if len(names) == 0 {
			names = []string{"no tools"}
		}
		toolLines = append(toolLines, fmt.Sprintf("%s (MCP server %q; %s)", strings.Join(names, ", "), specs[i].name, mcpNote))
	}

	fmt.Fprintf(c.stdout, "toolrun run: model %s\n", f.model)
	if len(toolLines) == 0 {
		toolLines = []string{"none (give --workdir, --mcp or --mcp-url)"}
	}
	fmt.Fprintf(c.stdout, "tools: %s\n", strings.Join(toolLines, "\n       "))
	if f.log == "" {
		fmt.Fprintln(c.stdout, "log: warnings and tool failures go to stderr")
	} else {
		fmt.Fprintf(c.stdout, "log: warnings and tool failures go to %s\n", f.log)
	}

	opts := &toolrun.Options{
		Logger:   log,
		MaxTurns: f.maxTurns,
		Stream:   f.stream,
		Timeouts: toolrun.Timeouts{Tool: f.toolTimeout}, // zero: no limit
		OnEvent:  d.event,
	}
	if f.record != "" {
		var mcpSpecs []string
		for _, s := range specs {
			mcpSpecs = append(mcpSpecs, s.name+"="+s.String())
		}
		meta := map[string]string{"name": "toolrun run", "model": f.model}
		if f.workdir != "" {
			meta["workdir"] = f.workdir
		}
		if len(mcpSpecs) > 0 {
			meta["mcp"] = strings.Join(mcpSpecs, "; ")
		}
		rec, done, err := c.record(f.record, meta)
		if err != nil {
			return fail("%v", err)
		}
		defer done("run")
		opts.OnEvent = func(ctx context.Context, e toolrun.Event) {
			rec.Observe(ctx, e)
			d.event(ctx, e)
		}
		fmt.Fprintf(c.stdout, "record: %s\n", f.record)
	}
	fmt.Fprintf(c.stdout, "\nuser: %s\n", strings.ReplaceAll(strings.TrimSpace(prompt), "\n", "\n      "))

	params := anthropic.BetaMessageNewParams{
		Model:     anthropic.Model(f.model),
		MaxTokens: int64(f.maxTokens),
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(prompt))},
	}
	r := toolrun.New(c.client(), params, tools, opts)
	a := c.newApprover(f.approve, "--approve auto", "", d.writer(c.stdout), d.writer(c.stderr))

	d.start()
	res, err := runWithApproval(ctx, r, a)
	d.close()
	d.summary(res)
	switch {
	case res == nil:
		return fail("%v", err)
	case ctx.Err() != nil:
		fmt.Fprintln(c.stderr, "toolrun run: interrupted")
		return exitCode(toolrun.StopCanceled)
	case err != nil:
		fmt.Fprintf(c.stderr, "toolrun run: %v\n", err)
	case res.StopReason == toolrun.StopAwaitingApproval && a == nil:
		var names []string
		for _, p := range res.Pending {
			names = append(names, p.Call.Name)
		}
		fmt.Fprintf(c.stderr, "toolrun run: no terminal to ask for approval of %s; rerun at a terminal, or with --approve auto or --approve deny\n", strings.Join(names, ", "))
	}
	return exitCode(res.StopReason)
}
