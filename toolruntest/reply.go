package toolruntest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Reply is what the server answers one request with: an assistant message,
// or, when Fault is set, a failure.
//
// The zero Reply is a message with no content and stop reason "end_turn".
type Reply struct {
	// Content holds the assistant content blocks to return, built with
	// [Text], [ToolUse], [Thinking] and [Compaction]. A tool_use block may name a tool the
	// request did not define: the server sends it all the same, as the real
	// model can.
	Content []Block
	// StopReason is the stop_reason of the message. If empty, it is
	// "tool_use" when Content has a tool_use block and "end_turn" otherwise.
	StopReason string
	// Usage is the usage of the message. If nil, the server computes one as
	// the package documentation describes.
	Usage *Usage
	// ID is the id of the message. If empty, it is "msg_toolruntest_<n>",
	// where n numbers the request among those of [Server.Requests], from 1.
	ID string
	// Model is the model of the message. If empty, it is the request's model.
	Model string
	// Fault, if non-zero, makes the reply fail in the way it describes.
	Fault Fault
	// Container, if non-empty, is the id of the container the message
	// reports in its container field, as the API does for a request whose
	// code execution ran in one (in message_start, when streamed). The
	// server does not check that later requests name it; a test reads the
	// container field they sent from [Request].Params.Raw.
	Container string
}

// Usage is the token usage a reply reports, and what [Server.Usage] and
// [Request].Usage add up.
type Usage struct {
	InputTokens              int64
	OutputTokens             int64
	CacheCreationInputTokens int64
	CacheReadInputTokens     int64
	// CacheCreation1hInputTokens is the part of CacheCreationInputTokens
	// written with the 1-hour TTL; the rest was written with the 5-minute
	// TTL. It is sent as usage.cache_creation, when CacheCreationInputTokens
	// is not 0.
	CacheCreation1hInputTokens int64
}

// add returns the sum of u and v.
func (u Usage) add(v Usage) Usage {
	return Usage{
		InputTokens:                u.InputTokens + v.InputTokens,
		OutputTokens:               u.OutputTokens + v.OutputTokens,
		CacheCreationInputTokens:   u.CacheCreationInputTokens + v.CacheCreationInputTokens,
		CacheReadInputTokens:       u.CacheReadInputTokens + v.CacheReadInputTokens,
		CacheCreation1hInputTokens: u.CacheCreation1hInputTokens + v.CacheCreation1hInputTokens,
	}
}

// Fault makes a reply fail in a chosen way. The zero Fault is no fault.
//
// Status takes precedence: with a non-zero Status, the server answers with an
// error and the message of the Reply is never sent. StreamErrorAfter and
// DropAfter both cut a message short; if both are set, the smaller one wins.
type Fault struct {
	// Status, if non-zero, makes the server answer with this HTTP status and
	// an error body instead of a message.
	Status int
	// ErrorType is the error.type of the error body, or of the error event
	// of StreamErrorAfter. If empty, it is derived from Status: for example
	// "rate_limit_error" for 429, "api_error" for 500 and
	// "overloaded_error" for 529; for StreamErrorAfter it is
	// "overloaded_error".
	ErrorType string
	// Message is the error.message of the error body or event. If empty, it
	// is a sensible text for ErrorType.
	Message string
	// RetryAfter, if positive, is sent in the "retry-after" header, in
	// seconds, fractions allowed (such as "0.01"), and in the
	// "retry-after-ms" header. The SDK waits that long before it retries, so
	// a small RetryAfter keeps retry tests fast.
	RetryAfter time.Duration
	// StreamErrorAfter, if positive, makes a streamed reply send this many
	// server-sent events of the message, counting message_start and ping,
	// then an "error" event, and end the body. If the message has fewer
	// events, the error follows them all. It has no effect on a reply that
	// is not streamed.
	StreamErrorAfter int
	// DropAfter, if positive, makes the server send this many server-sent
	// events of a streamed reply, or this many bytes of the JSON body of one
	// that is not streamed, then drop the connection abruptly, so the client
	// sees an unexpected EOF. It never sends the whole JSON body: at most all
	// but its last byte.
	DropAfter int
	// EventDelay, if positive, makes the server wait this long before each
	// server-sent event of a streamed reply, or once before it answers a
	// request that is not streamed. A client that goes away, or
	// [Server.Close], ends the wait.
	EventDelay time.Duration
	// StallAfter, if positive, makes the server send this many server-sent
	// events of a streamed reply, or this many bytes of the JSON body of one
	// that is not streamed, then send nothing more, holding the connection
	// open until the client goes away or [Server.Close]: a stalled model, to
	// test a client's idle and request timeouts.
	StallAfter int
}

// Text returns a text block for a [Reply].
func Text(s string) Block {
	return Block{Type: "text", Text: s}
}

// ServerToolUse returns a server_tool_use block for a [Reply]: a call of a
// tool the API runs itself (web_search, web_fetch, code_execution), which
// the client must keep in the history and not run. It panics if input
// cannot be encoded as JSON.
func ServerToolUse(id, name string, input any) Block {
	return rawBlock("ServerToolUse", map[string]any{"type": "server_tool_use", "id": id, "name": name, "input": input})
}

// ServerToolResult returns a result block of a server tool for a [Reply],
// of type typ (such as "web_search_tool_result" or
// "code_execution_tool_result"), answering the server_tool_use toolUseID
// with content, encoded as JSON. It panics if content cannot be encoded.
func ServerToolResult(typ, toolUseID string, content any) Block {
	return rawBlock("ServerToolResult", map[string]any{"type": typ, "tool_use_id": toolUseID, "content": content})
}

// rawBlock is a Block sent as the JSON of v.
func rawBlock(fn string, v map[string]any) Block {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("toolruntest: %s: cannot encode the block: %v", fn, err))
	}
	return Block{Type: v["type"].(string), Raw: raw}
}

// ToolUse returns a tool_use block for a [Reply]: a call of the tool name,
// with the id and the JSON encoding of input. A nil input is sent as {}.
// ToolUse panics if input cannot be encoded as JSON.
func ToolUse(id, name string, input any) Block {
	raw := json.RawMessage("{}")
	if input != nil {
		var err error
		raw, err = json.Marshal(input)
		if err != nil {
			panic(fmt.Sprintf("toolruntest: ToolUse(%q, %q): cannot encode input: %v", id, name, err))
		}
	}
	return Block{Type: "tool_use", ID: id, Name: name, Input: raw}
}

// Fallback returns a fallback block for a [Reply]: the API's server-side
// fallback handed the turn from the model from, which declined, to the
// model to. The blocks before the last fallback block of a reply are the
// declined attempt's: when the reply is sent back in a later request the
// server strips that attempt's tool_use blocks, as the API does, so a
// tool_result answering one of them is refused with HTTP 400.
func Fallback(from, to string) Block {
	return rawBlock("Fallback", map[string]any{
		"type":    "fallback",
		"from":    map[string]any{"model": from},
		"to":      map[string]any{"model": to},
		"trigger": map[string]any{"type": "refusal", "category": nil},
	})
}

// Thinking returns a thinking block for a [Reply], with its text and
// signature.
func Thinking(text, signature string) Block {
	return Block{Type: "thinking", Text: text, Signature: signature}
}

// Compaction returns a compaction block for a [Reply], with its summary and
// signature, such as a response to a request whose compact_20260112 edit
// was triggered starts with. The server writes the compaction block of a
// compaction request itself.
func Compaction(summary, signature string) Block {
	return Block{Type: "compaction", Text: summary, Signature: signature}
}

// Message returns a Reply with the given content: a shorthand for
// Reply{Content: blocks}.
func Message(blocks ...Block) Reply {
	return Reply{Content: blocks}
}

// RateLimited returns a Reply that fails with HTTP 429 and a
// rate_limit_error, asking the client to retry after retryAfter.
//
// With a zero retryAfter the SDK falls back to its own backoff, which waits
// about 0.4–0.5s before the first retry and 0.75–1s before the second.
func RateLimited(retryAfter time.Duration) Reply {
	return Reply{Fault: Fault{Status: http.StatusTooManyRequests, RetryAfter: retryAfter}}
}

// ServerError returns a Reply that fails with HTTP 500 and an api_error.
// The SDK retries it with its own backoff unless Fault.RetryAfter is set.
func ServerError() Reply {
	return Reply{Fault: Fault{Status: http.StatusInternalServerError}}
}

// Overloaded returns a Reply that fails with HTTP 529 and an
// overloaded_error. The SDK retries it with its own backoff unless
// Fault.RetryAfter is set.
func Overloaded() Reply {
	return Reply{Fault: Fault{Status: statusOverloaded}}
}

// statusOverloaded is the status the API answers with when it is overloaded.
const statusOverloaded = 529

// errorTypeFor returns the error type the API uses for status.
func errorTypeFor(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case statusOverloaded:
		return "overloaded_error"
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// errorMessageFor returns a default error message for errorType.
func errorMessageFor(errorType string) string {
	switch errorType {
	case "invalid_request_error":
		return "Invalid request"
	case "authentication_error":
		return "invalid x-api-key"
	case "billing_error":
		return "Billing error"
	case "permission_error":
		return "Your API key does not have permission to use the specified resource."
	case "not_found_error":
		return "Not found"
	case "request_too_large":
		return "Request exceeds the maximum allowed number of bytes."
	case "rate_limit_error":
		return "Number of request tokens has exceeded your per-minute rate limit"
	case "timeout_error":
		return "Request timed out"
	case "overloaded_error":
		return "Overloaded"
	}
	return "Internal server error"
}

// hasToolUse reports whether blocks has a tool_use block.
func hasToolUse(blocks []Block) bool {
	for _, b := range blocks {
		if b.Type == "tool_use" {
			return true
		}
	}
	return false
}

// ceilQuarter returns n/4 rounded up: the package's token approximation.
func ceilQuarter(n int) int64 {
	return int64((n + 3) / 4)
}

// inputTokens approximates the input tokens of p, as the package
// documentation describes.
func inputTokens(p Params) int64 {
	in := inputFor(p)
	if !in.special() {
		return ceilQuarter(len(in.tools) + len(in.system) + len(in.messages))
	}
	pr, err := render(in)
	if err != nil {
		return ceilQuarter(len(in.tools) + len(in.system) + len(in.messages))
	}
	return pr.tokens()
}

// outputTokens approximates the output tokens of content: at least 1.
func outputTokens(content []Block) int64 {
	n := 0
	for _, b := range content {
		switch b.Type {
		case "text", "thinking", "compaction":
			n += len(b.Text)
		case "tool_use":
			n += len(b.Input)
		}
	}
	return max(1, ceilQuarter(n))
}

// The wire types below marshal to the API's JSON, fields in the API's order.

type wireUsage struct {
	InputTokens              int64              `json:"input_tokens"`
	CacheCreationInputTokens int64              `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64              `json:"cache_read_input_tokens"`
	CacheCreation            *wireCacheCreation `json:"cache_creation,omitempty"`
	OutputTokens             int64              `json:"output_tokens"`
	Iterations               []wireIteration    `json:"iterations,omitempty"`
}

type wireCacheCreation struct {
	Ephemeral5mInputTokens int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
}

// wireIteration is one entry of usage.iterations.
type wireIteration struct {
	Type                     string            `json:"type"` // "compaction" or "message"
	Model                    string            `json:"model,omitempty"`
	InputTokens              int64             `json:"input_tokens"`
	CacheCreationInputTokens int64             `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64             `json:"cache_read_input_tokens"`
	CacheCreation            wireCacheCreation `json:"cache_creation"`
	OutputTokens             int64             `json:"output_tokens"`
}

// wireUsageOf returns u as the API sends it, with usage.cache_creation when
// u wrote to the cache.
func wireUsageOf(u Usage) wireUsage {
	w := wireUsage{
		InputTokens:              u.InputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens,
		OutputTokens:             u.OutputTokens,
	}
	if u.CacheCreationInputTokens != 0 {
		c := cacheCreationOf(u)
		w.CacheCreation = &c
	}
	return w
}

func cacheCreationOf(u Usage) wireCacheCreation {
	return wireCacheCreation{
		Ephemeral5mInputTokens: u.CacheCreationInputTokens - u.CacheCreation1hInputTokens,
		Ephemeral1hInputTokens: u.CacheCreation1hInputTokens,
	}
}

// iterationOf returns u as an entry of usage.iterations of type typ.
func iterationOf(typ, model string, u Usage) wireIteration {
	return wireIteration{
		Type:                     typ,
		Model:                    model,
		InputTokens:              u.InputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens,
		CacheCreation:            cacheCreationOf(u),
		OutputTokens:             u.OutputTokens,
	}
}

type wireMessage struct {
	ID           string            `json:"id"`
	Type         string            `json:"type"`
	Role         string            `json:"role"`
	Model        string            `json:"model"`
	Content      []json.RawMessage `json:"content"`
	StopReason   *string           `json:"stop_reason"`
	StopSequence *string           `json:"stop_sequence"`
	Usage        wireUsage         `json:"usage"`
	// ContextManagement is sent for a request with context_management.
	ContextManagement *wireContextManagement `json:"context_management,omitempty"`
	Container         *wireContainer         `json:"container,omitempty"`
}

// wireContainer is a message's container field.
type wireContainer struct {
	ID        string   `json:"id"`
	ExpiresAt string   `json:"expires_at"`
	Skills    []string `json:"skills"`
}

type wireText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type wireToolUse struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Input   json.RawMessage `json:"input"`
	Toolset string          `json:"toolset_name,omitempty"`
	Caller  *wireCaller     `json:"caller,omitempty"`
}

type wireCaller struct {
	Type   string `json:"type"`
	ToolID string `json:"tool_id,omitempty"`
}

type wireThinking struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type wireCompaction struct {
	Type      string  `json:"type"`
	Content   string  `json:"content"`
	Signature *string `json:"signature,omitempty"`
}

type wireErrorDetail struct {
	Type    string            `json:"type"`
	Message string            `json:"message"`
	Details *wireErrorDetails `json:"details,omitempty"`
}

type wireErrorDetails struct {
	ErrorCode   string   `json:"error_code"`
	Unsupported []string `json:"unsupported,omitempty"`
}

type wireError struct {
	Type      string          `json:"type"`
	Error     wireErrorDetail `json:"error"`
	RequestID string          `json:"request_id"`
}

// mustMarshal marshals v, which is one of the package's wire types and so
// cannot fail.
func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("toolruntest: " + err.Error())
	}
	return b
}

// blockJSON returns b as a content block of a message. With full false it
// returns b as a content_block_start event carries it: with empty text,
// thinking and input.
func blockJSON(b Block, full bool) json.RawMessage {
	if b.Raw != nil {
		return b.Raw
	}
	switch b.Type {
	case "text":
		w := wireText{Type: b.Type}
		if full {
			w.Text = b.Text
		}
		return mustMarshal(w)
	case "tool_use":
		w := wireToolUse{Type: b.Type, ID: b.ID, Name: b.Name, Input: json.RawMessage("{}"), Toolset: b.Toolset}
		if b.Caller != "" {
			w.Caller = &wireCaller{Type: b.Caller, ToolID: b.CallerToolID}
		}
		if full && b.Input != nil {
			w.Input = b.Input
		}
		return mustMarshal(w)
	case "thinking":
		w := wireThinking{Type: b.Type}
		if full {
			w.Thinking, w.Signature = b.Text, b.Signature
		}
		return mustMarshal(w)
	case "compaction":
		w := wireCompaction{Type: b.Type}
		if full {
			w.Content = b.Text
			if b.Signature != "" {
				w.Signature = &b.Signature
			}
		}
		return mustMarshal(w)
	}
	return mustMarshal(struct {
		Type string `json:"type"`
	}{b.Type})
}

// message is a reply resolved against its request: every default applied.
type message struct {
	id, model, stopReason string
	content               []Block
	usage                 Usage
	// iterations, if non-nil, is sent as usage.iterations.
	iterations        []wireIteration
	contextManagement *wireContextManagement
	container         string
}

// billed returns the usage that m is billed: that of its iterations, when
// it has any, else its own.
func (m message) billed() Usage {
	if m.iterations == nil {
		return m.usage
	}
	var u Usage
	for _, it := range m.iterations {
		u = u.add(Usage{
			InputTokens:                it.InputTokens,
			OutputTokens:               it.OutputTokens,
			CacheCreationInputTokens:   it.CacheCreationInputTokens,
			CacheReadInputTokens:       it.CacheReadInputTokens,
			CacheCreation1hInputTokens: it.CacheCreation.Ephemeral1hInputTokens,
		})
	}
	return u
}

// resolve applies the defaults of r for the n-th request, req, whose
// input the server counted as in.
func resolve(r Reply, n int, req Params, in Usage) message {
	m := message{id: r.ID, model: r.Model, stopReason: r.StopReason, content: r.Content, container: r.Container}
	if m.id == "" {
		m.id = fmt.Sprintf("msg_toolruntest_%d", n)
	}
	if m.model == "" {
		m.model = req.Model
	}
	if m.stopReason == "" {
		m.stopReason = "end_turn"
		if hasToolUse(r.Content) {
			m.stopReason = "tool_use"
		}
	}
	if r.Usage != nil {
		m.usage = *r.Usage
	} else {
		m.usage = in
		m.usage.OutputTokens = outputTokens(r.Content)
	}
	return m
}

// wire returns m as the API's message object. With streamed true it returns
// the message that a message_start event carries.
func (m message) wire(streamed bool) wireMessage {
	w := wireMessage{
		ID:      m.id,
		Type:    "message",
		Role:    "assistant",
		Model:   m.model,
		Content: []json.RawMessage{},
		Usage:   wireUsageOf(m.usage),
	}
	if m.container != "" {
		w.Container = &wireContainer{ID: m.container, ExpiresAt: "2099-01-01T00:00:00Z", Skills: []string{}}
	}
	if streamed {
		w.Usage.OutputTokens = 1
		return w
	}
	w.Usage.Iterations = m.iterations
	w.ContextManagement = m.contextManagement
	stop := m.stopReason
	w.StopReason = &stop
	for _, b := range m.content {
		w.Content = append(w.Content, blockJSON(b, true))
	}
	return w
}

// errorBody returns the API's error body.
func errorBody(errorType, msg, requestID string) []byte {
	return mustMarshal(wireError{
		Type:      "error",
		Error:     wireErrorDetail{Type: errorType, Message: msg},
		RequestID: requestID,
	})
}
