package storetest

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
	"os/exec"
	"path/filepath"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// The environment of a resumer child of RunResumers.
const (
	envResume = "TOOLRUN_STORETEST_RESUME" // how the child resumes the run: "open" or "resume"
	// The dir of the child is envDir's.
)

const (
	resumerRounds = 8 // races of two resumers for each way of resuming
	resumerID     = "storetest-resumers"
	resumerCall   = "toolu_append"
)

// The ways RunResumers has its two processes resume the run: both Open it,
// both Resume one State's JSON, or one of each.
var resumerModes = [][2]string{{"open", "open"}, {"resume", "resume"}, {"open", "resume"}}

// RunResumers checks that a call of a tool that is not
// [toolrun.ToolConfig.Idempotent] runs at most once when two processes
// resume one suspended run at the same moment, which is what Save's
// compare-and-swap is for (see [toolrun.Store]). It returns every violation
// found, joined with errors.Join, or nil.
//
// In a directory under dir for each race, it suspends a run that awaits a
// person's approval of one call in the store that open opens there, then
// starts two copies of the running test binary, whose TestMain must call
// [Child] with the same open function. Each copy continues the run the way
// a program would, with [toolrun.Open] on the store or [toolrun.Resume] of
// the suspended State's JSON (both copies one way, or one of each), allows
// the call with [toolrun.Runner.Decide], and runs it once both are ready.
// The tool appends a line to a file, so its executions are counted outside
// either process. Exactly one copy must finish the run; the other must stop
// with an error wrapping [toolrun.ErrRunBusy] without sending a request or
// running the tool; the call must run exactly once; and the store must then
// hold the finished run. Each copy talks to a [toolruntest] server of its
// own. RunResumers stops at the first race that fails. The run's id starts
// with "storetest-". Cancelling ctx kills the children.
func RunResumers(ctx context.Context, dir string, open func(dir string) (toolrun.Store, error)) error {
	for _, modes := range resumerModes {
		for round := range resumerRounds {
			d := filepath.Join(dir, fmt.Sprintf("%s-%s-%d", modes[0], modes[1], round))
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("storetest: %w", err)
			}
			if err := resumerRace(ctx, d, modes, open); err != nil {
				// The races after it would most likely fail the same way,
				// and each costs two processes.
				return fmt.Errorf("storetest: two resumers (%s and %s), race %d: %w", modes[0], modes[1], round, err)
			}
		}
	}
	return nil
}

// resumerRace suspends a run in dir, has two children continue it at once,
// the first as modes[0] says and the second as modes[1] says, and checks
// how they ended.
func resumerRace(ctx context.Context, dir string, modes [2]string, open func(dir string) (toolrun.Store, error)) error {
	if err := suspend(ctx, dir, open); err != nil {
		return err
	}

	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
		rest  bytes.Buffer // stderr, and stdout after "ready"
	}
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.stdin.Close()
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	}()
	for _, mode := range modes {
		p := &proc{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^$")}
		p.cmd.Env = append(os.Environ(), envDir+"="+dir, envResume+"="+mode)
		p.cmd.Stderr = &p.rest
		stdout, err := p.cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			return err
		}
		if err := p.cmd.Start(); err != nil {
			return fmt.Errorf("starting a child: %w", err)
		}
		p.out = bufio.NewReader(stdout)
		procs = append(procs, p)
	}
	// Each child says it is ready once it has resumed the run and allowed
	// the call; then both are let go at once, so that they race from their
	// first save.
	for i, p := range procs {
		line, err := p.out.ReadString('\n')
		if line != "ready\n" {
			rest, _ := io.ReadAll(p.out)
			return fmt.Errorf("child %d (%s) did not get ready (does TestMain call storetest.Child first?): %q, %v\n%s%s", i, modes[i], line, err, rest, p.rest.String())
		}
	}
	for _, p := range procs {
		p.stdin.Close()
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	got := map[string]int{}
	var outs []string
	for i, p := range procs {
		rest, _ := io.ReadAll(p.out)
		err := p.cmd.Wait()
		out := string(rest) + p.rest.String()
		outs = append(outs, fmt.Sprintf("child %d (%s):\n%s", i, modes[i], out))
		if err != nil {
			fail("child %d (%s): %v\n%s", i, modes[i], err, out)
			continue
		}
		for line := range strings.Lines(string(rest)) {
			if strings.HasPrefix(line, "stop=") {
				got[strings.TrimSpace(line)]++
			}
		}
	}
	procs = nil
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// The winner sends the request that follows the approval; the loser is
	// refused at its first save, before it sends or runs anything.
	const won, lost = "stop=end_turn busy=false requests=1", "stop=error busy=true requests=0"
	if got[won] != 1 || got[lost] != 1 || len(got) != 2 {
		fail("how the two children stopped: got %v, want one %q and one %q\n%s", got, won, lost, strings.Join(outs, ""))
	}
	runs, err := os.ReadFile(filepath.Join(dir, "executions"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if got, want := string(runs), "append "+resumerCall+"\n"; got != want {
		fail("executions of the call: got %q, want %q (exactly one)", got, want)
	}
	s, err := open(dir)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("open: %w", err))...)
	}
	if c, ok := s.(io.Closer); ok {
		defer c.Close()
	}
	switch st, err := s.Load(ctx, resumerID); {
	case err != nil:
		fail("Load after the race: %v", err)
	case st.StopReason != toolrun.StopEndTurn || st.Calls() != nil:
		fail("Load after the race: got a run stopped with %q and %d calls pending, want the finished run", st.StopReason, len(st.Calls()))
	}
	if err := s.Delete(ctx, resumerID); err != nil {
		fail("Delete: %v", err)
	}
	return errors.Join(errs...)
}

// suspend runs the run in the store open(dir) opens until it awaits
// approval of its one call, and writes its State to dir/state.json.
func suspend(ctx context.Context, dir string, open func(dir string) (toolrun.Store, error)) error {
	s, err := open(dir)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if c, ok := s.(io.Closer); ok {
		defer c.Close()
	}
	if err := s.Delete(ctx, resumerID); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	srv := toolruntest.New(nil, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse(resumerCall, "append", map[string]string{"id": resumerCall}))))
	defer srv.Close()
	r, err := toolrun.Open(ctx, srv.Client(option.WithMaxRetries(0)), resumerParams(), []toolrun.Tool{AppendTool(dir)}, resumerOptions(s))
	if err != nil {
		return fmt.Errorf("toolrun.Open: %w", err)
	}
	if res, err := r.Run(ctx); err != nil || res.StopReason != toolrun.StopAwaitingApproval {
		return fmt.Errorf("suspending the run: got %q, %v; want %q", res.StopReason, err, toolrun.StopAwaitingApproval)
	}
	if errs := srv.Errors(); len(errs) > 0 {
		return fmt.Errorf("the fake server rejected a request: %w", errors.Join(errs...))
	}
	data, err := json.Marshal(r.State())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "state.json"), data, 0o644)
}

// resumerChild is a child of RunResumers: it continues the run in the store
// open(dir) opens as mode says, allows the call, prints "ready", waits for
// its stdin to close, runs, and prints how the run stopped.
func resumerChild(mode string, open func(dir string) (toolrun.Store, error)) error {
	dir := os.Getenv(envDir)
	s, err := open(dir)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if c, ok := s.(io.Closer); ok {
		defer c.Close()
	}
	srv := toolruntest.New(nil, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
	defer srv.Close()
	client := srv.Client(option.WithMaxRetries(0))
	ctx := context.Background()
	tools := []toolrun.Tool{AppendTool(dir)}
	var r *toolrun.Runner
	switch mode {
	case "open":
		r, err = toolrun.Open(ctx, client, resumerParams(), tools, resumerOptions(s))
	case "resume":
		var st toolrun.State
		data, err := os.ReadFile(filepath.Join(dir, "state.json"))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &st); err != nil {
			return err
		}
		r, err = toolrun.Resume(client, &st, tools, resumerOptions(s))
		if err != nil {
			return fmt.Errorf("toolrun.Resume: %w", err)
		}
	default:
		return fmt.Errorf("unknown way of resuming %q", mode)
	}
	if err != nil {
		return fmt.Errorf("toolrun.Open: %w", err)
	}
	if err := r.Decide(resumerCall, toolrun.Decision{}); err != nil {
		return fmt.Errorf("decide: %w", err)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin) // the parent closes it to start the race
	res, err := r.Run(ctx)
	fmt.Printf("error: %v\nstop=%s busy=%t requests=%d\n", err, res.StopReason, errors.Is(err, toolrun.ErrRunBusy), len(srv.Requests()))
	if errs := srv.Errors(); len(errs) > 0 {
		return fmt.Errorf("the fake server rejected a request: %w", errors.Join(errs...))
	}
	return nil
}

// AppendTool returns the tool [RunResumers] races: it appends the line
// "append <id>" to dir/executions, is not idempotent, and needs a person's
// approval, so that its executions can be counted outside any process.
func AppendTool(dir string) toolrun.Tool {
	type in struct {
		ID string `json:"id"`
	}
	t := toolrun.NewTool("append", "Append a line (not idempotent)", func(ctx context.Context, in in) (string, error) {
		f, err := os.OpenFile(filepath.Join(dir, "executions"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return "", err
		}
		defer f.Close()
		_, err = fmt.Fprintf(f, "append %s\n", in.ID)
		return "appended " + in.ID, err
	})
	t.Policy = policy.RequireApproval("appends")
	return t
}

func resumerParams() anthropic.BetaMessageNewParams {
	return anthropic.BetaMessageNewParams{
		Model:     "claude-test",
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("append a line"))},
	}
}

func resumerOptions(s toolrun.Store) *toolrun.Options {
	return &toolrun.Options{Logger: slog.New(slog.DiscardHandler), Store: s, RunID: resumerID}
}
