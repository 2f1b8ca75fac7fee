package serve

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun/redact"
)

// MaxSnapshotMessages and MaxSnapshotBytes bound the MESSAGES_SNAPSHOT a
// run sends when the client's history differs from the thread's: a
// conversation of more AG-UI messages, or more bytes of content, gets no
// snapshot but a CUSTOM "toolrun.warning" saying so, and the client keeps
// the history it has. A snapshot replaces the client's whole message
// list, so one cut to the conversation's tail would take the older
// messages from the chat; none at all leaves the chat as it was, which
// the client's next request reconciles again.
const (
	MaxSnapshotMessages = 1000
	MaxSnapshotBytes    = 4 << 20
)

// snapshotMessages returns the thread's conversation, msgs, as AG-UI
// messages, for a MESSAGES_SNAPSHOT that shows the client what the model
// sees: user messages, assistant messages with their text and toolCalls,
// and a tool message for each tool result. Thinking blocks, images and
// documents the model reads are left out (their text, where any, stays):
// every message has only members @ag-ui/core 0.0.59's and 1.0's schemas
// both take, whatever protocolVersion the client declared.
//
// Each message keeps an id the client already has where there is one: a
// user message the id its client gave it (users are the thread's user
// message records, in order) and the content it sent, when in still
// carries it as text; an assistant message the id of the client's assistant
// message that shares one of its tool calls or its text; a tool result
// "result_" and its call's id, as TOOL_CALL_RESULT named it, or the id of
// the client's own tool message for a call of a client tool, which the
// client ran. Other messages get an id from their position on the
// thread. It returns false past MaxSnapshotMessages or MaxSnapshotBytes.
func snapshotMessages(thread string, msgs []anthropic.BetaMessageParam, users []userRec, in []message, clientTools map[string]bool) ([]map[string]any, bool) {
	clientByID := map[string]message{}
	clientToolMsg := map[string]string{} // tool call id → the client's tool message id
	assistantByCall := map[string]string{}
	assistantByText := map[string]string{}
	for _, m := range in {
		clientByID[m.ID] = m
		switch m.Role {
		case "tool":
			clientToolMsg[m.ToolCallID] = m.ID
		case "assistant":
			for _, tc := range m.ToolCalls {
				assistantByCall[tc.ID] = m.ID
			}
			var s string
			if json.Unmarshal(m.Content, &s) == nil && s != "" {
				assistantByText[s] = m.ID
			}
		}
	}
	callName := map[string]string{}
	used := map[string]bool{}
	var out []map[string]any
	size, nUser := 0, 0
	add := func(m map[string]any, content string) bool {
		size += len(content)
		out = append(out, m)
		return len(out) <= MaxSnapshotMessages && size <= MaxSnapshotBytes
	}
	posID := func(i int) string { return thread + "/snapshot_" + strconv.Itoa(i) }
	for i, mp := range msgs {
		switch {
		case mp.OfAssistant != nil:
			var text []string
			var calls []map[string]any
			id := ""
			for _, b := range mp.OfAssistant.Content {
				switch {
				case b.OfText != nil:
					text = append(text, b.OfText.Text)
				case b.OfToolUse != nil:
					tu := b.OfToolUse
					callName[tu.ID] = tu.Name
					args, err := json.Marshal(tu.Input)
					if err != nil || tu.Input == nil {
						args = []byte("{}")
					}
					size += len(args)
					calls = append(calls, map[string]any{"id": tu.ID, "type": "function", "function": map[string]any{"name": tu.Name, "arguments": string(args)}})
					if id == "" {
						id = assistantByCall[tu.ID]
					}
				}
			}
			content := redact.String(strings.Join(text, "\n\n"))
			if id == "" {
				id = assistantByText[strings.Join(text, "\n\n")]
			}
			if id == "" || used[id] {
				id = posID(i)
			}
			used[id] = true
			am := map[string]any{"id": id, "role": "assistant"}
			if content != "" {
				am["content"] = content
			}
			if len(calls) > 0 {
				am["toolCalls"] = calls
			}
			if !add(am, content) {
				return nil, false
			}
		case mp.OfUser != nil:
			var text []string
			said := false
			for _, b := range mp.OfUser.Content {
				switch {
				case b.OfToolResult != nil:
					tr := b.OfToolResult
					call := tr.ToolUseID
					id := "result_" + call
					if cid, ok := clientToolMsg[call]; ok && clientTools[callName[call]] {
						id = cid
					}
					content := toolResultText(tr)
					tm := map[string]any{"id": id, "role": "tool", "toolCallId": call, "content": content}
					if tr.IsError.Valid() && tr.IsError.Value {
						tm["error"] = content
					}
					if !add(tm, content) {
						return nil, false
					}
				case b.OfText != nil:
					text = append(text, b.OfText.Text)
					said = true
				default:
					said = true // an image or a document the user gave
				}
			}
			if !said {
				continue
			}
			content := strings.Join(text, "\n\n")
			id := posID(i)
			if nUser < len(users) && !used[users[nUser].ID] {
				id = users[nUser].ID
				var said string
				if cm, ok := clientByID[id]; ok && cm.Role == "user" && contentDigest(cm.Content) == users[nUser].Digest && json.Unmarshal(cm.Content, &said) == nil {
					// The client's own text, as it sent it: the model's
					// copy may carry the run's preamble (system messages,
					// context) too.
					content = said
				}
			}
			used[id] = true
			nUser++
			if !add(map[string]any{"id": id, "role": "user", "content": content}, content) {
				return nil, false
			}
		}
	}
	return out, true
}

// snapshotEvent returns the MESSAGES_SNAPSHOT of the thread's
// conversation, or a warning saying why there is none.
func snapshotEvent(thread string, msgs []anthropic.BetaMessageParam, users []userRec, in []message, clientTools map[string]bool) event {
	snap, ok := snapshotMessages(thread, msgs, users, in, clientTools)
	if !ok {
		return event{"type": "CUSTOM", "name": "toolrun.warning", "value": map[string]any{"message": fmt.Sprintf("the client's history differs from the thread's, which is past the %d messages or %d bytes a MESSAGES_SNAPSHOT carries: none was sent", MaxSnapshotMessages, MaxSnapshotBytes)}}
	}
	if snap == nil {
		snap = []map[string]any{}
	}
	return event{"type": "MESSAGES_SNAPSHOT", "messages": snap}
}

// toolResultText is the text of a tool result of the thread's
// conversation as TOOL_CALL_RESULT gave it to the client (resultText):
// its text parts, a placeholder for each image or document, redacted.
func toolResultText(tr *anthropic.BetaToolResultBlockParam) string {
	return redact.String(contentText(tr.Content))
}

// resultsDiffer reports whether the client's history, in, shows a result
// of a call the server ran other than the thread's: a tool message under
// the id TOOL_CALL_RESULT gave it ("result_" and the call's id) whose
// text is not the result the model read. The server's result stands (a
// client's message never stands in for it), so the client is shown it.
func resultsDiffer(msgs []anthropic.BetaMessageParam, in []message) bool {
	shown := map[string]string{}
	for _, m := range in {
		var s string
		if m.Role == "tool" && m.ID == "result_"+m.ToolCallID && json.Unmarshal(m.Content, &s) == nil {
			shown[m.ToolCallID] = s
		}
	}
	if len(shown) == 0 {
		return false
	}
	for _, mp := range msgs {
		if mp.OfUser == nil {
			continue
		}
		for _, b := range mp.OfUser.Content {
			if tr := b.OfToolResult; tr != nil {
				if s, ok := shown[tr.ToolUseID]; ok && s != toolResultText(tr) {
					return true
				}
			}
		}
	}
	return false
}

// showsResults reports whether the client's history, in, shows a result
// of a call the server ran under the id TOOL_CALL_RESULT gave it, which
// resultsDiffer compares with the thread's.
func showsResults(in []message) bool {
	for _, m := range in {
		if m.Role == "tool" && m.ID == "result_"+m.ToolCallID {
			return true
		}
	}
	return false
}
