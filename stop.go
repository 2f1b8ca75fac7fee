package toolrun

import (
	"context"
	"errors"
	"fmt"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun/internal/deepcopy"
)

// This file holds how a run stops, and nothing else decides it: the one
// function that makes a stop (setStop, through which stop, fail and
// Resume go), the one that builds a Result of it (resultOf), the one that
// clears it for a step that goes on (clearStop), and the rules that read
// it: which stops are failures tried again (failed), whether the runner
// has stopped (stopped), and which stops hold against a step (halted).

// failed reports whether the run stopped on a failure: a run that is tried
// again goes on from where it stopped.
func (s StopReason) failed() bool {
	return s == StopError || s == StopCanceled || s == stopMalformed
}

// Result returns how the run stopped, or nil while it has not.
//
// It is made afresh from the run's State at each call: its Messages are
// the history as it stands, its Pending the calls awaiting a person now,
// and its Message the last response; of a run awaiting approval, decoded
// again from the JSON it came as (so a change a hook made to the decoded
// response is not in it).
func (r *Runner) Result() *Result { return r.result() }

// result returns how the run stopped, or nil while it has not.
func (r *Runner) result() *Result {
	if !r.stopped() {
		return nil
	}
	return r.resultOf(true)
}

// resultOf builds the Result of the run's stop from the State: the one
// place a Result is made. Besides the State it reads the stop's error,
// which no State can carry, and the last response, which the State keeps
// only as a message of its history. Without history, Messages is left
// out: the copy of a long history is the dearest part of a Result, and
// the RunStopped of a run nobody observes goes only to the log.
func (r *Runner) resultOf(history bool) *Result {
	var msgs []anthropic.BetaMessageParam
	if history {
		msgs = deepcopy.Copy(r.st.Params.Messages)
	}
	res := &Result{StopReason: r.st.StopReason, Detail: r.st.Detail, Err: r.stopErr, Message: r.lastMessage(),
		Messages: msgs, Usage: r.st.Usage,
		CostUSD: r.st.CostUSD, CostComplete: !r.st.CostIncomplete, Budget: r.st.Budget,
		Turns: r.st.Turns, ToolCalls: r.st.ToolCalls, ToolFailures: r.st.ToolFailures, ToolDenials: r.st.ToolDenials}
	if res.StopReason == StopAwaitingApproval {
		res.Pending = r.st.AwaitingApproval()
	}
	return res
}

// stopped reports whether the run is stopped: the State records a stop,
// and it is not a failure this runner did not make. A failure read from a
// State (Resume) is no stop of this runner: its first step tries again.
func (r *Runner) stopped() bool {
	return r.st.StopReason != "" && (!r.st.StopReason.failed() || r.stopErr != nil)
}

// setStop records a stop in the State, and its error beside it: the one
// function that makes a stop, for stop and for Resume. err is the stop's
// error; a stop at a limit the caller set gets limitError's.
func (r *Runner) setStop(reason StopReason, detail string, budget BudgetKind, err error) {
	if lerr := limitError(reason, detail); lerr != nil {
		err = lerr
	}
	if err == nil && reason.failed() {
		err = errors.New("toolrun: " + detail) // a failure always has one
	}
	r.st.StopReason, r.st.Detail, r.st.Budget = reason, detail, budget
	r.stopErr = err
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
	return StopIncomplete, fmt.Sprintf("the model stopped with %q", reason)
}

// halted reports whether the run has stopped in a way that a step would not
// go on from: everything but a failure (tried again) and a suspension whose
// calls have all been decided.
func (r *Runner) halted() bool {
	if !r.stopped() || r.st.StopReason.failed() {
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

// clearStop takes the stop off the State, for a step that goes on from
// it: a failure tried again, a suspension whose calls are all decided, a
// run given more turns or new messages.
func (r *Runner) clearStop() {
	r.stopErr = nil
	r.st.StopReason, r.st.Detail, r.st.Budget = "", "", ""
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
	if wallTimeEnded(ctx, err) {
		r.stop(ctx, r.wallTimeStop())
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
	out := r.resultOf(r.observed())
	if m := r.last; m != nil && res.StopReason == StopAwaitingApproval {
		// A run awaiting approval may be held for long, by the thousand:
		// it keeps the last response as the JSON it came as, several
		// times smaller than the decoded message.
		if raw := m.RawJSON(); raw != "" {
			r.last, r.lastRaw = nil, raw
		}
	}
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
	case StopMaxTokens:
		return &incompleteError{ErrMaxTokens, detail}
	case StopContextWindow:
		return &incompleteError{ErrContextWindow, detail}
	case StopIncomplete:
		return &incompleteError{ErrIncomplete, detail}
	}
	return nil
}

// incompleteError is the error of a run the model's answer did not finish:
// it is its kind (ErrMaxTokens, say) and ErrIncomplete.
type incompleteError struct {
	kind   error
	detail string
}

func (e *incompleteError) Error() string {
	return "toolrun: the model's answer is incomplete: " + e.detail
}

func (e *incompleteError) Is(target error) bool {
	return target == e.kind || target == ErrIncomplete
}
