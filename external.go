package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// This file holds the API for running a run's tool calls outside the
// runner: in other goroutines, other processes or as the activities of a
// durable workflow (see the nested module github.com/toolrun/toolrun/temporal).
// [Runner.Advance] does everything but run tools, [Runner.ExecuteCall] runs
// one call, and the State methods below record what happened elsewhere as
// plain data.

// ErrAwaitingApproval is returned by [Runner.ExecuteCall] for a call
// deferred to a person and not decided yet.
var ErrAwaitingApproval = errors.New("toolrun: tool call awaits approval")

// PlannedCall is a call of the pending turn that is decided and allowed,
// ready to be run with [Runner.ExecuteCall], with what a scheduler needs to
// know about its tool.
type PlannedCall struct {
	// Call is the call; its Input is the input the tool will run with (the
	// decision's, if it replaced the model's).
	Call ToolCall `json:"call"`
	// Exclusive, Idempotent and Timeout come from the tool's [ToolConfig];
	// Timeout is the call's effective timeout ([Options.ToolTimeout] for a
	// tool that sets none), zero for none.
	Exclusive  bool          `json:"exclusive,omitempty"`
	Idempotent bool          `json:"idempotent,omitempty"`
	Timeout    time.Duration `json:"timeout,omitempty"`
}

// Advance takes the run as far as it goes without running a tool, and
// returns the calls that must run before it can go further, in the order of
// the response. The caller runs them, here or elsewhere, with
// [Runner.ExecuteCall] (on this runner, or on one resumed from its [State]
// whose results are then recorded with [State.SetResult]), then calls
// Advance again. When Advance returns no calls and no error, the run has
// either stopped ([Runner.Result] is non-nil: the model finished, a limit,
// a hook, calls awaiting approval) or sent a request whose response needs
// no tool to run (a pause_turn, say, or calls that were all denied), and
// the caller calls Advance again.
//
// Advance decides the calls as [Runner.Next] does, one at a time and in
// order (the Allow and Deny lists, [Options.Decide], the tool's policy),
// and answers those that need no running (denied, skipped, unknown, invalid
// input). It commits the turn once every call is answered, and sends at most
// one model request per call (and a compaction's, when one is due), so that
// each call of Advance is a bounded piece of work that can be retried from
// the State it started from. Like Next, it
// returns an error only when the run stopped with [StopError] or
// [StopCanceled], and keeps its state: calling it again tries again.
func (r *Runner) Advance(ctx context.Context) ([]PlannedCall, error) {
	sent := false
	for {
		if r.halted() {
			return nil, nil
		}
		r.stopped = nil // as in Next: an error is tried again, approvals are all given
		// Before anything is decided or run.
		if err := r.claim(ctx); err != nil {
			return nil, r.fail(ctx, err, "")
		}
		plans, err := r.planCalls(ctx)
		if err != nil || r.stopped != nil || len(plans) > 0 {
			return plans, err
		}
		if sent && r.wouldSend() {
			return nil, nil
		}
		turn, err := r.Next(ctx)
		if err != nil || turn == nil {
			return nil, err
		}
		sent = true
	}
}

// halted reports whether the run has stopped in a way that Next would not
// go on from.
func (r *Runner) halted() bool {
	s := r.stopped
	if s == nil || s.StopReason == StopError || s.StopReason == StopCanceled {
		return false
	}
	return s.StopReason != StopAwaitingApproval || r.undecided() > 0
}

// wouldSend reports whether Next would send a request now, as opposed to
// stopping the run without one. It mirrors finishTurn for a pending turn
// whose calls are all answered or awaiting a person.
func (r *Runner) wouldSend() bool {
	if r.maxTurns != Unlimited && r.turns >= r.maxTurns {
		return false
	}
	p := r.pending
	if p == nil || r.edited {
		return true
	}
	return isToolTurn(p.stopReason) && r.undecided() == 0
}

// planCalls decides the unanswered calls of the pending turn as answerCalls
// does, answers those that need no running, and returns the others. It
// leaves alone a turn that finishTurn would not answer (a final response,
// the turn limit).
func (r *Runner) planCalls(ctx context.Context) ([]PlannedCall, error) {
	p := r.pending
	if p == nil || r.edited || len(p.calls) == 0 || !isToolTurn(p.stopReason) {
		return nil, nil
	}
	if r.heldBack(p) != nil {
		return nil, nil // Next stops the run, at its turn limit or tool-call budget
	}
	jobs, hookErrs := r.decideCalls(ctx, p)
	var plans []PlannedCall
	for _, jb := range jobs {
		call := jb.c.call
		call.Input = jb.input
		plans = append(plans, PlannedCall{Call: call, Exclusive: jb.e.config.Exclusive,
			Idempotent: jb.e.config.Idempotent, Timeout: r.timeoutOf(jb.e)})
	}
	if err := firstErr(hookErrs); err != nil {
		return nil, r.hookFailed(ctx, "AfterTool", err)
	}
	return plans, nil
}

// prepare works out what to do with c, as answerCalls does: a result to
// answer it with, or the tool and input to run it with (ok), or neither for
// a call awaiting a person. A call that started and never finished is
// answered as interrupted unless its tool is idempotent. A call that a hook
// allowed before (in an earlier Advance, in this process or another) is not
// decided again, so the hooks are asked once per call. A person's decision
// is announced with a [ToolDecided] if announce is set, as Next does.
func (r *Runner) prepare(ctx context.Context, c *callState, announce bool) (e *toolEntry, input json.RawMessage, res *ToolResult, ok bool) {
	if c.deferred && !c.decided && r.always[c.call.Name] {
		c.decision, c.decided, c.decidedBy = AllowCall(), true, "always"
	}
	if c.deferred && !c.decided {
		return nil, nil, nil, false
	}
	if c.started {
		if e, ok := r.tools[c.call.Name]; !ok || !e.config.Idempotent {
			return nil, nil, &ToolResult{Call: c.call, Err: fmt.Errorf(
				"%w: it started but did not finish (the run was stopped or its process died), and tool %q is not declared idempotent, so it was not run again; its effects, if any, are unknown",
				ErrInterrupted, c.call.Name)}, false
		}
		c.started = false
	}
	allowedBefore := c.decidedBy != "" && c.decision.Kind == Allow && (c.decided || !c.deferred)
	if allowedBefore && (!c.decided || !announce) {
		e, input, res = r.allowed(c)
	} else {
		e, input, res = r.decide(ctx, c)
	}
	return e, input, res, res == nil && e != nil
}

// allowed returns the tool and input of a call already allowed, or the
// result of a call that cannot run (its tool is gone, its input is invalid).
func (r *Runner) allowed(c *callState) (*toolEntry, json.RawMessage, *ToolResult) {
	e, ok := r.tools[c.call.Name]
	if !ok {
		return nil, nil, &ToolResult{Call: c.call, Err: unknownToolError(c.call.Name, r.names)}
	}
	input := c.call.Input
	if len(c.decision.Input) > 0 {
		input = c.decision.Input
	}
	if err := r.validate(e, c.call.Name, input); err != nil {
		return nil, nil, &ToolResult{Call: c.call, Err: err}
	}
	return e, input, nil
}

// ExecuteCall answers one call of the pending turn, by its tool_use id, as
// [Runner.Next] would: it decides the call if it has no decision yet (a
// decision taken before, by [Runner.Advance] or a person, stands and is not
// announced again), runs it if it is allowed (input validated, panics
// recovered, the tool's timeout enforced), passes the result through
// [Options.AfterTool], records it in the pending turn and returns it. A call
// answered already is not run again: its result is returned as it is.
//
// It returns [ErrAwaitingApproval] for a call deferred to a person, and an
// error if the pending turn has no call with that id. If ctx is cancelled
// while the tool runs, the call is left unanswered and ctx's error is
// returned. If AfterTool ends the run, the result is returned with the
// hook's error (nil for [StopRun]) and [Runner.Result] says how the run
// stopped.
//
// ExecuteCall is the building block for running calls elsewhere (see
// [Runner.Advance]); like the rest of Runner it is not safe for concurrent
// use, so calls of one turn run in parallel on runners of their own, each
// resumed from the run's [State].
func (r *Runner) ExecuteCall(ctx context.Context, toolUseID string) (*ToolResult, error) {
	c := r.pendingCall(toolUseID)
	if c == nil {
		return nil, fmt.Errorf("toolrun: execute call: no call %q in the pending turn", toolUseID)
	}
	if c.result != nil {
		return c.result, nil
	}
	e, input, res, ok := r.prepare(ctx, c, false)
	if res == nil && !ok {
		return nil, fmt.Errorf("%w: %s (%s)", ErrAwaitingApproval, toolUseID, c.call.Name)
	}
	if res == nil {
		res = r.runTool(ctx, e, c.call, input)
		if res == nil {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, context.Canceled
		}
	}
	if err := r.answer(ctx, c, res); err != nil {
		return res, r.hookFailed(ctx, "AfterTool", err)
	}
	return res, nil
}

func (r *Runner) pendingCall(id string) *callState {
	if r.pending == nil {
		return nil
	}
	for _, c := range r.pending.calls {
		if c.call.ID == id {
			return c
		}
	}
	return nil
}

// callState returns the pending call with id, or nil.
func (s *State) callState(id string) *CallState {
	if s.Pending == nil {
		return nil
	}
	for i := range s.Pending.Calls {
		if s.Pending.Calls[i].Call.ID == id {
			return &s.Pending.Calls[i]
		}
	}
	return nil
}

// SetResult records res as the result of the pending call toolUseID, as
// [Runner.ExecuteCall] would have on a runner holding s: for a call run
// elsewhere, or answered by the caller (a call interrupted by a crash, say).
// The call is then never run again. It is an error if the pending turn has
// no such call or the call has a result already.
//
// SetResult, [State.Decide] and [State.AwaitingApproval] change and read s
// as plain data, with no runner, no client and no I/O, so a deterministic
// workflow may call them.
func (s *State) SetResult(toolUseID string, res ResultState) error {
	cs := s.callState(toolUseID)
	if cs == nil {
		return fmt.Errorf("toolrun: set result: no call %q in the pending turn", toolUseID)
	}
	if cs.Result != nil {
		return fmt.Errorf("toolrun: set result: call %q already has a result", toolUseID)
	}
	res.Content = slices.Clone(res.Content)
	cs.Result = &res
	return nil
}

// Decide records a person's decision for a call awaiting approval in s, as
// [Runner.Decide] does on a runner: Allow (with Input to run it with other
// input; with Always, for every later call of the tool too), Deny or Skip.
// Unlike Runner.Decide, the run need not have stopped yet: a decision may
// arrive while the other calls of the turn run. The run goes on, once every
// deferred call has a decision, from a runner resumed from s.
func (s *State) Decide(toolUseID string, d Decision) error {
	if d.Kind == Defer {
		return errors.New("toolrun: decide: a person's decision cannot be Defer")
	}
	cs := s.callState(toolUseID)
	if cs == nil || cs.Result != nil || !cs.Deferred {
		return fmt.Errorf("toolrun: decide: no call %q awaits approval", toolUseID)
	}
	cs.Decision, cs.Decided, cs.DecidedBy = &d, true, "approval"
	if d.Kind == Allow && d.Always && !slices.Contains(s.AlwaysAllow, cs.Call.Name) {
		s.AlwaysAllow = append(s.AlwaysAllow, cs.Call.Name)
		slices.Sort(s.AlwaysAllow)
	}
	return nil
}

// AwaitingApproval lists the calls of s deferred to a person and not
// decided yet, in order.
func (s *State) AwaitingApproval() []PendingCall {
	if s.Pending == nil {
		return nil
	}
	var out []PendingCall
	for _, cs := range s.Pending.Calls {
		if cs.Result != nil || !cs.Deferred || cs.Decided {
			continue
		}
		pc := PendingCall{Call: cs.Call}
		if cs.Decision != nil {
			pc.Reason = cs.Decision.Reason
		}
		out = append(out, pc)
	}
	return out
}
