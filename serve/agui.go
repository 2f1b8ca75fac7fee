package serve

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The AG-UI 1.0 wire types the server reads and writes, as @ag-ui/core
// 1.0.0 defines them. Only the fields the server uses are here; the
// protocol's objects are open, so a client may send more.

// runInput is a RunAgentInput.
type runInput struct {
	ThreadID       string          `json:"threadId"`
	RunID          string          `json:"runId"`
	Messages       []message       `json:"messages"`
	Tools          []clientTool    `json:"tools"`
	Resume         []resumeEntry   `json:"resume"`
	Context        []contextEntry  `json:"context"`
	ForwardedProps json.RawMessage `json:"forwardedProps"`
}

// message is one AG-UI message of any role.
type message struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"toolCallId"`
	Error      string          `json:"error"`
}

// clientTool is a tool the client declares and runs itself.
type clientTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// contextEntry is one entry of a RunAgentInput's context: something the
// client's application knows that the model should.
type contextEntry struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// resumeEntry answers one interrupt.
type resumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload"`
}

// event is one AG-UI event, as a JSON object whose "type" is the event's.
type event map[string]any

// text returns the text of a message's content: a string, or an array of
// parts of which only text parts are taken. Any other shape is an error.
func (m message) text() (string, error) {
	if len(m.Content) == 0 {
		return "", fmt.Errorf("message %q has no content", m.ID)
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", fmt.Errorf("message %q: content is neither a string nor an array of parts", m.ID)
	}
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", fmt.Errorf("message %q: content part %d is %q; only text parts are taken", m.ID, i, p.Type)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// decisionPayload is the payload of a resolved resume entry, and the body
// of a decision over the JSON API: the shape responseSchema describes.
type decisionPayload struct {
	Decision string          `json:"decision"`
	Reason   string          `json:"reason,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
}

// responseSchema is the JSON Schema of a decisionPayload for a call of a
// tool whose input schema is input.
func responseSchema(input json.RawMessage) map[string]any {
	if len(input) == 0 {
		input = json.RawMessage(`{"type":"object"}`)
	}
	return map[string]any{
		"type": "object",
		"oneOf": []any{
			map[string]any{
				"properties": map[string]any{"decision": map[string]any{"const": "approve"}},
				"required":   []string{"decision"},
			},
			map[string]any{
				"properties": map[string]any{
					"decision": map[string]any{"const": "deny"},
					"reason":   map[string]any{"type": "string", "description": "why, for the model"},
				},
				"required": []string{"decision"},
			},
			map[string]any{
				"properties": map[string]any{
					"decision": map[string]any{"const": "edit"},
					"input":    input,
				},
				"required": []string{"decision", "input"},
			},
		},
	}
}
