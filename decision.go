package toolrun

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
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
// The zero value allows the call. Build one with [AllowCall], [DenyCall],
// [SkipCall], [DeferCall] or [AllowWithInput].
type Decision struct {
	Kind DecisionKind `json:"kind"`
	// Reason is sent to the model for Deny and shown to the person for
	// Defer; it is logged for every kind but Allow.
	Reason string `json:"reason,omitempty"`
	// Input, if set with Allow, replaces the model's input. It is validated
	// against the tool's schema like the model's.
	Input json.RawMessage `json:"input,omitempty"`
	// Result is the call's result for Skip.
	Result []Content `json:"result,omitempty"`
	// IsError marks a Skip result as an error.
	IsError bool `json:"is_error,omitempty"`
	// Always, with Allow given to [Runner.Decide], answers every later call
	// of the same tool that would be deferred to a person, for the rest of
	// the run. It never lets through a call that a deny rule denies.
	Always bool `json:"always,omitempty"`
}

// AllowCall returns a decision that runs the call.
func AllowCall() Decision { return Decision{Kind: Allow} }

// AllowWithInput returns a decision that runs the call with input instead of
// the model's.
func AllowWithInput(input json.RawMessage) Decision { return Decision{Kind: Allow, Input: input} }

// DenyCall returns a decision that refuses the call; the model is told reason.
func DenyCall(reason string) Decision { return Decision{Kind: Deny, Reason: reason} }

// SkipCall returns a decision that answers the call with result instead of
// running it.
func SkipCall(result ...Content) Decision { return Decision{Kind: Skip, Result: result} }

// DeferCall returns a decision that suspends the run until a person decides.
func DeferCall(reason string) Decision { return Decision{Kind: Defer, Reason: reason} }

// Policy decides tool calls. Options.Decide is one for every call, and a
// tool's [ToolConfig.Policy] one for its own calls. [RequireApproval],
// [Never] and [PolicyFunc] build the common ones.
//
// # The decision order
//
// Every call is decided by one rule, in [Runner.Next] and every other
// driver, in this process or after [Resume] with other Options:
//
//  1. A call of a tool the runner does not have is answered
//     [ErrUnknownTool].
//  2. Options.Deny, and Options.Allow when set, deny by name, before the
//     input is looked at.
//  3. The input is validated against the tool's schema; invalid input is
//     answered with a *[ValidationError]. The input is the model's, or a
//     person's edit of it (see 6).
//  4. Options.Decide, then the tool's Policy, see the validated input. The
//     first Deny or Skip decides the call: deny rules from every source win.
//     An Allow with Input replaces the input for the rules after it (the
//     edit is validated first).
//  5. If no rule denied or skipped, and one deferred the call, a person's
//     decision answers the deferral; failing that an earlier Always
//     approval of the tool allows it; failing that the call awaits a
//     person ([StopAwaitingApproval]).
//  6. If no rule had anything to say, a person's decision, if there is one,
//     stands; otherwise the call is allowed.
//
// A person's decision is taken once ([State.Decide]); a decision the rules
// took in another runner is taken again by this runner's rules, so that a
// run resumed with a new Deny list honours it. Policies must therefore be
// free of side effects: they may be asked about a call more than once.
type Policy func(ctx context.Context, call ToolCall) Decision

// RequireApproval is a policy that defers every call to a person.
func RequireApproval(reason string) Policy {
	return func(context.Context, ToolCall) Decision { return DeferCall(reason) }
}

// Never is a policy that denies every call with reason.
func Never(reason string) Policy {
	return func(context.Context, ToolCall) Decision { return DenyCall(reason) }
}

// PolicyFunc returns a policy that decodes each call's input into In and
// asks decide. It decodes as the tool reads its input: a key that matches
// a field of In only when case is ignored is refused (encoding/json would
// take it for the field, while a tool reading the exact key would not), as
// is input that does not decode; both are denied with the reason.
func PolicyFunc[In any](decide func(ctx context.Context, in In) Decision) Policy {
	t := reflect.TypeFor[In]()
	return func(ctx context.Context, call ToolCall) Decision {
		var in In
		if len(call.Input) > 0 {
			if msg := caseMismatch(t, call.Input, ""); msg != "" {
				return DenyCall("input could not be decoded for the policy: " + msg)
			}
			if err := json.Unmarshal(call.Input, &in); err != nil {
				return DenyCall("input could not be decoded for the policy: " + err.Error())
			}
		}
		return decide(ctx, in)
	}
}

// caseMismatch returns a description of the first key of raw that names a
// field of t only when case is ignored, or "".
func caseMismatch(t reflect.Type, raw json.RawMessage, at string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return ""
		}
		fields := jsonFields(t)
		for key, v := range obj {
			if f, ok := fields[key]; ok {
				if msg := caseMismatch(f, v, at+"/"+key); msg != "" {
					return msg
				}
				continue
			}
			for name := range fields {
				if strings.EqualFold(name, key) {
					return fmt.Sprintf("key %q at %q differs only in case from field %q", key, at+"/", name)
				}
			}
		}
	case reflect.Slice, reflect.Array:
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil {
			return ""
		}
		for i, v := range arr {
			if msg := caseMismatch(t.Elem(), v, fmt.Sprintf("%s/%d", at, i)); msg != "" {
				return msg
			}
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return ""
		}
		for key, v := range obj {
			if msg := caseMismatch(t.Elem(), v, at+"/"+key); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// jsonFields maps the JSON names of t's fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous && f.Type.Kind() == reflect.Struct {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		out[name] = f.Type
	}
	return out
}

// decideTurn decides the unanswered calls of p by the decision order,
// answers those that need no running, and returns those to run. Calls
// awaiting a person are neither. Calls are decided one at a time, in
// order, so a hook that asks a person asks about one call at a time.
func (r *Runner) decideTurn(ctx context.Context, p *TurnState) ([]*CallState, error) {
	var run []*CallState
	for i := range p.Calls {
		c := &p.Calls[i]
		if c.Phase == PhaseAnswered {
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

// decideCall decides c, unless this runner has: it answers c if it needs
// no running (unknown tool, denied, skipped, invalid input, interrupted),
// and reports whether c is to run. The error is that of a hook.
func (r *Runner) decideCall(ctx context.Context, c *CallState) (bool, error) {
	e := r.tool(c.Call.Name)
	if e == nil {
		return false, r.answer(ctx, c, &ToolResult{Call: c.Call, Err: unknownToolError(c.Call.Name, r.toolNames())})
	}
	if c.Phase == PhaseStarted {
		if !e.config.Idempotent {
			return false, r.answer(ctx, c, &ToolResult{Call: c.Call, Err: fmt.Errorf(
				"%w: it started but did not finish (the run was stopped or its process died), and tool %q is not declared idempotent, so it was not run again; its effects, if any, are unknown",
				ErrInterrupted, c.Call.Name)})
		}
		r.mu.Lock()
		c.Phase = PhaseDecided // run again, as its tool allows
		r.mu.Unlock()
	}
	if !slices.Contains(r.decided, c.Call.ID) {
		d, by, res, err := r.rules(ctx, e, c)
		if err != nil {
			return false, err
		}
		if res != nil {
			return false, r.answer(ctx, c, res)
		}
		r.mu.Lock()
		c.Decision, c.DecidedBy, c.Phase = &d, by, PhaseDecided
		r.mu.Unlock()
		r.decided = append(r.decided, c.Call.ID)
		r.emit(ctx, ToolDecided{Turn: r.st.Pending.Turn, Call: c.Call, Decision: d, By: by})
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
func (r *Runner) rules(ctx context.Context, e *toolEntry, c *CallState) (Decision, DecidedBy, *ToolResult, error) {
	name := c.Call.Name
	if slices.Contains(r.opts.Deny, name) || r.opts.Allow != nil && !slices.Contains(r.opts.Allow, name) {
		return DenyCall(fmt.Sprintf("tool %q is not allowed in this run", name)), ByOptions, nil, nil
	}
	var person *Decision
	if c.DecidedBy == ByApproval {
		person = c.Decision
	}
	call := c.Call
	if person != nil && person.Kind == Allow && len(person.Input) > 0 {
		call.Input = person.Input
	}
	if err := r.validate(ctx, e, call.Input); err != nil {
		if ctx.Err() != nil {
			return Decision{}, "", nil, err // no verdict: the run stops, the call unanswered
		}
		return Decision{}, "", &ToolResult{Call: c.Call, Err: err}, nil
	}
	allow, allowBy := AllowCall(), ByDefault
	var deferred *Decision
	var deferredBy DecidedBy
	for _, rule := range []struct {
		hook   string
		by     DecidedBy
		policy Policy
	}{{"Decide", ByOptions, r.opts.Decide}, {"Policy", ByPolicy, e.config.Policy}} {
		if rule.policy == nil {
			continue
		}
		var d Decision
		if err := r.callHook(ctx, rule.hook, func() error { d = rule.policy(ctx, call); return nil }); err != nil {
			return Decision{}, "", nil, err
		}
		switch d.Kind {
		case Deny, Skip:
			if d.Reason == "" {
				d.Reason = "no reason given"
			}
			return d, rule.by, nil, nil
		case Defer:
			if deferred == nil {
				deferred, deferredBy = &d, rule.by
			}
		case Allow:
			if len(d.Input) > 0 {
				if err := r.validate(ctx, e, d.Input); err != nil {
					if ctx.Err() != nil {
						return Decision{}, "", nil, err
					}
					return Decision{}, "", &ToolResult{Call: c.Call, Err: err}, nil
				}
				call.Input = d.Input
				allow, allowBy = AllowWithInput(d.Input), rule.by
			}
		}
	}
	switch {
	case person != nil:
		d := *person
		if d.Kind == Deny && d.Reason == "" {
			d.Reason = "denied by a person; no reason given"
		}
		if d.Kind == Allow && len(d.Input) == 0 && len(allow.Input) > 0 {
			d.Input = allow.Input
		}
		return d, ByApproval, nil, nil
	case deferred != nil && slices.Contains(r.st.AlwaysAllow, name):
		return allow, ByAlways, nil, nil
	case deferred != nil:
		return *deferred, deferredBy, nil, nil
	}
	return allow, allowBy, nil, nil
}

// Decide gives a person's decision for a call awaiting approval, by its
// tool_use id: Allow (with Input to run it with edited input), Deny (the
// model is told Reason) or Skip; Allow with Always also answers every later
// call of that tool that would be deferred. Once every pending call has a
// decision, Run or Next continues the run: the deny rules are applied once
// more (see [Policy]), approved calls run, and calls that ran before the
// run was suspended do not run again.
//
// Decide returns an error wrapping [ErrNotAwaitingApproval] if the run is
// not awaiting approval or the call does not await a decision (see
// [State.Decide]).
func (r *Runner) Decide(toolUseID string, d Decision) error {
	if r.stopped == nil || r.stopped.StopReason != StopAwaitingApproval {
		return fmt.Errorf("%w: the run is not suspended for approval", ErrNotAwaitingApproval)
	}
	r.mu.Lock()
	err := r.st.Decide(toolUseID, d)
	r.mu.Unlock()
	if err == nil {
		// The rules see the person's decision, and any input it carries.
		r.decided = slices.DeleteFunc(r.decided, func(id string) bool { return id == toolUseID })
	}
	return err
}
