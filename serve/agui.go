package serve

import (
	"encoding/json"
	"errors"
)

// The AG-UI 1.0 wire types the server reads and writes, as @ag-ui/core
// 1.0.0 defines them. Only the fields the server uses are here; the
// protocol's objects are open, so a client may send more.

// runInput is a RunAgentInput.
type runInput struct {
	ThreadID        string          `json:"threadId"`
	RunID           string          `json:"runId"`
	ProtocolVersion string          `json:"protocolVersion"`
	ParentRunID     string          `json:"parentRunId"`
	State           json.RawMessage `json:"state"`
	Messages        []message       `json:"messages"`
	Tools           []clientTool    `json:"tools"`
	Resume          []resumeEntry   `json:"resume"`
	Context         []contextEntry  `json:"context"`
	ForwardedProps  json.RawMessage `json:"forwardedProps"`

	// What the server makes of the input before it starts the run.
	peer     peer     // the client's protocol version
	warnings []string // what was stripped or ignored, for the client's developer
	// firstSeq is the number of the event before the run's first: 0, or
	// the last of the interrupted run this one resumes under its runId.
	firstSeq int64
	// byDecision is set on a run no client asked for, which a decision
	// (the inbox's, the JSON API's) started to continue its thread: it
	// offers the tools the thread's last client run declared.
	byDecision bool
}

// message is one AG-UI message of any role.
type message struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"toolCallId"`
	Error      string          `json:"error"`
	ToolCalls  []toolCall      `json:"toolCalls"`
}

// toolCall is a call an assistant message made, as the client has it.
type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function *struct {
		Name      *string `json:"name"`
		Arguments *string `json:"arguments"`
	} `json:"function"`
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

// text returns the text of a message's content, for what takes only
// text (a system or developer message): a string, or the text parts of
// an array of parts.
func (m message) text() (string, error) {
	cs, _, err := m.blocks()
	if err != nil {
		return "", err
	}
	return textOf(cs), nil
}

// decisionPayload is the payload of a resolved resume entry, and the body
// of a decision over the JSON API: the shape responseSchema describes.
// Two spellings are taken: toolrun's {"decision": "approve" | "deny" |
// "edit" | "respond", "reason", "input", "response"}, and the approval shape of AG-UI's
// interrupts guide, which CopilotKit's useInterrupt sends: {"approved":
// true}, {"approved": false, "reason"} or {"approved": true,
// "editedArgs": {…}}. A payload that mixes the two is refused.
type decisionPayload struct {
	Decision   string          `json:"decision,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Approved   *bool           `json:"approved,omitempty"`
	EditedArgs json.RawMessage `json:"editedArgs,omitempty"`
	// Response is a person's answer to the call, given to the model as
	// the tool's result instead of running it: the decision respond.
	Response string `json:"response,omitempty"`
}

// normalize returns dp in toolrun's spelling.
func (dp decisionPayload) normalize() (decisionPayload, error) {
	if dp.Response != "" && dp.Approved == nil && dp.Decision != "respond" {
		return dp, errors.New("response goes with decision: respond")
	}
	if dp.Approved == nil {
		if len(dp.EditedArgs) > 0 {
			return dp, errors.New("editedArgs goes with approved: true")
		}
		return dp, nil
	}
	if dp.Decision != "" || len(dp.Input) > 0 || dp.Response != "" {
		return dp, errors.New("a payload is either {decision, reason, input, response} or {approved, reason, editedArgs}, not both")
	}
	switch {
	case !*dp.Approved && len(dp.EditedArgs) > 0:
		return dp, errors.New("editedArgs goes with approved: true")
	case !*dp.Approved:
		return decisionPayload{Decision: "deny", Reason: dp.Reason}, nil
	case len(dp.EditedArgs) > 0:
		return decisionPayload{Decision: "edit", Input: dp.EditedArgs, Reason: dp.Reason}, nil
	}
	return decisionPayload{Decision: "approve", Reason: dp.Reason}, nil
}

// responseSchema is the JSON Schema of a decisionPayload for a call of a
// tool whose input schema is input: toolrun's four decisions, and the
// {approved, editedArgs} shape. A client tool's call cannot be edited
// (the client runs it with the input it was sent), so its schema has no
// edit.
func responseSchema(input json.RawMessage, editable bool) map[string]any {
	if len(input) == 0 {
		input = json.RawMessage(`{"type":"object"}`)
	}
	reason := map[string]any{"type": "string", "description": "why, for the model"}
	approvedShape := map[string]any{
		"properties": map[string]any{
			"approved": map[string]any{"type": "boolean"},
			"reason":   reason,
		},
		"required":             []string{"approved"},
		"additionalProperties": false,
	}
	shapes := []any{
		map[string]any{
			"properties":           map[string]any{"decision": map[string]any{"const": "approve"}},
			"required":             []string{"decision"},
			"additionalProperties": false,
		},
		map[string]any{
			"properties": map[string]any{
				"decision": map[string]any{"const": "deny"},
				"reason":   reason,
			},
			"required":             []string{"decision"},
			"additionalProperties": false,
		},
		map[string]any{
			"properties": map[string]any{
				"decision": map[string]any{"const": "respond"},
				"response": map[string]any{"type": "string", "minLength": 1, "description": "the answer the model gets as the tool's result; the call does not run"},
			},
			"required":             []string{"decision", "response"},
			"additionalProperties": false,
		},
	}
	if editable {
		shapes = append(shapes, map[string]any{
			"properties": map[string]any{
				"decision": map[string]any{"const": "edit"},
				"input":    input,
			},
			"required":             []string{"decision", "input"},
			"additionalProperties": false,
		})
		approvedShape["properties"].(map[string]any)["editedArgs"] = input
	}
	shapes = append(shapes, approvedShape)
	return map[string]any{"type": "object", "oneOf": shapes}
}
