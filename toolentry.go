package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// toolSet is what the runners built from the same tools share: the tools'
// definitions for the API, their compiled schemas and their names. It is
// never changed once built. A runner keeps its own toolEntry per tool on
// top of it, for what may differ between runners: each tool's settings
// (a FuncTool's ToolConfig may change between two calls of New) and
// whether RemoveTools took it out.
//
// Building it once per set rather than once per New is what keeps a runner
// small when thousands are held awaiting approval (issue 15): the
// definitions alone are a few hundred bytes per tool.
type toolSet struct {
	// funcs are the tools the set was built from, when all are *FuncTool;
	// nil for a set that is not shared.
	funcs []*FuncTool
	index map[string]int // a tool's position by name
	// entries are the tools with their settings as they were when the set
	// was built: a runner whose tools have the same ones shares them, and
	// copies them before it changes one.
	entries []toolEntry
	defs    []anthropic.BetaToolUnionParam // in the order given to New
	names   []string                       // sorted, for messages to the model
	// defsJSON is the request JSON of defs, encoded by the first request
	// that sends them (encode.go's toolsBody).
	defsJSON atomic.Pointer[toolsJSON]
}

// lastToolSet is the set New built last from FuncTools alone, for the next
// New with the same tools. One entry is enough for the common program,
// which builds every runner from the same tools; a program that alternates
// between sets builds each set per New, as it would without the cache.
var lastToolSet atomic.Pointer[toolSet]

// toolSetOf returns the set of tools, shared with the runners built before
// from the same *FuncTool values in the same order. It returns an error
// for two tools with one name or a schema that cannot be used.
func toolSetOf(tools []Tool) (*toolSet, error) {
	funcs := make([]*FuncTool, 0, len(tools))
	for _, t := range tools {
		ft, ok := t.(*FuncTool)
		if !ok {
			funcs = nil
			break
		}
		funcs = append(funcs, ft)
	}
	if funcs != nil {
		if s := lastToolSet.Load(); s != nil && slices.Equal(s.funcs, funcs) {
			return s, nil
		}
	}
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
	if funcs != nil {
		s.funcs = funcs
		lastToolSet.Store(s)
	}
	return s, nil
}

// newToolEntry returns the entry of t, with its settings as they are now.
func newToolEntry(t Tool, schema *toolSchema) toolEntry {
	return toolEntry{tool: t, schema: schema, config: t.Config()}
}

// entriesFor returns the entries of tools, the set's own tools: the set's
// shared entries if every tool's settings are as they were when the set
// was built (compared as memory, since a Policy is a func), or new ones.
func (s *toolSet) entriesFor(tools []Tool) []toolEntry {
	if s.funcs == nil {
		return s.entries // built for this runner alone
	}
	shared := true
	for i := 0; shared && i < len(tools); i++ {
		e := newToolEntry(tools[i], s.entries[i].schema)
		shared = sameEntry(&e, &s.entries[i])
	}
	if shared {
		return s.entries
	}
	entries := make([]toolEntry, len(tools))
	for i, t := range tools {
		entries[i] = newToolEntry(t, s.entries[i].schema)
	}
	return entries
}

// sameEntry reports whether a and b are the same tool with the same
// settings: the same Policy func value, compared as memory, since Go
// cannot compare funcs (a closure's pointer: two closures of one func
// literal over different variables differ).
func sameEntry(a, b *toolEntry) bool {
	ca, cb := &a.config, &b.config
	return a.tool == b.tool && a.schema == b.schema &&
		ca.Timeout == cb.Timeout && ca.Exclusive == cb.Exclusive && ca.Idempotent == cb.Idempotent && ca.MaxParallel == cb.MaxParallel &&
		ca.MaxResultBytes == cb.MaxResultBytes && sameMemory(&ca.Policy, &cb.Policy)
}

// tool returns the entry of the tool named name, or nil if the run has no
// such tool (or it was removed).
func (r *Runner) tool(name string) *toolEntry {
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
