package toolrun

import (
	"context"
	"encoding/json"
	"errors"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// toolEntry is a tool as a runner holds it: its settings, its schema
// compiled for validation and its definition for the API, built once.
type toolEntry struct {
	tool   Tool
	config ToolConfig
	schema *toolSchema
	param  anthropic.BetaToolUnionParam
}

func newToolEntry(t Tool) (*toolEntry, error) {
	e := &toolEntry{tool: t}
	if c, ok := t.(Configurable); ok {
		e.config = c.Config()
	}
	var err error
	if ft, ok := t.(*FuncTool); ok {
		e.schema, e.param, err = ft.prepare()
	} else {
		e.schema, e.param, err = compileTool(t)
	}
	return e, err
}

// validate checks input against the tool's schema. A validation cut short
// by ctx returns ctx's error, which is no verdict: the caller leaves the
// call unanswered.
func (r *Runner) validate(ctx context.Context, e *toolEntry, input json.RawMessage) error {
	err := e.schema.validate(ctx, input)
	var ve *ValidationError
	if errors.As(err, &ve) {
		ve.Tool = e.tool.Name()
	}
	return err
}
