package toolruntest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
)

// This file holds the server's thinking block binding (Options.BindThinking):
// as the API does for the accounts it binds thinking for, the server
// records what came before each thinking block it sends, and checks that a
// later request sends the block back behind the same conversation.

// prefixHash is the hash of the canonical JSON of what comes before a
// thinking block: the system prompt, the tools, the earlier messages and
// the blocks of its own message before it.
type prefixHash [sha256.Size]byte

// blockPrefix returns the hash of what comes before block j of message i
// of p's conversation msgs. When j is -1 message i is the reply being sent,
// which msgs does not hold, and head holds its blocks before the thinking
// block.
func blockPrefix(p Params, msgs []MessageParam, head []json.RawMessage) prefixHash {
	var b bytes.Buffer
	b.WriteString(`{"system":`)
	b.Write(boundJSON(p.Raw["system"]))
	b.WriteString(`,"tools":`)
	b.Write(boundJSON(p.Raw["tools"]))
	b.WriteString(`,"messages":[`)
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":%q,"content":[`, m.Role)
		for k, blk := range m.Content {
			if k > 0 {
				b.WriteByte(',')
			}
			b.Write(boundBlock(blk))
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`],"head":[`)
	for k, raw := range head {
		if k > 0 {
			b.WriteByte(',')
		}
		b.Write(boundJSON(raw))
	}
	b.WriteString(`]}`)
	return sha256.Sum256(b.Bytes())
}

// boundBlock returns blk as canonical JSON: a block sent as the string
// content of a message is the text block it stands for.
func boundBlock(blk Block) []byte {
	if blk.Raw == nil {
		return boundJSON(mustMarshal(wireText{Type: "text", Text: blk.Text}))
	}
	return boundJSON(blk.Raw)
}

// boundJSON returns raw with its object keys sorted, its null members and
// its cache_control members left out (a cache breakpoint may move without
// changing the conversation), and a string system prompt or content as
// the one text block it stands for. A missing value is null.
func boundJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("null")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return raw
	}
	if s, ok := v.(string); ok {
		v = []any{map[string]any{"type": "text", "text": s}}
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if e.Encode(prune(v)) != nil {
		return raw
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// prune returns v without null members or cache_control members, at any
// depth, and with a string content as the text block it stands for.
func prune(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			if e == nil || k == "cache_control" {
				continue
			}
			if s, ok := e.(string); ok && k == "content" {
				if _, isBlock := x["type"]; !isBlock || x["type"] == "tool_result" {
					e = []any{map[string]any{"type": "text", "text": s}}
				}
			}
			m[k] = prune(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = prune(e)
		}
		return l
	}
	return v
}

// thinkingMismatch is a thinking block of a request that fails the binding
// check: at messages.i.content.j.
type thinkingMismatch struct{ i, j int }

func (m thinkingMismatch) path() string { return fmt.Sprintf("messages.%d.content.%d", m.i, m.j) }

// checkThinking returns the thinking blocks of p's conversation msgs that
// the server sent behind another prefix than the one they are sent back
// behind now, or never sent. s.mu must be held.
func (s *Server) checkThinking(p Params, msgs []MessageParam) []thinkingMismatch {
	var bad []thinkingMismatch
	for i, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		for j, b := range m.Content {
			if b.Type != "thinking" {
				continue
			}
			want, ok := s.thinking[b.Signature]
			if ok {
				head := make([]json.RawMessage, j)
				for k := range j {
					head[k] = boundBlock(m.Content[k])
				}
				ok = blockPrefix(p, msgs[:i], head) == want
			}
			if !ok {
				bad = append(bad, thinkingMismatch{i, j})
			}
		}
	}
	return bad
}

// dropThinking returns msgs without the blocks of bad and, as the API
// removes them, the rest of each one's run of consecutive thinking blocks.
// msgs is not changed.
func dropThinking(msgs []MessageParam, bad []thinkingMismatch) []MessageParam {
	out := slices.Clone(msgs)
	drop := make(map[thinkingMismatch]bool)
	for _, m := range bad {
		for j := m.j; j < len(msgs[m.i].Content) && msgs[m.i].Content[j].Type == "thinking"; j++ {
			drop[thinkingMismatch{m.i, j}] = true
		}
	}
	for i := range out {
		var kept []Block
		changed := false
		for j, b := range out[i].Content {
			if drop[thinkingMismatch{i, j}] {
				changed = true
				continue
			}
			kept = append(kept, b)
		}
		if changed {
			out[i].Content = kept
		}
	}
	return out
}

// recordThinking records, for each thinking block of the reply m to the
// request p with the conversation msgs, what came before it. s.mu must be
// held.
func (s *Server) recordThinking(p Params, msgs []MessageParam, m message) {
	for j, b := range m.content {
		if b.Type != "thinking" || b.Signature == "" {
			continue
		}
		head := make([]json.RawMessage, j)
		for k := range j {
			head[k] = blockJSON(m.content[k], true)
		}
		if s.thinking == nil {
			s.thinking = make(map[string]prefixHash)
		}
		s.thinking[b.Signature] = blockPrefix(p, msgs, head)
	}
}

// blockBinding returns the request's thinking.block_binding
// prefix_mismatch_behavior: "error" (the default) or "drop_block".
func blockBinding(p Params) string {
	var t struct {
		BlockBinding struct {
			PrefixMismatchBehavior string `json:"prefix_mismatch_behavior"`
		} `json:"block_binding"`
	}
	json.Unmarshal(p.Raw["thinking"], &t)
	if t.BlockBinding.PrefixMismatchBehavior == "drop_block" {
		return "drop_block"
	}
	return "error"
}
