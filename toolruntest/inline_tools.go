package toolruntest

import (
	"encoding/json"
	"fmt"
	"slices"
)

// This file is the inline-tools beta (inline-tools-2026-09-15): role
// "system" messages whose tool_addition and tool_removal blocks give the
// model a tool, or take one away, from that point of the conversation on,
// without a change of the request's tools. The shapes are those of the
// SDK's BetaRequestToolAdditionBlockParam and BetaRequestToolRemovalBlockParam.

// betaInlineTools is the beta header the tool_addition and tool_removal
// blocks need.
const betaInlineTools = "inline-tools-2026-09-15"

// decodeSystemMessage decodes the content of the role "system" message at
// path, whose members are fields, into msg: a non-empty list of text,
// tool_addition and tool_removal blocks.
func decodeSystemMessage(path string, fields map[string]json.RawMessage, msg *MessageParam) error {
	for k := range fields {
		switch k {
		case "role", "content", "clear_at", "output_config":
		default:
			return invalid(path+"."+k, "Extra inputs are not permitted")
		}
	}
	raw, ok := fields["content"]
	if !ok {
		return invalid(path+".content", "Field required")
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil || isNull(raw) {
		return invalid(path+".content", "Input should be a valid list")
	}
	msg.Content = make([]Block, 0, len(blocks))
	for j, b := range blocks {
		block, err := decodeSystemBlock(fmt.Sprintf("%s.content.%d", path, j), b)
		if err != nil {
			return err
		}
		msg.Content = append(msg.Content, block)
	}
	return nil
}

// decodeSystemBlock decodes one block of a role "system" message.
func decodeSystemBlock(path string, raw json.RawMessage) (Block, error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return Block{}, invalid(path, "Input should be a valid dictionary")
	}
	b := Block{Raw: raw}
	t, ok := fields["type"]
	if !ok {
		return b, invalid(path+".type", "Field required")
	}
	json.Unmarshal(t, &b.Type)
	switch b.Type {
	case "text":
		return decodeBlock(path, raw)
	case "tool_addition", "tool_removal":
	default:
		return b, invalid(path+".type", "Input should be 'text', 'tool_addition' or 'tool_removal'")
	}
	for k := range fields {
		switch k {
		case "type", "tool", "cache_control":
		default:
			return b, invalid(path+"."+k, "Extra inputs are not permitted")
		}
	}
	tool, ok := fields["tool"]
	if !ok {
		return b, invalid(path+".tool", "Field required")
	}
	_, err := decodeToolChange(path+".tool", tool, b.Type == "tool_addition")
	return b, err
}

// toolChange is the tool of a tool_addition or tool_removal block.
type toolChange struct {
	kind string // tool_reference, mcp_tool_reference, mcp_toolset_reference, tool_definition
	name string // the tool's name; "" for an MCP toolset
	def  *ToolDef
}

// decodeToolChange decodes and checks the tool of a tool_addition
// (addition) or tool_removal block, at path.
func decodeToolChange(path string, raw json.RawMessage, addition bool) (toolChange, error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return toolChange{}, invalid(path, "Input should be a valid dictionary")
	}
	var c toolChange
	if t, ok := fields["type"]; !ok {
		return c, invalid(path+".type", "Field required")
	} else if json.Unmarshal(t, &c.kind) != nil {
		return c, invalid(path+".type", "Input should be a valid string")
	}
	var allowed []string
	switch c.kind {
	case "tool_reference":
		allowed = []string{"type", "name"}
	case "mcp_tool_reference":
		allowed = []string{"type", "server_name", "name"}
	case "mcp_toolset_reference":
		allowed = []string{"type", "server_name"}
	case "tool_definition":
		if addition {
			allowed = []string{"type", "definition"}
			break
		}
		fallthrough
	default:
		want := "'tool_reference', 'mcp_tool_reference' or 'mcp_toolset_reference'"
		if addition {
			want = "'tool_reference', 'mcp_tool_reference', 'mcp_toolset_reference' or 'tool_definition'"
		}
		return c, invalid(path+".type", "Input should be %s", want)
	}
	for k := range fields {
		if !slices.Contains(allowed, k) {
			return c, invalid(path+"."+k, "Extra inputs are not permitted")
		}
	}
	for _, k := range allowed[1:] {
		v, ok := fields[k]
		if !ok {
			return c, invalid(path+"."+k, "Field required")
		}
		if k == "definition" {
			if isMCPToolset(v) {
				continue // named by its server, not by a name of its own
			}
			def, err := decodeToolDef(path+".definition", v)
			if err != nil {
				return c, err
			}
			c.def, c.name = &def, def.Name
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil || isNull(v) {
			return c, invalid(path+"."+k, "Input should be a valid string")
		}
		if s == "" {
			return c, invalid(path+"."+k, "String should have at least 1 character")
		}
		if k == "name" {
			c.name = s
		}
	}
	return c, nil
}

// isMCPToolset reports whether the tool definition raw is an MCP toolset.
func isMCPToolset(raw json.RawMessage) bool {
	var t struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &t) == nil && t.Type == "mcp_toolset"
}

// checkToolChanges applies the rules of the inline-tools beta to the whole
// conversation of p, the request as the API sees it, with the beta headers
// of f: its tool changes need the beta, an addition names a tool the model
// does not have (or, by reference, one defined earlier), a removal one it
// has, and a role "system" message never comes directly after the model's
// turn (after a pause_turn, say, which the next request continues), but
// for a compaction block sent back in place of the history.
func checkToolChanges(f features, p Params) error {
	offered := make(map[string]bool, len(p.Tools))
	known := make(map[string]bool, len(p.Tools))
	for _, t := range p.Tools {
		offered[t.Name], known[t.Name] = true, true
	}
	for i, m := range p.Messages {
		if m.Role != "system" {
			continue
		}
		path := fmt.Sprintf("messages.%d", i)
		if i > 0 && p.Messages[i-1].Role == "assistant" && !startsWithCompaction(p.Messages[i-1]) {
			return invalid(path, "a `system` message cannot directly follow an `assistant` message; send it after the next `user` message")
		}
		for j, b := range m.Content {
			if b.Type != "tool_addition" && b.Type != "tool_removal" {
				continue
			}
			bpath := fmt.Sprintf("%s.content.%d", path, j)
			if err := f.needBeta(bpath, betaInlineTools); err != nil {
				return err
			}
			var block struct {
				Tool json.RawMessage `json:"tool"`
			}
			json.Unmarshal(b.Raw, &block)
			c, err := decodeToolChange(bpath+".tool", block.Tool, b.Type == "tool_addition")
			if err != nil {
				return err
			}
			if c.name == "" || c.kind == "mcp_tool_reference" {
				continue // the MCP server's tools: the server knows them
			}
			switch {
			case b.Type == "tool_removal" && !offered[c.name]:
				return invalid(bpath+".tool.name", "tool %q is not available at this point of the conversation, so it cannot be removed", c.name)
			case b.Type == "tool_removal":
				delete(offered, c.name)
			case offered[c.name]:
				return invalid(bpath+".tool", "Tool names must be unique: %q is available already; remove it before it is added again", c.name)
			case c.kind == "tool_reference" && !known[c.name]:
				return invalid(bpath+".tool.name", "tool %q is not defined in `tools` or by an earlier `tool_addition`", c.name)
			default:
				offered[c.name], known[c.name] = true, true
			}
		}
	}
	return nil
}

// ToolNames returns the names of the tools the model had for this request,
// in the order it was given them: those of the request's tools, then, under
// the inline-tools beta, each one the conversation's role "system" messages
// added, less those they removed. A script asserts with it which tools the
// model had at each turn; a [Options].Func responder may answer by it.
func (r *Request) ToolNames() []string {
	var names []string
	var tools []json.RawMessage
	json.Unmarshal(r.Tools, &tools)
	for _, t := range tools {
		var def struct {
			Name string `json:"name"`
		}
		json.Unmarshal(t, &def)
		names = append(names, def.Name)
	}
	for _, m := range r.Conversation {
		if m.Role != "system" {
			continue
		}
		for _, b := range m.Content {
			if b.Type != "tool_addition" && b.Type != "tool_removal" {
				continue
			}
			var block struct {
				Tool json.RawMessage `json:"tool"`
			}
			json.Unmarshal(b.Raw, &block)
			c, err := decodeToolChange("", block.Tool, b.Type == "tool_addition")
			if err != nil || c.name == "" || c.kind == "mcp_tool_reference" {
				continue
			}
			names = slices.DeleteFunc(names, func(n string) bool { return n == c.name })
			if b.Type == "tool_addition" {
				names = append(names, c.name)
			}
		}
	}
	return names
}
