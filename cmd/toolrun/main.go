// Command toolrun runs Claude's tool-use loop from the command line. It is a
// thin client of package github.com/toolrun/toolrun.
//
// Usage:
//
//	toolrun <command> [flags] [arguments]
//
// The commands are:
//
//	run      run a prompt against the API, with MCP servers and read-only file tools
//	demo     run a multi-turn tool-use conversation with local tools
//	replay   replay a recorded run offline and report where its tools now differ
//	view     write a recorded run as a self-contained HTML report
//	resume   continue a saved run: one that stopped awaiting approval or was interrupted
//	version  print the version of toolrun, the Go it was built with, and its revision
//	serve    serve the runner to any language over HTTP, as AG-UI 1.0 (SSE)
//	help     show help for toolrun or one of its commands
//
// Run "toolrun <command> --help" for a command's flags; flags may come
// before or after the arguments, with one dash or two. The exit status of run and demo says how
// the run stopped: 0 when the model finished (end_turn), 2 for a usage
// error, and a distinct code for every other stop reason, listed by
// "toolrun help".
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"

	"golang.org/x/term"

	"github.com/toolrun/toolrun"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	var got atomic.Value // the first signal, an os.Signal
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		first := <-sigs
		got.Store(first)
		cancel() // the run stops cleanly: summary, run saved, MCP servers closed
		// A second Ctrl-C: the person does not want to wait for the clean
		// stop. A second SIGTERM is not that: timeout(1) and others that
		// signal a process and then its group send two at once, and the
		// run is saved only by the clean stop (SIGKILL is the way to stop
		// at once).
		for sig := range sigs {
			if sig == os.Interrupt {
				fmt.Fprintln(os.Stderr, "toolrun: stopped at once by a second Ctrl-C; the run is not saved")
				os.Exit(signalExit(first))
			}
		}
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	if sig, ok := got.Load().(os.Signal); ok && code == exitInterrupted {
		code = signalExit(sig)
	}
	os.Exit(code)
}

// Exit statuses of a run stopped by a signal, as shells report a process
// killed by one: 128 plus the signal's number.
const (
	exitInterrupted = 130 // SIGINT
	exitTerminated  = 143 // SIGTERM
)

// signalExit returns the exit status for a run stopped by sig.
func signalExit(sig os.Signal) int {
	if sig == syscall.SIGTERM {
		return exitTerminated
	}
	return exitInterrupted
}

// run runs the toolrun command with args (without the program name) and
// returns its exit status. Tests call it in-process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	c := &cli{
		stdin:          stdin,
		stdout:         stdout,
		stderr:         stderr,
		getenv:         getenv,
		interactive:    isTerminal(stdin),
		stdoutTerminal: isTerminal(stdout),
		terminalWidth:  terminalWidth,
	}
	return c.run(ctx, args)
}

// cli is what a command runs with: its standard streams, its environment,
// and whether a person is at stdin to answer prompts.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// out is the real standard output where stdout is the display moved
	// to stderr, for a file named "-"; nil means stdout.
	out    io.Writer
	getenv func(string) string
	// interactive reports that stdin is a terminal, so approvals can be
	// asked for. Tests set it to drive the prompt with a scripted reader.
	interactive bool
	// stdoutTerminal reports that stdout is a terminal, so a run's
	// progress is shown live.
	stdoutTerminal bool
	// tempDir is where new transcripts and saved runs go unless named;
	// "" is the temporary directory ($TMPDIR).
	tempDir string
	// terminalWidth returns the width of the terminal w, 0 if unknown.
	terminalWidth func(w io.Writer) int
}

// isTerminal reports whether rw, a reader or a writer, is a terminal. A
// character device is not enough: /dev/null and /dev/zero are ones too, with
// nobody behind them.
func isTerminal(rw any) bool {
	f, ok := rw.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// terminalWidth returns the width of the terminal w, or 0 if w is not one
// or its size is unknown.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return width
}

// command is one toolrun command. Adding a command is adding one to
// [commands].
type command struct {
	name    string
	args    string // the synopsis after the command's name
	summary string // one line, for the command list
	doc     string // what the command does, for its help
	// setup defines the command's flags on fs and returns the function that
	// runs the command once fs is parsed, with the arguments left over.
	setup func(fs *flag.FlagSet) func(ctx context.Context, c *cli, args []string) int
	// exits lists the command's exit statuses for its help; nil means the
	// statuses of a run, [exitCodes].
	exits []exitStatus
}

// exitStatus is one exit status of a command, for its help.
type exitStatus struct {
	code    int
	name    string
	meaning string
}

// commands lists the commands in the order help shows them.
var commands = []*command{
	runCommand,
	demoCommand,
	replayCommand,
	viewCommand,
	resumeCommand,
	serveCommand,
	versionCommand,
}

func lookup(name string) *command {
	for _, cmd := range commands {
		if cmd.name == name {
			return cmd
		}
	}
	return nil
}

// Exit statuses that are not a run's stop reason.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// exitCodes maps each way a run stops to the command's exit status. Every
// reason has its own code, so a script can tell them apart.
var exitCodes = []struct {
	reason  toolrun.StopReason
	code    int
	meaning string
}{
	{toolrun.StopEndTurn, exitOK, "the model finished"},
	{toolrun.StopError, exitError, "a request failed, or another error"},
	{toolrun.StopMaxTurns, 3, "the turn limit was reached"},
	{toolrun.StopMaxTokens, 4, "a response was cut off at max_tokens"},
	{toolrun.StopRefusal, 5, "the model refused"},
	{toolrun.StopContextWindow, 6, "the model's context window was exceeded"},
	{toolrun.StopAwaitingApproval, 7, "a tool call still awaits approval"},
	{toolrun.StopHook, 8, "a hook stopped the run"},
	{toolrun.StopBudget, 9, "a budget was used up"},
	{toolrun.StopCanceled, exitInterrupted, "interrupted by SIGINT (Ctrl-C); 143 for SIGTERM"},
}

// exitCode returns the exit status for a run that stopped for reason. A
// reason this command does not know is an error.
func exitCode(reason toolrun.StopReason) int {
	for _, e := range exitCodes {
		if e.reason == reason {
			return e.code
		}
	}
	return exitError
}

func (c *cli) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(c.stderr, "toolrun: no command given")
		c.usage(c.stderr)
		return exitUsage
	}
	switch name := args[0]; name {
	case "help", "-h", "-help", "--help":
		return c.help(args[1:])
	default:
		cmd := lookup(name)
		if cmd == nil {
			fmt.Fprintf(c.stderr, "toolrun: unknown command %q\n", name)
			fmt.Fprintln(c.stderr, `run "toolrun help" for the commands`)
			return exitUsage
		}
		return c.runCommand(ctx, cmd, args[1:])
	}
}

// help shows the help of toolrun, or of the command named in args.
func (c *cli) help(args []string) int {
	switch len(args) {
	case 0:
		c.usage(c.stdout)
		return exitOK
	case 1:
		if cmd := lookup(args[0]); cmd != nil {
			c.commandHelp(c.stdout, cmd)
			return exitOK
		}
		fmt.Fprintf(c.stderr, "toolrun help: unknown command %q\n", args[0])
	default:
		fmt.Fprintln(c.stderr, "toolrun help: takes at most one command")
	}
	fmt.Fprintln(c.stderr, `run "toolrun help" for the commands`)
	return exitUsage
}

func (c *cli) runCommand(ctx context.Context, cmd *command, args []string) int {
	fs := newFlagSet(cmd, io.Discard)
	runCmd := cmd.setup(fs)
	positional, err := parseFlags(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.commandHelp(c.stdout, cmd)
			return exitOK
		}
		return c.usageError(cmd.name, "%v", err)
	}
	return runCmd(ctx, c, positional)
}

// parseFlags parses args with fs, allowing flags after the arguments too
// ("toolrun view run.jsonl -o report.html"). Everything after "--" is an
// argument. It returns the arguments.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// newFlagSet returns the command's empty flag set, which prints its
// defaults to w and leaves reporting errors and printing help to the
// caller.
func newFlagSet(cmd *command, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("toolrun "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {}
	return fs
}

// usageError reports a mistake in the arguments of the command name and returns
// [exitUsage].
func (c *cli) usageError(name, format string, args ...any) int {
	fmt.Fprintf(c.stderr, "toolrun %s: %s\n", name, printable(fmt.Sprintf(format, args...)))
	fmt.Fprintf(c.stderr, "run \"toolrun %s --help\" for usage\n", name)
	return exitUsage
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprint(w, `toolrun runs Claude's tool-use loop: it sends the conversation, runs the
tools the model asks for, sends their results back, and repeats until the
model answers without tools.

usage:
  toolrun <command> [flags] [arguments]

commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, cmd := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintf(tw, "  %s\t%s\n", "help", "show help for toolrun or one of its commands")
	tw.Flush()
	fmt.Fprint(w, `
Run "toolrun <command> --help" for a command's flags. The API key and base
URL come from the environment, as the anthropic client reads them
(ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN, ANTHROPIC_BASE_URL).

The exit status of run and demo says how the run stopped:
`)
	printExitCodes(w, nil)
}

func (c *cli) commandHelp(w io.Writer, cmd *command) {
	fmt.Fprintf(w, "usage: toolrun %s %s\n\n%s\n", cmd.name, cmd.args, strings.TrimSpace(cmd.doc))
	fs := newFlagSet(cmd, w)
	cmd.setup(fs)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nflags:\n")
		var buf bytes.Buffer
		fs.SetOutput(&buf)
		fs.PrintDefaults()
		w.Write(twoDashes(buf.Bytes()))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "exit status:")
	printExitCodes(w, cmd.exits)
}

// twoDashes returns the flag list of [flag.FlagSet.PrintDefaults] with
// each flag written with two dashes ("--state"), as the docs and the
// messages write them; the flag package takes both.
func twoDashes(defaults []byte) []byte {
	lines := bytes.SplitAfter(defaults, []byte("\n"))
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("  -")) {
			lines[i] = append([]byte("  --"), l[len("  -"):]...)
		}
	}
	return bytes.Join(lines, nil)
}

// printExitCodes prints exits, or the statuses of a run if exits is nil.
func printExitCodes(w io.Writer, exits []exitStatus) {
	if exits == nil {
		for _, e := range exitCodes {
			exits = append(exits, exitStatus{e.code, string(e.reason), e.meaning})
			if e.code == exitError {
				exits = append(exits, usageStatus)
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range exits {
		fmt.Fprintf(tw, "  %d\t%s\t%s\n", e.code, e.name, e.meaning)
	}
	tw.Flush()
}

// usageStatus is the exit status of every command given a wrong command
// line.
var usageStatus = exitStatus{exitUsage, "usage", "the command line is wrong"}
