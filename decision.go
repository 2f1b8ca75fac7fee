package toolrun

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// DecisionKind says what happens to a tool call.
type DecisionKind int

const (
	// Allow runs the call (with Decision.Input instead of the model's input,
	// if set). It is the zero value.
	Allow DecisionKind = iota
	// Deny does not run the call; the model receives Decision.Reason as an
	// is_error result.
	Deny
	// Skip does not run the call; the model receives Decision.Result as the
	// call's result (conditional execution: a cached answer, a dry run).
	Skip
	// Defer suspends the run until a person decides: the run stops with
	// [StopAwaitingApproval] and the call is listed in [Result.Pending].
	// Resume with [Runner.Decide] (in the same process or, through
	// [State], another one).
	Defer
)

// String returns the kind's name in lower case.
func (k DecisionKind) String() string {
	switch k {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	case Skip:
		return "skip"
	case Defer:
		return "defer"
	}
	return "unknown"
}

// valid reports whether k is one of Allow, Deny, Skip and Defer.
func (k DecisionKind) valid() bool { return k >= Allow && k <= Defer }

// MarshalText encodes the kind by name, so decisions read well in JSON.
func (k DecisionKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText decodes a kind's name.
func (k *DecisionKind) UnmarshalText(b []byte) error {
	for _, c := range []DecisionKind{Allow, Deny, Skip, Defer} {
		if c.String() == string(b) {
			*k = c
			return nil
		}
	}
	return &json.UnsupportedValueError{Str: string(b)}
}

// Decision is what a hook, a policy or a person decides about one tool call.
// The zero value, Decision{}, allows the call; a literal builds any other,
// such as Decision{Kind: Deny, Reason: "no"} or Decision{Kind: Allow,
// Input: edited}, and package [github.com/toolrun/toolrun/policy] has
// the short forms a policy returns (policy.Deny, policy.Skip,
// policy.Defer).
type Decision struct {
	Kind DecisionKind `json:"kind"`
	// Reason is sent to the model for Deny and shown to the person for
	// Defer; it is logged for every kind but Allow.
	Reason string `json:"reason,omitempty"`
	// Input, if set with Allow, replaces the model's input, for the
	// policies after this one (policy.Chain) and for the run. It is validated
	// against the tool's schema like the model's. A Defer that a policy.Chain
	// returns carries the input its policies edited, which a person's
	// Allow without input of its own runs with.
	Input json.RawMessage `json:"input,omitempty"`
	// Result is the call's result for Skip.
	Result []Content `json:"result,omitempty"`
	// IsError marks a Skip result as an error.
	IsError bool `json:"is_error,omitempty"`
	// Always, with Allow given to [Runner.Decide], answers every later call
	// of the same tool that would be deferred to a person, for the rest of
	// the run. It never lets through a call that a deny rule denies.
	Always bool `json:"always,omitempty"`
	// Who names the person who took a decision given to [Runner.Decide] or
	// [State.Decide] (a login, a token's name), and At when they took it,
	// which may be long before the run goes on. toolrun keeps both in the
	// State and hands them on in [ToolDecided], so that an audit trail
	// (package transcript) shows who decided what and when; it acts on
	// neither. Empty and the zero time mean unknown.
	Who string    `json:"who,omitempty"`
	At  time.Time `json:"at,omitzero"`
}

// Policy decides tool calls. [Options].Policy is one for every call, and a
// tool's [ToolConfig].Policy one for its own calls. Package
// [github.com/toolrun/toolrun/policy] builds the common ones (policy.DenyTools,
// policy.AllowOnly, policy.RequireApproval, policy.Func) and combines
// several (policy.Chain).
//
// # The decision order
//
// Every call is decided by one rule, in [Runner.Next] and every other
// driver, in this process or after [Resume] with other Options:
//
//  1. A call of a tool the runner does not have is answered
//     [ErrUnknownTool].
//  2. The input is validated against the tool's schema; invalid input is
//     answered with a *[ValidationError], before any policy sees it. The
//     input is the model's, or a person's edit of it (see 5), which the
//     policies see and may edit in turn as in 3. Name-based
//     denials (policy.DenyTools, policy.AllowOnly) are policies too, so they run
//     after this step: a denied tool's call with invalid input is answered
//     with the *ValidationError, and neither runs.
//  3. Options.Policy, then the tool's Policy, are asked in order, as by
//     policy.Chain: the first Deny or Skip decides the call, so deny rules from
//     every source win; an Allow with Input replaces the input for the
//     policies after it (the edit is validated first, and invalid edited
//     input is answered with a *ValidationError); a Defer is remembered
//     and stands if nothing after it denies or skips.
//  4. If no policy denied or skipped, and one deferred the call, a
//     person's decision answers the deferral; failing that an earlier
//     Always approval of the tool allows it; failing that the call awaits
//     a person ([StopAwaitingApproval]).
//  5. If no policy had anything to say, a person's decision, if there is
//     one, stands; otherwise the call is allowed.
//
// A call is decided once: the decision is recorded in the run's [State]
// and stands in every runner resumed from it, whatever its Options, so
// the policies are asked once per call and [ToolDecided] is sent once. A
// decision is redone in one case: a call deferred to a person is decided
// again when the person answers ([State.Decide]), by the rules of the
// runner that goes on, so a deny rule still wins over a person's Allow. A
// run resumed with new deny rules applies them to the calls not decided
// yet and to every person's answer given since; a caller that wants them
// to apply to calls the old rules allowed but that never started drops
// those decisions from the State before resuming it, as the CLI's resume
// does with a saved run's approvals. A verdict given while the run's
// context ends is not taken (a policy may have given up for want of an
// answer): the run stops with the call undecided, and the policies are
// asked again when it goes on.
type Policy func(ctx context.Context, call PolicyCall) Decision

// PolicyCall is the call a [Policy] decides: the model's call (or a
// person's or an earlier policy's edit of its input), with the runner's
// check of an input against the tool's schema, so that a policy.Chain in a
// policy checks an edit before the policies after it see it. A policy
// that asks another passes its PolicyCall on, with Input changed if it
// edits it; a PolicyCall made outside a runner (a test asking a policy
// itself) checks nothing.
type PolicyCall struct {
	ToolCall
	valid func(json.RawMessage) error // the runner's validation; nil outside a runner
}

// Validate reports whether input is valid input for the call's tool, as
// the runner checks it before the tool runs: nil, or a *[ValidationError].
// Outside a runner it reports nil, since there is no schema to check
// against.
func (c PolicyCall) Validate(input json.RawMessage) error {
	if c.valid == nil {
		return nil
	}
	return c.valid(input)
}

// chainVerdict is what asking a chain of policies found.
type chainVerdict struct {
	final    *Decision // the first Deny or Skip
	finalAt  int
	deferred *Decision // the first Defer
	deferAt  int
	edit     json.RawMessage // the last input an Allow or Defer gave
	editAt   int
	invalid  error // edit's validation error, which ended the chain
}

// askChain is the one implementation of the rule policy.Chain documents, for
// Chain and for the runner's own Options.Policy and tool Policy. It asks
// each non-nil policies[i] through ask (which may guard the call); the
// call's [PolicyCall.Validate] checks an edited input before the next
// policy sees it. The error is ask's.
func askChain(call PolicyCall, policies []Policy, ask func(i int, p Policy, call PolicyCall) (Decision, error)) (chainVerdict, error) {
	var v chainVerdict
	for i, p := range policies {
		if p == nil {
			continue
		}
		d, err := ask(i, p, call)
		if err != nil {
			return v, err
		}
		if !d.Kind.valid() {
			// A bug in a policy must not open the door: fail closed, and say why.
			d = Decision{Kind: Deny, Reason: fmt.Sprintf("the policy returned an unknown decision kind (%d), so the call is denied", int(d.Kind))}
		}
		switch d.Kind {
		case Deny, Skip:
			if d.Reason == "" {
				d.Reason = "no reason given"
			}
			v.final, v.finalAt = &d, i
			return v, nil
		case Defer:
			if v.deferred == nil {
				v.deferred, v.deferAt = &d, i
			}
		}
		if (d.Kind == Allow || d.Kind == Defer) && len(d.Input) > 0 {
			v.edit, v.editAt = d.Input, i
			if err := call.Validate(d.Input); err != nil {
				v.invalid = err
				return v, nil
			}
			call.Input = d.Input
		}
	}
	return v, nil
}

// decision is the verdict as one policy's decision: what policy.Chain returns.
// An invalid edit is returned as an Allow with it, which the runner's own
// chain then refuses.
func (v chainVerdict) decision() Decision {
	switch {
	case v.final != nil:
		return *v.final
	case v.invalid != nil:
		return Decision{Kind: Allow, Input: v.edit}
	case v.deferred != nil:
		d := *v.deferred
		d.Input = v.edit
		return d
	}
	return Decision{Kind: Allow, Input: v.edit}
}

// decideTurn decides the unanswered calls of p by the decision order,
// answers those that need no running, and returns those to run. Calls
// awaiting a person are neither. Calls are decided one at a time, in
// order, so a hook that asks a person asks about one call at a time.
func (r *Runner) decideTurn(ctx context.Context, p *turnState) ([]*callState, error) {
	var run []*callState
	for i := range p.Calls {
		c := &p.Calls[i]
		if c.Phase == phaseAnswered {
			continue
		}
		ok, err := r.decideCall(ctx, c)
		if err != nil {
			return nil, err
		}
		if ok {
			run = append(run, c)
		}
	}
	return run, nil
}

// decideCall decides c if the State records no decision of the rules for
// it (its phase is new), and keeps the one it records otherwise, in this
// runner or after a Resume; it answers c if it needs no running (unknown
// tool, denied, skipped, invalid input, interrupted), and reports whether c
// is to run. The error is that of a hook.
func (r *Runner) decideCall(ctx context.Context, c *callState) (bool, error) {
	e := r.tool(c.Call)
	if e == nil {
		return false, r.answer(ctx, c, &ToolResult{Call: c.Call, Err: r.unknownCall(c.Call)})
	}
	if kind := inputKind(c.Call.Input); kind != "" {
		return false, r.answer(ctx, c, &ToolResult{Call: c.Call, Err: nonObjectInput(c.Call.Name, kind)})
	}
	if c.Phase == phaseStarted {
		if !e.config.Idempotent {
			return false, r.answer(ctx, c, &ToolResult{Call: c.Call, Err: fmt.Errorf(
				"%w: it started but did not finish (the run was stopped or its process died), and tool %q is not declared idempotent, so it was not run again; its effects, if any, are unknown",
				ErrInterrupted, c.Call.Name)})
		}
		r.mu.Lock()
		c.Phase = phaseDecided // run again, as its tool allows
		r.mu.Unlock()
	}
	if c.Phase == phaseNew {
		d, by, res, err := r.rules(ctx, e, c)
		if err != nil {
			return false, err
		}
		if res != nil {
			return false, r.answer(ctx, c, res)
		}
		r.mu.Lock()
		c.Decision, c.DecidedBy, c.Phase = &d, by, phaseDecided
		r.mu.Unlock()
		r.emit(ctx, ToolDecided{Turn: r.st.pending.Turn, Call: c.Call, Decision: d, By: by})
	}
	switch d := c.Decision; d.Kind {
	case Defer:
		return false, nil
	case Deny:
		return false, r.answer(ctx, c, &ToolResult{Call: c.Call, Err: fmt.Errorf("%w: %s", ErrDenied, d.Reason)})
	case Skip:
		return false, r.answer(ctx, c, &ToolResult{Call: c.Call, Content: d.Result, IsError: d.IsError})
	}
	return true, nil
}

// rules applies the decision order (see [Policy]) to c: it returns the
// decision and who took it, or the result of a call answered without a
// decision (invalid input), or a hook's error.
func (r *Runner) rules(ctx context.Context, e *toolEntry, c *callState) (Decision, DecidedBy, *ToolResult, error) {
	var person *Decision
	if c.DecidedBy == ByApproval {
		person = c.Decision
	}
	call := c.Call
	if person != nil && person.Kind == Allow && len(person.Input) > 0 {
		call.Input = person.Input
	}
	invalid := func(err error) (Decision, DecidedBy, *ToolResult, error) {
		if ctx.Err() != nil {
			return Decision{}, "", nil, err // no verdict: the run stops, the call unanswered
		}
		return Decision{}, "", &ToolResult{Call: c.Call, Err: err}, nil
	}
	if err := r.validate(ctx, e, call.Input); err != nil {
		return invalid(err)
	}
	// Options.Policy, then the tool's, as one Chain whose steps are hooks.
	policies := [...]Policy{r.opts.Policy, e.config.Policy}
	hooks := [...]string{"Policy", "ToolConfig.Policy"}
	var v chainVerdict
	if policies[0] != nil || policies[1] != nil {
		// The validation travels with the call, for a Chain in a policy.
		pc := PolicyCall{ToolCall: call, valid: func(in json.RawMessage) error { return r.validate(ctx, e, in) }}
		var err error
		v, err = askChain(pc, policies[:], func(i int, p Policy, call PolicyCall) (d Decision, err error) {
			err = r.callHook(ctx, hooks[i], func() error { d = p(ctx, call); return nil })
			return d, err
		})
		if err != nil {
			return Decision{}, "", nil, err
		}
		if ctx.Err() != nil {
			// A policy asked while the run was being cancelled may have
			// given up for want of an answer (a person, a service): no
			// verdict, the run stops and the call stays undecided.
			return Decision{}, "", nil, context.Cause(ctx)
		}
	}
	switch {
	case v.invalid != nil:
		return invalid(v.invalid)
	case v.final != nil:
		return *v.final, ByPolicy, nil, nil
	}
	allow, allowBy := Decision{}, ByDefault
	if len(v.edit) > 0 {
		allow, allowBy = Decision{Kind: Allow, Input: v.edit}, ByPolicy
	}
	switch {
	case person != nil:
		d := *person
		if d.Kind == Deny && d.Reason == "" {
			d.Reason = "denied by a person; no reason given"
		}
		// The policies were asked with the person's input, if it brought
		// one: an edit of theirs is of that input, and is what runs.
		if d.Kind == Allow && len(allow.Input) > 0 {
			d.Input = allow.Input
		}
		return d, ByApproval, nil, nil
	case v.deferred != nil && slices.Contains(r.st.AlwaysAllow, call.Name):
		return allow, ByAlways, nil, nil
	case v.deferred != nil:
		return *v.deferred, ByPolicy, nil, nil
	}
	return allow, allowBy, nil, nil
}

// Decide gives a person's decision for a call awaiting approval, by its
// tool_use id: Allow (with Input to run it with edited input), Deny (the
// model is told Reason) or Skip; Allow with Always also answers every later
// call of that tool that would be deferred. Once every pending call has a
// decision, Run or Next continues the run: the rules decide each answered
// call once more, with the person's decision (a deny rule still wins; see
// [Policy]), approved calls run, and calls that ran before the run was
// suspended do not run again.
//
// Decide takes a decision exactly when [State.Decide] does, whether the
// run has stopped to await it (Run, Next) or not yet (a driver of Advance
// and ExecuteCall): it returns an error wrapping [ErrNotAwaitingApproval]
// if the call does not await a person's decision.
func (r *Runner) Decide(toolUseID string, d Decision) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.Decide(toolUseID, d)
}
