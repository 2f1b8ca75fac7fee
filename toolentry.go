package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// toolEntry is a tool as a runner holds it: its settings, as they were when
// the runner was built, and its schema compiled for validation.
type toolEntry struct {
	tool    Tool
	config  ToolConfig
	schema  *toolSchema
	removed bool // taken out of the run by Runner.RemoveTools
}

// toolSet is what the runners of one [Template] share: the tools'
// definitions for the API, their compiled schemas, their settings as they
// were when the set was built, and their names. It is never changed once
// built: a runner copies its entries before RemoveTools marks one.
type toolSet struct {
	index   map[string]int // a tool's position by name
	entries []toolEntry
	defs    []anthropic.BetaToolUnionParam // in the order given
	names   []string                       // sorted, for messages to the model
	// defsJSON is the request JSON of defs, encoded by the first request
	// that sends them (encode.go's toolsBody).
	defsJSON atomic.Pointer[toolsJSON]
}

// toolSetOf returns the set of tools. It returns an error for two tools
// with one name or a schema that cannot be used.
func toolSetOf(tools []Tool) (*toolSet, error) {
	s := &toolSet{index: make(map[string]int, len(tools)),
		defs: make([]anthropic.BetaToolUnionParam, len(tools)), names: make([]string, len(tools)),
		entries: make([]toolEntry, len(tools))}
	for i, t := range tools {
		name := t.Name()
		if _, dup := s.index[name]; dup {
			return nil, fmt.Errorf("toolrun: two tools are named %q", name)
		}
		var (
			schema *toolSchema
			err    error
		)
		if ft, ok := t.(*FuncTool); ok {
			schema, s.defs[i], err = ft.prepare()
		} else {
			schema, s.defs[i], err = compileTool(t)
		}
		if err != nil {
			return nil, err
		}
		s.index[name] = i
		s.names[i] = name
		s.entries[i] = newToolEntry(t, schema)
	}
	sort.Strings(s.names)
	return s, nil
}

// newToolEntry returns the entry of t, with its settings as they are now.
func newToolEntry(t Tool, schema *toolSchema) toolEntry {
	return toolEntry{tool: t, schema: schema, config: t.Config()}
}

// tool returns the entry of the tool named name, or nil if the run has no
// such tool (or it was removed). A tool added during the run comes first:
// it may stand in place of one of New's that was removed.
func (r *Runner) tool(name string) *toolEntry {
	if e := r.addedEntry(name); e != nil {
		return e
	}
	i, ok := r.set.index[name]
	if !ok || r.tools[i].removed {
		return nil
	}
	return &r.tools[i]
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
