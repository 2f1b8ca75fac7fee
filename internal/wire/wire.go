// Package wire holds what toolrun's packages share about the Messages API's
// wire format, and no user of toolrun needs.
package wire

import (
	"encoding/json"
	"strconv"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// usage is a response's usage as the API reports it.
type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// ResponseJSON returns m as the API sent it: the raw JSON of a response
// received whole, or, for one accumulated from a stream (whose raw JSON is
// that of its message_start), the message rebuilt from its fields. The
// runner's logger and package transcript use it for the body of a
// toolrun.ResponseReceived.
func ResponseJSON(m *anthropic.BetaMessage) []byte {
	raw := []byte(m.RawJSON())
	var head struct {
		Content    []json.RawMessage `json:"content"`
		StopReason *string           `json:"stop_reason"`
	}
	if json.Unmarshal(raw, &head) == nil && len(head.Content) == len(m.Content) && head.StopReason != nil {
		return raw
	}
	p := m.ToParam()
	content := []anthropic.BetaContentBlockParamUnion{}
	if p.OfAssistant != nil {
		content = append(content, p.OfAssistant.Content...)
	}
	b, err := json.Marshal(struct {
		ID           string                                 `json:"id"`
		Type         string                                 `json:"type"`
		Role         string                                 `json:"role"`
		Model        string                                 `json:"model"`
		Content      []anthropic.BetaContentBlockParamUnion `json:"content"`
		StopReason   string                                 `json:"stop_reason"`
		StopSequence string                                 `json:"stop_sequence,omitempty"`
		Usage        usage                                  `json:"usage"`
	}{m.ID, "message", "assistant", string(m.Model), content, string(m.StopReason), m.StopSequence, usage{m.Usage.InputTokens, m.Usage.OutputTokens, m.Usage.CacheCreationInputTokens, m.Usage.CacheReadInputTokens}})
	if err != nil {
		return []byte(strconv.Quote(err.Error()))
	}
	return b
}
