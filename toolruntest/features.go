package toolruntest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// The beta headers that the features below require.
const (
	betaCompact           = "compact-2026-09-04"
	betaCompactEdit       = "compact-2026-01-12"
	betaContextManagement = "context-management-2025-06-27"
	betaThreads           = "message-threads-2026-08-12"
)

// clearedToolResult is the text that clear_tool_uses_20250919 puts in place
// of the content of a tool result it clears.
const clearedToolResult = "[tool result cleared by context management]"

// apiError is a rejection of a request that carries an error code in
// error.details, as the API words it.
type apiError struct {
	status      int
	errorType   string
	message     string
	code        string   // error.details.error_code
	unsupported []string // error.details.unsupported
	// expected is set for a rejection that a well-behaved client meets in
	// the normal course, such as an expired thread, which Errors leaves out.
	expected bool
}

func (e *apiError) Error() string {
	if e.code != "" {
		return e.code + ": " + e.message
	}
	return e.message
}

// features holds the fields of a request that go beyond a plain
// conversation: caching, compaction, context management and threads.
type features struct {
	betas map[string]bool
	// autoTTL is the TTL of the top-level cache_control, or 0.
	autoTTL time.Duration
	// compaction is set for a compaction request.
	compaction *compactionConfig
	// edits are those of context_management, nil without it.
	edits []edit
	// contextManagement reports whether the request had context_management.
	contextManagement bool
	thread            *ThreadParam
}

// compactionConfig is the compaction field of a request.
type compactionConfig struct {
	instructions string
}

// edit is one edit of context_management.
type edit struct {
	typ string
	// clear_tool_uses_20250919 and compact_20260112
	triggerType  string // "input_tokens" or "tool_uses"
	triggerValue int64
	// clear_tool_uses_20250919
	keep          int64
	clearAtLeast  int64
	exclude       []string
	clearInputs   bool
	clearInputsOf []string // when clear_tool_inputs is a list
	// clear_thinking_20251015
	keepAllThinking bool
	keepThinking    int64
	// compact_20260112
	instructions string
	pause        bool
}

// wireAppliedEdit is one entry of context_management.applied_edits.
type wireAppliedEdit struct {
	Type                 string `json:"type"`
	ClearedInputTokens   int64  `json:"cleared_input_tokens"`
	ClearedToolUses      *int64 `json:"cleared_tool_uses,omitempty"`
	ClearedThinkingTurns *int64 `json:"cleared_thinking_turns,omitempty"`
}

type wireContextManagement struct {
	AppliedEdits []wireAppliedEdit `json:"applied_edits"`
}

// betas returns the betas that the anthropic-beta headers of h name.
func betas(h http.Header) map[string]bool {
	out := make(map[string]bool)
	for _, v := range h.Values("Anthropic-Beta") {
		for _, b := range strings.Split(v, ",") {
			if b = strings.TrimSpace(b); b != "" {
				out[b] = true
			}
		}
	}
	return out
}

// needBeta returns the error for the field that needs a beta the request did
// not name, or nil.
func (f *features) needBeta(path string, names ...string) error {
	for _, n := range names {
		if f.betas[n] {
			return nil
		}
	}
	return invalid(path, "this feature requires the anthropic-beta header %s", strings.Join(names, " or "))
}

// parseFeatures decodes and checks the fields of p that go beyond a plain
// conversation. opts is the server's.
func parseFeatures(h http.Header, p Params, opts *Options) (features, error) {
	f := features{betas: betas(h)}
	raw := p.Raw
	if cc, ok := raw["cache_control"]; ok && !isNull(cc) {
		ttl, err := parseCacheControl("cache_control", cc)
		if err != nil {
			return f, err
		}
		f.autoTTL = ttl
	}

	for i, m := range p.Messages {
		for j, b := range m.Content {
			if b.Type != "compaction" {
				continue
			}
			path := fmt.Sprintf("messages.%d.content.%d", i, j)
			if err := f.needBeta(path, betaCompact, betaCompactEdit); err != nil {
				return f, err
			}
			c := field(b.Raw, "content")
			var s string
			switch {
			case c == nil || isNull(c):
			case json.Unmarshal(c, &s) != nil:
				return f, invalid(path+".content", "Input should be a valid string")
			case s == "":
				return f, invalid(path+".content", "compaction content must be non-empty; send null for a compaction that produced no summary")
			}
		}
	}

	if c, ok := raw["compaction"]; ok && !isNull(c) {
		if err := f.needBeta("compaction", betaCompact); err != nil {
			return f, err
		}
		var cfg struct {
			Type         string  `json:"type"`
			Instructions *string `json:"instructions"`
		}
		if json.Unmarshal(c, &cfg) != nil {
			return f, invalid("compaction", "Input should be a valid dictionary")
		}
		if cfg.Type != "summarize" {
			return f, invalid("compaction.type", "Input should be 'summarize'")
		}
		f.compaction = &compactionConfig{}
		if cfg.Instructions != nil {
			f.compaction.instructions = strings.TrimSpace(*cfg.Instructions)
		}
		if err := checkCompactionRequest(raw); err != nil {
			return f, err
		}
	}

	if cm, ok := raw["context_management"]; ok && !isNull(cm) {
		f.contextManagement = true
		edits, err := parseEdits(&f, cm)
		if err != nil {
			return f, err
		}
		f.edits = edits
	}

	if t, ok := raw["thread"]; ok && !isNull(t) {
		if err := f.needBeta("thread", betaThreads); err != nil {
			return f, err
		}
		f.thread = new(ThreadParam)
		if json.Unmarshal(t, f.thread) != nil {
			return f, invalid("thread", "Input should be a valid dictionary")
		}
		switch f.thread.Type {
		case "create":
		case "continue":
			if f.thread.PreviousMessageID == "" {
				return f, invalid("thread.previous_message_id", "Field required")
			}
		default:
			return f, invalid("thread.type", "Input should be 'create' or 'continue'")
		}
		if len(opts.ThreadUnsupported) > 0 {
			return f, &apiError{
				status:      http.StatusBadRequest,
				errorType:   "invalid_request_error",
				message:     "thread: this request uses features that a message thread cannot hold: " + strings.Join(opts.ThreadUnsupported, ", ") + "; send the whole conversation without a thread",
				code:        "thread_unsupported_request",
				unsupported: opts.ThreadUnsupported,
				expected:    true,
			}
		}
	}
	return f, nil
}

// checkCompactionRequest rejects the fields that the API does not take
// together with compaction: those that only shape a reply, which a
// compaction request never writes.
func checkCompactionRequest(raw map[string]json.RawMessage) error {
	present := func(k string) bool { v, ok := raw[k]; return ok && !isNull(v) }
	for _, k := range []string{"context_management", "stop_sequences", "output_format"} {
		if present(k) {
			return invalid("compaction", "cannot be combined with %s", k)
		}
	}
	if present("tool_choice") {
		var tc struct {
			Type string `json:"type"`
		}
		json.Unmarshal(raw["tool_choice"], &tc)
		if tc.Type == "any" || tc.Type == "tool" {
			return invalid("compaction", "cannot be combined with a tool_choice of type %s, which forces tool use", tc.Type)
		}
	}
	if present("output_config") && field(raw["output_config"], "format") != nil && !isNull(field(raw["output_config"], "format")) {
		return invalid("compaction", "cannot be combined with output_config.format")
	}
	if present("fallbacks") {
		for i, sp := range elements(raw["fallbacks"]) {
			fb := raw["fallbacks"][sp.start:sp.end]
			if oc := field(fb, "output_config"); oc != nil && field(oc, "format") != nil && !isNull(field(oc, "format")) {
				return invalid("compaction", "cannot be combined with fallbacks.%d.output_config.format", i)
			}
		}
	}
	return nil
}

// parseEdits decodes the edits of the context_management value cm.
func parseEdits(f *features, cm json.RawMessage) ([]edit, error) {
	var v struct {
		Edits []json.RawMessage `json:"edits"`
	}
	if json.Unmarshal(cm, &v) != nil {
		return nil, invalid("context_management", "Input should be a valid dictionary")
	}
	edits := make([]edit, 0, len(v.Edits))
	for i, raw := range v.Edits {
		path := fmt.Sprintf("context_management.edits.%d", i)
		var e struct {
			Type            string          `json:"type"`
			Trigger         *valueParam     `json:"trigger"`
			Keep            json.RawMessage `json:"keep"`
			ClearAtLeast    *valueParam     `json:"clear_at_least"`
			ExcludeTools    []string        `json:"exclude_tools"`
			ClearToolInputs json.RawMessage `json:"clear_tool_inputs"`
			Instructions    *string         `json:"instructions"`
			Pause           *bool           `json:"pause_after_compaction"`
		}
		if json.Unmarshal(raw, &e) != nil {
			return nil, invalid(path, "Input should be a valid dictionary")
		}
		ed := edit{typ: e.Type}
		switch e.Type {
		case "clear_tool_uses_20250919":
			if err := f.needBeta(path, betaContextManagement); err != nil {
				return nil, err
			}
			ed.triggerType, ed.triggerValue = "input_tokens", 100_000
			if t := e.Trigger; t != nil {
				if t.Type != "input_tokens" && t.Type != "tool_uses" {
					return nil, invalid(path+".trigger.type", "Input should be 'input_tokens' or 'tool_uses'")
				}
				ed.triggerType, ed.triggerValue = t.Type, t.Value
			}
			ed.keep = 3
			if len(e.Keep) > 0 && !isNull(e.Keep) {
				var k valueParam
				if json.Unmarshal(e.Keep, &k) != nil || k.Type != "tool_uses" {
					return nil, invalid(path+".keep.type", "Input should be 'tool_uses'")
				}
				ed.keep = k.Value
			}
			if c := e.ClearAtLeast; c != nil {
				ed.clearAtLeast = c.Value
			}
			ed.exclude = e.ExcludeTools
			if len(e.ClearToolInputs) > 0 && !isNull(e.ClearToolInputs) {
				if json.Unmarshal(e.ClearToolInputs, &ed.clearInputs) != nil {
					if json.Unmarshal(e.ClearToolInputs, &ed.clearInputsOf) != nil {
						return nil, invalid(path+".clear_tool_inputs", "Input should be a valid boolean or a list of tool names")
					}
				}
			}
		case "clear_thinking_20251015":
			if err := f.needBeta(path, betaContextManagement); err != nil {
				return nil, err
			}
			ed.keepThinking = 1
			if len(e.Keep) > 0 && !isNull(e.Keep) {
				var all string
				var k valueParam
				switch {
				case json.Unmarshal(e.Keep, &all) == nil && all == "all":
					ed.keepAllThinking = true
				case json.Unmarshal(e.Keep, &k) == nil && (k.Type == "thinking_turns" || k.Type == "all"):
					ed.keepAllThinking = k.Type == "all"
					ed.keepThinking = k.Value
				default:
					return nil, invalid(path+".keep", "Input should be 'all' or a thinking_turns count")
				}
			}
		case "compact_20260112":
			if err := f.needBeta(path, betaCompactEdit); err != nil {
				return nil, err
			}
			ed.triggerType, ed.triggerValue = "input_tokens", 150_000
			if t := e.Trigger; t != nil {
				if t.Type != "input_tokens" {
					return nil, invalid(path+".trigger.type", "Input should be 'input_tokens'")
				}
				if t.Value < 50_000 {
					return nil, invalid(path+".trigger.value", "Input should be greater than or equal to 50000")
				}
				ed.triggerValue = t.Value
			}
			if e.Instructions != nil {
				ed.instructions = strings.TrimSpace(*e.Instructions)
			}
			ed.pause = e.Pause != nil && *e.Pause
		default:
			return nil, invalid(path+".type", "Input should be 'clear_tool_uses_20250919', 'clear_thinking_20251015' or 'compact_20260112'")
		}
		edits = append(edits, ed)
	}
	return edits, nil
}

// valueParam is a typed count, such as {"type": "input_tokens", "value": 100}.
type valueParam struct {
	Type  string `json:"type"`
	Value int64  `json:"value"`
}

// toolUseRef is where a tool_use block, or its tool_result, is.
type toolUseRef struct {
	msg, block int
	id, name   string
}

// applyClearToolUses applies the edit e of type clear_tool_uses_20250919 to
// the conversation msgs, counted as in, whose prompt is before. It returns
// the edited input and what it cleared, or ok false when the edit does not
// apply: its trigger is not reached, nothing is old enough to clear, or
// less than clear_at_least would go.
func applyClearToolUses(e edit, msgs []MessageParam, first int, in promptInput, before *prompt) (out promptInput, applied wireAppliedEdit, after *prompt, ok bool) {
	var uses []toolUseRef
	results := make(map[string]toolUseRef)
	for i := first; i < len(msgs); i++ {
		for j, b := range msgs[i].Content {
			switch {
			case b.Type == "tool_use" && msgs[i].Role == "assistant":
				uses = append(uses, toolUseRef{i, j, b.ID, b.Name})
			case b.Type == "tool_result" && msgs[i].Role == "user" && b.Raw != nil:
				results[b.ToolUseID] = toolUseRef{i, j, b.ToolUseID, ""}
			}
		}
	}
	switch e.triggerType {
	case "tool_uses":
		if int64(len(uses)) < e.triggerValue {
			return in, applied, before, false
		}
	default:
		if before.tokens() < e.triggerValue {
			return in, applied, before, false
		}
	}
	old := uses[:max(0, len(uses)-int(e.keep))]
	edits := cloneEdits(in.edits)
	var cleared int64
	placeholder := mustMarshal(clearedToolResult)
	for _, u := range old {
		if slices.Contains(e.exclude, u.name) {
			continue
		}
		cleared++
		if r, ok := results[u.id]; ok {
			edits[[2]int{r.msg, r.block}] = withField(blockAt(msgs, in.edits, r), "content", placeholder)
		}
		if e.clearInputs || slices.Contains(e.clearInputsOf, u.name) {
			edits[[2]int{u.msg, u.block}] = withField(blockAt(msgs, in.edits, u), "input", []byte("{}"))
		}
	}
	if cleared == 0 {
		return in, applied, before, false
	}
	out = in
	out.edits = edits
	after, err := render(out)
	if err != nil {
		return in, applied, before, false
	}
	tokens := before.tokens() - after.tokens()
	if tokens < e.clearAtLeast {
		return in, applied, before, false
	}
	return out, wireAppliedEdit{Type: e.typ, ClearedInputTokens: tokens, ClearedToolUses: &cleared}, after, true
}

// applyClearThinking applies the edit e of type clear_thinking_20251015, as
// applyClearToolUses does.
func applyClearThinking(e edit, msgs []MessageParam, first int, in promptInput, before *prompt) (out promptInput, applied wireAppliedEdit, after *prompt, ok bool) {
	if e.keepAllThinking {
		return in, applied, before, false
	}
	var turns []int
	for i := first; i < len(msgs); i++ {
		if msgs[i].Role != "assistant" {
			continue
		}
		for _, b := range msgs[i].Content {
			if b.Type == "thinking" || b.Type == "redacted_thinking" {
				turns = append(turns, i)
				break
			}
		}
	}
	old := turns[:max(0, len(turns)-int(e.keepThinking))]
	if len(old) == 0 {
		return in, applied, before, false
	}
	edits := cloneEdits(in.edits)
	for _, i := range old {
		for j, b := range msgs[i].Content {
			if b.Type == "thinking" || b.Type == "redacted_thinking" {
				edits[[2]int{i, j}] = []byte{}
			}
		}
	}
	out = in
	out.edits = edits
	after, err := render(out)
	if err != nil {
		return in, applied, before, false
	}
	n := int64(len(old))
	return out, wireAppliedEdit{Type: e.typ, ClearedInputTokens: before.tokens() - after.tokens(), ClearedThinkingTurns: &n}, after, true
}

// blockAt returns the block at r as the edits so far leave it.
func blockAt(msgs []MessageParam, edits map[[2]int][]byte, r toolUseRef) []byte {
	if e, ok := edits[[2]int{r.msg, r.block}]; ok && len(e) > 0 {
		return e
	}
	b, _, _ := stripCacheControl("", msgs[r.msg].Content[r.block].Raw)
	return b
}

func cloneEdits(m map[[2]int][]byte) map[[2]int][]byte {
	out := make(map[[2]int][]byte, len(m)+4)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// summaryQuote is the most bytes of the last user text that a summary
// quotes.
const summaryQuote = 100

// summarize returns the summary that the server writes for a compaction of
// the messages msgs from first on, with the instructions given, if any.
func summarize(msgs []MessageParam, first int, instructions string) string {
	var sb strings.Builder
	if n := len(msgs) - first; n == 1 {
		sb.WriteString("Summary of 1 message.")
	} else {
		fmt.Fprintf(&sb, "Summary of %d messages.", n)
	}
	if first < len(msgs) {
		for _, b := range msgs[first].Content {
			if b.Type == "compaction" && b.Text != "" {
				fmt.Fprintf(&sb, " Earlier: %s", b.Text)
			}
		}
	}
	for i := len(msgs) - 1; i >= first; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		if text := lastText(msgs[i]); text != "" {
			if len(text) > summaryQuote {
				n := summaryQuote
				for n > 0 && !utf8.RuneStart(text[n]) {
					n--
				}
				text = text[:n] + "..."
			}
			fmt.Fprintf(&sb, " Last user text: %q.", text)
			break
		}
	}
	if instructions != "" {
		fmt.Fprintf(&sb, " Instructions: %q.", instructions)
	}
	return sb.String()
}

// lastText returns the text of the last text block of m, or "".
func lastText(m MessageParam) string {
	for i := len(m.Content) - 1; i >= 0; i-- {
		if m.Content[i].Type == "text" {
			return m.Content[i].Text
		}
	}
	return ""
}

// compactionSignature returns the signature the server gives a compaction
// block with summary.
func compactionSignature(summary string) string {
	sum := sha256.Sum256([]byte(summary))
	return "toolruntest_sig_" + hex.EncodeToString(sum[:8])
}
