package toolrun_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// The runs of TestFaultInjection that put a Store to the test, under the
// same faults as the others:
//
//   - Two resumers. The run suspends awaiting approval of a call of
//     "charge" (after the calls of its turn that needed none have run), with
//     its state in a filestore.Store. Two runners then continue it at the same
//     moment, each with Open on the store or Resume of the suspended State's
//     JSON (both one way, or one of each), each allowing the call: exactly
//     one must go on, and the other must stop with ErrRunBusy having sent no
//     request and run no tool. The two are goroutines in most of these runs
//     and processes (this test binary, re-run as TestFaultChild against the
//     same fake server) in the rest.
//   - A kill during saves. A process runs the run with a filestore.Store and kills
//     itself with SIGKILL at a Save drawn from the plan: before it, after
//     it, or while it writes. The parent then Opens the run and finishes it.
//     A call that had started is answered as interrupted and never run
//     again, unless its tool ("fetch") is idempotent, when it may run once
//     more.
//
// Either way the run ends with a runner in the parent that Opens the run and
// runs it to its end, and whose Result gets every check of the other runs.
// The tools of these runs journal each entry and exit to a file, with
// O_APPEND, and the runners each ToolFinished that ran, so that "no call runs
// twice" is counted across processes and kills.
//
// A process costs about a quarter of a CPU second under the race detector,
// as much as eight runs in goroutines, so processes are a small share:
// about 15 runs with two resumer processes and 25 with a killed process in
// a full run of 1,000 (the shares below), 4 in all with -short; the
// goroutine races are 6 in 100. Measured on two shared cores with seed 1,
// these runs take the suite from 33 to 50 CPU seconds, and from 70 to 82
// seconds of wall time.
const (
	shareResumers     = 60 // thousandths of the runs: two resumers in goroutines
	shareResumerProcs = 15 // two resumers in processes
	shareKills        = 25 // a process killed at a save
)

// The kinds of faultStore.
const (
	storeNone = iota
	storeResumers
	storeKill
)

// faultStore is how a run of TestFaultInjection puts a Store to the test,
// if it does.
type faultStore struct {
	kind      int           // storeNone, storeResumers or storeKill
	procs     bool          // storeResumers: the resumers are processes, not goroutines
	modes     [2]string     // storeResumers: how each resumer continues the run, "open" or "resume"
	killAt    int           // storeKill: the Save, from 1, at which the process is killed
	killHow   string        // storeKill: "before" that Save, "amid" it or "after" it
	killDelay time.Duration // storeKill, amid: how long after the Save begins
}

func (f faultStore) String() string {
	switch f.kind {
	case storeResumers:
		where := "goroutines"
		if f.procs {
			where = "processes"
		}
		return fmt.Sprintf("two resumers in %s (%s and %s)", where, f.modes[0], f.modes[1])
	case storeKill:
		s := fmt.Sprintf("a process killed %s save %d", f.killHow, f.killAt)
		if f.killHow == "amid" {
			s = fmt.Sprintf("a process killed %v into save %d", f.killDelay, f.killAt)
		}
		return s
	}
	return "no store"
}

// drawStore draws whether and how the run puts a Store to the test. It
// draws last, so the other runs are as they were before these existed.
func (p *faultPlan) drawStore(rng *rand.Rand) {
	switch x := rng.IntN(1000); {
	case x < shareResumers+shareResumerProcs:
		p.store.kind = storeResumers
		p.store.procs = x >= shareResumers
		p.store.modes = [...][2]string{{"open", "open"}, {"resume", "resume"}, {"open", "resume"}}[rng.IntN(3)]
		p.turns = max(p.turns, 2) // the first turn asks for the charge
	case x < shareResumers+shareResumerProcs+shareKills:
		p.store.kind = storeKill
		// About as many saves as the run makes: one before the first
		// request, then for each turn one when its response arrives, two
		// for each call and one to commit it.
		p.store.killAt = 1 + rng.IntN(3+5*(p.turns-1))
		p.store.killHow = [...]string{"before", "amid", "after"}[rng.IntN(3)]
		p.store.killDelay = time.Duration(rng.IntN(1000)) * time.Microsecond
	default:
		return
	}
	// A turn limit or a cancellation would stop these runs before what
	// they test; the other runs test those.
	p.maxTurns, p.cancelAt = 0, 0
}

// approvalTurn reports whether the response of turn asks for the call that
// awaits approval.
func (p *faultPlan) approvalTurn(turn int) bool { return p.store.kind == storeResumers && turn == 1 }

// chargeID is the id of the call that awaits approval.
func (p *faultPlan) chargeID() string { return fmt.Sprintf("r%d_t1_c", p.run) }

// runID is the run's id in its Store.
func (p *faultPlan) runID() string { return fmt.Sprintf("run-%d", p.run) }

// deadline is how long the run may take before it counts as a hang: a run
// with a Store runs two or three runners, and may start processes.
func (p *faultPlan) deadline() time.Duration {
	if p.store.kind != storeNone {
		return 60 * time.Second
	}
	return 30 * time.Second
}

// faultCalls is what happened to the calls of a run, by tool_use id.
type faultCalls struct {
	entered    map[string]int  // entries of the call's tool
	overlap    map[string]bool // an entry began while an earlier one still ran
	reported   map[string]int  // ToolFinished events that ran, from processes not killed
	killed     map[string]int  // entries in the process killed at a save
	lastKilled map[string]bool // the last entry was in the killed process
	byRunner   map[string]int  // entries of any call, by the runner that made them
}

func newFaultCalls() *faultCalls {
	return &faultCalls{entered: map[string]int{}, overlap: map[string]bool{}, reported: map[string]int{},
		killed: map[string]int{}, lastKilled: map[string]bool{}, byRunner: map[string]int{}}
}

// faultJournal is the file in which the tools of a run with a Store write
// each entry and exit, and its runners each ToolFinished that ran, a line
// each ("enter r3_t1_1 first": what, the call, the runner). Every line is
// one write with O_APPEND, so processes may share the file and a kill
// loses no line written before it.
type faultJournal string

func (j faultJournal) write(what, id, runner string) {
	f, err := os.OpenFile(string(j), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s %s %s\n", what, id, runner); err != nil {
		panic(err)
	}
}

// enter journals an entry of the call id by runner and returns its number
// among the call's entries, from 1.
func (j faultJournal) enter(id, runner string) int {
	j.write("enter", id, runner)
	data, err := os.ReadFile(string(j))
	if err != nil {
		panic(err)
	}
	n := 0
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "enter "+id+" ") {
			n++
		}
	}
	return n
}

// calls reads the journal; killed names the runner whose process was
// killed, if one was.
func (j faultJournal) calls(killed string) (*faultCalls, error) {
	data, err := os.ReadFile(string(j))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	c := newFaultCalls()
	running := map[string]string{} // call → the runner of its entry not yet exited
	last := map[string]string{}    // call → the runner of its last entry
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("a journal line torn: %q", line)
		}
		what, id, runner := f[0], f[1], f[2]
		switch what {
		case "enter":
			// An entry of the killed process ended with it.
			if r, ok := running[id]; ok && r != killed {
				c.overlap[id] = true
			}
			running[id], last[id] = runner, runner
			c.entered[id]++
			c.byRunner[runner]++
			if runner == killed {
				c.killed[id]++
			}
		case "exit":
			delete(running, id)
		case "reported":
			if runner != killed {
				c.reported[id]++
			}
		}
	}
	for id, r := range last {
		c.lastKilled[id] = killed != "" && r == killed
	}
	return c, nil
}

// faultToolFunc returns the func of the tools of TestFaultInjection, which
// calls enter as it is entered, with the call's id, for the number of the
// entry and the func to call when the entry returns: echo succeeds at
// once; flaky succeeds, fails or panics as its input says; slow takes a
// millisecond unless its ctx is cancelled first.
func faultToolFunc(enter func(id string) (int, func())) func(context.Context, faultInput) (string, error) {
	return func(ctx context.Context, in faultInput) (string, error) {
		n, done := enter(in.ID)
		defer done()
		mark := faultMark(in.ID, n)
		switch in.Mode {
		case "error":
			return "", errors.New(mark + " and failed")
		case "panic":
			panic(mark + " and panicked")
		case "slow":
			timer := time.NewTimer(time.Millisecond)
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return mark, nil
	}
}

// faultJournalTools returns the tools of a run with a Store, for the runner
// named runner: those of faultTools, journaled in j, and two more. fetch
// is idempotent, so may run again after a crash interrupted it; charge
// needs a person's approval.
func faultJournalTools(j faultJournal, runner string) []toolrun.Tool {
	run := faultToolFunc(func(id string) (int, func()) {
		return j.enter(id, runner), func() { j.write("exit", id, runner) }
	})
	exclusive := toolrun.NewTool("exclusive", "Runs alone.", run)
	exclusive.Exclusive = true
	fetch := toolrun.NewTool("fetch", "Succeeds; safe to repeat.", run)
	fetch.Idempotent = true
	charge := toolrun.NewTool("charge", "Succeeds, once a person allows it.", run)
	charge.Policy = policy.RequireApproval("moves money")
	return []toolrun.Tool{
		toolrun.NewTool("echo", "Succeeds.", run),
		toolrun.NewTool("flaky", "Succeeds, fails or panics.", run),
		toolrun.NewTool("slow", "Takes a moment.", run),
		exclusive, fetch, charge,
	}
}

// faultRunner is one runner of a run with a Store, in this process: the
// first, one of two resumers, or the one that finishes the run.
type faultRunner struct {
	name     string
	r        *toolrun.Runner
	wire     *wireCheck
	requests atomic.Int64 // requests sent, retries included
	retried  atomic.Int64 // RequestSent events of a request sent again
}

// newFaultRunner makes the runner name of the run, with Open on store, or
// with Resume of the State in dir/state.json if mode is "resume". Its
// client comes from newClient, given the options the runner needs.
func newFaultRunner(ctx context.Context, p *faultPlan, dir, name, mode string, store toolrun.Store,
	newClient func(...option.RequestOption) anthropic.Client) (*faultRunner, error) {
	fr := &faultRunner{name: name, wire: &wireCheck{}}
	j := faultJournal(filepath.Join(dir, "journal"))
	opts := p.options(func(_ context.Context, e toolrun.Event) {
		fr.wire.observe(e)
		switch e := e.(type) {
		case toolrun.ToolFinished:
			if e.Result.Ran {
				j.write("reported", e.Result.Call.ID, name)
			}
		case toolrun.RequestSent:
			if e.Attempt > 1 {
				fr.retried.Add(1)
			}
		}
	})
	opts.Store, opts.RunID = store, p.runID()
	client := newClient(option.WithMaxRetries(2), option.WithMiddleware(fr.wire.middleware),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			fr.requests.Add(1)
			return next(req)
		}))
	tools := faultJournalTools(j, name)
	var err error
	if mode == "resume" {
		var st toolrun.State
		data, rerr := os.ReadFile(filepath.Join(dir, "state.json"))
		if rerr != nil {
			return nil, rerr
		}
		if err := json.Unmarshal(data, &st); err != nil {
			return nil, err
		}
		fr.r, err = toolrun.Resume(client, &st, tools, opts)
	} else {
		fr.r, err = toolrun.Open(ctx, client, userParams(fmt.Sprintf("run %d", p.run)), tools, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("runner %s (%s): %w", name, mode, err)
	}
	return fr, nil
}

// faultOutcome is how a runner of a run with a Store ended; a process
// prints it as JSON.
type faultOutcome struct {
	Runner   string             `json:"runner"`
	Stop     toolrun.StopReason `json:"stop"`
	Err      string             `json:"err,omitempty"`
	Busy     bool               `json:"busy,omitempty"` // the error wraps ErrRunBusy
	Requests int64              `json:"requests"`
	Retried  int64              `json:"retried,omitempty"`
	Resumed  int                `json:"resumed,omitempty"`
	Wire     string             `json:"wire,omitempty"` // what the wire check found
	Hung     bool               `json:"hung,omitempty"` // its deadline passed
}

// outcome returns how the runner's drive ended.
func (fr *faultRunner) outcome(ctx context.Context, res *toolrun.Result, err error, resumed int) faultOutcome {
	o := faultOutcome{Runner: fr.name, Busy: errors.Is(err, toolrun.ErrRunBusy), Requests: fr.requests.Load(),
		Retried: fr.retried.Load(), Resumed: resumed, Hung: errors.Is(ctx.Err(), context.DeadlineExceeded)}
	if res != nil {
		o.Stop = res.StopReason
	}
	if err != nil {
		o.Err = err.Error()
	}
	if err := fr.wire.err(); err != nil {
		o.Wire = err.Error()
	}
	return o
}

// runStore runs a run with a Store, as p.store says, and returns how its
// last runner ended and what happened to its calls. It adds to tally, and
// reports through failf what went wrong before the last runner.
func (st *faultRunState) runStore(ctx context.Context, s *toolruntest.Server, tally *faultTally, failf func(string, ...any)) (*toolrun.Result, error, *faultCalls) {
	p := st.plan
	store := &filestore.Store{Dir: filepath.Join(st.dir, "store")}
	newClient := func(opts ...option.RequestOption) anthropic.Client { return s.Client(opts...) }
	j := faultJournal(filepath.Join(st.dir, "journal"))
	var outcomes []faultOutcome
	// check checks what every runner's outcome says, and adds it up.
	check := func(o faultOutcome) {
		outcomes = append(outcomes, o)
		tally.retried += int(o.Retried)
		tally.resumed += o.Resumed
		if o.Wire != "" {
			failf("runner %s: %s", o.Runner, o.Wire)
		}
		if o.Hung {
			failf("runner %s hung past the run's deadline: %s", o.Runner, o.Err)
		}
	}
	calls := func(killed string) *faultCalls {
		c, err := j.calls(killed)
		if err != nil {
			failf("%v", err)
			return newFaultCalls()
		}
		return c
	}
	// run runs the runner name to its end in this process.
	run := func(name, mode string) (*faultRunner, *toolrun.Result, error) {
		fr, err := newFaultRunner(ctx, p, st.dir, name, mode, store, newClient)
		if err != nil {
			return nil, nil, err
		}
		res, err, resumed := p.drive(ctx, fr.r)
		check(fr.outcome(ctx, res, err, resumed))
		return fr, res, err
	}

	killed := ""
	switch p.store.kind {
	case storeKill:
		c, err := st.startChild(ctx, s.URL, "child", "")
		if err != nil {
			failf("%v", err)
			break
		}
		o, sig, err := c.wait(ctx)
		switch {
		case err != nil:
			failf("%v", err)
		case sig:
			killed = "child"
			if tally.kills == nil {
				tally.kills = map[string]int{}
			}
			tally.kills[p.store.killHow]++
		default:
			tally.missed++
			check(*o)
		}

	case storeResumers:
		fr, res, err := run("first", "open")
		if res == nil || res.StopReason != toolrun.StopAwaitingApproval {
			// Faults stopped the run before it asked for approval: there
			// is nothing to race for.
			return res, err, calls("")
		}
		// What a program that suspends a run keeps besides its store.
		data, err := json.Marshal(fr.r.State())
		if err == nil {
			err = os.WriteFile(filepath.Join(st.dir, "state.json"), data, 0o644)
		}
		if err != nil {
			failf("saving the State: %v", err)
			return res, err, calls("")
		}
		var race []faultOutcome
		if p.store.procs {
			race = st.raceProcesses(ctx, s.URL, failf)
			tally.raced[1]++
		} else {
			race = st.raceGoroutines(ctx, store, newClient, failf)
			tally.raced[0]++
		}
		for _, o := range race {
			check(o)
		}
		// Exactly one resumer goes on; the other is refused at its first
		// save, before it sends a request or runs a tool.
		c := calls("")
		refused := 0
		for _, o := range race {
			if !o.Busy {
				continue
			}
			refused++
			if o.Stop != toolrun.StopError || o.Requests != 0 || c.byRunner[o.Runner] != 0 {
				failf("resumer %s was refused with ErrRunBusy, but stopped with %q after %d requests and %d tool entries, want StopError, 0 and 0",
					o.Runner, o.Stop, o.Requests, c.byRunner[o.Runner])
			}
		}
		tally.refused += refused
		if len(race) == 2 && refused != 1 {
			failf("got %d of the two resumers refused with ErrRunBusy, want 1: %+v", refused, race)
		}
	}

	// A runner of this process finishes the run from the store, however
	// the others left it.
	_, res, err := run("last", "open")
	return res, err, calls(killed)
}

// raceGoroutines continues the suspended run with two runners in this
// process, which allow the call awaiting approval and then run at the
// same moment, and returns how they ended.
func (st *faultRunState) raceGoroutines(ctx context.Context, store toolrun.Store, newClient func(...option.RequestOption) anthropic.Client,
	failf func(string, ...any)) []faultOutcome {
	p := st.plan
	var runners []*faultRunner
	for i, mode := range p.store.modes {
		fr, err := newFaultRunner(ctx, p, st.dir, string(rune('a'+i)), mode, store, newClient)
		if err == nil {
			err = fr.r.Decide(p.chargeID(), toolrun.Decision{})
		}
		if err != nil {
			failf("resumer %d: %v", i, err)
			return nil
		}
		runners = append(runners, fr)
	}
	outcomes := make([]faultOutcome, len(runners))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, fr := range runners {
		wg.Go(func() {
			<-start
			res, err, resumed := p.drive(ctx, fr.r)
			outcomes[i] = fr.outcome(ctx, res, err, resumed)
		})
	}
	close(start)
	wg.Wait()
	return outcomes
}

// raceProcesses continues the suspended run with two processes, which
// allow the call awaiting approval, say they are ready, and run once both
// are; it returns how they ended.
func (st *faultRunState) raceProcesses(ctx context.Context, url string, failf func(string, ...any)) []faultOutcome {
	var children []*faultChild
	defer func() {
		for _, c := range children {
			c.kill()
		}
	}()
	for i, mode := range st.plan.store.modes {
		c, err := st.startChild(ctx, url, string(rune('a'+i)), mode)
		if err != nil {
			failf("%v", err)
			return nil
		}
		children = append(children, c)
	}
	for _, c := range children {
		if err := c.ready(); err != nil {
			failf("%v", err)
			return nil
		}
	}
	for _, c := range children {
		c.stdin.Close()
	}
	var outcomes []faultOutcome
	for _, c := range children {
		o, sig, err := c.wait(ctx)
		switch {
		case err != nil:
			failf("%v", err)
		case sig:
			failf("resumer process %s was killed", c.name)
		default:
			outcomes = append(outcomes, *o)
		}
	}
	children = nil
	return outcomes
}

// faultChild is a process running TestFaultChild: a runner of a run with a
// Store, in a process of its own.
type faultChild struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
	out    strings.Builder // stdout read so far
}

// startChild starts the runner name of the run in a process of its own,
// which talks to the server at url and resumes the run as mode says ("open"
// or "resume"; "" for the child of a kill, which Opens it).
func (st *faultRunState) startChild(ctx context.Context, url, name, mode string) (*faultChild, error) {
	p := st.plan
	deadline, _ := ctx.Deadline()
	c := &faultChild{name: name}
	c.cmd = exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFaultChild$", "-test.v=false")
	c.cmd.Env = append(os.Environ(), "TOOLRUN_FAULT_CHILD="+name, "TOOLRUN_FAULT_URL="+url, "TOOLRUN_FAULT_DIR="+st.dir,
		"TOOLRUN_FAULT_MODE="+mode, fmt.Sprintf("TOOLRUN_FAULT_SEED=%d", p.seed), fmt.Sprintf("TOOLRUN_FAULT_RUN=%d", p.run),
		// A second early, so that a child that hangs says so itself.
		fmt.Sprintf("TOOLRUN_FAULT_DEADLINE=%d", deadline.Add(-time.Second).UnixNano()))
	c.cmd.Stderr = &c.stderr
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.stdout = bufio.NewReader(stdout)
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting runner %s: %w", name, err)
	}
	return c, nil
}

// ready waits for the child to say it is ready.
func (c *faultChild) ready() error {
	for {
		line, err := c.stdout.ReadString('\n')
		c.out.WriteString(line)
		if line == "ready\n" {
			return nil
		}
		if err != nil {
			c.cmd.Wait()
			return fmt.Errorf("runner %s never got ready: %v\n%s%s", c.name, err, c.out.String(), c.stderr.String())
		}
	}
}

// wait waits for the child to end, and returns the outcome it printed, or
// whether it was killed with SIGKILL.
func (c *faultChild) wait(ctx context.Context) (o *faultOutcome, killed bool, err error) {
	c.stdin.Close()
	rest, _ := io.ReadAll(c.stdout)
	c.out.Write(rest)
	err = c.cmd.Wait()
	out := c.out.String() + c.stderr.String()
	if ctx.Err() != nil {
		return nil, false, fmt.Errorf("runner %s hung past the run's deadline, and was killed:\n%s", c.name, out)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return nil, true, nil
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("runner %s: %v\n%s", c.name, err, out)
	}
	for line := range strings.Lines(c.out.String()) {
		if data, ok := strings.CutPrefix(line, "outcome "); ok {
			o = new(faultOutcome)
			if err := json.Unmarshal([]byte(data), o); err != nil {
				return nil, false, fmt.Errorf("runner %s: %v\n%s", c.name, err, out)
			}
			return o, false, nil
		}
	}
	return nil, false, fmt.Errorf("runner %s printed no outcome:\n%s", c.name, out)
}

// kill ends the child if it is still running.
func (c *faultChild) kill() {
	c.stdin.Close()
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// TestFaultChild is a runner of a run of TestFaultInjection in a process of
// its own (see startChild); it does nothing in a normal run.
func TestFaultChild(t *testing.T) {
	name := os.Getenv("TOOLRUN_FAULT_CHILD")
	if name == "" {
		t.Skip("helper process of TestFaultInjection")
	}
	if err := faultChildRun(name); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func faultChildRun(name string) error {
	seed, err1 := strconv.ParseUint(os.Getenv("TOOLRUN_FAULT_SEED"), 10, 64)
	run, err2 := strconv.Atoi(os.Getenv("TOOLRUN_FAULT_RUN"))
	deadline, err3 := strconv.ParseInt(os.Getenv("TOOLRUN_FAULT_DEADLINE"), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	p := newFaultPlan(seed, run)
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, deadline))
	defer cancel()
	dir, url, mode := os.Getenv("TOOLRUN_FAULT_DIR"), os.Getenv("TOOLRUN_FAULT_URL"), os.Getenv("TOOLRUN_FAULT_MODE")
	var store toolrun.Store = &filestore.Store{Dir: filepath.Join(dir, "store")}
	if p.store.kind == storeKill {
		store = &killingStore{Store: store, at: p.store.killAt, how: p.store.killHow, delay: p.store.killDelay}
	}
	newClient := func(opts ...option.RequestOption) anthropic.Client {
		return anthropic.NewClient(append([]option.RequestOption{option.WithBaseURL(url), option.WithAPIKey(toolruntest.TestAPIKey)}, opts...)...)
	}
	fr, err := newFaultRunner(ctx, p, dir, name, mode, store, newClient)
	if err != nil {
		return err
	}
	if p.store.kind == storeResumers {
		if err := fr.r.Decide(p.chargeID(), toolrun.Decision{}); err != nil {
			return err
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin) // the parent closes it to start the race
	}
	res, err, resumed := p.drive(ctx, fr.r)
	out, err := json.Marshal(fr.outcome(ctx, res, err, resumed))
	if err != nil {
		return err
	}
	fmt.Printf("outcome %s\n", out)
	return nil
}

// killingStore is a Store whose process kills itself with SIGKILL at its
// Save number at: before that Save, after it, or a delay into it.
type killingStore struct {
	toolrun.Store
	at    int
	how   string // "before", "amid" or "after"
	delay time.Duration

	mu    sync.Mutex // guards saves
	saves int
}

func (k *killingStore) Save(ctx context.Context, id string, s *toolrun.State, prev uint64) error {
	k.mu.Lock()
	k.saves++
	n := k.saves
	k.mu.Unlock()
	if n != k.at {
		return k.Store.Save(ctx, id, s, prev)
	}
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		panic(err)
	}
	switch k.how {
	case "before":
		self.Kill()
	case "after":
		k.Store.Save(ctx, id, s, prev)
		self.Kill()
	default:
		// The kill lands before, during or after the write, as the delay
		// and the scheduler have it.
		go func() {
			time.Sleep(k.delay)
			self.Kill()
		}()
		k.Store.Save(ctx, id, s, prev)
	}
	select {} // the kill is on its way
}
