package toolruntest

import (
	"encoding/json"
	"unicode/utf8"
)

// event is one server-sent event: its type and its JSON data.
type event struct {
	typ  string
	data []byte
}

// The wire types of the stream events, fields in the API's order.

type wireMessageStart struct {
	Type    string      `json:"type"`
	Message wireMessage `json:"message"`
}

type wireBlockStart struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	ContentBlock json.RawMessage `json:"content_block"`
}

type wireBlockDelta struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta any    `json:"delta"`
}

type wireTextDelta struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type wireInputDelta struct {
	Type        string `json:"type"`
	PartialJSON string `json:"partial_json"`
}

type wireThinkingDelta struct {
	Type     string `json:"type"`
	Thinking string `json:"thinking"`
}

type wireSignatureDelta struct {
	Type      string `json:"type"`
	Signature string `json:"signature"`
}

type wireBlockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type wireStop struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

type wireDeltaUsage struct {
	OutputTokens int64           `json:"output_tokens"`
	Iterations   []wireIteration `json:"iterations,omitempty"`
}

type wireMessageDelta struct {
	Type              string                 `json:"type"`
	Delta             wireStop               `json:"delta"`
	Usage             wireDeltaUsage         `json:"usage"`
	ContextManagement *wireContextManagement `json:"context_management,omitempty"`
}

type wireCompactionDelta struct {
	Type             string `json:"type"`
	Content          string `json:"content"`
	EncryptedContent string `json:"encrypted_content"`
}

type wireType struct {
	Type string `json:"type"`
}

// events returns the server-sent events that stream m, in the order the API
// sends them.
func (m message) events() []event {
	evs := []event{
		{"message_start", mustMarshal(wireMessageStart{Type: "message_start", Message: m.wire(true)})},
		{"ping", mustMarshal(wireType{Type: "ping"})},
	}
	delta := func(i int, d any) {
		evs = append(evs, event{"content_block_delta", mustMarshal(wireBlockDelta{Type: "content_block_delta", Index: i, Delta: d})})
	}
	for i, b := range m.content {
		start, input, partial := streamedInput(b)
		if !partial {
			start = blockJSON(b, false)
		}
		evs = append(evs, event{"content_block_start", mustMarshal(wireBlockStart{Type: "content_block_start", Index: i, ContentBlock: start})})
		for _, s := range split(input) {
			delta(i, wireInputDelta{Type: "input_json_delta", PartialJSON: s})
		}
		if b.Raw == nil {
			switch b.Type {
			case "text":
				for _, s := range split(b.Text) {
					delta(i, wireTextDelta{Type: "text_delta", Text: s})
				}
			case "tool_use":
				in := string(b.Input)
				if in == "" {
					in = "{}"
				}
				for _, s := range split(in) {
					delta(i, wireInputDelta{Type: "input_json_delta", PartialJSON: s})
				}
			case "thinking":
				for _, s := range split(b.Text) {
					delta(i, wireThinkingDelta{Type: "thinking_delta", Thinking: s})
				}
				delta(i, wireSignatureDelta{Type: "signature_delta", Signature: b.Signature})
			case "compaction":
				delta(i, wireCompactionDelta{Type: "compaction_delta", Content: b.Text})
				if b.Signature != "" {
					delta(i, wireSignatureDelta{Type: "signature_delta", Signature: b.Signature})
				}
			}
		}
		evs = append(evs, event{"content_block_stop", mustMarshal(wireBlockStop{Type: "content_block_stop", Index: i})})
	}
	evs = append(evs,
		event{"message_delta", mustMarshal(wireMessageDelta{
			Type:              "message_delta",
			Delta:             wireStop{StopReason: m.stopReason},
			Usage:             wireDeltaUsage{OutputTokens: m.usage.OutputTokens, Iterations: m.iterations},
			ContextManagement: m.contextManagement,
		})},
		event{"message_stop", mustMarshal(wireType{Type: "message_stop"})},
	)
	return evs
}

// split cuts s into up to three pieces of about equal length, at rune
// boundaries, so that a client has to put deltas back together. It returns
// no pieces for an empty s.
func split(s string) []string {
	const pieces = 3
	var out []string
	for k := pieces; k > 0 && s != ""; k-- {
		n := (len(s) + k - 1) / k
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// appendEvent appends ev in the wire format of server-sent events.
func appendEvent(buf []byte, ev event) []byte {
	buf = append(buf, "event: "...)
	buf = append(buf, ev.typ...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, ev.data...)
	return append(buf, "\n\n"...)
}
