package temporal_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/mock"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

var (
	wfFaultSeed = flag.Uint64("faults.seed", 1, "seed of TestWorkflowFaultInjection; 0 picks one at random and logs it")
	wfFaultRun  = flag.Int("faults.run", -1, "run only this run of TestWorkflowFaultInjection, to reproduce a failure")
)

// The numbers of TestWorkflowFaultInjection. A run in the SDK's test
// environment costs tens of milliseconds under the race detector, a
// stalled response its idle or request timeout (2 or 3 s, real time).
const (
	wfFaultRuns      = 250
	wfFaultRunsShort = 60
	wfFaultParallel  = 8
)

// TestWorkflowFaultInjection is the root package's TestFaultInjection run
// through this module: many seeded runs of the workflow in the SDK's test
// environment, against a model that fails at random in every way the fake
// server can (429, 529 and 500 with retry-after; error events and dropped
// connections mid-stream and mid-body; slow streams; stalled responses,
// streamed or not, ended by Options.Timeouts; responses whose tool_use ids
// repeat), with tools that succeed, fail, panic, time out, run alone or
// need a person's approval, decided by update, by signal, or by a signal
// sent before the call exists; and some runs cancelled. It checks what
// must hold whatever happens:
//
//   - every run ends with an Outcome and a defined StopReason, or, if it
//     was cancelled, with Temporal's CanceledError (the workflow's form of
//     StopCanceled: the execution is closed as cancelled);
//   - a run that was not cancelled stops as its script says, after as many
//     turns and with as many messages as the same plan run in process with
//     toolrun.Runner (resumed after each error and each approval, as its
//     caller would): the same stop reason for the same seed;
//   - every request passes the fake server's validation (srv.Errors), and
//     so does each run's final history;
//   - no tool_use id's tool is entered twice (none of the tools is
//     idempotent), and the one result the model gets for it comes from
//     that entry;
//   - the memo temporal.PendingMemo lists exactly the calls the pending
//     query lists whenever the run waits for a person, and none at the end.
//
// Each run's replies and faults come from PCGs seeded with the test's seed
// and the run's number; a failure names both, and -faults.seed and
// -faults.run replay it alone.
func TestWorkflowFaultInjection(t *testing.T) {
	seed := *wfFaultSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	runs := wfFaultRuns
	if testing.Short() {
		runs = wfFaultRunsShort
	}
	first, last := 0, runs
	if *wfFaultRun >= 0 {
		first, last = *wfFaultRun, *wfFaultRun+1
	}
	t.Logf("seed %d, runs %d to %d", seed, first, last-1)

	plans := make([]*wfPlan, last)
	// Each run has a model side for the workflow ("run N") and one for the
	// runner in process ("ref N"), each with its own faults.
	sides := map[string]*wfSide{}
	for i := first; i < last; i++ {
		plans[i] = newWFPlan(seed, i)
		sides["run "+strconv.Itoa(i)] = &wfSide{plan: plans[i], faults: rand.New(rand.NewPCG(seed, uint64(i)<<16|1))}
		sides["ref "+strconv.Itoa(i)] = &wfSide{plan: plans[i], faults: rand.New(rand.NewPCG(seed, uint64(i)<<16|2))}
	}
	s := toolruntest.New(nil, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		msgs := req.Conversation
		if len(msgs) == 0 || len(msgs[0].Content) == 0 || sides[msgs[0].Content[0].Text] == nil {
			panic(fmt.Sprintf("a request of no run: %s", req.Body))
		}
		return sides[msgs[0].Content[0].Text].respond(req)
	}})
	// The workflows' tools and the runners' count their entries apart:
	// a plan's ids are the same in both.
	wfLedger, refLedger := newWFLedger(), newWFLedger()
	wfTools, refTools := wfFaultTools(wfLedger), wfFaultTools(refLedger)

	var mu sync.Mutex // guards failed, failures, stops
	failed := 0
	var failures []string
	stops := map[string]int{}
	sem := make(chan struct{}, wfFaultParallel)
	var wg sync.WaitGroup
	for i := first; i < last; i++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p := plans[i]
			got, problems := runWFPlan(t, s, wfTools, wfLedger, p, sides["run "+strconv.Itoa(i)])
			if !got.canceled {
				want, refProblems := runRefPlan(t.Context(), s, refTools, refLedger, p)
				problems = append(problems, refProblems...)
				if got.stop != want.stop || got.turns != want.turns || got.messages != want.messages {
					problems = append(problems, fmt.Sprintf("the workflow stopped with %q after %d turns with %d messages; in process, %q after %d turns with %d messages",
						got.stop, got.turns, got.messages, want.stop, want.turns, want.messages))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if got.canceled {
				stops["canceled (CanceledError)"]++
			} else {
				stops[string(got.stop)]++
			}
			if len(problems) == 0 {
				return
			}
			failed++
			if len(failures) < 10 {
				failures = append(failures, fmt.Sprintf("seed %d, run %d (%s; replay with -run 'TestWorkflowFaultInjection$' -faults.seed=%d -faults.run=%d):\n\t%s",
					seed, i, p, seed, i, strings.Join(problems, "\n\t")))
			}
		})
	}
	wg.Wait()
	requests := 0
	for _, sd := range sides {
		requests += sd.requestCount()
	}
	decisions := map[string]int{}
	for _, p := range plans[first:last] {
		for _, id := range p.approvals() {
			how, d := p.decision(id)
			decisions[fmt.Sprintf("%s by %s", d.Kind, [...]string{"update", "signal", "early signal"}[how])]++
		}
	}
	t.Logf("%d requests; stops %v; decisions planned %v", requests, stops, decisions)
	for _, f := range failures {
		t.Error(f)
	}
	if failed > len(failures) {
		t.Errorf("seed %d: %d runs failed, the first %d shown", seed, failed, len(failures))
	}
	s.Close()
	// A thread's refused continue, which the runner answers by creating a
	// new thread, is the protocol: a step sent again (a retried activity,
	// the client's retry of a cut-off reply) finds its thread continued.
	var rejected []error
	for _, err := range s.Errors() {
		if msg := err.Error(); !strings.Contains(msg, "thread_already_continued") && !strings.Contains(msg, "thread_continue_in_flight") &&
			!strings.Contains(msg, "thread_not_found") {
			rejected = append(rejected, err)
		}
	}
	for i, err := range rejected {
		if i == 10 {
			t.Errorf("seed %d: %d requests rejected in all", seed, len(rejected))
			break
		}
		t.Errorf("seed %d: fake server rejected a request: %v", seed, err)
	}
}

// How a decision reaches the workflow.
const (
	byUpdate = iota
	bySignal
	bySignalEarly // a signal sent as the run starts, before the call exists
)

// wfPlan is what one run is: how it runs, the script of its model, and
// the decisions on its calls that need approval.
type wfPlan struct {
	seed       uint64
	run        int
	stream     bool
	store      bool // the workers keep states in a Store
	turns      int  // the response of this turn is final
	final      string
	maxTurns   int
	parallel   int
	cancelAt   time.Duration // on the workflow's clock; 0 for none
	stopReason toolrun.StopReason
}

func (p *wfPlan) String() string {
	mode := "unstreamed"
	if p.stream {
		mode = "streamed"
	}
	if p.store {
		mode += ", Store"
	}
	s := fmt.Sprintf("%s, %d turns ending in %s, MaxTurns %d, MaxParallelTools %d", mode, p.turns, p.final, p.maxTurns, p.parallel)
	if p.cancelAt > 0 {
		s += fmt.Sprintf(", cancelled at %s", p.cancelAt)
	}
	return s
}

func newWFPlan(seed uint64, run int) *wfPlan {
	rng := rand.New(rand.NewPCG(seed, uint64(run)<<16))
	p := &wfPlan{seed: seed, run: run, stream: rng.IntN(2) == 0, store: rng.IntN(2) == 0, turns: 1 + rng.IntN(3), parallel: 1 + rng.IntN(4)}
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
	if rng.IntN(100) < 10 {
		// Reached while the workflow waits: for a person, or between
		// the attempts of a step.
		p.cancelAt = time.Duration(1+rng.IntN(120)) * time.Second
	}
	return p
}

// want returns the stop reason and the turns the plan ends with, if no
// fault and no cancellation stops it first.
func (p *wfPlan) want() (toolrun.StopReason, int) {
	if p.maxTurns != 0 && p.maxTurns < p.turns {
		return toolrun.StopMaxTurns, p.maxTurns
	}
	return p.stopReason, p.turns
}

// reply returns the model's response to the request of turn: the same for
// every attempt of the turn.
func (p *wfPlan) reply(turn int) toolruntest.Reply {
	rng := rand.New(rand.NewPCG(p.seed, uint64(p.run)<<16|uint64(turn+1)))
	if turn >= p.turns {
		switch p.final {
		case "max_tokens":
			id := fmt.Sprintf("r%d_t%d_1", p.run, turn)
			return toolruntest.Reply{StopReason: "max_tokens", Content: []toolruntest.Block{
				toolruntest.Text("Checking the last"), toolruntest.ToolUse(id, "echo", wfInput{ID: id, Mode: "ok"}),
			}}
		case "refusal":
			return toolruntest.Reply{StopReason: "refusal", Content: []toolruntest.Block{toolruntest.Text("I can't help with that.")}}
		}
		return toolruntest.Message(toolruntest.Text(fmt.Sprintf("Done after %d turns.", turn)))
	}
	if rng.IntN(100) < 10 {
		return toolruntest.Reply{StopReason: "pause_turn", Content: []toolruntest.Block{toolruntest.Text("Still working.")}}
	}
	var blocks []toolruntest.Block
	if rng.IntN(2) == 0 {
		blocks = append(blocks, toolruntest.Text(fmt.Sprintf("Step %d.", turn)))
	}
	for k := range 1 + rng.IntN(3) {
		id := fmt.Sprintf("r%d_t%d_%d", p.run, turn, k+1)
		in := wfInput{ID: id, Mode: "ok"}
		var name string
		switch x := rng.IntN(100); {
		case x < 25:
			name = "echo"
		case x < 45:
			name, in.Mode = "flaky", [...]string{"ok", "error", "panic"}[rng.IntN(3)]
		case x < 55:
			name, in.Mode = "slow", "hang" // ended by the tool's timeout
		case x < 65:
			name = "exclusive"
		case x < 90:
			name = "approve"
		case x < 95:
			name = "nosuch" // answered as an unknown tool
		default:
			blocks = append(blocks, toolruntest.ToolUse(id, "echo", map[string]int{"id": 5})) // fails validation
			continue
		}
		blocks = append(blocks, toolruntest.ToolUse(id, name, in))
	}
	return toolruntest.Message(blocks...)
}

// approvals returns the calls of the plan that need a person, in order.
func (p *wfPlan) approvals() []string {
	var ids []string
	for turn := 1; turn <= p.turns; turn++ {
		for _, b := range p.reply(turn).Content {
			if b.Type == "tool_use" && b.Name == "approve" {
				ids = append(ids, b.ID)
			}
		}
	}
	return ids
}

// decision returns how and what the person decides on call id.
func (p *wfPlan) decision(id string) (how int, d toolrun.Decision) {
	h := uint64(0)
	for _, c := range id {
		h = h*31 + uint64(c)
	}
	rng := rand.New(rand.NewPCG(p.seed, h))
	how = rng.IntN(3)
	if rng.IntN(3) == 0 {
		return how, policy.Deny("not now " + id)
	}
	return how, toolrun.Decision{}
}

// wfSide is one driver's side of the server for a run: its faults, drawn
// one per request in the order the driver sends them.
type wfSide struct {
	plan *wfPlan

	mu       sync.Mutex // guards faults, requests
	faults   *rand.Rand
	requests int
}

func (sd *wfSide) requestCount() int {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	return sd.requests
}

// respond answers a request with the plan's reply for its turn and, at
// random, a fault: toolruntest.RandomFault, the root package's fault
// suite's mix.
func (sd *wfSide) respond(req *toolruntest.Request) toolruntest.Reply {
	turn := 1
	for _, m := range req.Conversation {
		if m.Role == "assistant" {
			turn++
		}
	}
	r := sd.plan.reply(turn)
	sd.mu.Lock()
	defer sd.mu.Unlock()
	sd.requests++
	r = toolruntest.RandomFault(sd.faults, req.Stream, r)
	return r
}

// wfInput is the input of the suite's tools: the call's own id and what
// to do.
type wfInput struct {
	ID   string `json:"id"`
	Mode string `json:"mode"` // "ok", "error", "panic" or "hang"
}

// wfLedger counts the times a tool was entered, by tool_use id.
type wfLedger struct {
	mu sync.Mutex // guards n
	n  map[string]int
}

func newWFLedger() *wfLedger { return &wfLedger{n: map[string]int{}} }

func (l *wfLedger) enter(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[id]++
	return l.n[id]
}

func (l *wfLedger) entered(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[id]
}

// wfMark is what the result of entry n of call id says.
func wfMark(id string, n int) string { return fmt.Sprintf("ran %s #%d", id, n) }

// wfFaultTools returns the suite's tools, none idempotent, which count
// their entries in l: echo succeeds; flaky succeeds, fails or panics as
// its input says; slow hangs until its 50 ms timeout; exclusive runs
// alone; approve needs a person's approval.
func wfFaultTools(l *wfLedger) []toolrun.Tool {
	run := func(ctx context.Context, in wfInput) (string, error) {
		mark := wfMark(in.ID, l.enter(in.ID))
		switch in.Mode {
		case "error":
			return "", errors.New(mark + " and failed")
		case "panic":
			panic(mark + " and panicked")
		case "hang":
			<-ctx.Done()
			return "", fmt.Errorf("%s: %w", mark, ctx.Err())
		}
		return mark, nil
	}
	slow := toolrun.NewTool("slow", "Hangs until its timeout.", run)
	slow.Timeout = 50 * time.Millisecond
	exclusive := toolrun.NewTool("exclusive", "Runs alone.", run)
	exclusive.Exclusive = true
	approve := toolrun.NewTool("approve", "Needs a person.", run)
	approve.Policy = policy.RequireApproval("a person decides")
	return []toolrun.Tool{
		toolrun.NewTool("echo", "Succeeds.", run),
		toolrun.NewTool("flaky", "Succeeds, fails or panics.", run),
		slow, exclusive, approve,
	}
}

// wfEnd is how a run ended, in comparable form.
type wfEnd struct {
	canceled bool
	stop     toolrun.StopReason
	turns    int
	messages int
}

// wfOptions are the runner options of both drivers.
func wfOptions(p *wfPlan) *toolrun.Options {
	return &toolrun.Options{
		Logger:           discard(),
		MaxParallelTools: p.parallel,
		Stream:           p.stream,
		StreamRetry:      toolrun.RetryPolicy{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond},
		Timeouts:         toolrun.Timeouts{StreamIdle: 2 * time.Second, Request: 3 * time.Second},
	}
}

// runWFPlan runs plan p as a workflow in the SDK's test environment and
// returns how it ended and what went wrong.
func runWFPlan(t *testing.T, s *toolruntest.Server, tools []toolrun.Tool, ledger *wfLedger, p *wfPlan, side *wfSide) (wfEnd, []string) {
	var problems []string
	failf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(nopLogger)
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(2 * time.Minute) // real time: a few stalls at 3 s each
	opts := wfOptions(p)
	var store toolrun.Store
	if p.store {
		store = &filestore.Store{Dir: t.TempDir()}
		opts.Store = store
	}
	temporal.Register(env, temporal.NewActivities(s.Client(), tools, opts))

	// The memo, as the workflow last upserted it.
	var memo *temporal.PendingApprovals
	memoSets := 0
	env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
		m, _ := args.Get(0).(map[string]any)
		v, ok := m[temporal.PendingMemo].(temporal.PendingApprovals)
		if !ok {
			failf("got an upserted memo %v, want %s holding a PendingApprovals", m, temporal.PendingMemo)
			return
		}
		memo = &v
		memoSets++
	}).Return(nil)

	// The person: decisions by early signal as the run starts, the others
	// once their call awaits approval, found by a poll of the query.
	sent := map[string]bool{}
	send := func(id string) {
		how, d := p.decision(id)
		sent[id] = true
		a := temporal.Approval{ToolUseID: id, Decision: d}
		if how == byUpdate {
			env.UpdateWorkflow(temporal.DecideUpdate, "decide-"+id, &testsuite.TestUpdateCallback{
				OnReject:   func(err error) { failf("update for %s rejected: %v", id, err) },
				OnAccept:   func() {},
				OnComplete: func(_ any, err error) {},
			}, a)
			return
		}
		env.SignalWorkflow(temporal.DecideSignal, a)
	}
	env.RegisterDelayedCallback(func() {
		for _, id := range p.approvals() {
			if how, _ := p.decision(id); how == bySignalEarly {
				send(id)
			}
		}
	}, 0)
	var poll func()
	poll = func() {
		if env.IsWorkflowCompleted() {
			return
		}
		v, err := env.QueryWorkflow(temporal.PendingQuery)
		if err != nil {
			failf("pending query: %v", err)
			return
		}
		var pending []toolrun.PendingCall
		if err := v.Get(&pending); err != nil {
			failf("pending query: %v", err)
			return
		}
		var ids, memoIDs []string
		for _, c := range pending {
			ids = append(ids, c.Call.ID)
		}
		if memo != nil {
			for _, c := range memo.Calls {
				memoIDs = append(memoIDs, c.Call.ID)
			}
		}
		if len(ids) > 0 && !slices.Equal(ids, memoIDs) {
			failf("awaiting approval: the query lists %q, the memo %q", ids, memoIDs)
		}
		for _, id := range ids {
			if !sent[id] {
				send(id)
			}
		}
		env.RegisterDelayedCallback(poll, time.Minute)
	}
	env.RegisterDelayedCallback(poll, time.Minute)
	canceled := false
	if p.cancelAt > 0 {
		env.RegisterDelayedCallback(func() {
			if !env.IsWorkflowCompleted() {
				canceled = true
				env.CancelWorkflow()
			}
		}, p.cancelAt)
	}

	ro := temporal.RunOptions{
		MaxTurns:   p.maxTurns,
		ModelRetry: &sdktemporal.RetryPolicy{InitialInterval: 10 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: time.Second},
	}
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(wfParams(fmt.Sprintf("run %d", p.run)), &ro))

	end := wfEnd{}
	if !env.IsWorkflowCompleted() {
		return end, []string{"the workflow did not complete"}
	}
	if err := env.GetWorkflowError(); err != nil {
		var ce *sdktemporal.CanceledError
		if canceled && errors.As(err, &ce) {
			end.canceled = true
		} else {
			return end, []string{fmt.Sprintf("the workflow failed: %v", err)}
		}
	}
	var msgs []anthropic.BetaMessageParam
	if !end.canceled {
		var out temporal.Outcome
		if err := env.GetWorkflowResult(&out); err != nil {
			return end, []string{fmt.Sprintf("no Outcome: %v", err)}
		}
		if out.State == nil {
			return end, []string{"an Outcome with no State"}
		}
		whole, err := temporal.LoadState(t.Context(), store, &out)
		if err != nil {
			return end, []string{fmt.Sprintf("the final state: %v", err)}
		}
		msgs = whole.Params.Messages
		end.stop, end.turns, end.messages = out.StopReason, whole.Turns, len(msgs)
		if !definedStop(out.StopReason) {
			failf("got StopReason %q, which is none of the defined ones", out.StopReason)
		}
		if want, turns := p.want(); out.StopReason != want || whole.Turns != turns {
			failf("got %q (%s) after %d turns, want %q after %d turns", out.StopReason, out.Detail, whole.Turns, want, turns)
		}
		if err := historyError(msgs); err != nil {
			failf("%v", err)
		}
		if memo == nil || len(memo.Calls) != 0 {
			failf("got the memo %+v at the end, want one with no calls", memo)
		}
	}
	if memoSets == 0 {
		failf("the memo was never upserted")
	}
	problems = append(problems, checkEntries(p, ledger, msgs, end.canceled)...)
	return end, problems
}

// runRefPlan runs plan p in process with toolrun.Runner, as its caller
// would: run again after an error, and after each suspension for approval
// with the plan's decisions.
func runRefPlan(ctx context.Context, s *toolruntest.Server, tools []toolrun.Tool, ledger *wfLedger, p *wfPlan) (wfEnd, []string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	opts := wfOptions(p)
	opts.MaxTurns = p.maxTurns
	r := toolrun.New(s.Client(option.WithMaxRetries(2)), wfParams(fmt.Sprintf("ref %d", p.run)), tools, opts)
	var res *toolrun.Result
	var err error
	for range 50 {
		res, err = r.Run(ctx)
		if res.StopReason == toolrun.StopAwaitingApproval {
			for _, c := range r.State().AwaitingApproval() {
				_, d := p.decision(c.Call.ID)
				if err := r.Decide(c.Call.ID, d); err != nil {
					return wfEnd{}, []string{fmt.Sprintf("in process: decide %s: %v", c.Call.ID, err)}
				}
			}
			continue
		}
		if err == nil || ctx.Err() != nil || errors.Is(err, toolrun.ErrMaxTurns) {
			break
		}
	}
	end := wfEnd{stop: res.StopReason, turns: res.Turns, messages: len(res.Messages)}
	var problems []string
	if err := historyError(res.Messages); err != nil {
		problems = append(problems, "in process: "+err.Error())
	}
	for _, pr := range checkEntries(p, ledger, res.Messages, false) {
		problems = append(problems, "in process: "+pr)
	}
	return end, problems
}

// checkEntries checks that no call of plan p was entered twice, and that
// the result the model received for each came from its one entry.
func checkEntries(p *wfPlan, ledger *wfLedger, msgs []anthropic.BetaMessageParam, canceled bool) []string {
	var problems []string
	results := toolruntest.ResultTexts(msgs)
	for turn := 1; turn <= p.turns; turn++ {
		for _, b := range p.reply(turn).Content {
			if b.Type != "tool_use" {
				continue
			}
			id := b.ID
			n := ledger.entered(id)
			if n > 1 {
				problems = append(problems, fmt.Sprintf("%s: its tool was entered %d times, want at most 1", id, n))
			}
			result, answered := results[id]
			var in wfInput
			_ = json.Unmarshal(b.Input, &in)
			if in.Mode == "hang" {
				// Ended by its timeout: the model is told so, not the
				// tool's own error.
				if answered && n > 0 && !strings.Contains(result, "timed out") {
					problems = append(problems, fmt.Sprintf("%s: the model got %q, want its timeout", id, result))
				}
				continue
			}
			switch {
			case !answered && n > 0 && !canceled:
				// A call the turn limit left pending is not run; one that
				// ran must have reached the model.
				problems = append(problems, fmt.Sprintf("%s: its tool was entered %d times, but the model got no result", id, n))
			case answered && n > 0 && !strings.Contains(result, wfMark(id, n)):
				problems = append(problems, fmt.Sprintf("%s: the model got %q, want the result of entry %d", id, result, n))
			case answered && n == 0 && strings.Contains(result, "ran "+id+" #"):
				problems = append(problems, fmt.Sprintf("%s: the model got %q, from an entry that never happened", id, result))
			}
			if _, d := p.decision(id); answered && b.Name == "approve" && d.Kind == toolrun.Deny && n > 0 {
				problems = append(problems, fmt.Sprintf("%s: denied, but its tool ran", id))
			}
		}
	}
	return problems
}

// definedStop reports whether r is a StopReason a run can end with.
func definedStop(r toolrun.StopReason) bool {
	switch r {
	case toolrun.StopEndTurn, toolrun.StopMaxTurns, toolrun.StopMaxTokens, toolrun.StopRefusal, toolrun.StopContextWindow,
		toolrun.StopIncomplete, toolrun.StopAwaitingApproval, toolrun.StopHook, toolrun.StopBudget, toolrun.StopCanceled, toolrun.StopError,
		toolrun.StopPayloadTooLarge:
		return true
	}
	return false
}

// wfParams are the params of a run whose first message names it.
func wfParams(name string) anthropic.BetaMessageNewParams {
	return userParams(name)
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
