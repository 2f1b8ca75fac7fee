package toolrun

import (
	"context"
	"encoding/json"
	"fmt"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

// NewSDKTool returns a [Tool] that runs t, a tool written for the anthropic
// SDK's runner (toolrunner.NewBetaTool, NewBetaToolFromJSONSchema,
// NewBetaToolFromBytes, or any other anthropic.BetaTool), so that a program
// moving over to toolrun keeps its tools as they are. The tool has t's
// name, description and input schema; a call runs t.Execute, and the
// blocks it returns are the tool_result's content, its error an is_error
// result, as with any tool. Like every tool, its input is validated
// against the schema before t sees it.
//
// The schema is t's, taken once, here: an error wraps [ErrInvalidSchema]
// if the runner cannot use it, as for [NewRawTool]. An invalid name and a
// nil t are errors too.
func NewSDKTool(t anthropic.BetaTool) (*FuncTool, error) {
	if t == nil {
		return nil, fmt.Errorf("toolrun: NewSDKTool: nil tool")
	}
	raw, err := json.Marshal(t.InputSchema())
	if err != nil {
		return nil, fmt.Errorf("toolrun: tool %q: encoding its input schema: %w", t.Name(), err)
	}
	return NewRawTool(t.Name(), t.Description(), raw, t.Execute)
}

// NewSDKToolParam returns a [Tool] from p, a client tool's definition as the
// SDK sends it, and fn, which answers its calls: what a program that ran
// its own loop over the SDK (or gave BetaToolRunner an
// anthropic.BetaToolParam) pairs together. The tool has p's name,
// description and input schema, and a call runs fn with the model's input,
// already validated against the schema.
//
// NewSDKToolParam returns an error rather than drop what p asks of the API
// that a toolrun tool does not send: strict, defer_loading,
// eager_input_streaming, allowed_callers, input_examples and cache_control
// (toolrun places its own cache breakpoints: see [Options].NoCache), and a
// type other than "custom". A schema the runner cannot use is an error
// wrapping [ErrInvalidSchema]; an invalid name and a nil fn are errors too.
func NewSDKToolParam(p anthropic.BetaToolParam, fn func(ctx context.Context, input json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error)) (*FuncTool, error) {
	var unsent []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"strict", !param.IsOmitted(p.Strict)},
		{"defer_loading", !param.IsOmitted(p.DeferLoading)},
		{"eager_input_streaming", !param.IsOmitted(p.EagerInputStreaming)},
		{"allowed_callers", len(p.AllowedCallers) > 0},
		{"input_examples", len(p.InputExamples) > 0},
		{"cache_control", !param.IsOmitted(p.CacheControl)},
		{"type " + string(p.Type), p.Type != "" && p.Type != anthropic.BetaToolTypeCustom},
	} {
		if f.set {
			unsent = append(unsent, f.name)
		}
	}
	if len(unsent) > 0 {
		return nil, fmt.Errorf("toolrun: tool %q: a toolrun tool cannot send %v; leave them out of the BetaToolParam", p.Name, unsent)
	}
	if fn == nil {
		return nil, fmt.Errorf("toolrun: tool %q: nil function", p.Name)
	}
	raw, err := json.Marshal(p.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("toolrun: tool %q: encoding its input schema: %w", p.Name, err)
	}
	return NewRawTool(p.Name, p.Description.Value, raw, fn)
}
