package toolrun

import (
	"fmt"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// This file holds the hold rule: whether the calls of a pending turn may
// start now, which every driver reaches (step, ExecuteCall).

// maxTurns returns the turn limit in force.
func (r *Runner) maxTurns() int {
	switch {
	case r.st.MaxTurns != 0:
		return r.st.MaxTurns
	case r.opts.MaxTurns != 0:
		return r.opts.MaxTurns
	}
	return DefaultMaxTurns
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
	// holdEdited: the caller took the turn over (SetMessages, RetryTurn):
	// its response is left out and its calls never run.
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
		if c.Phase != phaseNew || c.Decision != nil { // a person's decision counts
			return nil
		}
	}
	if res := r.turnLimit(p); res != nil {
		return res
	}
	if b := r.opts.Budget.ToolCalls; b > 0 && r.st.ToolCalls+len(p.Calls) > b {
		return budgetStop(BudgetToolCalls, fmt.Sprintf("tool-call budget of %d would be exceeded: %d answered, turn %d asks for %d more; they are left pending", b, r.st.ToolCalls, p.Turn, len(p.Calls)))
	}
	return nil
}

// turnLimit is the one rule of the turn limit: it returns the stop of a run
// at its limit, or nil. With p nil, a request is due, and is not sent; with
// p, the pending turn's calls, none started or decided, are left pending
// (see heldBack), for a raised limit to run them.
func (r *Runner) turnLimit(p *turnState) *Result {
	limit := r.maxTurns()
	if limit < 0 || r.st.Turns < limit {
		return nil
	}
	if p == nil {
		return &Result{StopReason: StopMaxTurns, Detail: fmt.Sprintf("turn limit of %d reached", limit)}
	}
	return &Result{StopReason: StopMaxTurns, Detail: fmt.Sprintf("turn limit of %d reached; %s of turn %d not run", limit, count(len(p.Calls), "tool call"), p.Turn)}
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
