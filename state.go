package toolrun

import (
	"errors"
	"fmt"
	"slices"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// StateFormat is the version of the [State] format this package writes. A
// State of another format is refused by [Resume].
const StateFormat = 1

// State is everything needed to continue a run, as plain data that
// round-trips through JSON: the request params with the history, the turn
// handed out and not yet committed with the progress of each of its tool
// calls (decided, deferred, answered), the tools allowed for the rest of the
// run, the counters and the usage so far.
//
// Take it with [Runner.State], store it anywhere, and continue with
// [Resume], in this process or another one. What cannot be serialised is not
// in it and is given to Resume again: the client, the tools and the
// [Options].
type State struct {
	// Format is the version of the format, [StateFormat]. Resume takes 0
	// as 1: such a State predates the field.
	Format int `json:"format"`
	// Version counts the saves of the run to its [Store]: it is the version
	// of the state last loaded from the store or saved to it, and is bumped
	// by every save. A runner resumed from a State saves only over that same
	// version, so a State older than the store's is refused with
	// [ErrRunBusy]. It stays 0 without a Store.
	Version uint64 `json:"version,omitempty"`
	// Params are the request params with the history as Messages, without
	// the runner's own tools (those come from the tools given to Resume).
	Params anthropic.BetaMessageNewParams `json:"params"`
	// Betas are Params.Betas, which travel as a header and are not in
	// Params' JSON.
	Betas []anthropic.AnthropicBeta `json:"betas,omitempty"`
	// Pending is the turn handed out and not yet committed, if any.
	Pending *TurnState `json:"pending,omitempty"`
	// Edited reports that the caller changed the history after Pending was
	// handed out, so Pending will be left out.
	Edited bool `json:"edited,omitempty"`
	// AlwaysAllow lists the tools a person allowed for the rest of the run.
	AlwaysAllow []string `json:"always_allow,omitempty"`
	// Removed lists the tools taken out of the run with
	// [Runner.RemoveTools]; Resume leaves them out even if it is given them.
	Removed   []string `json:"removed,omitempty"`
	MaxTurns  int      `json:"max_turns"`
	Turns     int      `json:"turns"`
	ToolCalls int      `json:"tool_calls"`
	// ToolFailures counts the calls answered with is_error.
	ToolFailures int   `json:"tool_failures"`
	Usage        Usage `json:"usage"`
	// CostUSD is what the run's responses cost so far.
	CostUSD float64 `json:"cost_usd,omitempty"`
	// StopReason and Detail are how the run stopped, if it had.
	StopReason StopReason `json:"stop_reason,omitempty"`
	Detail     string     `json:"detail,omitempty"`
}

// TurnState is a response not yet committed to the history, and its calls.
type TurnState struct {
	Turn int `json:"turn"`
	// Message is the response as an assistant message.
	Message    anthropic.BetaMessageParam `json:"message"`
	StopReason anthropic.BetaStopReason   `json:"stop_reason"`
	Calls      []CallState                `json:"calls"`
}

// CallState is the progress of one tool call of a [TurnState].
type CallState struct {
	Call ToolCall `json:"call"`
	// Decision is the call's decision once it has one; Decided reports that
	// it was given with [Runner.Decide] and is final.
	Decision  *Decision `json:"decision,omitempty"`
	DecidedBy string    `json:"decided_by,omitempty"`
	Decided   bool      `json:"decided,omitempty"`
	// Deferred reports that the call awaits (or awaited) a person.
	Deferred bool `json:"deferred,omitempty"`
	// Started reports that the tool was called. A call started and not
	// finished when the state was saved is run again on resume only if its
	// tool is idempotent; otherwise it is answered with [ErrInterrupted].
	Started bool `json:"started,omitempty"`
	// Result is the call's answer once it has one: such a call never runs
	// again.
	Result *ResultState `json:"result,omitempty"`
}

// ResultState is an answered call's result.
type ResultState struct {
	Content  []Content     `json:"content,omitempty"`
	IsError  bool          `json:"is_error,omitempty"`
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration,omitempty"`
	Ran      bool          `json:"ran,omitempty"`
}

// State returns a snapshot of the run's state. It shares nothing with the
// runner.
func (r *Runner) State() *State {
	s := &State{
		Format:       StateFormat,
		Version:      r.ckpt.version.Load(),
		Params:       r.params,
		Betas:        slices.Clone(r.params.Betas),
		Edited:       r.edited,
		MaxTurns:     r.maxTurns,
		Turns:        r.turns,
		ToolCalls:    r.toolCalls,
		ToolFailures: r.toolFailures,
		Usage:        r.usage,
		CostUSD:      r.cost,
	}
	s.Params.Messages = slices.Clone(r.params.Messages)
	s.Params.Tools = slices.Clone(r.baseTools)
	for name, ok := range r.always {
		if ok {
			s.AlwaysAllow = append(s.AlwaysAllow, name)
		}
	}
	slices.Sort(s.AlwaysAllow)
	s.Removed = slices.Clone(r.removed)
	if r.stopped != nil {
		s.StopReason, s.Detail = r.stopped.StopReason, r.stopped.Detail
	}
	if p := r.pending; p != nil && !p.streaming {
		ts := &TurnState{Turn: p.turn, Message: p.param, StopReason: p.stopReason}
		r.stateMu.Lock()
		defer r.stateMu.Unlock()
		for _, c := range p.calls {
			cs := CallState{Call: c.call, DecidedBy: c.decidedBy, Decided: c.decided, Deferred: c.deferred, Started: c.started}
			if c.decidedBy != "" || c.decided {
				d := c.decision
				cs.Decision = &d
			}
			if res := c.result; res != nil {
				rs := &ResultState{Content: res.Content, IsError: res.IsError, Duration: res.Duration, Ran: res.Ran}
				if res.Err != nil {
					rs.Error = res.Err.Error()
				}
				cs.Result = rs
			}
			ts.Calls = append(ts.Calls, cs)
		}
		s.Pending = ts
	}
	return s
}

// Resume returns a runner that continues the run saved in s, with the same
// client, tools and options as the run that saved it (or others: a tool
// missing now makes its pending calls fail as unknown). Calls of the pending
// turn that were answered are not run again. A run that was awaiting
// approval still is: give the decisions with [Runner.Decide], then Run.
func Resume(client anthropic.Client, s *State, tools []Tool, opts *Options) (*Runner, error) {
	if s == nil {
		return nil, errors.New("toolrun: resume: nil state")
	}
	// A State without Format was written before the field existed, in
	// format 1, when "version" held the format (and now reads as a Version
	// of 1, which is what a store holding it reports too).
	if s.Format != StateFormat && s.Format != 0 {
		return nil, fmt.Errorf("toolrun: resume: state format %d, want %d", s.Format, StateFormat)
	}
	params := s.Params
	params.Betas = slices.Clone(s.Betas)
	r := New(client, params, tools, opts)
	r.ckpt.version.Store(s.Version)
	if s.MaxTurns != 0 {
		r.maxTurns = s.MaxTurns
	}
	r.turns, r.toolCalls, r.toolFailures, r.usage, r.cost = s.Turns, s.ToolCalls, s.ToolFailures, s.Usage, s.CostUSD
	for _, name := range s.AlwaysAllow {
		r.always[name] = true
	}
	r.RemoveTools(s.Removed...)
	if ts := s.Pending; ts != nil {
		p := &pendingTurn{turn: ts.Turn, param: ts.Message, stopReason: ts.StopReason}
		for _, cs := range ts.Calls {
			c := &callState{call: cs.Call, decidedBy: cs.DecidedBy, decided: cs.Decided, deferred: cs.Deferred, started: cs.Started}
			if cs.Decision != nil {
				c.decision = *cs.Decision
			}
			if rs := cs.Result; rs != nil {
				res := &ToolResult{Call: cs.Call, Content: rs.Content, IsError: rs.IsError,
					Duration: rs.Duration, Ran: rs.Ran, Decision: c.decision}
				if rs.Error != "" {
					res.Err = errors.New(rs.Error)
				}
				c.result = res
			}
			p.calls = append(p.calls, c)
		}
		r.pending = p
		r.edited = s.Edited
	}
	if s.StopReason != "" && s.StopReason != StopError && s.StopReason != StopCanceled {
		res := &Result{StopReason: s.StopReason, Detail: s.Detail, Messages: r.Messages(), Usage: r.usage,
			Turns: r.turns, ToolCalls: r.toolCalls, ToolFailures: r.toolFailures}
		if s.StopReason == StopAwaitingApproval {
			res.Pending = r.pendingCalls()
		}
		r.stopped = res
	}
	return r, nil
}

// pendingCalls lists the calls awaiting a decision.
func (r *Runner) pendingCalls() []PendingCall {
	if r.pending == nil {
		return nil
	}
	var out []PendingCall
	for _, c := range r.pending.calls {
		if c.result == nil && c.deferred && !c.decided {
			out = append(out, PendingCall{Call: c.call, Reason: c.decision.Reason})
		}
	}
	return out
}

// Decide gives a person's decision for a call awaiting approval, by its
// tool_use id. Allow (with Input to run it with edited input), Deny (the
// model is told Reason) and Skip are accepted; Allow with Always also allows
// every later call of that tool in this run. Once every pending call has a
// decision, Run or Next continues the run: approved calls run, and calls
// that ran before the run was suspended do not run again.
//
// Decide returns [ErrStopped] if the run is not awaiting approval, and an
// error if no pending call has that id.
func (r *Runner) Decide(toolUseID string, d Decision) error {
	if r.pending == nil || r.stopped == nil || r.stopped.StopReason != StopAwaitingApproval {
		return ErrStopped
	}
	if d.Kind == Defer {
		return errors.New("toolrun: decide: a person's decision cannot be Defer")
	}
	for _, c := range r.pending.calls {
		if c.call.ID != toolUseID || c.result != nil || !c.deferred {
			continue
		}
		c.decision, c.decided, c.decidedBy = d, true, "approval"
		if d.Kind == Allow && d.Always {
			r.always[c.call.Name] = true
		}
		return nil
	}
	return fmt.Errorf("toolrun: decide: no call %q awaits approval", toolUseID)
}
