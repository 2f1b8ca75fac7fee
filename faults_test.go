package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

var (
	faultSeed = flag.Uint64("faults.seed", 1, "seed of TestFaultInjection; 0 picks one at random and logs it")
	faultRun  = flag.Int("faults.run", -1, "run only this run of TestFaultInjection, to reproduce a failure")
)

// The numbers of TestFaultInjection.
const (
	faultRuns      = 1000 // runs of a full test
	faultRunsShort = 200  // runs with -short
	faultParallel  = 16   // runs at once
)

// TestFaultInjection runs many tool loops against a server that fails at
// random, in every way the fake server can, and checks what must hold
// whatever happens:
//
//   - every run ends with a defined StopReason, and returns an error exactly
//     when it stopped short of the model's answer (StopError, StopCanceled,
//     StopMaxTurns); a run that no fault
//     stopped ends as its script says, after as many turns and with as many
//     messages;
//   - every history the runner sends passes the server's validation, and so
//     does each run's final history;
//   - no tool_use id runs twice (see below);
//   - no goroutine outlives the runs.
//
// What "no tool_use id runs twice" means: a call's tool is entered at most
// once, whatever the faults and however often the run is resumed after an
// error, and never while an earlier entry of the same call still runs; each
// entry is reported by a ToolFinished with Ran set; and the one result the
// model receives for the id comes from that entry. No call starts before
// its response is whole, so a response that fails midway, stalls, repeats
// a tool_use id or ends in max_tokens or refusal runs nothing.
//
// The faults: 429, 529 and 500 statuses; error events and dropped
// connections mid-stream and mid-body; slow streams; stalled responses,
// streamed or not, ended by Options.Timeouts.StreamIdle and
// Options.Timeouts.Request (a run still going at its 30-second deadline is a
// hang); responses whose tool_use ids repeat; and cancellation.
//
// A tenth of the runs put a Store to the test under those faults (see
// faults_store_test.go): two runners resume a suspended run at the same
// moment, with Open or with Resume of its State's JSON, and exactly one may
// go on while the other is refused with ErrRunBusy having run nothing; or a
// process running the run is killed with SIGKILL at one of its saves and
// the run is finished from the store, where a call the kill interrupted is
// answered as interrupted and run again only if its tool is idempotent.
// Their tools count their entries in a file, across processes and kills.
// Most of these runners are goroutines; about 40 runs of a full test, and
// a handful with -short, use processes, which add about half to the suite's
// CPU time under the race detector.
//
// The log's last lines add up what happened, and the test fails unless they
// report 0 calls run twice, 0 invalid histories, 0 hangs past the deadline
// and 0 leaked goroutines.
//
// Each run's replies and faults come from its own PCG, seeded with the
// test's seed and the run's number, which the responder reads from the
// run's first message ("run 17"): concurrent runs interleave their requests
// in any order, but each run sees the same sequence of replies and faults
// every time. A failure names the seed and the run; -faults.seed and
// -faults.run replay it alone.
func TestFaultInjection(t *testing.T) {
	seed := *faultSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	runs := faultRuns
	if testing.Short() {
		runs = faultRunsShort
	}
	first, last := 0, runs
	if *faultRun >= 0 {
		first, last = *faultRun, *faultRun+1
	}
	t.Logf("seed %d, runs %d to %d", seed, first, last-1)

	before := runtime.NumGoroutine()
	states := make([]*faultRunState, last)
	dir := t.TempDir()
	for i := first; i < last; i++ {
		states[i] = &faultRunState{plan: newFaultPlan(seed, i), faults: rand.New(rand.NewPCG(seed, uint64(i)<<16|1))}
		if states[i].plan.store.kind != storeNone {
			states[i].dir = filepath.Join(dir, strconv.Itoa(i))
			if err := os.Mkdir(states[i].dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := toolruntest.New(nil, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		n, ok := faultRunOf(req)
		if !ok || n < first || n >= last {
			panic(fmt.Sprintf("a request of no run: %s", req.Body))
		}
		return states[n].respond(req)
	}})
	ledger := newFaultLedger()
	tools := faultTools(ledger)

	var mu sync.Mutex // guards failed, failures, tally
	failed := 0
	var failures []string
	var tally faultTally
	sem := make(chan struct{}, faultParallel)
	var wg sync.WaitGroup
	for i := first; i < last; i++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			problems, ran := states[i].run(t.Context(), s, tools, ledger)
			mu.Lock()
			defer mu.Unlock()
			tally.add(ran)
			if len(problems) == 0 {
				return
			}
			failed++
			if len(failures) < 10 {
				failures = append(failures, fmt.Sprintf("seed %d, run %d (%s; replay with -run 'TestFaultInjection$' -faults.seed=%d -faults.run=%d):\n\t%s",
					seed, i, states[i].plan, seed, i, strings.Join(problems, "\n\t")))
			}
		})
	}
	wg.Wait()
	t.Logf("%v", &tally)
	for _, f := range failures {
		t.Error(f)
	}
	if failed > len(failures) {
		t.Errorf("seed %d: %d runs failed, the first %d shown", seed, failed, len(failures))
	}
	if tally.reentered != 0 || tally.invalid != 0 || tally.hangs != 0 {
		t.Errorf("seed %d: got %d calls run twice, %d invalid histories and %d hangs past the deadline, want 0 of each",
			seed, tally.reentered, tally.invalid, tally.hangs)
	}
	// A suite that met none of the Store's trials would pass without
	// testing it. A full run meets each with any seed; 200 runs may miss
	// the rarest (processes) with some seeds.
	if last-first >= faultRuns && (tally.raced[0] == 0 || tally.raced[1] == 0 || tally.refused == 0 || len(tally.kills) == 0) {
		t.Errorf("seed %d: the runs raced resumers %d times in goroutines and %d in processes (%d refused) and killed %v processes at a save; want each at least once",
			seed, tally.raced[0], tally.raced[1], tally.refused, tally.kills)
	}

	// Close waits for the handlers and closes the client's idle
	// connections, so that what is left is what the runs left.
	s.Close()
	// A thread's answers that the runner recovers from by creating a new
	// thread are the protocol, not an invalid history: the client's own
	// retry of a continue whose reply was cut off finds it continued.
	var rejected []error
	threadAnswers := 0
	for _, err := range s.Errors() {
		if msg := err.Error(); strings.Contains(msg, "thread_already_continued") || strings.Contains(msg, "thread_continue_in_flight") ||
			strings.Contains(msg, "thread_not_found") {
			threadAnswers++
			continue
		}
		rejected = append(rejected, err)
	}
	for i, err := range rejected {
		if i == 10 {
			t.Errorf("seed %d: %d requests rejected in all", seed, len(rejected))
			break
		}
		t.Errorf("seed %d: fake server rejected a request: %v", seed, err)
	}
	checkGoroutines(t, before)
	t.Logf("%d invalid histories sent, %d thread continues refused (the runner creates a new thread), 0 leaked goroutines", len(rejected), threadAnswers)
}

// checkGoroutines fails the test if more goroutines are running than
// before, once those ending have had up to five seconds to end.
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			var dump strings.Builder
			pprof.Lookup("goroutine").WriteTo(&dump, 1)
			t.Fatalf("got %d goroutines after the runs, want at most %d as before them:\n%s", runtime.NumGoroutine(), before, dump.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// faultRunOf reads the number of the run that sent req from its first
// message, "run 17".
func faultRunOf(req *toolruntest.Request) (int, bool) {
	msgs := req.Conversation
	if len(msgs) == 0 || len(msgs[0].Content) == 0 {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(msgs[0].Content[0].Text, "run "))
	return n, err == nil
}

// The ways a run streams.
const (
	unstreamed = iota
	streamed
	streamed2 // streamed (early start, gone, was this mode)
)

// faultPlan is what one run is: how it runs, and the script of its model.
type faultPlan struct {
	seed       uint64
	run        int
	mode       int  // unstreamed, streamed or streamed2
	viaEvents  bool // run by ranging over Events
	turns      int  // the response of this turn is final
	final      string
	maxTurns   int // Options.MaxTurns
	parallel   int // Options.MaxParallelTools
	cancelAt   int // the request of the run that cancels it as it arrives; 0 for none
	attempts   int // Run calls: a run that stops with an error is run again, as its caller may
	stopReason toolrun.StopReason
	store      faultStore // storeNone, or how a Store is put to the test (faults_store_test.go)
}

func (p *faultPlan) String() string {
	mode := [...]string{"unstreamed", "streamed", "streamed"}[p.mode]
	if p.viaEvents {
		mode += " via Events"
	}
	s := fmt.Sprintf("%s, %d turns ending in %s, MaxTurns %d, MaxParallelTools %d, %d Run calls at most",
		mode, p.turns, p.final, p.maxTurns, p.parallel, p.attempts)
	if p.cancelAt > 0 {
		s += fmt.Sprintf(", cancelled at request %d", p.cancelAt)
	}
	if p.store.kind != storeNone {
		s += ", " + p.store.String()
	}
	return s
}

func newFaultPlan(seed uint64, run int) *faultPlan {
	rng := rand.New(rand.NewPCG(seed, uint64(run)<<16))
	p := &faultPlan{seed: seed, run: run, mode: rng.IntN(3), turns: 1 + rng.IntN(4), parallel: 1 + rng.IntN(4), attempts: 1 + rng.IntN(3)}
	p.viaEvents = p.mode != unstreamed && rng.IntN(2) == 0
	switch x := rng.IntN(100); {
	case x < 80:
		p.final, p.stopReason = "end_turn", toolrun.StopEndTurn
	case x < 92:
		p.final, p.stopReason = "max_tokens", toolrun.StopMaxTokens
	default:
		p.final, p.stopReason = "refusal", toolrun.StopRefusal
	}
	if rng.IntN(100) < 15 {
		p.maxTurns = 1 + rng.IntN(p.turns)
	}
	if rng.IntN(100) < 4 {
		p.cancelAt = 1 + rng.IntN(4)
	}
	p.drawStore(rng)
	return p
}

// reply returns the model's response to the request of turn: the same for
// every attempt of the turn, as a retried response is, with the same ids.
func (p *faultPlan) reply(turn int) toolruntest.Reply {
	rng := rand.New(rand.NewPCG(p.seed, uint64(p.run)<<16|uint64(turn+1)))
	if turn >= p.turns {
		switch p.final {
		case "max_tokens":
			id := fmt.Sprintf("r%d_t%d_1", p.run, turn)
			return toolruntest.Reply{StopReason: "max_tokens", Content: []toolruntest.Block{
				toolruntest.Text("Checking the last"), toolruntest.ToolUse(id, "echo", faultInput{ID: id, Mode: "ok"}),
			}}
		case "refusal":
			return toolruntest.Reply{StopReason: "refusal", Content: []toolruntest.Block{toolruntest.Text("I can't help with that.")}}
		}
		return toolruntest.Message(toolruntest.Text(fmt.Sprintf("Done after %d turns.", turn)))
	}
	if rng.IntN(100) < 10 && !p.approvalTurn(turn) {
		return toolruntest.Reply{StopReason: "pause_turn", Content: []toolruntest.Block{toolruntest.Text("Still working.")}}
	}
	var blocks []toolruntest.Block
	if rng.IntN(2) == 0 {
		blocks = append(blocks, toolruntest.Text(fmt.Sprintf("Step %d.", turn)))
	}
	for k := range 1 + rng.IntN(3) {
		id := fmt.Sprintf("r%d_t%d_%d", p.run, turn, k+1)
		in := faultInput{ID: id, Mode: "ok"}
		var name string
		switch x := rng.IntN(100); {
		case x < 35:
			name = "echo"
			if p.store.kind != storeNone && rng.IntN(2) == 0 {
				name = "fetch" // idempotent: run again after a crash
			}
		case x < 60:
			name, in.Mode = "flaky", [...]string{"ok", "error", "panic"}[rng.IntN(3)]
		case x < 80:
			name, in.Mode = "slow", "slow"
		case x < 90:
			name = "exclusive"
		case x < 95:
			name = "nosuch" // answered as an unknown tool
		default:
			blocks = append(blocks, toolruntest.ToolUse(id, "echo", map[string]int{"id": 5})) // fails validation
			continue
		}
		blocks = append(blocks, toolruntest.ToolUse(id, name, in))
	}
	if p.approvalTurn(turn) {
		id := p.chargeID()
		blocks = append(blocks, toolruntest.ToolUse(id, "charge", faultInput{ID: id, Mode: "ok"}))
	}
	return toolruntest.Message(blocks...)
}

// messages returns how many messages the history of a run holds when it
// stops as planned after turns turns: the user's, then each turn committed
// with its tool results, if any. A turn whose calls the turn limit left
// pending is not committed.
func (p *faultPlan) messages(turns int) int {
	n := 1
	for turn := 1; turn <= turns; turn++ {
		r := p.reply(turn)
		calls := false
		for _, b := range r.Content {
			calls = calls || b.Type == "tool_use"
		}
		if turn == turns && p.maxTurns == turns && turns < p.turns && calls {
			break
		}
		n++
		if calls {
			n++
		}
	}
	return n
}

// faultRunState is a run's side of the server: its plan and the PCG its
// faults come from, drawn one per request in the order the run sends them.
type faultRunState struct {
	plan *faultPlan
	dir  string // the run's own directory, for a run with a Store

	mu       sync.Mutex // guards faults, requests, began, cancel
	faults   *rand.Rand
	requests int
	began    map[int]int // the responses answered with a message (whole or not), by turn
	cancel   context.CancelFunc
}

// respond answers a request of the run.
func (st *faultRunState) respond(req *toolruntest.Request) toolruntest.Reply {
	turn := 1
	for _, m := range req.Conversation {
		if m.Role == "assistant" {
			turn++
		}
	}
	r := st.plan.reply(turn)

	st.mu.Lock()
	defer st.mu.Unlock()
	st.requests++
	if st.requests == st.plan.cancelAt {
		st.cancel()
		// Slow enough that the client gives up first; its leaving ends the
		// wait.
		r.Fault.EventDelay = time.Minute
		return r
	}
	r = toolruntest.RandomFault(st.faults, req.Stream, r)
	if r.Fault.Status == 0 {
		if st.began == nil {
			st.began = map[int]int{}
		}
		st.began[turn]++
	}
	return r
}

// responses returns the responses of turn that began: the calls of the
// turn can have started from those only.
func (st *faultRunState) responses(turn int) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.began[turn]
}

// faultInput is the input of the tools of TestFaultInjection: the call's
// own id, which the tool cannot otherwise know, and what to do.
type faultInput struct {
	ID   string `json:"id"`
	Mode string `json:"mode"` // "ok", "error", "panic" or "slow"
}

// faultLedger counts the times a tool was entered, by tool_use id; ids
// name their run, so runs do not share them.
type faultLedger struct {
	mu      sync.Mutex // guards n, running, overlap
	n       map[string]int
	running map[string]bool
	overlap map[string]bool // entered while an earlier entry was still running
}

func newFaultLedger() *faultLedger {
	return &faultLedger{n: map[string]int{}, running: map[string]bool{}, overlap: map[string]bool{}}
}

// enter counts an entry of the call id and returns its number, from 1, and
// the func to call when the entry returns.
func (l *faultLedger) enter(id string) (int, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[id] {
		l.overlap[id] = true
	}
	l.n[id]++
	l.running[id] = true
	return l.n[id], func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.running[id] = false
	}
}

// entered returns the times the call id was entered, and whether an entry
// began while another was running.
func (l *faultLedger) entered(id string) (n int, overlap bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[id], l.overlap[id]
}

// calls returns what the ledger and the ToolFinished events, reported,
// say of the calls ids.
func (l *faultLedger) calls(ids []string, reported map[string]int) *faultCalls {
	c := newFaultCalls()
	for _, id := range ids {
		c.entered[id], c.overlap[id] = l.entered(id)
		c.reported[id] = reported[id]
	}
	return c
}

// faultMark is what the result of the entry n of the call id says,
// whether it succeeded, failed or panicked.
func faultMark(id string, n int) string { return fmt.Sprintf("ran %s #%d", id, n) }

// faultTools returns the tools of TestFaultInjection, shared by its runs,
// which count their entries in l:
// echo succeeds at once; flaky succeeds, fails or panics as its input says;
// slow takes a millisecond unless its ctx is cancelled first; exclusive
// runs alone, and ends what early start takes of a response.
func faultTools(l *faultLedger) []toolrun.Tool {
	run := faultToolFunc(l.enter)
	exclusive := toolrun.NewTool("exclusive", "Runs alone.", run)
	exclusive.Exclusive = true
	return []toolrun.Tool{
		toolrun.NewTool("echo", "Succeeds.", run),
		toolrun.NewTool("flaky", "Succeeds, fails or panics.", run),
		toolrun.NewTool("slow", "Takes a moment.", run),
		exclusive,
	}
}

// faultTally adds up what happened in the runs, to show in the log that
// the faults were met.
type faultTally struct {
	requests  int
	stops     map[toolrun.StopReason]int
	resumed   int // runs run again after an error
	retried   int // streams retried
	reentered int // calls whose tool was entered more than once: always 0
	invalid   int // runs whose final history the server would reject: always 0
	hangs     int // runs still going at their deadline: always 0

	// The runs with a Store (faults_store_test.go).
	raced       [2]int // runs whose two resumers were goroutines, processes
	refused     int    // resumers refused with ErrRunBusy: one a race
	kills       map[string]int
	missed      int // children that finished before the save they were to be killed at
	interrupted int // calls a kill interrupted, answered as interrupted
	rerun       int // idempotent calls a kill interrupted, run again
}

func (t *faultTally) add(u faultTally) {
	if t.stops == nil {
		t.stops = map[toolrun.StopReason]int{}
	}
	for k, v := range u.stops {
		t.stops[k] += v
	}
	if t.kills == nil {
		t.kills = map[string]int{}
	}
	for k, v := range u.kills {
		t.kills[k] += v
	}
	t.requests += u.requests
	t.resumed += u.resumed
	t.retried += u.retried
	t.reentered += u.reentered
	t.invalid += u.invalid
	t.hangs += u.hangs
	t.raced[0] += u.raced[0]
	t.raced[1] += u.raced[1]
	t.refused += u.refused
	t.missed += u.missed
	t.interrupted += u.interrupted
	t.rerun += u.rerun
}

func (t *faultTally) String() string {
	return fmt.Sprintf("%d requests; stops %v; %d runs resumed after an error, %d streams retried; "+
		"stores: %d runs raced two resumers in goroutines and %d in processes, %d resumers refused with ErrRunBusy; "+
		"children killed at a save %v, %d finished first; %d calls answered interrupted, %d idempotent calls run again; "+
		"%d calls run twice, %d invalid histories, %d hangs past the deadline",
		t.requests, t.stops, t.resumed, t.retried,
		t.raced[0], t.raced[1], t.refused, t.kills, t.missed, t.interrupted, t.rerun,
		t.reentered, t.invalid, t.hangs)
}

// run runs the run to its end and returns what went wrong.
func (st *faultRunState) run(ctx context.Context, s *toolruntest.Server, tools []toolrun.Tool, ledger *faultLedger) ([]string, faultTally) {
	p := st.plan
	// A runner that hangs ends in a failure, not a hung test. A run with a
	// Store has more to do, some of it in processes of its own.
	ctx, cancel := context.WithTimeout(ctx, p.deadline())
	defer cancel()
	st.mu.Lock()
	st.cancel = cancel
	st.mu.Unlock()

	var problems []string
	failf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var (
		tally faultTally
		res   *toolrun.Result
		err   error
		calls *faultCalls
	)
	if p.store.kind == storeNone {
		var mu sync.Mutex            // guards reported, retried
		reported := map[string]int{} // ToolFinished with Ran, by id
		retried := 0
		// Every body sent, retries included, must be the full params as
		// JSON (a thread's create; see wireCheck).
		wire := &wireCheck{}
		opts := p.options(func(_ context.Context, e toolrun.Event) {
			wire.observe(e)
			mu.Lock()
			defer mu.Unlock()
			switch e := e.(type) {
			case toolrun.ToolFinished:
				if e.Result.Ran {
					reported[e.Result.Call.ID]++
				}
			case toolrun.RequestSent:
				if e.Attempt > 1 {
					retried++
				}
			}
		})
		r := toolrun.New(s.Client(option.WithMaxRetries(2), option.WithMiddleware(wire.middleware)), userParams(fmt.Sprintf("run %d", p.run)), tools, opts)
		res, err, tally.resumed = p.drive(ctx, r)
		if err := wire.err(); err != nil {
			failf("%v", err)
		}
		mu.Lock()
		tally.retried = retried
		calls = ledger.calls(p.callIDs(), reported)
		mu.Unlock()
	} else {
		res, err, calls = st.runStore(ctx, s, &tally, failf)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		tally.hangs++
		failf("the run hung past its %v deadline: %v", p.deadline(), err)
	}

	if res == nil {
		return append(problems, fmt.Sprintf("got a nil Result, with error %v", err)), tally
	}
	tally.stops = map[toolrun.StopReason]int{res.StopReason: 1}
	st.mu.Lock()
	tally.requests = st.requests
	st.mu.Unlock()
	switch res.StopReason {
	case toolrun.StopEndTurn, toolrun.StopMaxTurns, toolrun.StopMaxTokens, toolrun.StopRefusal, toolrun.StopContextWindow,
		toolrun.StopIncomplete, toolrun.StopAwaitingApproval, toolrun.StopHook, toolrun.StopBudget, toolrun.StopCanceled, toolrun.StopError:
	default:
		failf("got StopReason %q, which is none of the defined ones", res.StopReason)
	}
	cancelled := st.cancelled()
	var te *toolrun.TurnError
	switch {
	case err == nil && (res.StopReason == toolrun.StopError || res.StopReason == toolrun.StopCanceled):
		failf("got %q with no error", res.StopReason)
	case err != nil && res.StopReason == toolrun.StopMaxTurns && !errors.Is(err, toolrun.ErrMaxTurns):
		failf("got %q with the error %v, want one wrapping ErrMaxTurns", res.StopReason, err)
	case err == nil && res.StopReason == toolrun.StopMaxTurns:
		failf("got %q with no error, want one wrapping ErrMaxTurns", res.StopReason)
	case res.StopReason == toolrun.StopMaxTokens && !errors.Is(err, toolrun.ErrMaxTokens):
		failf("got %q with the error %v, want one wrapping ErrMaxTokens", res.StopReason, err)
	case err != nil && res.StopReason != toolrun.StopError && res.StopReason != toolrun.StopCanceled && res.StopReason != toolrun.StopMaxTurns &&
		res.StopReason != toolrun.StopMaxTokens:
		failf("got %q with the error %v, want StopError, StopCanceled, StopMaxTurns or StopMaxTokens", res.StopReason, err)
	case cancelled:
		if res.StopReason != toolrun.StopCanceled || !errors.Is(err, context.Canceled) || !errors.As(err, &te) {
			failf("got %q, %v; want StopCanceled with a *TurnError wrapping context.Canceled", res.StopReason, err)
		}
	case res.StopReason == toolrun.StopError && errors.Is(err, toolrun.ErrMalformedResponse):
		// Two responses in a row repeated a tool_use id: the run stops
		// with the history as it was, checked above, and nothing ran.
	case err != nil && res.StopReason != toolrun.StopMaxTurns && res.StopReason != toolrun.StopMaxTokens:
		// Only requests fail here, and each failure had its retries.
		if res.StopReason != toolrun.StopError || !errors.As(err, &te) || te.Turn != res.Turns+1 {
			failf("got %q, %v after %d turns; want StopError with a *TurnError for turn %d", res.StopReason, err, res.Turns, res.Turns+1)
		}
	default:
		want, turns := p.stopReason, p.turns
		if p.maxTurns != 0 && p.maxTurns < p.turns {
			want, turns = toolrun.StopMaxTurns, p.maxTurns
		}
		if res.StopReason != want || res.Turns != turns || len(res.Messages) != p.messages(turns) {
			failf("got %q after %d turns with %d messages, want %q after %d turns with %d messages",
				res.StopReason, res.Turns, len(res.Messages), want, turns, p.messages(turns))
		}
	}
	if err := historyError(res.Messages); err != nil {
		tally.invalid++
		failf("%v", err)
	}

	// The results the model received, by id.
	results := toolruntest.ResultTexts(res.Messages)
	for turn := 1; turn <= p.turns; turn++ {
		for _, b := range p.reply(turn).Content {
			if b.Type != "tool_use" {
				continue
			}
			id := b.ID
			entered, killed := calls.entered[id], calls.killed[id]
			if calls.overlap[id] {
				failf("%s: its tool was entered again while an earlier entry was still running", id)
			}
			// Entries in a process killed before it could report them are
			// not reported.
			if entered-killed > calls.reported[id] {
				failf("%s: its tool was entered %d times (%d in a killed process), and %d reported by a ToolFinished that ran", id, entered, killed, calls.reported[id])
			}
			// An idempotent call that a kill interrupted may run again;
			// nothing else may.
			again := b.Name == "fetch" && killed > 0 && entered-killed <= 1
			switch {
			case entered > 1 && again:
				tally.rerun++
			case entered > 1:
				tally.reentered++
				failf("%s: its tool was entered %d times (%d in a killed process), want at most 1", id, entered, killed)
			}
			if began := st.responses(turn); min(entered, 1) > began {
				failf("%s: its tool was entered %d times, from %d responses that began", id, entered, began)
			}
			result, answered := results[id]
			switch {
			case !answered && entered > 0:
				failf("%s: its tool was entered %d times, but no result was sent", id, entered)
			case answered && entered > 0 && !strings.Contains(result, faultMark(id, entered)):
				// A call that a kill interrupted before its result was saved
				// is answered as interrupted, and not run again.
				if calls.lastKilled[id] && b.Name != "fetch" && strings.Contains(result, toolrun.ErrInterrupted.Error()) {
					tally.interrupted++
					break
				}
				failf("%s: the model got %q, want the result of the last of %d entries", id, result, entered)
			case answered && entered == 0 && strings.Contains(result, "ran "+id+" #"):
				failf("%s: the model got %q, from a run never entered", id, result)
			}
		}
	}
	return problems, tally
}

// callIDs returns the ids of the calls of the run's script.
func (p *faultPlan) callIDs() []string {
	var ids []string
	for turn := 1; turn <= p.turns; turn++ {
		for _, b := range p.reply(turn).Content {
			if b.Type == "tool_use" {
				ids = append(ids, b.ID)
			}
		}
	}
	return ids
}

// options returns the Options of a runner of the run, which reports its
// events to onEvent.
func (p *faultPlan) options(onEvent func(context.Context, toolrun.Event)) *toolrun.Options {
	return &toolrun.Options{
		Logger:           discard(),
		MaxTurns:         p.maxTurns,
		MaxParallelTools: p.parallel,
		Stream:           p.mode != unstreamed,
		StreamRetry:      toolrun.RetryPolicy{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond},
		// Stalled responses end fast, so that the suite stays quick; a
		// hang would be a run that passes the suite's deadline.
		Timeouts: toolrun.Timeouts{StreamIdle: 2 * time.Second, Request: 3 * time.Second},
		OnEvent:  onEvent,
		// Odd runs go without a thread, so that the whole-history path
		// meets every fault too; even runs take the default.
		NoThread: p.run%2 == 1,
	}
}

// drive runs r as the plan says, by Run or by ranging over Events, and runs
// it again after an error up to p.attempts times in all, as its caller may;
// a runner refused with ErrRunBusy is not tried again. It returns how the
// last attempt ended and the number of attempts after the first.
func (p *faultPlan) drive(ctx context.Context, r *toolrun.Runner) (res *toolrun.Result, err error, resumed int) {
	for i := range p.attempts {
		if i > 0 {
			resumed++
		}
		if p.viaEvents {
			err = nil
			for _, e := range r.Events(ctx) {
				if e != nil {
					err = e
				}
			}
			res = r.Result()
		} else {
			res, err = r.Run(ctx)
		}
		if err == nil || ctx.Err() != nil || errors.Is(err, toolrun.ErrRunBusy) {
			break
		}
	}
	return res, err, resumed
}

// cancelled reports whether the responder cancelled the run.
func (st *faultRunState) cancelled() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.plan.cancelAt > 0 && st.requests >= st.plan.cancelAt
}

// historyError returns the fake server's objection to msgs, if any.
func historyError(msgs []anthropic.BetaMessageParam) error {
	body, err := json.Marshal(anthropic.BetaMessageNewParams{Model: "claude-test", MaxTokens: 1, Messages: msgs})
	if err != nil {
		return err
	}
	if err := toolruntest.Validate(body); err != nil {
		return fmt.Errorf("history is not valid: %w\n%s", err, body)
	}
	return nil
}

// TestFaultKinds runs one tool loop per kind of fault and checks exactly how
// it ends.
func TestFaultKinds(t *testing.T) {
	ms := time.Millisecond
	fault := func(r toolruntest.Reply, f toolruntest.Fault) toolruntest.Reply {
		r.Fault = f
		return r
	}
	status := func(code int) toolruntest.Reply {
		return toolruntest.Reply{Fault: toolruntest.Fault{Status: code, RetryAfter: ms}}
	}
	final := toolruntest.Message(toolruntest.Text("It is sunny in Paris."))

	// outcome is how a run ended, in comparable form.
	type outcome struct {
		Stop      toolrun.StopReason
		TurnError int // the turn a *TurnError names, or 0
		Status    int // the status of an *anthropic.Error in the error, or 0
		Stream    int // the attempt of a *TurnError whose stream began, or 0
		Requests  int
		Runs      int // of the tool
		Retried   int // RequestSent events of a request sent again
	}
	tests := []struct {
		name   string
		mode   int
		script []toolruntest.Reply
		want   outcome
	}{
		{
			name:   "429 twice, then the reply",
			script: []toolruntest.Reply{status(429), status(429), toolMessage(), final},
			want:   outcome{Stop: toolrun.StopEndTurn, Requests: 4, Runs: 1},
		},
		{
			name:   "500 once, streamed",
			mode:   streamed,
			script: []toolruntest.Reply{status(500), toolMessage(), final},
			want:   outcome{Stop: toolrun.StopEndTurn, Requests: 3, Runs: 1},
		},
		{
			// The client's retries are spent; the runner does not retry a
			// failure before the stream began.
			name:   "529 three times, streamed",
			mode:   streamed,
			script: []toolruntest.Reply{status(529), status(529), status(529)},
			want:   outcome{Stop: toolrun.StopError, TurnError: 1, Status: 529, Requests: 3},
		},
		{
			name:   "529 three times in the second turn",
			script: []toolruntest.Reply{toolMessage(), status(529), status(529), status(529)},
			want:   outcome{Stop: toolrun.StopError, TurnError: 2, Status: 529, Requests: 4, Runs: 1},
		},
		{
			name:   "JSON body cut short",
			script: []toolruntest.Reply{fault(toolMessage(), toolruntest.Fault{DropAfter: 40, RetryAfter: ms}), toolMessage(), final},
			want:   outcome{Stop: toolrun.StopEndTurn, Requests: 3, Runs: 1},
		},
		{
			name:   "error event in a tool_use block",
			mode:   streamed,
			script: []toolruntest.Reply{fault(toolMessage(), toolruntest.Fault{StreamErrorAfter: inToolBlock}), toolMessage(), final},
			want:   outcome{Stop: toolrun.StopEndTurn, Requests: 3, Runs: 1, Retried: 1},
		},
		{
			name:   "connection dropped in a tool_use block",
			mode:   streamed,
			script: []toolruntest.Reply{fault(toolMessage(), toolruntest.Fault{DropAfter: inToolBlock}), toolMessage(), final},
			want:   outcome{Stop: toolrun.StopEndTurn, Requests: 3, Runs: 1, Retried: 1},
		},
		{
			name: "error events exhaust the stream's attempts",
			mode: streamed,
			script: []toolruntest.Reply{
				fault(toolMessage(), toolruntest.Fault{StreamErrorAfter: 3}),
				fault(toolMessage(), toolruntest.Fault{StreamErrorAfter: 3}),
				fault(toolMessage(), toolruntest.Fault{StreamErrorAfter: 3}),
			},
			want: outcome{Stop: toolrun.StopError, TurnError: 1, Stream: 3, Requests: 3, Retried: 2},
		},
		{
			name:   "slow streams",
			mode:   streamed,
			script: []toolruntest.Reply{fault(toolMessage(), toolruntest.Fault{EventDelay: ms}), fault(final, toolruntest.Fault{EventDelay: ms})},
			want:   outcome{Stop: toolrun.StopEndTurn, Requests: 2, Runs: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(tt.script...))
			var calls counter
			var observed eventLog
			r := toolrun.New(client(s), userParams("Weather in Paris?"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
				Logger: discard(), OnEvent: observed.add,
				Stream:      tt.mode != unstreamed,
				StreamRetry: toolrun.RetryPolicy{InitialBackoff: ms},
			})
			res, err := r.Run(bounded(t))
			got := outcome{
				Stop:     res.StopReason,
				Requests: len(s.Requests()),
				Runs:     calls.get("get_weather"),
				Retried:  len(retries(observed.all())),
			}
			te := (*toolrun.TurnError)(nil)
			if errors.As(err, &te) {
				got.TurnError = te.Turn
			}
			if te != nil && te.Events > 0 {
				got.Stream = te.Attempt
			} else if ae := (*anthropic.Error)(nil); errors.As(err, &ae) {
				got.Status = ae.StatusCode
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s\nerror: %v", diff, err)
			}
			if (err != nil) != (res.StopReason == toolrun.StopError) {
				t.Errorf("got %q with the error %v, want an error exactly with StopError", res.StopReason, err)
			}
			checkHistory(t, res.Messages)
		})
	}
}
