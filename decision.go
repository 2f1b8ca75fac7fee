package toolrun

import (
	"context"
	"encoding/json"
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
	// Always, with Allow given to [Runner.Decide], allows every later call
	// of the same tool for the rest of the run without asking again.
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

// Policy decides the calls of one tool; it is declared on the tool with
// [ToolConfig.Policy]. The input it sees is the model's, already validated
// against the tool's schema. [RequireApproval] and [Never] are the common
// ones; [PolicyFunc] builds one from a func of the decoded input.
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
// asks decide. Input that does not decode is denied with the decoding error.
func PolicyFunc[In any](decide func(ctx context.Context, in In) Decision) Policy {
	return func(ctx context.Context, call ToolCall) Decision {
		var in In
		if len(call.Input) > 0 {
			if err := json.Unmarshal(call.Input, &in); err != nil {
				return DenyCall("input could not be decoded for the policy: " + err.Error())
			}
		}
		return decide(ctx, in)
	}
}
