package toolrun

import (
	"encoding/json"
	"fmt"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
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
