package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
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
is the command's base name or the URL's host unless given. Each server has
--mcp-timeout (30s) to start, answer and list its tools. Tools of two
servers that would have one name (a with b__c, a__b with c) are refused.

The environment of an MCP server. A server of --mcp gets only these
variables of toolrun's environment: PATH, HOME, USER, LOGNAME, SHELL, LANG,
LANGUAGE, TZ, TERM, TMPDIR, TMP, TEMP, LC_*, XDG_*, SSL_CERT_FILE,
SSL_CERT_DIR, NODE_EXTRA_CA_CERTS, HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and
NO_PROXY (a proxy URL with a password left out), and on Windows
SYSTEMROOT, SYSTEMDRIVE, WINDIR, COMSPEC, PATHEXT, USERPROFILE, USERNAME,
APPDATA, LOCALAPPDATA, PROGRAMDATA, PROGRAMFILES, PROGRAMFILES(X86),
COMMONPROGRAMFILES, NUMBER_OF_PROCESSORS and PROCESSOR_ARCHITECTURE.
--mcp-env NAME passes one more, such as a token the server needs;
--mcp-env NAME=VALUE sets one. A saved run or transcript keeps the names
of --mcp-env, never a value. A server runs in a process group of its own,
stopped as a whole when the run ends or is interrupted.

Approval. The file tools only read and never need it. MCP tools are other
people's code, so each of their calls needs approval, as --approve says:
  ask   ask at the terminal: yes, no (with a reason for the model), or
        always for that tool; with no terminal at stdin, the run stops
        awaiting approval (exit status 7)
  auto  run every call without asking
  deny  deny every call; the model is told why

Stopping. Ctrl-C or SIGTERM, at the prompt or while a request or a call
runs, stops the run cleanly and saves it as --state says, as a run that
stops awaiting approval is saved, with the command that continues it; a
call that was running is not run again by the resume. The exit status is
130 (SIGINT) or 143 (SIGTERM). A second Ctrl-C stops at once, unsaved.

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
		f.tools.define(fs)
		fs.Var(&f.approve, "approve", "who decides the calls that need approval (MCP tools): `ask` at the terminal, auto (approve) or deny")
		fs.StringVar(&f.record, "record", "", "record the run to `file` (a new file; - for stdout), a JSON Lines transcript for replay and view")
		fs.BoolVar(&f.stream, "stream", false, "stream each response, showing its text as it arrives")
		fs.StringVar(&f.log, "log", "", "append warnings and tool failures to `file` instead of stderr")
		fs.DurationVar(&f.toolTimeout, "tool-timeout", 5*time.Minute, "cancel a tool call that runs longer than `duration` (0: no limit)")
		fs.StringVar(&f.script, "script", "", "answer with the scripted model of `replies.jsonl` (- for stdin) on a local fake server: offline, no API key")
		fs.StringVar(&f.state, "state", "", "save a run that stops awaiting approval or is interrupted to `file` (- for stdout), for toolrun resume; by default a new file in the temporary directory")
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
			if f.record == "-" && f.state == "-" {
				return c.usageError("run", "--record and --state cannot both be standard output")
			}
			if f.script == "-" && len(args) == 1 && args[0] == "-" {
				return c.usageError("run", "the script and the prompt cannot both be standard input")
			}
			specs, err := parseMCPSpecs(f.tools.MCP, f.tools.MCPURL)
			if err != nil {
				return c.usageError("run", "%v", err)
			}
			prompt := args[0]
			if prompt == "-" {
				b, err := readAtMost(c.stdin, maxPrompt)
				if errors.Is(err, errTooLong) {
					return c.usageError("run", "the prompt on standard input %v; pass a shorter one", err)
				}
				if err != nil {
					c.errorf("run", "reading the prompt: %v", err)
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

// maxPrompt bounds a prompt read from standard input.
const maxPrompt = 16 << 20

// errTooLong is the error of readAtMost for input longer than its limit.
var errTooLong = errors.New("is longer than the limit")

// readAtMost reads r to its end, or fails with an error wrapping
// errTooLong if it holds more than limit bytes: a bounded read that never
// passes on a cut input as if it were whole.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(b)) > limit {
		return nil, fmt.Errorf("%w of %d MiB", errTooLong, limit>>20)
	}
	return b, err
}

type runFlags struct {
	model       string
	maxTurns    int
	maxTokens   int
	tools       toolFlags
	approve     approveMode
	record      string
	stream      bool
	log         string
	toolTimeout time.Duration
	script      string
	state       string
}

// errNoKey is the error of a run against the API with no credentials.
var errNoKey = errors.New("no API key: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN")

// noKeyHint is what to do about errNoKey.
const noKeyHint = "hint: export ANTHROPIC_API_KEY=..., or try the run offline with a scripted model: --script replies.jsonl"

// hasKey reports whether the environment holds credentials for the API.
func (c *cli) hasKey() bool {
	return c.getenv("ANTHROPIC_API_KEY") != "" || c.getenv("ANTHROPIC_AUTH_TOKEN") != ""
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
// and tool failures, or more if ANTHROPIC_LOG asks. With shown true (a
// live display, no --log) it leaves out the records the display already
// shows. The run's stop is always left out: the command reports it.
func (c *cli) logger(w io.Writer, shown bool) *slog.Logger {
	level := slog.LevelWarn
	env := c.getenv("ANTHROPIC_LOG")
	switch env {
	case "info":
		level = slog.LevelInfo
	case "debug":
		level = slog.LevelDebug
	}
	h := slog.Handler(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	if env == "" {
		h = shownHandler{Handler: h, toolCalls: shown}
	}
	return slog.New(h)
}

// shownHandler drops the records a command shows another way: the run's
// stop (its summary and error), and with toolCalls the tool calls that
// failed, were denied or not run (the live display's ✗ lines).
type shownHandler struct {
	slog.Handler
	toolCalls bool
}

func (h shownHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "toolrun: run stopped" || (h.toolCalls && strings.HasPrefix(r.Message, "toolrun: tool call ")) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h shownHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return shownHandler{h.Handler.WithAttrs(attrs), h.toolCalls}
}

func (h shownHandler) WithGroup(name string) slog.Handler {
	return shownHandler{h.Handler.WithGroup(name), h.toolCalls}
}

// transcriptFile is a transcript being written, and what to do when the
// run is over.
type transcriptFile struct {
	name string // as the person gave it, or the one made; "-" for stdout
	rec  *transcript.Recorder
	f    *os.File // nil for stdout
}

// createTranscript creates the transcript name, or a new one with a unique
// name in the temporary directory if name is "" (prefix starts the name),
// always with an exclusive create: two runs never share one by accident.
// "-" is stdout.
func (c *cli) createTranscript(name, prefix string, meta map[string]string) (*transcriptFile, error) {
	var f *os.File
	var w io.Writer
	var err error
	switch name {
	case "-":
		w = c.realStdout()
	case "":
		f, err = os.CreateTemp(c.tempDir, prefix+"-"+time.Now().UTC().Format("20060102T150405")+"-*.jsonl")
	default:
		f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%s exists; name another file with --record, or remove it", name)
		}
	}
	if err != nil {
		return nil, err
	}
	if f != nil {
		w, name = f, f.Name()
	}
	return &transcriptFile{name: name, f: f, rec: transcript.NewRecorder(w, &transcript.RecorderOptions{Meta: meta})}, nil
}

// appendTranscript opens the transcript name to record the rest of a
// resumed run after what it holds, without a second header.
func (c *cli) appendTranscript(name string) (*transcriptFile, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	return &transcriptFile{name: name, f: f, rec: transcript.NewRecorder(&skipFirst{w: f}, nil)}, nil
}

// skipFirst drops the first write to w: the header of a recorder that
// appends to a transcript that has one.
type skipFirst struct {
	w       io.Writer
	skipped bool
}

func (s *skipFirst) Write(p []byte) (int, error) {
	if !s.skipped {
		s.skipped = true
		return len(p), nil
	}
	return s.w.Write(p)
}

// close closes the transcript and reports one that could not be written in
// full.
func (t *transcriptFile) close(c *cli, cmd string) {
	err := t.rec.Err()
	if t.f != nil {
		if cerr := t.f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		c.errorf(cmd, "the transcript %s is incomplete: %v", t.name, err)
	}
}

// errorf prints an error of the command cmd once, as "toolrun cmd:
// message", without the "toolrun: " its packages put in front of theirs,
// through printable: an error may quote an MCP server, the API or a file.
func (c *cli) errorf(cmd, format string, args ...any) {
	msg := printable(fmt.Sprintf(format, args...))
	for strings.HasPrefix(msg, "toolrun: ") {
		msg = strings.TrimPrefix(msg, "toolrun: ")
	}
	fmt.Fprintf(c.stderr, "toolrun %s: %s\n", cmd, msg)
}

func (c *cli) runPrompt(ctx context.Context, f runFlags, specs []mcpSpec, prompt string) int {
	fail := func(format string, args ...any) int {
		c.errorf("run", format, args...)
		return exitError
	}
	saved := savedRun{
		Version:     savedRunVersion,
		Model:       f.model,
		MaxTokens:   f.maxTokens,
		Tools:       f.tools,
		Approve:     f.approve,
		Stream:      f.stream,
		Log:         f.log,
		ToolTimeout: f.toolTimeout.String(),
	}
	if f.script != "" {
		script, err := c.readScript(f.script)
		if err != nil {
			return fail("--script: %v", err)
		}
		saved.Script = script
	} else if !c.hasKey() {
		c.errorf("run", "%v", errNoKey)
		fmt.Fprintln(c.stderr, noKeyHint)
		return exitError
	}
	// "-" for the transcript or the state puts them on stdout, and the
	// run's display on stderr.
	if f.record == "-" || f.state == "-" {
		cc := *c
		cc.stdout, cc.stdoutTerminal = c.stderr, isTerminal(c.stderr)
		cc.out = c.stdout
		c = &cc
	}

	s, code := c.startSession(ctx, "run", &saved, specs)
	if s == nil {
		return code
	}
	defer s.close()

	if w := saved.Tools.Workdir; w != "" {
		if abs, err := filepath.Abs(w); err == nil {
			saved.Tools.Workdir = abs // for a resume in another directory
		}
	}
	fmt.Fprintf(c.stdout, "toolrun run: model %s%s\n", f.model, s.modelNote)
	s.printSetup()
	if f.record != "" {
		meta := map[string]string{"name": "toolrun run", "model": f.model}
		if f.tools.Workdir != "" {
			meta["workdir"] = f.tools.Workdir
		}
		var mcpSpecs []string
		for _, sp := range specs {
			mcpSpecs = append(mcpSpecs, sp.name+"="+sp.String())
		}
		if len(mcpSpecs) > 0 {
			meta["mcp"] = strings.Join(mcpSpecs, "; ")
		}
		b, err := json.Marshal(f.tools)
		if err != nil {
			return fail("%v", err)
		}
		meta[metaTools] = string(b)
		tf, err := c.createTranscript(f.record, "toolrun-run", meta)
		if err != nil {
			return fail("--record: %v", err)
		}
		defer tf.close(c, "run")
		s.record(tf)
		saved.Record = tf.name
		if tf.name != "-" {
			if abs, err := filepath.Abs(tf.name); err == nil {
				saved.Record = abs
			}
			fmt.Fprintf(c.stdout, "record: %s\n", tf.name)
		}
	}
	fmt.Fprintf(c.stdout, "\nuser: %s\n", strings.ReplaceAll(strings.TrimSpace(printable(prompt)), "\n", "\n      "))

	params := anthropic.BetaMessageNewParams{
		Model:     anthropic.Model(f.model),
		MaxTokens: int64(f.maxTokens),
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(prompt))},
	}
	r := toolrun.New(s.client, params, s.tools, s.options(f.maxTurns))
	return s.finish(ctx, r, c.newApprover(f.approve, "--approve auto", "", s.d.writer(c.stdout), s.d.writer(c.stderr)), f.state)
}
