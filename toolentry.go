package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
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

// toolSet is what the runners of one template share: the tools'
// definitions for the API, their compiled schemas, their settings as they
// were when the set was built, and their names. It is never changed once
// built: a runner copies its entries before RemoveTools marks one.
type toolSet struct {
	index   map[string]int // a tool's position by name
	entries []toolEntry
	// members holds the tools of toolsets (ToolConfig.Toolset), by
	// toolset and name. They are apart from entries: they have no
	// definition of their own to send, and RemoveTools and AddTools,
	// which deal in names, never touch them.
	members map[memberKey]*toolEntry
	defs    []anthropic.BetaToolUnionParam // in the order given
	names   []string                       // sorted, for messages to the model
	// defsJSON is the request JSON of defs, encoded by the first request
	// that sends them (encode.go's toolsBody).
	defsJSON atomic.Pointer[toolsJSON]
}

// memberKey is how a call of a toolset's member is dispatched: on the
// toolset and the name together, since a member's name is not reserved
// (a tool of its own, or a member of another toolset, may have it too).
type memberKey struct{ toolset, name string }

// toolSetOf returns the set of tools. It returns an error for two tools
// with one name (in one toolset, for members) or a schema that cannot be
// used.
func toolSetOf(tools []Tool) (*toolSet, error) {
	s := &toolSet{index: make(map[string]int, len(tools))}
	for _, t := range tools {
		name := t.Name()
		var (
			schema *toolSchema
			def    anthropic.BetaToolUnionParam
			err    error
		)
		if ft, ok := t.(*FuncTool); ok {
			schema, def, err = ft.prepare()
		} else {
			schema, def, err = compileTool(t)
		}
		if err != nil {
			return nil, err
		}
		e := newToolEntry(t, schema)
		if ts := e.config.Toolset; ts != "" {
			k := memberKey{ts, name}
			if _, dup := s.members[k]; dup {
				return nil, fmt.Errorf("toolrun: two tools of toolset %q are named %q", ts, name)
			}
			if s.members == nil {
				s.members = make(map[memberKey]*toolEntry)
			}
			s.members[k] = &e
			continue
		}
		if _, dup := s.index[name]; dup {
			return nil, fmt.Errorf("toolrun: two tools are named %q", name)
		}
		s.index[name] = len(s.entries)
		s.entries = append(s.entries, e)
		s.defs = append(s.defs, def)
		s.names = append(s.names, name)
	}
	sort.Strings(s.names)
	return s, nil
}

// newToolEntry returns the entry of t, with its settings as they are now.
func newToolEntry(t Tool, schema *toolSchema) toolEntry {
	return toolEntry{tool: t, schema: schema, config: t.Config()}
}

// tool returns the entry of the tool that runs call, or nil if the run has
// none: for a call of a toolset's member, the tool of that toolset and
// name (ToolConfig.Toolset), never a tool of its own of the same name;
// otherwise the tool named call.Name.
func (r *Runner) tool(call ToolCall) *toolEntry {
	if call.Toolset != "" {
		return r.set.members[memberKey{call.Toolset, call.Name}]
	}
	return r.toolNamed(call.Name)
}

// toolNamed returns the entry of the tool of its own named name, or nil if
// the run has no such tool (or it was removed). A tool added during the
// run comes first: it may stand in place of one of New's that was removed.
func (r *Runner) toolNamed(name string) *toolEntry {
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

// unknownCall returns the failure of call, which no tool of the run runs:
// an error wrapping [ErrUnknownTool] that names the tools the model may
// call instead, those of the call's toolset for a member's call.
func (r *Runner) unknownCall(call ToolCall) error {
	if call.Toolset == "" {
		return unknownToolError(call.Name, r.toolNames())
	}
	var names []string
	for k := range r.set.members {
		if k.toolset == call.Toolset {
			names = append(names, k.name)
		}
	}
	sort.Strings(names)
	list := "none"
	if len(names) > 0 {
		list = strings.Join(names, ", ")
	}
	return fmt.Errorf("%w %q of toolset %q; available tools of the toolset: %s", ErrUnknownTool, call.Name, call.Toolset, list)
}
