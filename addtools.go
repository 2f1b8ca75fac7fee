package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun/internal/deepcopy"
)

// This file gives a run tools after it began ([Runner.AddTools],
// [Runner.AddToolParams]), keeps them in its State, and tells the model of
// every change of its tools: in the tool list sent with each request, or,
// with the inline-tools beta, in the role "system" messages of that beta,
// as the official runner does.

// toolChanges is what a run's tools became after it began: the definitions
// added, and the inline-tools beta's blocks not sent yet. A State holds it
// through a pointer and never writes through it: each change builds a new
// one, so that copies of the State (Runner.State, checkpoints) may share it.
type toolChanges struct {
	// Added are the definitions given with AddTools (client tools, OfTool)
	// and AddToolParams (tools the API runs), in the order given, as they
	// are sent; a tool removed since is no longer in it.
	Added []anthropic.BetaToolUnionParam `json:"added,omitempty"`
	// Queued are the tool_addition and tool_removal blocks that go, as one
	// role "system" message, ahead of the next request (inline-tools beta).
	Queued []anthropic.BetaSystemMessageParamContentUnion `json:"queued,omitempty"`
	// AddedOnly names the client tools the run has had only through
	// AddTools, never among the tools it began with. Given to Resume, such
	// a tool is only the function of its added definition: while it is
	// not added (removed since) the run leaves it out, and it is never in
	// the tool list of the inline-tools beta, whose history's blocks tell
	// the model of it.
	AddedOnly []string `json:"added_only,omitempty"`
}

// addedDefs returns the definitions added to the run, not to be written.
func (s *State) addedDefs() []anthropic.BetaToolUnionParam {
	if s.tools == nil {
		return nil
	}
	return s.tools.Added
}

// AddedTools returns a copy of the definitions of the tools given to the
// run after it began ([Runner.AddTools], [Runner.AddToolParams]) and not
// removed since, in the order given. A run resumed from s needs the
// functions of its client tools (those with OfTool set) among the tools
// given to [Resume].
func (s *State) AddedTools() []anthropic.BetaToolUnionParam {
	return deepcopy.Copy(s.addedDefs())
}

// addedOnly returns the names of the client tools the run has had only
// through AddTools, not to be written.
func (s *State) addedOnly() []string {
	if s.tools == nil {
		return nil
	}
	return s.tools.AddedOnly
}

// setToolChanges replaces the run's tool changes with added and queued,
// and keeps the names of the tools it has had only as added.
func (s *State) setToolChanges(added []anthropic.BetaToolUnionParam, queued []anthropic.BetaSystemMessageParamContentUnion) {
	s.setToolState(added, queued, s.addedOnly())
}

// setToolState replaces the run's tool changes.
func (s *State) setToolState(added []anthropic.BetaToolUnionParam, queued []anthropic.BetaSystemMessageParamContentUnion, only []string) {
	if len(added) == 0 && len(queued) == 0 && len(only) == 0 {
		s.tools = nil
		return
	}
	s.tools = &toolChanges{Added: added, Queued: queued, AddedOnly: only}
}

// inlineTools reports whether the run's requests carry the inline-tools
// beta, so that a change of its tools is a block of the history rather
// than a change of the tool list: the list, the start of every request,
// stays as it was, and with it the prompt cache and the message thread.
func (r *Runner) inlineTools() bool {
	return slices.Contains(r.st.Betas, anthropic.AnthropicBetaInlineTools2026_09_15)
}

// AddTools gives the model more tools from its next request on. Each tool
// is checked as [New] checks its tools (its schema compiled, its name
// unique), and then runs under the same rules: the run's [Options] and
// the tool's own [ToolConfig] (policy, approval, timeout, MaxParallel).
// AddTools returns an error, and adds none of tools, if one of them has a
// schema that cannot be used (wrapping [ErrInvalidSchema]), or a name the
// run has already (wrapping [ErrToolExists]), among its tools, its params'
// tools and those added before. A tool taken out with [Runner.RemoveTools]
// may be added again.
//
// Without the inline-tools beta, the tools join the tool list sent with
// each request; a changed list starts a new message thread and a new
// prompt cache. With the beta in the params' Betas
// (anthropic.AnthropicBetaInlineTools2026_09_15), the list stays as it was
// and each tool goes in a tool_addition block of a role "system" message
// appended to the history before the next request, as the SDK's
// BetaToolRunner.AddTools sends it; that message waits while the history
// ends with the model's paused turn, which the API refuses to see followed.
//
// The tools' definitions are kept in the run's [State]; their functions
// are not, and a run resumed from it needs them again among the tools
// given to [Resume], which refuses the State otherwise (wrapping
// [ErrAddedToolMissing]).
//
// With Options.Store, the State is saved before AddTools returns, so that
// a crash before the next turn does not lose the tools. If that save
// fails, the tools are added all the same, AddTools returns the save's
// error, and the run stops with it at its next step, as it does for any
// failed save.
func (r *Runner) AddTools(tools ...Tool) error {
	taken := r.toolNameSet()
	entries := make([]toolEntry, 0, len(tools))
	defs := make([]anthropic.BetaToolUnionParam, 0, len(tools))
	for _, t := range tools {
		if t == nil {
			return errors.New("toolrun: add tools: a nil tool")
		}
		name := t.Name()
		if taken[name] {
			return fmt.Errorf("toolrun: add tools: %w: %q", ErrToolExists, name)
		}
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
			return fmt.Errorf("toolrun: add tools: %w", err)
		}
		taken[name] = true
		entries = append(entries, newToolEntry(t, schema))
		defs = append(defs, def)
	}
	r.tools = append(slices.Clip(r.tools), entries...)
	r.markAddedOnly(entries)
	r.addDefs(defs)
	return r.saveToolChange()
}

// markAddedOnly records the names of entries that are none of the tools
// the run began with.
func (r *Runner) markAddedOnly(entries []toolEntry) {
	only := r.st.addedOnly()
	grown := false
	for _, e := range entries {
		name := e.tool.Name()
		if _, began := r.set.index[name]; began || slices.Contains(only, name) {
			continue
		}
		if !grown {
			only, grown = slices.Clone(only), true
		}
		only = append(only, name)
	}
	if grown {
		var queued []anthropic.BetaSystemMessageParamContentUnion
		if r.st.tools != nil {
			queued = r.st.tools.Queued
		}
		r.st.setToolState(r.st.addedDefs(), queued, only)
	}
}

// saveToolChange saves the State after a change of the run's tools, with
// Options.Store: the change is the State's, and a crash before the next
// turn's save would lose it. A failure is kept, as every save's is, and
// stops the run at its next step.
func (r *Runner) saveToolChange() error {
	// No caller's context: the change is made, and its save must not be
	// cut short by one.
	return r.save(context.Background())
}

// AddToolParams gives the model definitions that the API runs, such as
// server tools (web search, code execution) or an MCP toolset, from its
// next request on, as the SDK's BetaToolRunner.AddToolParams does; they
// are sent as given and kept in the run's [State], like the tools of the
// params given to [New]. A client tool's definition (OfTool) is refused:
// the runner would have nothing to run its calls with; give it with its
// function through AddTools instead ([NewRawTool] takes its name,
// description and schema). A name the
// run has already is refused as by AddTools (wrapping [ErrToolExists]).
// The inline-tools beta changes how they are sent as it does for AddTools,
// and a Store saves them as it does for AddTools.
func (r *Runner) AddToolParams(defs ...anthropic.BetaToolUnionParam) error {
	taken := r.toolNameSet()
	for _, def := range defs {
		if def.OfTool != nil {
			return fmt.Errorf("toolrun: add tool params: %q is a client tool, which the runner would have no function to run; add it with its function through AddTools (NewRawTool takes its name, description and schema)", def.OfTool.Name)
		}
		b, err := json.Marshal(def)
		if err != nil || string(b) == "{}" || string(b) == "null" {
			return fmt.Errorf("toolrun: add tool params: a definition that does not encode (%v)", err)
		}
		// An MCP toolset has no name and takes no name of the run's.
		if name := definitionName(def); name != "" {
			if taken[name] {
				return fmt.Errorf("toolrun: add tool params: %w: %q", ErrToolExists, name)
			}
			taken[name] = true
		}
	}
	r.addDefs(deepcopy.Copy(defs))
	return r.saveToolChange()
}

// addDefs records defs as added, queues their blocks under the
// inline-tools beta, and rebuilds the tool list.
func (r *Runner) addDefs(defs []anthropic.BetaToolUnionParam) {
	if len(defs) == 0 {
		return
	}
	var queued []anthropic.BetaSystemMessageParamContentUnion
	if r.st.tools != nil {
		queued = r.st.tools.Queued
	}
	if r.inlineTools() {
		queued = slices.Clone(queued)
		for _, def := range defs {
			queued = append(queued, toolAddition(def))
		}
	}
	r.st.setToolChanges(append(slices.Clone(r.st.addedDefs()), defs...), queued)
	r.syncTools()
}

// removeAdded takes the tools named names out of the definitions added to
// the run and, under the inline-tools beta, queues a tool_removal block for
// each name the model has now. It is RemoveTools' share of the work, done
// before the removal is recorded: offered reads the run's tools as they were.
func (r *Runner) removeAdded(names []string) {
	offered := r.toolNameSet()
	added := r.st.addedDefs()
	var queued []anthropic.BetaSystemMessageParamContentUnion
	if r.st.tools != nil {
		queued = r.st.tools.Queued
	}
	changed := false
	if r.inlineTools() {
		for _, name := range names {
			if !offered[name] || r.paramsTool(name) {
				continue
			}
			if !changed {
				queued, changed = slices.Clone(queued), true
			}
			offered[name] = false // a name given twice is removed once
			queued = append(queued, toolRemoval(name))
		}
	}
	kept := added
	if slices.ContainsFunc(added, func(d anthropic.BetaToolUnionParam) bool { return slices.Contains(names, definitionName(d)) }) {
		kept = slices.DeleteFunc(slices.Clone(added), func(d anthropic.BetaToolUnionParam) bool {
			return slices.Contains(names, definitionName(d))
		})
		changed = true
	}
	if changed {
		r.st.setToolChanges(kept, queued)
	}
}

// paramsTool reports whether name is the name of a tool of the run's
// params (given to New), which RemoveTools leaves alone.
func (r *Runner) paramsTool(name string) bool {
	return slices.ContainsFunc(r.st.Params.Tools, func(d anthropic.BetaToolUnionParam) bool { return definitionName(d) == name })
}

// toolNameSet returns the names of every tool the model has now: the
// params' tools, the runner's, and those added.
func (r *Runner) toolNameSet() map[string]bool {
	taken := make(map[string]bool)
	for _, d := range r.st.Params.Tools {
		if name := definitionName(d); name != "" {
			taken[name] = true
		}
	}
	for _, d := range r.st.addedDefs() {
		if name := definitionName(d); name != "" {
			taken[name] = true
		}
	}
	for _, name := range r.toolNames() {
		taken[name] = true
	}
	return taken
}

// isCompaction reports whether m is a compaction block sent back in place
// of the history it summarises, which a system message may follow, as the
// official runner sends one after it.
func isCompaction(m anthropic.BetaMessageParam) bool {
	c := m.OfAssistant.Content
	return len(c) > 0 && c[0].OfCompaction != nil
}

// retellTools queues, under the inline-tools beta, what the history's
// system messages told the model of its tools, once a compaction has
// replaced them: a tool_removal for each tool of the list the model no
// longer has, and a tool_addition for each tool added. Without the beta
// the tool list says it all and nothing is queued.
func (r *Runner) retellTools() {
	if !r.inlineTools() {
		return
	}
	offered := r.toolNameSet()
	var queued []anthropic.BetaSystemMessageParamContentUnion
	for _, d := range r.toolDefs {
		if name := definitionName(d); name != "" && !offered[name] {
			queued = append(queued, toolRemoval(name))
		}
	}
	for _, def := range r.st.addedDefs() {
		queued = append(queued, toolAddition(def))
	}
	r.st.setToolChanges(r.st.addedDefs(), queued)
}

// flushToolChanges appends the queued tool_addition and tool_removal blocks
// to the history as one role "system" message, ahead of the next request,
// as the official runner does. While the history ends with the model's
// turn (a pause_turn sent back to be continued) they wait: the API refuses
// a message after a paused turn.
func (r *Runner) flushToolChanges() {
	t := r.st.tools
	if t == nil || len(t.Queued) == 0 {
		return
	}
	msgs := r.st.Params.Messages
	if n := len(msgs); n > 0 && msgs[n-1].OfAssistant != nil && !isCompaction(msgs[n-1]) {
		return
	}
	m := anthropic.BetaMessageParam{OfSystem: &anthropic.BetaSystemMessageParam{Content: t.Queued}}
	r.mu.Lock()
	r.st.Params.Messages = append(slices.Clip(msgs), m)
	r.st.setToolChanges(t.Added, nil)
	r.mu.Unlock()
}

// checkAddedTools reports a client tool added to the run (kept in its
// State) whose function the runner was not given.
func (r *Runner) checkAddedTools() error {
	var missing []string
	for _, d := range r.st.addedDefs() {
		if d.OfTool == nil {
			continue
		}
		if _, ok := r.set.index[d.OfTool.Name]; !ok {
			missing = append(missing, d.OfTool.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: the run was given %q with Runner.AddTools; give it to Resume with the other tools", ErrAddedToolMissing, missing)
	}
	return nil
}

// addedEntry returns the entry of the client tool named name that was
// added to the run, or nil.
func (r *Runner) addedEntry(name string) *toolEntry {
	for i := len(r.set.entries); i < len(r.tools); i++ {
		if r.tools[i].tool.Name() == name {
			return &r.tools[i]
		}
	}
	return nil
}

// addedNames returns the sorted names of the added client tools.
func (r *Runner) addedNames() []string {
	var names []string
	for i := len(r.set.entries); i < len(r.tools); i++ {
		names = append(names, r.tools[i].tool.Name())
	}
	sort.Strings(names)
	return names
}

// definitionName returns the name a tool definition has on the wire: for a
// server tool whose constant name is left to its encoding, the encoded one.
func definitionName(d anthropic.BetaToolUnionParam) string {
	if name := d.GetName(); name != nil && *name != "" {
		return *name
	}
	b, err := json.Marshal(d)
	if err != nil {
		return ""
	}
	var wire struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(b, &wire)
	return wire.Name
}

// changeTools does to s what [Runner.RemoveTools] of remove and then
// [Runner.AddTools] and [Runner.AddToolParams] of add do to a runner's
// State, for a driver that holds the State and no runner (a workflow):
// it takes out the added definitions named in remove (a name no
// definition added to s has is ignored: s does not say whether the run
// has such a tool) and adds the definitions of add, each checked as
// AddTools checks a tool (a client tool's name and schema, a name no
// other tool of s has), all or none of them. Under the inline-tools beta
// it queues the tool_removal and tool_addition blocks a runner would. With
// apply false it only checks, and changes nothing.
func (s *State) changeTools(remove []string, add []anthropic.BetaToolUnionParam, apply bool) error {
	added := s.addedDefs()
	var queued []anthropic.BetaSystemMessageParamContentUnion
	if s.tools != nil {
		queued = s.tools.Queued
	}
	only := s.addedOnly()
	inline := slices.Contains(s.Betas, anthropic.AnthropicBetaInlineTools2026_09_15)
	var removed []string
	for _, name := range remove {
		if slices.Contains(removed, name) || !slices.ContainsFunc(added, func(d anthropic.BetaToolUnionParam) bool { return definitionName(d) == name }) {
			continue
		}
		removed = append(removed, name)
		added = slices.DeleteFunc(slices.Clone(added), func(d anthropic.BetaToolUnionParam) bool { return definitionName(d) == name })
		if inline {
			queued = append(slices.Clip(queued), toolRemoval(name))
		}
	}
	taken := map[string]bool{}
	for _, d := range s.Params.Tools {
		taken[definitionName(d)] = true
	}
	for _, d := range added {
		taken[definitionName(d)] = true
	}
	for _, def := range add {
		name := definitionName(def)
		if def.OfTool != nil {
			if err := checkName(name); err != nil {
				return fmt.Errorf("toolrun: add tools: %w", err)
			}
			schema, err := json.Marshal(def.OfTool.InputSchema)
			if err != nil {
				return fmt.Errorf("toolrun: add tools: tool %q: %w: %w", name, ErrInvalidSchema, err)
			}
			if _, err := compileSchema(schema); err != nil {
				return fmt.Errorf("toolrun: add tools: tool %q: %w", name, err)
			}
		} else if b, err := json.Marshal(def); err != nil || string(b) == "{}" || string(b) == "null" {
			return fmt.Errorf("toolrun: add tools: a definition that does not encode (%v)", err)
		}
		if name == "" {
			continue // an MCP toolset has no name and takes no name of the run's
		}
		if taken[name] {
			return fmt.Errorf("toolrun: add tools: %w: %q", ErrToolExists, name)
		}
		taken[name] = true
	}
	if !apply {
		return nil
	}
	if len(add) > 0 {
		added = append(slices.Clone(added), deepcopy.Copy(add)...)
	}
	for _, def := range add {
		if def.OfTool != nil && !slices.Contains(only, def.OfTool.Name) {
			// The State does not say which tools the run began with: a
			// client tool given here is the run's only as added, as one
			// given to a runner begun without it.
			only = append(slices.Clip(only), def.OfTool.Name)
		}
		if inline {
			queued = append(slices.Clip(queued), toolAddition(deepcopy.Copy(def)))
		}
	}
	s.setToolState(added, queued, only)
	for _, name := range removed {
		if !slices.Contains(s.Removed, name) {
			s.Removed = append(slices.Clip(s.Removed), name)
		}
	}
	return nil
}

// toolAddition is the tool_addition block, under the inline-tools beta,
// that offers the model def from the next request on.
func toolAddition(def anthropic.BetaToolUnionParam) anthropic.BetaSystemMessageParamContentUnion {
	return anthropic.BetaSystemMessageParamContentUnion{OfToolAddition: &anthropic.BetaRequestToolAdditionBlockParam{
		Tool: anthropic.BetaRequestToolAdditionBlockToolUnionParam{OfToolDefinition: &anthropic.BetaToolChangeToolDefinitionParam{Definition: def}},
	}}
}

// toolRemoval is the tool_removal block, under the inline-tools beta,
// that takes the tool named name from the model from the next request on.
func toolRemoval(name string) anthropic.BetaSystemMessageParamContentUnion {
	return anthropic.BetaSystemMessageParamContentUnion{OfToolRemoval: &anthropic.BetaRequestToolRemovalBlockParam{
		Tool: anthropic.BetaRequestToolRemovalBlockToolUnionParam{OfToolReference: &anthropic.BetaToolChangeToolReferenceParam{Name: name}},
	}}
}
