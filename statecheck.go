package toolrun

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
)

// This file is the one check of a State as data: what a State read from a
// store or a file may hold ([State.Check]) and what it would have the API
// reach on the run's behalf ([State.Reaches]). Resume and Open check every
// State they are given; the CLI's resume also refuses, without the user's
// word, a State that reaches anything.

// Check reports, with an error wrapping [ErrInvalidState], a State that no
// run of this package could have saved (see ErrInvalidState). It reads s
// only. Resume and Open call it; a program that takes States from
// elsewhere may call it first to say why one is refused.
func (s *State) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidState, fmt.Sprintf(format, args...))
	}
	if s == nil {
		return bad("nil state")
	}
	if s.Format != stateFormat {
		return bad("state format %d, want %d", s.Format, stateFormat)
	}
	for _, c := range []struct {
		name string
		n    int64
	}{
		{"turns", int64(s.Turns)},
		{"tool_calls", int64(s.ToolCalls)},
		{"tool_failures", int64(s.ToolFailures)},
		{"tool_denials", int64(s.ToolDenials)},
		{"usage.input_tokens", s.Usage.InputTokens},
		{"usage.output_tokens", s.Usage.OutputTokens},
		{"usage.cache_creation_input_tokens", s.Usage.CacheCreationInputTokens},
		{"usage.cache_read_input_tokens", s.Usage.CacheReadInputTokens},
		{"usage.unreported_output_tokens", s.Usage.UnreportedOutputTokens},
	} {
		// A negative count would lift the bound it is checked against:
		// turns -1000000 under a limit of 10 is a million requests.
		if c.n < 0 {
			return bad("%s is %d, below 0", c.name, c.n)
		}
	}
	if s.MaxTurns < -1 {
		// -1 is "no limit" (SetMaxTurns); nothing writes a lower one.
		return bad("max_turns is %d, below -1", s.MaxTurns)
	}
	if s.CostUSD < 0 || math.IsNaN(s.CostUSD) || math.IsInf(s.CostUSD, 0) {
		return bad("cost_usd is %v", s.CostUSD)
	}
	if p := s.pending; p != nil {
		if p.Turn < 0 {
			return bad("the pending turn is numbered %d", p.Turn)
		}
		for i := range p.Calls {
			if err := p.Calls[i].check(); err != nil {
				return bad("%v", err)
			}
		}
		if err := p.check(); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// Reaches lists what s would have the API reach or run on the run's
// behalf, beyond the runner's own client tools, wherever the State holds
// it: "mcp_servers" for remote MCP servers; "container" for a container
// with skills (a container named by its id alone, as a run keeps the one a
// response gave, runs nothing by itself); and each tool the API runs or
// that is not a plain client tool, as "tools: TYPE NAME", found in the
// params' tools, the tools added with [Runner.AddToolParams], the queued
// tool_addition blocks of the inline-tools beta, and tool_addition blocks
// anywhere in the history or in messages waiting to be appended. The list
// is sorted, each entry once; it is empty for a State that reaches nothing.
//
// A State is data: a program that resumes one it did not write (a file a
// user gives, a store others write) refuses, or asks about, a State that
// reaches anything, as the toolrun CLI's resume does.
func (s *State) Reaches() []string {
	if s == nil {
		return nil
	}
	found := map[string]bool{}
	b, err := json.Marshal(s.Params)
	if err != nil {
		return []string{"params that do not encode"}
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(b, &params) != nil {
		return []string{"params that do not encode"}
	}
	if v, ok := params["mcp_servers"]; ok && !emptyJSON(v) {
		found["mcp_servers"] = true
	}
	if v, ok := params["container"]; ok && !emptyJSON(v) {
		var c struct {
			Skills json.RawMessage `json:"skills"`
		}
		// A string is an id; an object with skills has the API load them.
		if json.Unmarshal(v, &c) == nil && !emptyJSON(c.Skills) {
			found["container"] = true
		}
	}
	var tools []json.RawMessage
	json.Unmarshal(params["tools"], &tools)
	for _, t := range tools {
		// The params never hold the runner's own tools (they come from
		// the tools given to Resume): every one here is named.
		found["tools: "+toolLabel(t)] = true
	}
	if s.tools != nil {
		for _, d := range s.tools.Added {
			if b, err := json.Marshal(d); err == nil && !clientToolJSON(b) {
				found["tools: "+toolLabel(b)] = true
			}
		}
	}
	// Every tool_addition block: queued ones, and those anywhere in the
	// history, the turn in progress and the messages it will append.
	var rest []any
	rest = append(rest, params["messages"], params["system"])
	if s.tools != nil {
		rest = append(rest, s.tools.Queued)
	}
	if s.pending != nil {
		rest = append(rest, s.pending.Message, s.pending.After)
	}
	for _, v := range rest {
		b, err := json.Marshal(v)
		if err != nil {
			found["messages that do not encode"] = true
			continue
		}
		var tree any
		if json.Unmarshal(b, &tree) != nil {
			continue
		}
		walkToolAdditions(tree, found)
	}
	out := make([]string, 0, len(found))
	for k := range found {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// walkToolAdditions adds to found each tool a tool_addition block in v
// gives that is not a plain client tool's definition.
func walkToolAdditions(v any, found map[string]bool) {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			walkToolAdditions(e, found)
		}
	case map[string]any:
		if v["type"] == "tool_addition" {
			tool, _ := v["tool"].(map[string]any)
			def, isDef := tool["definition"]
			if tool["type"] == "tool_definition" && isDef {
				if b, err := json.Marshal(def); err == nil && !clientToolJSON(b) {
					found["tools: "+toolLabel(b)] = true
				}
			} else if b, err := json.Marshal(tool); err == nil {
				// A reference: to an MCP server's tools, or to a tool
				// the API holds back; either is the API's to reach.
				found["tools: "+toolLabel(b)] = true
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			walkToolAdditions(v[k], found)
		}
	}
}

// clientToolJSON reports whether b is the definition of a plain client
// tool: one the runner runs by its name, of type "custom" or none.
func clientToolJSON(b []byte) bool {
	var t struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(b, &t) == nil && (t.Type == "" || t.Type == "custom")
}

// toolLabel names the tool definition or reference b as "TYPE NAME".
func toolLabel(b []byte) string {
	var t struct {
		Type       string `json:"type"`
		Name       string `json:"name"`
		ServerName string `json:"server_name"`
		ToolName   string `json:"tool_name"`
	}
	json.Unmarshal(b, &t)
	if t.Type == "" {
		t.Type = "custom"
	}
	name := t.Name
	if name == "" {
		name = t.ToolName
	}
	if t.ServerName != "" {
		name = t.ServerName + "/" + name
	}
	if name == "" {
		return t.Type
	}
	return t.Type + " " + name
}

// emptyJSON reports whether v is JSON with nothing in it.
func emptyJSON(v json.RawMessage) bool {
	return len(v) == 0 || slices.Contains([]string{"null", "[]", `""`, "{}"}, string(v))
}
