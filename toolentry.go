package toolrun

import (
	"context"
	"encoding/json"
	"errors"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/jsonschema-go/jsonschema"
)

// toolEntry is a tool as a runner holds it: its settings, its schema made
// ready for validation and its definition for the API, built once.
type toolEntry struct {
	tool     Tool
	config   ToolConfig
	resolved *jsonschema.Resolved
	param    anthropic.BetaToolUnionParam
}

func newToolEntry(t Tool) (*toolEntry, error) {
	e := &toolEntry{tool: t}
	if c, ok := t.(Configurable); ok {
		e.config = c.Config()
	}
	var err error
	if ft, ok := t.(*FuncTool); ok {
		e.resolved, e.param, err = ft.prepare()
	} else {
		e.resolved, e.param, err = prepareTool(t)
	}
	return e, err
}

// validate checks input against the tool's schema.
func (r *Runner) validate(ctx context.Context, e *toolEntry, input json.RawMessage) error {
	err := validateInput(e.resolved, input)
	var ve *ValidationError
	if errors.As(err, &ve) {
		ve.Tool = e.tool.Name()
	}
	return err
}
