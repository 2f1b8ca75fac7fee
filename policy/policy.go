// Package policy builds the common [toolrun.Policy] values: defer every
// call to a person, deny tools by name or allow only some, decide on a
// call's input decoded into a Go type, and combine several in order; and
// the decisions a policy returns ([Deny], [Skip], [Defer]; the zero
// [toolrun.Decision] allows).
//
// A policy is a plain function, so a program writes its own as easily; the
// ones here are the rules most programs start from, kept out of package
// toolrun so that its API is the one a program running tools reads. They
// decide exactly as the runner does: [Chain] is the rule the runner itself
// applies to Options.Policy and a tool's ToolConfig.Policy.
package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/bridge"
)

// chain is the runner's own chain rule (toolrun's askChain), which
// internal/bridge carries here.
var chain = bridge.Chain.(func(context.Context, toolrun.PolicyCall, []toolrun.Policy) toolrun.Decision)

// Deny returns a decision that refuses the call; the model is told
// reason, as an is_error result.
func Deny(reason string) toolrun.Decision {
	return toolrun.Decision{Kind: toolrun.Deny, Reason: reason}
}

// Skip returns a decision that answers the call with result instead of
// running it (conditional execution: a cached answer, a dry run).
func Skip(result ...toolrun.Content) toolrun.Decision {
	return toolrun.Decision{Kind: toolrun.Skip, Result: result}
}

// Defer returns a decision that suspends the run until a person decides:
// the run stops with toolrun.StopAwaitingApproval, and reason is shown to
// the person.
func Defer(reason string) toolrun.Decision {
	return toolrun.Decision{Kind: toolrun.Defer, Reason: reason}
}

// RequireApproval is a policy that defers every call to a person.
func RequireApproval(reason string) toolrun.Policy {
	return func(context.Context, toolrun.PolicyCall) toolrun.Decision { return Defer(reason) }
}

// DenyTools is a policy that denies the calls of the named tools and has
// nothing to say about the others. With no names it denies nothing.
func DenyTools(names ...string) toolrun.Policy {
	names = slices.Clone(names)
	return func(_ context.Context, call toolrun.PolicyCall) toolrun.Decision {
		if slices.Contains(names, call.Name) {
			return notAllowed(call.Name)
		}
		return toolrun.Decision{}
	}
}

// AllowOnly is a policy that denies the calls of every tool it does not
// name and has nothing to say about the named ones. With no names it
// denies every call.
func AllowOnly(names ...string) toolrun.Policy {
	names = slices.Clone(names)
	return func(_ context.Context, call toolrun.PolicyCall) toolrun.Decision {
		if !slices.Contains(names, call.Name) {
			return notAllowed(call.Name)
		}
		return toolrun.Decision{}
	}
}

// notAllowed is the denial of [DenyTools] and [AllowOnly].
func notAllowed(name string) toolrun.Decision {
	return Deny(fmt.Sprintf("tool %q is not allowed in this run", name))
}

// Chain is a policy that asks policies in order (nil ones are passed
// over): the first Deny or Skip decides the call; an Allow with Input
// replaces the input the policies after it see, and is the input the call
// runs with; a Defer is remembered and stands if nothing after it denies
// or skips (with Input, if a policy edited the input, for a person's Allow
// that brings none); a decision of any other kind is a Deny that says so.
// With no policy to say otherwise it allows the call.
//
// In a runner, an edited input is validated against the tool's schema
// ([toolrun.PolicyCall.Validate], which the call carries to the Chain
// whatever context it is asked with) before the next policy sees it; an
// invalid edit ends the chain and the call is answered with a
// *[toolrun.ValidationError]. Chain is the rule the runner itself applies
// to Options.Policy and the tool's ToolConfig.Policy (see [toolrun.Policy]),
// so a Chain nested in Options.Policy decides as if its policies were
// listed there.
func Chain(policies ...toolrun.Policy) toolrun.Policy {
	policies = slices.Clone(policies)
	return func(ctx context.Context, call toolrun.PolicyCall) toolrun.Decision {
		return chain(ctx, call, policies)
	}
}

// Func returns a policy that decodes each call's input into In and
// asks decide. It decodes as the tool reads its input: a key that matches
// a field of In only when case is ignored is refused (encoding/json would
// take it for the field, while a tool reading the exact key would not), as
// is input that does not decode; both are denied with the reason.
func Func[In any](decide func(ctx context.Context, in In) toolrun.Decision) toolrun.Policy {
	t := reflect.TypeFor[In]()
	return func(ctx context.Context, call toolrun.PolicyCall) toolrun.Decision {
		var in In
		if len(call.Input) > 0 {
			if msg := caseMismatch(t, call.Input, ""); msg != "" {
				return Deny("input could not be decoded for the policy: " + msg)
			}
			if err := json.Unmarshal(call.Input, &in); err != nil {
				return Deny("input could not be decoded for the policy: " + err.Error())
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
