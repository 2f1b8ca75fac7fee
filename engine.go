package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun/internal/deepcopy"
	"github.com/toolrun/toolrun/internal/defaults"
)

// This file holds the engine: a run is one state machine, [Runner.step],
// which looks at the run's [State] and says what happens next — hand out a
// turn, run these calls, or stopped. Every way of driving a run is a short
// loop over it: Next, Turns and Run here, Events in events.go, Advance and
// ExecuteCall (for runs whose calls go elsewhere, such as Temporal
// activities) at the end of this file. The calls go to the one executor in
// executor.go; the decision order is in decision.go.

// Runner runs the tool loop of one conversation. Build it with [New],
// [Resume] or [Open]. A Runner is not safe for concurrent use: call its
// methods from one goroutine at a time (the loop body of [Runner.Turns]
// included).
type Runner struct {
	// messages is the client's Messages service: all the runner needs of
	// the client, a fraction of its size, which matters for runs held by
	// the thousand while they await approval.
	//
	// messages, opts and log point into the runConfig of the runner's
	// Template, shared with its other runners and never written.
	messages *anthropic.BetaMessageService
	opts     *Options
	log      *runLogger  // Options.Logger as ANTHROPIC_LOG sets it, redacting
	set      *toolSet    // the Template's, shared with its other runners
	tools    []toolEntry // this runner's view of set's tools, by position
	// toolDefs is the tool list sent with each request: set.defs itself
	// (shared, never written through) while the run has no tool params of
	// its own and removed none.
	toolDefs []anthropic.BetaToolUnionParam

	// mu guards st.Pending's calls while the executor's goroutines answer
	// them and a checkpoint reads them; everything else in st is changed
	// by the engine's goroutine alone.
	//
	// st is an object of its own rather than a field, for the heap of runs
	// held by the thousand (issue 15): a Runner with the State inside takes
	// 1,536 bytes, which with the allocator's header for large objects
	// needs a 1,792-byte slot; apart, the State fills a 1,280-byte one and
	// the rest a 320-byte one, 192 bytes less per run. Keep the Runner's
	// own fields within 320 bytes (TestRunnerSizeClasses).
	mu sync.Mutex
	st *State // the run's data: the only copy

	// stopped is set while the run is stopped; fresh is its Result, until
	// it is handed out (see result).
	stopped *stopRecord
	fresh   *Result
	// last is the last response, decoded, for Result.Message and
	// TurnFinished; lastRaw holds its JSON in its place once the run's
	// result has been handed out, since a stopped run may be held for long
	// (awaiting approval, by the thousand) and the decoded message, with
	// the client's record of every field, is several times the size of the
	// JSON it came from.
	last    *anthropic.BetaMessage
	lastRaw string

	// decided holds the pending turn's calls this runner decided under its
	// own Options: a call decided by another runner, before a Resume, is
	// decided again, so that this runner's deny rules hold.
	// A list rather than a set: a turn has a few calls, and a held run
	// keeps the list.
	decided []string
	// live holds the pending turn's results answered in this process,
	// with their errors as the tools returned them.
	live map[string]*ToolResult

	started       time.Time // the first step in this process, for Budget.WallTime
	lastInput     int64     // the input tokens of the last request, all kinds
	lastInputMsgs int       // the messages the last request sent
	compactFloor  int64     // the input of the first response after the last compaction
	measureFloor  bool      // the next response's input is compactFloor
	inputStale    bool      // lastInput does not bound the history's first lastInputMsgs messages (budget.go)
	breakpoints   cacheTier // the dearest cache breakpoint seen in the history (budget.go)
	// threadOff says that this run's first thread request was refused with
	// a 400 and the same request without a thread was not (thread.go): the
	// rest of the run, in this process, goes without a thread, a stop and
	// a continue included, and the Warn record is written once. (With the
	// flags above, so that the Runner stays within its size class.)
	threadOff   bool
	warnedPrice map[string]bool
	// historyIDs is the set of the history's tool_use ids, for
	// checkResponse: built from the history when first needed, kept up to
	// date by appendTurn, and dropped by setHistory, the one other way the
	// history changes in place of it, and when the run stops (a held run
	// keeps no cache).
	historyIDs map[string]struct{}

	// wire holds the request JSON of the history's messages, so that a
	// request encodes only what is new (encode.go). It is a cache, not
	// state: a resumed runner encodes its first request in full.
	// It is nil until the first request, and again once the run stops.
	wire *wireCache

	saveMu  sync.Mutex // serialises saves to Options.Store; guards saveErr, busy, version and claimed
	saveErr error      // the first failed save, which stops the run
	version uint64     // the version of the state last loaded from or saved to the store
	busy    bool       // saveErr is a refusal (ErrRunBusy): the run is another runner's, for good
	claimed bool       // a save succeeded in this process

	eventMu sync.Mutex // serialises OnEvent and logging; guards sink and observerErr
	sink    *eventSink // the consumer of Events, while it runs
	// observerErr is the panic of an OnEvent observer, which stops the run
	// at its next step.
	observerErr error
}

// New returns a runner for the conversation in params (model, max_tokens,
// system, messages and any other request fields) with tools. Tools already
// in params.Tools are sent as they are (server tools, say); tools given here
// are added to them and run by the runner. opts may be nil.
//
// New panics if two tools share a name, a tool's schema cannot be used, or
// Options.Store is set without Options.RunID: those are mistakes in the
// program. To build many runners of the same client, tools and options,
// build a [Template] once.
func New(client anthropic.Client, params anthropic.BetaMessageNewParams, tools []Tool, opts *Options) *Runner {
	return NewTemplate(client, tools, opts).New(params)
}

// newRunner returns a runner of t with an empty State.
func (t *Template) newRunner() *Runner {
	return &Runner{messages: &t.cfg.messages, opts: &t.cfg.opts, log: &t.cfg.log, st: &State{},
		set: t.set, tools: t.set.entries}
}

// syncTools rebuilds the tool list sent with each request and the sorted
// names told to the model: the caller's own tool params, then the runner's
// tools in the order they were given, less those removed.
func (r *Runner) syncTools() {
	removed := false
	for _, name := range r.st.Removed {
		if i, ok := r.set.index[name]; ok {
			if len(r.tools) > 0 && &r.tools[0] == &r.set.entries[0] {
				r.tools = slices.Clone(r.tools) // the set's, shared
			}
			r.tools[i].removed = true
			removed = true
		}
	}
	if !removed && len(r.st.Params.Tools) == 0 {
		r.toolDefs = r.set.defs
		return
	}
	// A list of the run's own, never the shared set's.
	r.toolDefs = slices.Clone(r.st.Params.Tools)
	for i := range r.tools {
		if !r.tools[i].removed {
			r.toolDefs = append(r.toolDefs, r.set.defs[i])
		}
	}
}

// toolNames returns the sorted names of the tools in the run, for a message
// to the model.
func (r *Runner) toolNames() []string {
	var names []string
	for _, name := range r.set.names {
		if r.tool(name) != nil {
			names = append(names, name)
		}
	}
	return names
}

// RemoveTools takes tools out of the run: they are no longer sent to the
// model, and a later call of one of them is answered as an unknown tool, so
// a model cannot use a tool that was taken away. The removal is kept in the
// run's [State]. Names not in the run are ignored.
func (r *Runner) RemoveTools(names ...string) {
	for _, name := range names {
		if !slices.Contains(r.st.Removed, name) {
			r.st.Removed = append(r.st.Removed, name)
		}
	}
	r.syncTools()
}

// State returns a copy of the run's data, signed with Options.StateKey if
// set. It shares nothing with the runner: writing into the copy, down to a
// block's text or a tool_use input's bytes, does not change the run.
//
// The copy is made through the State's JSON, the form a [Store] keeps. A
// history that does not encode as JSON — a message the caller gave with a
// tool_use Input that is not valid JSON, or an Input holding a value
// encoding/json refuses (a func, a channel, an infinite or NaN float) — is
// copied without it, field by field, and State logs an Error, because no
// Store can save that state either. Such a run cannot be sent: Run, Next
// and the other drivers stop it with [StopError] and a *[TurnError] whose
// text carries the encoding's error (the SDK encodes with its own copy of
// encoding/json, whose error types a caller cannot name), before anything
// goes out, as often as they are called: nothing is sent twice, and no
// call runs again. Replacing the message with [Runner.SetMessages] lets
// the run go on.
func (r *Runner) State() *State {
	s := r.snapshot()
	r.saveMu.Lock()
	s.Version = r.version
	r.saveMu.Unlock()
	s.RunID = r.opts.RunID
	var out State
	b, err := json.Marshal(s)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err == nil {
		out.Params.Betas = slices.Clone(s.Params.Betas)
		s = &out
	} else {
		// Not silent: a Store could not save this state. The copy made
		// without JSON keeps unexported SDK bookkeeping (param.Opt status,
		// metadata) by value, which no caller can write through; see
		// internal/deepcopy. The turn in progress is unexported here and
		// is copied on its own, so State.Decide on the copy cannot reach
		// the runner's calls.
		r.log.Error("toolrun: the run's state does not encode as JSON; State returns a copy made without it, which a Store cannot save", "error", err)
		out = deepcopy.Copy(*s)
		out.pending = deepcopy.Copy(s.pending)
		s = &out
	}
	if err := s.sign(r.opts.StateKey); err != nil {
		r.log.Error("toolrun: signing the state failed", "error", err)
	}
	return s
}

// snapshot returns a copy of the run's data that shares no slice the
// runner changes.
func (r *Runner) snapshot() *State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.clone()
}

// Messages returns a copy of the history that shares nothing with the run:
// writing into it, down to a block's text, does not change the run; give
// the edited copy to [Runner.SetMessages] to change it. The response of a
// turn handed out by Next is not in it until the next call of Next commits
// it.
func (r *Runner) Messages() []anthropic.BetaMessageParam {
	return deepcopy.Copy(r.st.Params.Messages)
}

// SetMessages replaces the history with a copy of messages. Called while a
// turn is handed out, it takes over that turn: the runner will not append
// the turn's response or run its tools. If the run had stopped, it may go
// on. Writing into messages afterwards does not change the run.
func (r *Runner) SetMessages(messages []anthropic.BetaMessageParam) {
	r.setHistory(deepcopy.Copy(messages))
	r.markEdited()
}

// AppendMessages appends a copy of messages to the history, with the same
// effect on a handed-out turn as [Runner.SetMessages].
func (r *Runner) AppendMessages(messages ...anthropic.BetaMessageParam) {
	r.setHistory(append(slices.Clip(r.st.Params.Messages), deepcopy.Copy(messages)...))
	r.markEdited()
}

// setHistory replaces the history otherwise than by committing a turn.
// Any message may be another now: the set of tool_use ids is built again
// when needed, and the next request's input is estimated in full
// (budget.go).
func (r *Runner) setHistory(messages []anthropic.BetaMessageParam) {
	r.st.Params.Messages = messages
	r.historyIDs = nil
	r.inputStale = true
}

// RetryTurn discards the turn handed out by Next: its response is not
// appended and its tools do not run, and the next call of Next sends the
// same history again.
func (r *Runner) RetryTurn() { r.markEdited() }

// leaveOut drops the pending turn p, which the caller took over by changing
// the history. That is routine, and logged at Debug, unless some of its
// calls ran (or started): their effects stay, but the model will never see
// their results unless the caller put them in the history, so that is a
// Warn naming them.
func (r *Runner) leaveOut(ctx context.Context, p *turnState) {
	var ran []string
	for _, c := range p.Calls {
		if c.Phase == phaseStarted || (c.Result != nil && c.Result.Ran) {
			ran = append(ran, c.Call.ID)
		}
	}
	if len(ran) > 0 {
		r.log.WarnContext(ctx, "toolrun: history changed by the caller; turn left out with calls that ran, whose results the model will not see",
			"turn", p.Turn, "tool_use_ids", ran)
	} else {
		r.log.DebugContext(ctx, "toolrun: history changed by the caller; turn left out", "turn", p.Turn)
	}
	r.setPending(nil)
}

func (r *Runner) markEdited() {
	if r.st.pending != nil {
		r.st.edited = true
	}
	if r.stopped != nil && r.st.StopReason != StopAwaitingApproval {
		r.clearStop()
	}
}

// SetMaxTurns changes the turn limit; see [Options.MaxTurns]. A run stopped
// at its limit may go on after it is raised.
func (r *Runner) SetMaxTurns(n int) {
	if n == 0 {
		n = defaults.MaxTurns
	}
	r.st.MaxTurns = n
	if r.stopped != nil && r.st.StopReason == StopMaxTurns {
		r.clearStop()
	}
}

// Params returns a copy of the request params the runner sends, with the
// history as Messages and every tool's definition. It shares nothing with
// the run.
func (r *Runner) Params() anthropic.BetaMessageNewParams {
	p := r.st.Params
	p.Tools = r.toolDefs
	p.Betas = r.st.Betas
	return deepcopy.Copy(p)
}

// Result returns how the run stopped, or nil while it has not.
//
// Its Message is the last response decoded afresh from the JSON it came as:
// a runner that has handed out its result keeps only that JSON (so a change
// a hook made to the decoded response is not in it).
func (r *Runner) Result() *Result { return r.result() }

// result returns how the run stopped, or nil while it has not: the first
// time, the Result that RunStopped carried (after which the runner keeps
// only the last response's JSON: lastMessage decodes it again when asked);
// then one made afresh by resultOf.
func (r *Runner) result() *Result {
	if r.stopped == nil {
		return nil
	}
	if res := r.fresh; res != nil {
		r.fresh = nil
		if m := res.Message; m != nil && m == r.last {
			if raw := m.RawJSON(); raw != "" {
				r.last, r.lastRaw = nil, raw
			}
		}
		return res
	}
	return r.resultOf()
}

// resultOf builds the Result of the run's stop from the State and the
// stopRecord: the one place a Result is made.
func (r *Runner) resultOf() *Result {
	s := r.stopped
	return &Result{StopReason: r.st.StopReason, Detail: r.st.Detail, Err: s.Err, Message: r.lastMessage(),
		Messages: deepcopy.Copy(s.messages), Pending: s.pending, Usage: r.st.Usage,
		CostUSD: r.st.CostUSD, CostComplete: !r.st.CostIncomplete, Budget: r.st.Budget,
		Turns: r.st.Turns, ToolCalls: r.st.ToolCalls, ToolFailures: r.st.ToolFailures}
}

// stopRecord is what a Result is made of, besides the State, while the run
// is stopped: the stop's error (which no State can carry), the history and
// the calls awaiting approval as they were at the stop.
type stopRecord struct {
	Err      error
	messages []anthropic.BetaMessageParam // the history when the run stopped; its array is never written
	pending  []PendingCall
}

// setStop records a stop in the State, and what a Result needs beside it:
// the one function that makes a stop, for stop and for Resume. err is the
// stop's error; a stop at a limit the caller set gets limitError's.
func (r *Runner) setStop(reason StopReason, detail string, budget BudgetKind, err error) {
	if lerr := limitError(reason, detail); lerr != nil {
		err = lerr
	}
	r.st.StopReason, r.st.Detail, r.st.Budget = reason, detail, budget
	r.stopped = &stopRecord{Err: err, messages: slices.Clip(r.st.Params.Messages)}
	if reason == StopAwaitingApproval {
		r.stopped.pending = r.st.AwaitingApproval()
	}
}

// lastMessage returns the last response, decoding it again if the runner
// kept only its JSON, or nil if this runner received none.
func (r *Runner) lastMessage() *anthropic.BetaMessage {
	if r.last == nil && r.lastRaw != "" {
		var m anthropic.BetaMessage
		if err := m.UnmarshalJSON([]byte(r.lastRaw)); err == nil {
			return &m
		}
	}
	return r.last
}

// Run runs the loop until it stops and returns how it ended. The result is
// never nil. The error is nil when the model finished (or refused, or ran
// out of max_tokens or context: Result.StopReason says which), when a hook
// stopped the run, and when the run awaits approval. It is non-nil when
// the run stopped short of the model's answer: a failure ([StopError],
// [StopCanceled]) or a limit the caller set
// ([ErrMaxTurns], [ErrBudget]).
//
// With Options.Stream, Run streams every response (and retries faults
// mid-stream) without handing out its events; use [Runner.Events] to see
// them.
func (r *Runner) Run(ctx context.Context) (*Result, error) {
	for {
		turn, err := r.Next(ctx)
		if err != nil || turn == nil {
			return r.result(), err
		}
	}
}

// Turns returns an iterator over the run's turns: each response, before the
// runner acts on it (see [Turn]). It ends when the run stops, after yielding
// the error if it stopped with one (as Run returns it). Leaving the loop
// with break keeps the run as it is; ranging over Turns again picks it up
// where it was.
func (r *Runner) Turns(ctx context.Context) iter.Seq2[*Turn, error] {
	return func(yield func(*Turn, error) bool) {
		for {
			turn, err := r.Next(ctx)
			if err != nil {
				yield(nil, err)
				return
			}
			if turn == nil || !yield(turn, nil) {
				return
			}
		}
	}
}

// Next takes one step: it answers the turn handed out before, if any (see
// [Turn]), then sends the next request and returns the response as a turn.
// It returns a nil turn once the run has stopped, with the error Run would
// return; [Runner.Result] says why. A run stopped with an error keeps its
// state: calling Next again tries again.
func (r *Runner) Next(ctx context.Context) (*Turn, error) {
	ctx, cancel := r.runContext(ctx)
	defer cancel()
	for {
		s := r.step(ctx, true)
		switch s.kind {
		case stepTurn:
			return s.turn, nil
		case stepCalls:
			if err := r.execute(ctx, s.calls); err != nil {
				return nil, err
			}
		default:
			return nil, r.stopErr()
		}
	}
}

// stepKind is what the engine says happens next.
type stepKind int

const (
	stepStopped stepKind = iota // the run stopped; Runner.stopped says how
	stepTurn                    // a response arrived: hand it out
	stepCalls                   // run these calls, then step again
	stepYield                   // a request is due, and the driver asked for none
)

type step struct {
	kind  stepKind
	turn  *Turn
	calls []*callState // allowed, not started, in the order of the response
}

// step takes the run one step from its state: it commits a pending turn
// whose calls are all answered, decides the calls that have no decision
// (answering those that need no running), and sends the next request when
// one is due — unless request is false, for a driver that sends at most
// one request at a time.
func (r *Runner) step(ctx context.Context, request bool) step {
	if r.halted() {
		return step{}
	}
	r.clearStop()
	if r.started.IsZero() {
		r.started = time.Now()
	}
	if err := r.claim(ctx); err != nil {
		r.fail(ctx, err, "")
		return step{}
	}
	for {
		if err := r.takeSaveErr(); err != nil {
			r.fail(ctx, err, "")
			return step{}
		}
		if err := r.takeObserverErr(); err != nil {
			r.fail(ctx, err, "an OnEvent observer panicked")
			return step{}
		}
		if ctx.Err() != nil {
			r.fail(ctx, context.Cause(ctx), "")
			return step{}
		}
		p := r.st.pending
		if p == nil {
			if limit := r.maxTurns(); limit >= 0 && r.st.Turns >= limit {
				r.stop(ctx, &Result{StopReason: StopMaxTurns, Detail: fmt.Sprintf("turn limit of %d reached", limit)})
				return step{}
			}
			if !request {
				return step{kind: stepYield}
			}
			if due, tokens := r.compactDue(); due {
				if err := r.compact(ctx, tokens); err != nil {
					r.fail(ctx, err, "")
					return step{}
				}
				if r.stopped != nil { // over budget
					return step{}
				}
			}
			turn := r.request(ctx)
			if turn == nil {
				return step{}
			}
			return step{kind: stepTurn, turn: turn}
		}
		h, held := r.held(p)
		switch h {
		case holdStopped:
			return step{} // not reached: a halted run returned at the top
		case holdEdited:
			r.leaveOut(ctx, p)
			continue
		case holdFinal:
			// A final response: calls in it are answered as not run, never
			// executed with input that may be cut off.
			reason, detail := modelStop(p.StopReason)
			for i := range p.Calls {
				if c := &p.Calls[i]; c.Phase != phaseAnswered {
					r.answer(ctx, c, &ToolResult{Call: c.Call, Err: fmt.Errorf("%w: %s", ErrNotRun, detail)})
				}
			}
			// The answer and the stop are saved together: a crash between
			// two saves would leave a history ending in the model's answer
			// with no stop, and the run resumed from it would ask the model
			// again.
			r.appendTurn(ctx)
			r.stop(ctx, &Result{StopReason: reason, Detail: detail})
			return step{}
		case holdLimit:
			if held.StopReason == StopMaxTurns {
				r.log.WarnContext(ctx, "toolrun: turn limit reached; the last turn's tool calls are left pending",
					"turn", p.Turn, "max_turns", r.maxTurns(), "pending_calls", len(p.Calls))
			}
			r.stop(ctx, held)
			return step{}
		}
		if len(p.Calls) == 0 {
			// pause_turn and compaction are sent back as they are, so the
			// server resumes the turn.
			r.commit(ctx)
			continue
		}
		calls, err := r.decideTurn(ctx, p)
		if err != nil {
			r.hookFailed(ctx, err)
			return step{}
		}
		if len(calls) > 0 {
			return step{kind: stepCalls, calls: calls}
		}
		if n := len(r.st.AwaitingApproval()); n > 0 {
			r.stop(ctx, &Result{StopReason: StopAwaitingApproval, Detail: fmt.Sprintf("%s of turn %d awaiting approval", count(n, "tool call"), p.Turn)})
			return step{}
		}
		r.commit(ctx)
	}
}

// maxTurns returns the turn limit in force.
func (r *Runner) maxTurns() int {
	switch {
	case r.st.MaxTurns != 0:
		return r.st.MaxTurns
	case r.opts.MaxTurns != 0:
		return r.opts.MaxTurns
	}
	return defaults.MaxTurns
}

// hold says why the calls of the pending turn may not start now.
type hold int

const (
	holdNone hold = iota // they may start
	// holdStopped: the run is stopped for good (see halted) by a limit, a
	// budget, a hook's StopRun or the model's final answer, until the stop
	// is lifted (SetMaxTurns, SetMessages, ...). A run suspended awaiting
	// approval is not: a call decided since may run while others of its
	// turn still await a decision.
	holdStopped
	// holdEdited: the caller took the turn over (SetMessages,
	// AppendMessages, RetryTurn): its response is left out and its calls
	// never run.
	holdEdited
	// holdFinal: the response is final (max_tokens, refusal, ...): its
	// calls are answered as not run, never run with input that may be cut
	// off.
	holdFinal
	// holdLimit: the turn limit or the tool-call budget holds the turn
	// back (heldBack).
	holdLimit
)

// held is the one rule for whether the calls of the pending turn p may
// start: step asks it before it decides a turn's calls, and ExecuteCall
// before it decides or runs one, so that no driver runs a call that
// another would not (a call Next would never run cannot be run by
// ExecuteCall on this runner or on one resumed from the run's State). It
// returns holdNone if they may, or why not and, for holdLimit, the stop.
// What each driver does then is its own: step stops the run or leaves the
// turn out; ExecuteCall refuses and changes nothing.
func (r *Runner) held(p *turnState) (hold, *Result) {
	switch {
	case r.halted() && r.st.StopReason != StopAwaitingApproval:
		return holdStopped, nil
	case r.st.edited:
		return holdEdited, nil
	case !isToolTurn(p.StopReason):
		return holdFinal, nil
	}
	if res := r.heldBack(p); res != nil {
		return holdLimit, res
	}
	return holdNone, nil
}

// heldBack returns the stop for a tool turn whose calls must not start: the
// run is at its turn limit (the calls wait for it to be raised) or they
// would pass the tool-call budget. A turn some of whose calls were decided
// or answered already goes on, and a turn with no calls has none to hold.
func (r *Runner) heldBack(p *turnState) *Result {
	if len(p.Calls) == 0 {
		return nil
	}
	for _, c := range p.Calls {
		if c.Phase != phaseNew {
			return nil
		}
	}
	if limit := r.maxTurns(); limit >= 0 && r.st.Turns >= limit {
		return &Result{StopReason: StopMaxTurns, Detail: fmt.Sprintf("turn limit of %d reached; %s of turn %d not run", limit, count(len(p.Calls), "tool call"), p.Turn)}
	}
	if b := r.opts.Budget.ToolCalls; b > 0 && r.st.ToolCalls+len(p.Calls) > b {
		return budgetStop(BudgetToolCalls, fmt.Sprintf("tool-call budget of %d would be exceeded: %d answered, turn %d asks for %d more; they are left pending", b, r.st.ToolCalls, p.Turn, len(p.Calls)))
	}
	return nil
}

// isToolTurn reports whether a response's calls are to be answered, as
// opposed to answered as not run because the response is final.
func isToolTurn(reason anthropic.BetaStopReason) bool {
	switch reason {
	case anthropic.BetaStopReasonToolUse, anthropic.BetaStopReasonPauseTurn, anthropic.BetaStopReasonCompaction:
		return true
	}
	return false
}

// modelStop maps the stop_reason of a final response to the run's.
func modelStop(reason anthropic.BetaStopReason) (StopReason, string) {
	switch reason {
	case anthropic.BetaStopReasonEndTurn, anthropic.BetaStopReasonStopSequence:
		return StopEndTurn, ""
	case anthropic.BetaStopReasonMaxTokens:
		return StopMaxTokens, "the response was cut off at max_tokens"
	case anthropic.BetaStopReasonRefusal:
		return StopRefusal, "the model refused"
	case anthropic.BetaStopReasonModelContextWindowExceeded:
		return StopContextWindow, "the model's context window was exceeded"
	}
	return StopEndTurn, fmt.Sprintf("the model stopped with %q", reason)
}

// setPending makes p the pending turn and forgets what this runner knew of
// the previous one.
func (r *Runner) setPending(p *turnState) {
	r.mu.Lock()
	r.st.pending, r.st.edited = p, false
	r.mu.Unlock()
	// Dropped rather than cleared: a run held awaiting approval keeps no
	// map of a turn it no longer has.
	r.decided, r.live = nil, nil
}

// commit appends the pending turn's assistant message and tool results to
// the history, and saves the state.
func (r *Runner) commit(ctx context.Context) {
	r.appendTurn(ctx)
	r.save(ctx)
}

// appendTurn is commit without the save, for a caller that saves what
// follows with it.
func (r *Runner) appendTurn(ctx context.Context) {
	p := r.st.pending
	// One new array, of the size it needs: a run held awaiting approval
	// keeps it, and a long run copies its history once per turn, not twice.
	add := 1
	if len(p.Calls) > 0 {
		add = 2
	}
	r.st.Params.Messages = append(slices.Grow(slices.Clip(r.st.Params.Messages), add), sanitizeAssistant(p.Message))
	if r.historyIDs != nil {
		for _, c := range p.Calls {
			r.historyIDs[c.Call.ID] = struct{}{}
		}
	}
	var results []*ToolResult
	if len(p.Calls) > 0 {
		blocks := make([]anthropic.BetaContentBlockParamUnion, len(p.Calls))
		for i := range p.Calls {
			c := &p.Calls[i]
			res := r.live[c.Call.ID]
			if res == nil {
				res = c.toolResult()
			}
			results = append(results, res)
			blocks[i] = r.resultBlock(c)
			r.st.ToolCalls++
			if c.Result.IsError {
				r.st.ToolFailures++
			}
		}
		r.st.Params.Messages = append(r.st.Params.Messages, anthropic.NewBetaUserMessage(blocks...))
	}
	var msg *anthropic.BetaMessage
	var u Usage
	if m := r.lastMessage(); m != nil && r.st.Turns == p.Turn {
		msg, u = m, usageOf(m)
	}
	r.setPending(nil)
	r.emit(ctx, TurnFinished{Turn: p.Turn, Message: msg, Results: results, Usage: u})
}

// sanitizeAssistant makes a response safe to send back: a tool_use whose
// input was cut off (max_tokens) is not valid JSON, and would make every
// later request fail. m is not changed.
func sanitizeAssistant(m anthropic.BetaMessageParam) anthropic.BetaMessageParam {
	if m.OfAssistant == nil {
		return m
	}
	var content []anthropic.BetaContentBlockParamUnion
	for i, b := range m.OfAssistant.Content {
		if b.OfToolUse == nil {
			continue
		}
		raw, ok := b.OfToolUse.Input.(json.RawMessage)
		if ok && !json.Valid(raw) {
			if content == nil {
				content = slices.Clone(m.OfAssistant.Content)
			}
			tu := *b.OfToolUse
			tu.Input = map[string]any{}
			content[i].OfToolUse = &tu
		}
	}
	if content != nil {
		a := *m.OfAssistant
		a.Content = content
		m.OfAssistant = &a
	}
	return m
}

// resultBlock is the tool_result block of an answered call.
func (r *Runner) resultBlock(c *callState) anthropic.BetaContentBlockParamUnion {
	content, _ := truncateContent(c.Result.Content, r.resultLimit(r.tool(c.Call.Name)))
	b := anthropic.BetaToolResultBlockParam{ToolUseID: c.Call.ID, Content: content, CacheControl: c.Result.CacheControl}
	if c.Result.IsError {
		b.IsError = anthropic.Bool(true)
	}
	return anthropic.BetaContentBlockParamUnion{OfToolResult: &b}
}

// halted reports whether the run has stopped in a way that a step would not
// go on from: everything but a failure (tried again) and a suspension whose
// calls have all been decided.
func (r *Runner) halted() bool {
	s := r.stopped
	if s == nil || r.st.StopReason.failed() {
		return false
	}
	if r.st.StopReason == StopBudget && r.st.Budget == BudgetWallTime {
		// Budget.WallTime counts from this runner's first step and is
		// never reset: the stop holds while that time is used up. A
		// runner resumed from the State (in this process or another)
		// counts its own, and goes on.
		return r.wallTimeUsed()
	}
	return r.st.StopReason != StopAwaitingApproval || len(r.st.AwaitingApproval()) > 0
}

func (r *Runner) clearStop() {
	r.stopped, r.fresh = nil, nil
	r.st.StopReason, r.st.Detail, r.st.Budget = "", "", ""
}

// stopErr is the error a driver returns for the run's stop.
func (r *Runner) stopErr() error {
	if r.stopped == nil {
		return nil
	}
	return r.stopped.Err
}

// hookFailed stops the run for a hook's error: with StopHook for StopRun,
// with StopError otherwise.
func (r *Runner) hookFailed(ctx context.Context, err error) {
	var sr *stopRunError
	if errors.As(err, &sr) {
		r.stop(ctx, &Result{StopReason: StopHook, Detail: sr.reason})
		return
	}
	var he *HookError
	detail := ""
	if errors.As(err, &he) {
		detail = he.Hook + " hook failed"
	}
	r.fail(ctx, err, detail)
}

// fail stops the run with err: StopCanceled if the context is done,
// StopBudget if Budget.WallTime ended it, StopError otherwise.
func (r *Runner) fail(ctx context.Context, err error, detail string) {
	if errors.Is(context.Cause(ctx), errWallTime) || errors.Is(err, errWallTime) {
		r.stop(ctx, wallTimeStop(r.opts.Budget.WallTime))
		return
	}
	reason := StopError
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		reason = StopCanceled
	}
	if detail == "" {
		detail = err.Error()
	}
	r.stop(ctx, &Result{StopReason: reason, Detail: detail, Err: err})
}

// stop marks the run stopped as res says (its StopReason, Detail, Budget
// and Err), and sends RunStopped with the Result made of it.
func (r *Runner) stop(ctx context.Context, res *Result) {
	r.setStop(res.StopReason, res.Detail, res.Budget, res.Err)
	r.last, r.lastRaw = r.lastMessage(), ""
	out := r.resultOf()
	r.fresh = out
	// A stopped run may be held for long (awaiting approval, say): it
	// keeps no encoded copy of its history, nor the set of its tool_use
	// ids, and builds them again once if it goes on.
	r.wire, r.historyIDs = nil, nil
	// The event is sent with a detached context so observers record it even
	// when the run stopped because ctx was cancelled.
	r.emit(context.WithoutCancel(ctx), RunStopped{Turn: r.st.Turns, Result: out})
	r.save(ctx)
}

// limitError is the error of a stop at a limit the caller set, or nil for
// any other stop: the one rule for it, which stop and Resume both follow,
// so that a run resumed from its State returns the error the run that
// saved it did.
func limitError(reason StopReason, detail string) error {
	switch reason {
	case StopMaxTurns:
		return fmt.Errorf("%w: %s", ErrMaxTurns, detail)
	case StopBudget:
		return fmt.Errorf("%w: %s", ErrBudget, detail)
	}
	return nil
}

// errWallTime is the cause of the context of a run whose Budget.WallTime
// has passed.
var errWallTime = errors.New("toolrun: wall-time budget used up")

func wallTimeStop(b time.Duration) *Result {
	return budgetStop(BudgetWallTime, fmt.Sprintf("wall-time budget of %s used up", b))
}

// runContext returns the context of one call of a driver: with
// Budget.WallTime, a deadline on everything in flight (requests, tools),
// counted from the run's first step in this process.
func (r *Runner) runContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.started.IsZero() {
		r.started = time.Now()
	}
	if b := r.opts.Budget.WallTime; b > 0 {
		return context.WithDeadlineCause(ctx, r.started.Add(b), errWallTime)
	}
	return ctx, func() {}
}

// Advance takes the run as far as it goes without running a tool, and
// returns the calls that must run before it can go further, in the order of
// the response. The caller runs them, here or elsewhere, with
// [Runner.ExecuteCall] (on this runner, or on one resumed from its [State]
// whose results are then recorded with [State.SetResult]), then calls
// Advance again; [Batches] says which of them may run together. When
// Advance returns no calls and no error, the run has either stopped
// ([Runner.Result] is non-nil) or sent a request whose response needs no
// tool to run (a pause_turn, say, or calls that were all denied), and the
// caller calls Advance again.
//
// Advance is the engine's step, as Next takes it, with at most one model
// request per call (and a compaction's, when one is due), so that each call
// of Advance is a bounded piece of work that can be retried from the State
// it started from. It returns the error Run would return.
func (r *Runner) Advance(ctx context.Context) ([]PlannedCall, error) {
	ctx, cancel := r.runContext(ctx)
	defer cancel()
	request := true
	for {
		s := r.step(ctx, request)
		switch s.kind {
		case stepTurn:
			request = false
		case stepCalls:
			plans := make([]PlannedCall, len(s.calls))
			for i, c := range s.calls {
				plans[i] = r.plan(c)
			}
			return plans, nil
		case stepYield:
			return nil, nil
		default:
			return nil, r.stopErr()
		}
	}
}

// ExecuteCall answers one call of the pending turn, by its tool_use id, as
// [Runner.Next] would, through the same executor: it decides the call if
// this runner has not (a decision taken before stands unless this runner's
// deny rules say otherwise), runs it if it is allowed, records the result
// in the pending turn and returns it. A call answered already is not run
// again: its result is returned as it is.
//
// It runs only a call that Next would run: the engine's rule for whether a
// turn's calls may start is the same for both. So it returns an error
// wrapping [ErrNotRun], runs nothing and changes nothing, for a call of a
// run stopped for good (the turn limit, a budget, a hook's [StopRun]: the
// error wraps [ErrMaxTurns] or [ErrBudget] for a limit), of a turn the
// caller took over ([Runner.RetryTurn], [Runner.SetMessages]), of a final
// response (max_tokens, refusal: its calls are answered as not run by the
// next step), or of a turn that the turn limit or Budget.ToolCalls holds
// back. A run suspended awaiting approval is not stopped for good: a call
// decided since runs. The next Next or Advance then does with the turn
// what it would have done.
//
// It returns an error, and no result, for a call deferred to a person and
// not decided yet (give the decision with [Runner.Decide] or
// [State.Decide]) or if the pending turn has no call with that id. If ctx is cancelled
// while the tool runs, the call is left started (its phase in the State is started) and
// ctx's error is returned. If AfterTool ends the run, the result is
// returned with the hook's error (nil for [StopRun]) and [Runner.Result]
// says how the run stopped; after a [StopRun], the turn's other calls are
// refused.
//
// Like the rest of Runner it is not safe for concurrent use, so calls of one
// turn run in parallel on runners of their own, each resumed from the run's
// [State].
func (r *Runner) ExecuteCall(ctx context.Context, toolUseID string) (*ToolResult, error) {
	ctx, cancel := r.runContext(ctx)
	defer cancel()
	c := r.st.call(toolUseID)
	if c == nil {
		return nil, fmt.Errorf("toolrun: execute call: no call %q in the pending turn", toolUseID)
	}
	if c.Phase != phaseAnswered {
		if err := r.refusal(c); err != nil {
			return nil, err
		}
	}
	if !r.halted() {
		r.clearStop() // a failure is tried again, as by a step
	}
	if err := r.claim(ctx); err != nil {
		r.fail(ctx, err, "")
		return nil, err
	}
	if c.Phase != phaseAnswered {
		run, err := r.decideCall(ctx, c)
		if err != nil {
			r.hookFailed(ctx, err)
			return nil, r.stopErr()
		}
		if c.awaiting() {
			return nil, fmt.Errorf("toolrun: execute call: call %q (%s) awaits a person's decision; give it with Decide first", toolUseID, c.Call.Name)
		}
		if run {
			if err := r.execute(ctx, []*callState{c}); err != nil && c.Phase != phaseAnswered {
				return nil, err
			}
		}
	}
	if c.Phase != phaseAnswered {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		return nil, r.stopErr()
	}
	res := r.live[toolUseID]
	if res == nil {
		res = c.toolResult()
	}
	// The caller's copy: writing into it must not change what the model
	// receives, which went through AfterTool already.
	out := *res
	out.Content, out.Call.Input = cloneContent(res.Content), slices.Clone(res.Call.Input)
	out.Decision = cloneDecision(res.Decision)
	res = &out
	if r.stopped != nil {
		return res, r.stopErr()
	}
	return res, nil
}

// refusal returns ExecuteCall's error for unanswered call c if the engine
// would not let the calls of its turn start now (see held), or nil.
func (r *Runner) refusal(c *callState) error {
	p := r.st.pending
	h, held := r.held(p)
	var why string
	var limit error
	switch h {
	case holdNone:
		return nil
	case holdStopped:
		why, limit = fmt.Sprintf("the run is stopped (%s)", r.st.StopReason), r.stopped.Err
		if r.st.Detail != "" {
			why = fmt.Sprintf("the run is stopped (%s: %s)", r.st.StopReason, r.st.Detail)
		}
	case holdEdited:
		why = fmt.Sprintf("turn %d was taken over by the caller (RetryTurn, SetMessages or AppendMessages), so its calls do not run", p.Turn)
	case holdFinal:
		_, detail := modelStop(p.StopReason)
		why = fmt.Sprintf("turn %d is final (%s), so its calls are answered as not run", p.Turn, detail)
	case holdLimit:
		limit = limitError(held.StopReason, held.Detail)
	}
	if limit != nil {
		return fmt.Errorf("toolrun: execute call: call %q (%s): %w: %w", c.Call.ID, c.Call.Name, ErrNotRun, limit)
	}
	return fmt.Errorf("toolrun: execute call: call %q (%s): %w: %s", c.Call.ID, c.Call.Name, ErrNotRun, why)
}

// PlannedCall is a call of the pending turn that is decided and allowed,
// ready to be run with [Runner.ExecuteCall], with what a scheduler needs to
// know about its tool.
type PlannedCall struct {
	// Call is the call; its Input is the input the tool will run with (the
	// decision's, if it replaced the model's).
	Call ToolCall `json:"call"`
	// Exclusive, Idempotent and Timeout come from the tool's [ToolConfig];
	// Timeout is the call's effective timeout ([Timeouts.Tool] for a
	// tool that sets none), zero for none.
	Exclusive  bool          `json:"exclusive,omitempty"`
	Idempotent bool          `json:"idempotent,omitempty"`
	Timeout    time.Duration `json:"timeout,omitempty"`
}

func (r *Runner) plan(c *callState) PlannedCall {
	call := c.Call
	call.Input = c.input()
	e := r.tool(call.Name)
	return PlannedCall{Call: call, Exclusive: e.config.Exclusive, Idempotent: e.config.Idempotent, Timeout: r.timeoutOf(e)}
}
