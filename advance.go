package toolrun

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// This file holds the API of an external driver, one that runs a turn's
// calls elsewhere (Temporal activities, say): Advance steps the engine up
// to the calls to run, ExecuteCall runs one of them, and PlannedCall says
// what a scheduler needs to know of each.

// Advance takes the run as far as it goes without running a tool, and
// returns the calls that must run before it can go further, in the order of
// the response. The caller runs them, here or elsewhere, with
// driver.ExecuteCall (on this runner, or on one resumed from its [State]
// whose results are then recorded with driver.SetResult), then calls
// Advance again; batches says which of them may run together. When
// Advance returns no calls and no error, the run has either stopped
// ([Runner.Result] is non-nil) or sent a request whose response needs no
// tool to run (a pause_turn, say, or calls that were all denied), and the
// caller calls Advance again.
//
// Advance is the engine's step, as Next takes it, with at most one model
// request per call (and a compaction's, when one is due), so that each call
// of Advance is a bounded piece of work that can be retried from the State
// it started from. It returns the error Run would return.
func (r *Runner) advance(ctx context.Context) ([]plannedCall, error) {
	ctx, cancel := r.runContext(ctx)
	defer cancel()
	request := true
	for {
		s := r.step(ctx, request)
		switch s.kind {
		case stepTurn:
			request = false
		case stepCalls:
			plans := make([]plannedCall, len(s.calls))
			for i, c := range s.calls {
				plans[i] = r.plan(c)
			}
			return plans, nil
		case stepYield:
			return nil, nil
		default:
			return nil, r.stopErr
		}
	}
}

// ExecuteCall answers one call of the pending turn, by its tool_use id, as
// [Runner.Next] would, through the same executor: it decides the call if
// the State records no decision for it (a decision recorded stands, by
// whichever runner took it; see [Policy]), runs it if it is allowed, records the result
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
func (r *Runner) executeCall(ctx context.Context, toolUseID string) (*ToolResult, error) {
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
			return nil, r.stopErr
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
		return nil, r.stopErr
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
	if r.stopped() {
		return res, r.stopErr
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
		why, limit = fmt.Sprintf("the run is stopped (%s)", r.st.StopReason), r.stopErr
		if r.st.Detail != "" {
			why = fmt.Sprintf("the run is stopped (%s: %s)", r.st.StopReason, r.st.Detail)
		}
	case holdEdited:
		why = fmt.Sprintf("turn %d was taken over by the caller (RetryTurn or SetMessages), so its calls do not run", p.Turn)
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

// plannedCall is a call of the pending turn that is decided and allowed,
// ready to be run with executeCall, with what a scheduler needs to know
// about its tool. It is an alias of a struct literal, with exported fields
// only, so that package driver's PlannedCall converts to and from it
// without naming it (see bridge.go); the two field lists must stay alike.
type plannedCall = struct {
	// Call is the call; its Input is the input the tool will run with (the
	// decision's, if it replaced the model's).
	Call ToolCall `json:"call"`
	// Exclusive, Idempotent and Timeout come from the tool's [ToolConfig];
	// Timeout is the call's effective timeout ([Timeouts.Tool] for a
	// tool that sets none), zero for none.
	Exclusive  bool          `json:"exclusive,omitempty"`
	Idempotent bool          `json:"idempotent,omitempty"`
	Timeout    time.Duration `json:"timeout,omitempty"`
	// MaxParallel is the tool's [ToolConfig.MaxParallel]: at most that
	// many of its calls run at once (see callQueue); zero for no bound
	// of its own.
	MaxParallel int `json:"max_parallel,omitempty"`
}

func (r *Runner) plan(c *callState) plannedCall {
	call := c.Call
	call.Input = c.input()
	e := r.tool(call)
	return plannedCall{Call: call, Exclusive: e.config.Exclusive, Idempotent: e.config.Idempotent, Timeout: r.timeoutOf(e), MaxParallel: e.config.MaxParallel}
}
