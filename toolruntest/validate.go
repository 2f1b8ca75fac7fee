package toolruntest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Params is the decoded body of a Messages API request: a small, plain-data
// view of the fields tests assert on. Raw holds every top-level field as
// sent, for anything else.
type Params struct {
	Model     string
	MaxTokens int64
	// System is the system prompt as sent: a JSON string, an array of text
	// blocks, or nil when the request has none.
	System   json.RawMessage
	Messages []MessageParam
	Tools    []ToolDef
	Stream   bool
	// Thread is the thread field, or nil when the request has none.
	Thread *ThreadParam
	// Raw maps every top-level field of the body to its value as sent.
	Raw map[string]json.RawMessage
}

// MessageParam is one message of a request's conversation. A message whose
// content is a string is decoded as one text block, with a nil Raw; an empty
// string is decoded as no blocks.
type MessageParam struct {
	Role    string // "user", "assistant", or "system" (the inline-tools beta's tool changes)
	Content []Block
}

// Block is a content block: one block of a request message as the server
// received it, or one block of a [Reply] for the server to send. Build the
// blocks of a Reply with [Text], [ToolUse] and [Thinking].
//
// Fields that don't apply to a block's Type are zero.
type Block struct {
	Type      string          // "text", "tool_use", "tool_result", "thinking", "compaction", "image", "document", ...
	Text      string          // text; thinking: the thinking text; compaction: the summary
	Signature string          // thinking, compaction
	ID        string          // tool_use
	Name      string          // tool_use
	Input     json.RawMessage // tool_use
	// Toolset is a toolset member's family: a tool_use's toolset_name,
	// such as "browser", or the toolset_name a tool_result echoes.
	Toolset string // tool_use, tool_result
	// Caller is the type of what made a tool_use: "" or "direct" for the
	// model itself, or a code execution tool's type (such as
	// "code_execution_20260120") for a programmatic call, made from code
	// in the server_tool_use CallerToolID.
	Caller       string          // tool_use
	CallerToolID string          // tool_use
	ToolUseID    string          // tool_result
	IsError      bool            // tool_result
	Content      json.RawMessage // tool_result: the content as sent, a string or an array
	// Raw is the whole block as sent. In a Reply, a block with a non-nil Raw
	// is sent verbatim, which is how to send a type the constructors don't
	// cover, such as redacted_thinking or server_tool_use.
	Raw json.RawMessage
}

// ResultText returns the text of a tool_result block's content: the content
// itself when it is a string, else the concatenated text of its text blocks.
// For any other block it returns b.Text.
func (b Block) ResultText() string {
	if b.Type != "tool_result" {
		return b.Text
	}
	var s string
	if json.Unmarshal(b.Content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(b.Content, &blocks) != nil {
		return ""
	}
	var sb strings.Builder
	for _, c := range blocks {
		if c.Type == "text" {
			sb.WriteString(c.Text)
		}
	}
	return sb.String()
}

// ToolDef is one entry of a request's tools.
type ToolDef struct {
	// Type is empty or "custom" for a tool the client runs, or a versioned
	// type such as "web_search_20250305" for a tool the API defines.
	Type        string
	Name        string
	Description string
	InputSchema json.RawMessage
}

// toolNamePattern is the pattern the API requires of tool names.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// toolsetType matches the type of a toolset entry the API runs the members
// of, such as browser_toolset_20260801, and captures its family.
var toolsetType = regexp.MustCompile(`^([a-z]+)_toolset_[0-9]{8}$`)

// toolUseIDPattern is the pattern the API requires of tool_use ids.
var toolUseIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Validate reports whether body is a Messages API request body that the real
// API would accept, as far as the rules listed in the package documentation
// go. The error, if any, is the message an HTTP 400 invalid_request_error from
// the server carries, such as
//
//	messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01. Each `tool_use` block must have a corresponding `tool_result` block in the next message.
//
// Validate reports the first problem it finds, as the API does.
func Validate(body []byte) error {
	p, err := decodeParams(body, false)
	if err != nil {
		return err
	}
	return checkConversation(p)
}

// invalid returns the error for a problem at the dotted path, in the API's
// style: "messages.1.content.0: text content blocks must be non-empty".
func invalid(path, format string, args ...any) error {
	return errors.New(path + ": " + fmt.Sprintf(format, args...))
}

// decodeParams decodes body as far as it can, checking the shape and types of
// the fields that Params holds. A count_tokens body needs no max_tokens.
// The Params returned hold whatever was decoded before an error.
func decodeParams(body []byte, countTokens bool) (Params, error) {
	var p Params
	if err := json.Unmarshal(body, &p.Raw); err != nil {
		return p, fmt.Errorf("request body is not a valid JSON object: %v", err)
	}

	raw, ok := p.Raw["model"]
	switch {
	case !ok:
		return p, invalid("model", "Field required")
	case json.Unmarshal(raw, &p.Model) != nil || isNull(raw):
		return p, invalid("model", "Input should be a valid string")
	case p.Model == "":
		return p, invalid("model", "String should have at least 1 character")
	}

	if raw, ok := p.Raw["max_tokens"]; ok || !countTokens {
		switch {
		case !ok:
			return p, invalid("max_tokens", "Field required")
		case json.Unmarshal(raw, &p.MaxTokens) != nil || isNull(raw):
			return p, invalid("max_tokens", "Input should be a valid integer")
		case p.MaxTokens < 1:
			return p, invalid("max_tokens", "Input should be greater than or equal to 1")
		}
	}

	if raw, ok := p.Raw["stream"]; ok && !countTokens {
		if json.Unmarshal(raw, &p.Stream) != nil || isNull(raw) {
			return p, invalid("stream", "Input should be a valid boolean")
		}
	}

	if raw, ok := p.Raw["system"]; ok {
		if err := checkSystem(raw); err != nil {
			return p, err
		}
		p.System = raw
	}

	if raw, ok := p.Raw["thread"]; ok && !isNull(raw) {
		p.Thread = new(ThreadParam)
		if json.Unmarshal(raw, p.Thread) != nil {
			return p, invalid("thread", "Input should be a valid dictionary")
		}
	}

	if err := decodeMessages(&p); err != nil {
		return p, err
	}
	return p, decodeTools(&p)
}

// isNull reports whether raw is the JSON null, which json.Unmarshal accepts
// silently for any type.
func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// checkSystem checks that a system prompt is a string or an array of
// non-empty text blocks.
func checkSystem(raw json.RawMessage) error {
	var s string
	if json.Unmarshal(raw, &s) == nil && !isNull(raw) {
		return nil
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil || isNull(raw) {
		return invalid("system", "Input should be a valid string or a list of text blocks")
	}
	for i, b := range blocks {
		var text struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		path := fmt.Sprintf("system.%d", i)
		if json.Unmarshal(b, &text) != nil || text.Type != "text" {
			return invalid(path+".type", "Input should be 'text'")
		}
		if text.Text == nil {
			return invalid(path+".text", "Field required")
		}
		if *text.Text == "" {
			return invalid(path, "text content blocks must be non-empty")
		}
	}
	return nil
}

// decodeMessages fills p.Messages from p.Raw["messages"].
func decodeMessages(p *Params) error {
	raw, ok := p.Raw["messages"]
	if !ok {
		return invalid("messages", "Field required")
	}
	var msgs []json.RawMessage
	if json.Unmarshal(raw, &msgs) != nil || isNull(raw) {
		return invalid("messages", "Input should be a valid list")
	}
	// A request continuing a thread may add no message: it goes on with
	// the turn the thread holds (after a pause_turn, say).
	var thread struct {
		Type string `json:"type"`
	}
	json.Unmarshal(p.Raw["thread"], &thread)
	if len(msgs) == 0 && thread.Type != "continue" {
		return invalid("messages", "at least one message is required")
	}
	p.Messages = make([]MessageParam, 0, len(msgs))
	for i, m := range msgs {
		path := fmt.Sprintf("messages.%d", i)
		var fields map[string]json.RawMessage
		if json.Unmarshal(m, &fields) != nil || fields == nil {
			return invalid(path, "Input should be a valid dictionary")
		}
		var msg MessageParam
		raw, ok := fields["role"]
		if !ok {
			return invalid(path+".role", "Field required")
		}
		if json.Unmarshal(raw, &msg.Role) != nil || (msg.Role != "user" && msg.Role != "assistant" && msg.Role != "system") {
			return invalid(path+".role", "Input should be 'user', 'assistant' or 'system'")
		}
		if msg.Role == "system" {
			// The inline-tools beta's messages (inline_tools.go).
			if err := decodeSystemMessage(path, fields, &msg); err != nil {
				return err
			}
			p.Messages = append(p.Messages, msg)
			continue
		}
		raw, ok = fields["content"]
		if !ok {
			return invalid(path+".content", "Field required")
		}
		var s string
		var blocks []json.RawMessage
		switch {
		case isNull(raw):
			return invalid(path+".content", "Input should be a valid string or a list of content blocks")
		case json.Unmarshal(raw, &s) == nil:
			if s != "" {
				msg.Content = []Block{{Type: "text", Text: s}}
			}
		case json.Unmarshal(raw, &blocks) == nil:
			msg.Content = make([]Block, 0, len(blocks))
			for j, b := range blocks {
				block, err := decodeBlock(fmt.Sprintf("%s.content.%d", path, j), b)
				if err != nil {
					return err
				}
				msg.Content = append(msg.Content, block)
			}
		default:
			return invalid(path+".content", "Input should be a valid string or a list of content blocks")
		}
		p.Messages = append(p.Messages, msg)
	}
	return nil
}

// decodeBlock decodes one content block of a request message, checking the
// fields of the types the package knows. Other types pass unchecked.
func decodeBlock(path string, raw json.RawMessage) (Block, error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return Block{}, invalid(path, "Input should be a valid dictionary")
	}
	b := Block{Raw: raw}
	if t, ok := fields["type"]; !ok {
		return b, invalid(path+".type", "Field required")
	} else if json.Unmarshal(t, &b.Type) != nil || isNull(t) {
		return b, invalid(path+".type", "Input should be a valid string")
	}

	// str decodes the string field name into dst.
	str := func(name string, dst *string) error {
		v, ok := fields[name]
		if !ok {
			return invalid(path+"."+name, "Field required")
		}
		if json.Unmarshal(v, dst) != nil || isNull(v) {
			return invalid(path+"."+name, "Input should be a valid string")
		}
		return nil
	}

	switch b.Type {
	case "text":
		return b, str("text", &b.Text)
	case "thinking":
		if err := str("thinking", &b.Text); err != nil {
			return b, err
		}
		return b, str("signature", &b.Signature)
	case "compaction":
		// A compaction block whose content is null stands for one that
		// produced no summary; parseFeatures checks the rest.
		json.Unmarshal(fields["content"], &b.Text)
		json.Unmarshal(fields["signature"], &b.Signature)
	case "tool_use":
		if err := str("id", &b.ID); err != nil {
			return b, err
		}
		if !toolUseIDPattern.MatchString(b.ID) {
			return b, invalid(path+".id", "String should match pattern '%s'", toolUseIDPattern)
		}
		if err := str("name", &b.Name); err != nil {
			return b, err
		}
		in, ok := fields["input"]
		if !ok {
			return b, invalid(path+".input", "Field required")
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(in, &obj) != nil || obj == nil {
			return b, invalid(path+".input", "Input should be a valid dictionary")
		}
		b.Input = in
		if v, ok := fields["toolset_name"]; ok && !isNull(v) {
			if json.Unmarshal(v, &b.Toolset) != nil {
				return b, invalid(path+".toolset_name", "Input should be a valid string")
			}
		}
		if v, ok := fields["caller"]; ok && !isNull(v) {
			var c struct {
				Type   string `json:"type"`
				ToolID string `json:"tool_id"`
			}
			if json.Unmarshal(v, &c) != nil {
				return b, invalid(path+".caller", "Input should be a valid dictionary")
			}
			b.Caller, b.CallerToolID = c.Type, c.ToolID
		}
	case "tool_result":
		if err := str("tool_use_id", &b.ToolUseID); err != nil {
			return b, err
		}
		if v, ok := fields["toolset_name"]; ok && !isNull(v) {
			if json.Unmarshal(v, &b.Toolset) != nil {
				return b, invalid(path+".toolset_name", "Input should be a valid string")
			}
		}
		if v, ok := fields["is_error"]; ok && !isNull(v) {
			if json.Unmarshal(v, &b.IsError) != nil {
				return b, invalid(path+".is_error", "Input should be a valid boolean")
			}
		}
		if v, ok := fields["content"]; ok && !isNull(v) {
			var s string
			var list []json.RawMessage
			if json.Unmarshal(v, &s) != nil && json.Unmarshal(v, &list) != nil {
				return b, invalid(path+".content", "Input should be a valid string or a list of content blocks")
			}
			for k, c := range list {
				if _, err := decodeBlock(fmt.Sprintf("%s.content.%d", path, k), c); err != nil {
					return b, err
				}
			}
			b.Content = v
		}
	}
	return b, nil
}

// decodeTools fills p.Tools from p.Raw["tools"], checking names and schemas.
func decodeTools(p *Params) error {
	raw, ok := p.Raw["tools"]
	if !ok || isNull(raw) {
		return nil
	}
	var tools []json.RawMessage
	if json.Unmarshal(raw, &tools) != nil {
		return invalid("tools", "Input should be a valid list")
	}
	seen := make(map[string]bool, len(tools))
	p.Tools = make([]ToolDef, 0, len(tools))
	for i, t := range tools {
		def, err := decodeToolDef(fmt.Sprintf("tools.%d", i), t)
		if err != nil {
			return err
		}
		if seen[def.Name] {
			return invalid("tools", "Tool names must be unique: %q appears more than once", def.Name)
		}
		seen[def.Name] = true
		p.Tools = append(p.Tools, def)
	}
	return nil
}

// decodeToolDef decodes one tool definition, at path: an entry of tools,
// or the definition of a tool_addition block (inline_tools.go).
func decodeToolDef(path string, t json.RawMessage) (ToolDef, error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(t, &fields) != nil || fields == nil {
		return ToolDef{}, invalid(path, "Input should be a valid dictionary")
	}
	var def ToolDef
	if v, ok := fields["type"]; ok && !isNull(v) {
		if json.Unmarshal(v, &def.Type) != nil {
			return def, invalid(path+".type", "Input should be a valid string")
		}
	}
	// A toolset entry (browser_toolset_20260801) has no name: it declares
	// a family of member tools, and the family's name is its own, so no
	// other tool may have it.
	if m := toolsetType.FindStringSubmatch(def.Type); m != nil {
		def.Name = m[1]
		return def, nil
	}
	v, ok := fields["name"]
	if !ok {
		return def, invalid(path+".name", "Field required")
	}
	if json.Unmarshal(v, &def.Name) != nil || isNull(v) {
		return def, invalid(path+".name", "Input should be a valid string")
	}
	if !toolNamePattern.MatchString(def.Name) {
		return def, invalid(path+".name", "String should match pattern '%s'", toolNamePattern)
	}
	if v, ok := fields["description"]; ok && !isNull(v) {
		if json.Unmarshal(v, &def.Description) != nil {
			return def, invalid(path+".description", "Input should be a valid string")
		}
	}
	if v, ok := fields["input_schema"]; ok {
		def.InputSchema = v
	}
	// Tools the API defines, such as web search, carry their own schema.
	if def.Type == "" || def.Type == "custom" {
		if def.InputSchema == nil {
			return def, invalid(path+".input_schema", "Field required")
		}
		var schema struct {
			Type *string `json:"type"`
		}
		if json.Unmarshal(def.InputSchema, &schema) != nil || isNull(def.InputSchema) {
			return def, invalid(path+".input_schema", "Input should be a valid dictionary")
		}
		if schema.Type == nil || *schema.Type != "object" {
			return def, invalid(path+".input_schema.type", "Input should be 'object'")
		}
	}
	return def, nil
}

// checkConversation applies the rules that relate the messages of a decoded
// request to each other.
func checkConversation(p Params) error {
	msgs := withoutDeclinedCalls(p.Messages)
	if msgs[0].Role != "user" && !startsWithCompaction(msgs[0]) {
		return invalid("messages", "first message must use the \"user\" role")
	}
	last := len(msgs) - 1
	toolUseSeen := make(map[string]bool)
	fromCode := false // the user turn answers calls made from code
	for i, m := range msgs {
		path := fmt.Sprintf("messages.%d", i)
		if m.Role == "assistant" {
			fromCode = callsFromCode(m)
		} else if m.Role == "user" && fromCode {
			// The API merges the user messages of a turn, so each of
			// them counts.
			for j, b := range m.Content {
				if b.Type != "tool_result" {
					return invalid(fmt.Sprintf("%s.content.%d", path, j), "when answering programmatic tool calls (`tool_use` blocks whose `caller` is a code execution tool), the user turn must contain only `tool_result` blocks, but this is a %s block", b.Type)
				}
			}
		}
		if len(m.Content) == 0 && (i != last || m.Role != "assistant") {
			return invalid(path, "all messages must have non-empty content except for the optional final assistant message")
		}
		for j, b := range m.Content {
			bpath := fmt.Sprintf("%s.content.%d", path, j)
			switch b.Type {
			case "text":
				if b.Text == "" {
					return invalid(bpath, "text content blocks must be non-empty")
				}
				if strings.TrimSpace(b.Text) == "" {
					return invalid(bpath, "text content blocks must contain non-whitespace text")
				}
			case "tool_use":
				if m.Role != "assistant" {
					return invalid(bpath, "`tool_use` blocks can only be in `assistant` messages")
				}
				if toolUseSeen[b.ID] {
					return invalid(bpath, "`tool_use` ids must be unique: %s appears more than once", b.ID)
				}
				toolUseSeen[b.ID] = true
			case "tool_result":
				if m.Role != "user" {
					return invalid(bpath, "`tool_result` blocks can only be in `user` messages")
				}
			}
		}
		var prev MessageParam
		if i > 0 {
			prev = msgs[i-1]
		}
		if err := checkToolResults(path, prev, m); err != nil {
			return err
		}
		if i < last {
			if err := checkToolUses(path, m, msgs[i+1]); err != nil {
				return err
			}
		}
	}
	if m := msgs[last]; m.Role == "assistant" && len(m.Content) > 0 {
		if b := m.Content[len(m.Content)-1]; b.Type == "text" && strings.TrimRightFunc(b.Text, unicode.IsSpace) != b.Text {
			return invalid("messages", "final assistant content cannot end with trailing whitespace")
		}
	}
	return nil
}

// callsFromCode reports whether m has a tool_use made from code the model
// ran (programmatic tool calling): one whose caller is not direct.
func callsFromCode(m MessageParam) bool {
	for _, b := range m.Content {
		if b.Type == "tool_use" && b.Caller != "" && b.Caller != "direct" {
			return true
		}
	}
	return false
}

// toolUseIDs returns the ids of the tool_use blocks of m, in order.
func toolUseIDs(m MessageParam) []string {
	var ids []string
	if m.Role != "assistant" {
		return nil
	}
	for _, b := range m.Content {
		if b.Type == "tool_use" {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

// checkToolResults checks the tool_result blocks of m, at path, against the
// tool_use blocks of the message before it, prev.
func checkToolResults(path string, prev, m MessageParam) error {
	uses := make(map[string]bool)
	for _, id := range toolUseIDs(prev) {
		uses[id] = true
	}
	answered := make(map[string]bool)
	other := -1 // index of the first block that is not a tool_result
	for j, b := range m.Content {
		bpath := fmt.Sprintf("%s.content.%d", path, j)
		if b.Type != "tool_result" {
			if other < 0 {
				other = j
			}
			continue
		}
		if !uses[b.ToolUseID] {
			return invalid(bpath, "unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", b.ToolUseID)
		}
		if answered[b.ToolUseID] {
			return invalid(bpath, "each `tool_use` must have a single result. Found multiple `tool_result` blocks with id: %s", b.ToolUseID)
		}
		answered[b.ToolUseID] = true
		if other >= 0 {
			return invalid(bpath, "`tool_result` blocks must come before any other content in the message that answers `tool_use` blocks, but content.%d is a %s block", other, m.Content[other].Type)
		}
	}
	return nil
}

// checkToolUses checks that next, the message after m, answers every tool_use
// block of m, at path.
func checkToolUses(path string, m, next MessageParam) error {
	ids := toolUseIDs(m)
	if len(ids) == 0 {
		return nil
	}
	answered := make(map[string]bool)
	if next.Role == "user" {
		for _, b := range next.Content {
			if b.Type == "tool_result" {
				answered[b.ToolUseID] = true
			}
		}
	}
	var missing []string
	for _, id := range ids {
		if !answered[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return invalid(path, "`tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", strings.Join(missing, ", "))
	}
	return nil
}

// startsWithCompaction reports whether m is an assistant message whose first
// block is a compaction block: the first message of a conversation that was
// compacted, in place of the messages it summarizes.
func startsWithCompaction(m MessageParam) bool {
	return m.Role == "assistant" && len(m.Content) > 0 && m.Content[0].Type == "compaction"
}

// withoutDeclinedCalls returns msgs as the API's fallback middleware
// replays them: an assistant message's tool_use blocks before its last
// fallback block belong to the attempt that was declined, and are
// stripped, so a tool_result that answers one is refused as answering no
// tool_use. msgs is not changed.
func withoutDeclinedCalls(msgs []MessageParam) []MessageParam {
	var out []MessageParam
	for i, m := range msgs {
		seam := -1
		if m.Role == "assistant" {
			for j, b := range m.Content {
				if b.Type == "fallback" {
					seam = j
				}
			}
		}
		if seam < 0 {
			if out != nil {
				out = append(out, m)
			}
			continue
		}
		if out == nil {
			out = slices.Clone(msgs[:i])
		}
		kept := make([]Block, 0, len(m.Content))
		for j, b := range m.Content {
			if j < seam && b.Type == "tool_use" {
				continue
			}
			kept = append(kept, b)
		}
		out = append(out, MessageParam{Role: m.Role, Content: kept})
	}
	if out == nil {
		return msgs
	}
	return out
}
