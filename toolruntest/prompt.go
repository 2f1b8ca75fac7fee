package toolruntest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"
)

// prompt is the input of a request as the server counts and caches it: the
// tools, system and messages fields as sent, in that order, each
// cache_control member taken out, the messages before the last compaction
// block left out, and the edits of context_management applied.
type prompt struct {
	blocks []promptBlock
	size   int // bytes of the whole prompt
	// firstMessage is the index of the first message counted: that of the
	// message holding the last compaction block, or 0.
	firstMessage int
}

// promptBlock is one block of a prompt: a tool, a system text block, or a
// content block of a message.
type promptBlock struct {
	path string // where the request has it, such as "messages.2.content.0"
	typ  string
	role string // the role of its message, or "tools" or "system"
	msg  int    // the index of its message, or -1
	// end is the length in bytes of the prompt up to and including the block:
	// the prompt's prefix that ends with the block.
	end int
	// body is the block as counted: without cache_control, edits applied.
	body []byte
	// ttls holds the TTL of each cache_control on the block or on a block in
	// its content, such as those of a tool_result's content.
	ttls      []time.Duration
	cacheable bool
}

// tokens returns the input tokens of the prompt's prefix that ends with
// the block.
func (b promptBlock) tokens() int64 { return ceilQuarter(b.end) }

// promptInput is what a prompt is made from.
type promptInput struct {
	tools, system, messages json.RawMessage
	// edits replaces blocks of messages, by message and block index; an
	// empty, non-nil value removes the block.
	edits map[[2]int][]byte
}

// special reports whether in has anything that makes it count otherwise
// than as its bytes: a cache_control member, a compaction block or edits.
func (in promptInput) special() bool {
	if in.edits != nil {
		return true
	}
	for _, raw := range []json.RawMessage{in.tools, in.system, in.messages} {
		if bytes.Contains(raw, []byte(`"cache_control"`)) || bytes.Contains(raw, []byte(`"compaction"`)) {
			return true
		}
	}
	return false
}

// inputFor returns the input of p as sent.
func inputFor(p Params) promptInput {
	return promptInput{tools: p.Raw["tools"], system: p.Raw["system"], messages: p.Raw["messages"]}
}

// render makes the prompt of in. It fails on a cache_control that the API
// would reject.
func render(in promptInput) (*prompt, error) {
	pr := new(prompt)
	if raw := in.tools; len(raw) > 0 && !isNull(raw) {
		adj := 0
		for k, sp := range elements(raw) {
			path := fmt.Sprintf("tools.%d", k)
			el := raw[sp.start:sp.end]
			body, ttls, err := stripCacheControl(path, el)
			if err != nil {
				return nil, err
			}
			adj += len(body) - len(el)
			pr.blocks = append(pr.blocks, promptBlock{path: path, typ: "tool", role: "tools", msg: -1,
				end: pr.size + sp.end + adj, body: body, ttls: ttls, cacheable: true})
		}
		pr.size += len(raw) + adj
	}
	if raw := in.system; len(raw) > 0 && !isNull(raw) {
		adj := 0
		if raw[skipSpace(raw, 0)] == '"' {
			pr.blocks = append(pr.blocks, promptBlock{path: "system", typ: "text", role: "system", msg: -1,
				end: pr.size + len(raw), body: raw, cacheable: true})
		}
		for k, sp := range elements(raw) {
			path := fmt.Sprintf("system.%d", k)
			el := raw[sp.start:sp.end]
			body, ttls, err := stripCacheControl(path, el)
			if err != nil {
				return nil, err
			}
			adj += len(body) - len(el)
			pr.blocks = append(pr.blocks, promptBlock{path: path, typ: "text", role: "system", msg: -1,
				end: pr.size + sp.end + adj, body: body, ttls: ttls, cacheable: true})
		}
		pr.size += len(raw) + adj
	}

	raw := in.messages
	msgs := elements(raw)
	pr.firstMessage = lastCompaction(raw, msgs)
	adj := 0
	if pr.firstMessage > 0 {
		// The prompt starts "[" and goes on with the compaction's message.
		adj = -(msgs[pr.firstMessage].start - 1)
	}
	for i := pr.firstMessage; i < len(msgs); i++ {
		m := raw[msgs[i].start:msgs[i].end]
		var role string
		json.Unmarshal(field(m, "role"), &role)
		var content span
		for _, mb := range members(m) {
			if mb.key == "content" {
				content = span{msgs[i].start + mb.valueStart, msgs[i].start + mb.valueEnd}
			}
		}
		c := raw[content.start:content.end]
		if len(c) > 0 && c[0] == '"' {
			pr.blocks = append(pr.blocks, promptBlock{path: fmt.Sprintf("messages.%d.content", i), typ: "text", role: role, msg: i,
				end: pr.size + content.end + adj, body: c, cacheable: true})
			continue
		}
		for j, sp := range elements(c) {
			path := fmt.Sprintf("messages.%d.content.%d", i, j)
			el := c[sp.start:sp.end]
			typ := blockType(el)
			body, ttls, err := stripCacheControl(path, el)
			if err != nil {
				return nil, err
			}
			if len(ttls) > 0 && (typ == "thinking" || typ == "redacted_thinking") {
				return nil, invalid(path+".cache_control", "cache_control cannot be set on %s blocks", typ)
			}
			if e, ok := in.edits[[2]int{i, j}]; ok {
				if len(e) == 0 {
					adj -= len(el) + 1 // the block and a comma
					continue
				}
				body = e
			}
			adj += len(body) - len(el)
			pr.blocks = append(pr.blocks, promptBlock{path: path, typ: typ, role: role, msg: i,
				end: pr.size + content.start + sp.end + adj, body: body, ttls: ttls,
				cacheable: typ != "thinking" && typ != "redacted_thinking"})
		}
	}
	pr.size += len(raw) + adj
	return pr, nil
}

// tokens returns the input tokens of the whole prompt.
func (pr *prompt) tokens() int64 { return ceilQuarter(pr.size) }

// lastCompaction returns the index of the message that holds the last
// compaction block with a summary, or 0. The API drops what comes before it.
func lastCompaction(raw []byte, msgs []span) int {
	for i := len(msgs) - 1; i > 0; i-- {
		m := raw[msgs[i].start:msgs[i].end]
		if !bytes.Contains(m, []byte(`"compaction"`)) {
			continue
		}
		for _, sp := range elements(field(m, "content")) {
			b := field(m, "content")[sp.start:sp.end]
			if blockType(b) == "compaction" {
				if c := field(b, "content"); c != nil && !isNull(c) {
					return i
				}
			}
		}
	}
	return 0
}

// blockType returns the type of the content block b.
func blockType(b []byte) string {
	var t string
	json.Unmarshal(field(b, "type"), &t)
	return t
}

// stripCacheControl returns the block b, at path, without its cache_control
// member and those of the blocks of its content, and the TTLs they set.
func stripCacheControl(path string, b []byte) ([]byte, []time.Duration, error) {
	if !bytes.Contains(b, []byte(`"cache_control"`)) {
		return b, nil, nil
	}
	var ttls []time.Duration
	if cc := field(b, "cache_control"); cc != nil {
		if !isNull(cc) {
			ttl, err := parseCacheControl(path+".cache_control", cc)
			if err != nil {
				return nil, nil, err
			}
			ttls = append(ttls, ttl)
		}
		b = withField(b, "cache_control", nil)
	}
	if c := field(b, "content"); len(c) > 0 && c[0] == '[' && bytes.Contains(c, []byte(`"cache_control"`)) {
		var out []byte
		out = append(out, '[')
		for k, sp := range elements(c) {
			nested, t, err := stripCacheControl(fmt.Sprintf("%s.content.%d", path, k), c[sp.start:sp.end])
			if err != nil {
				return nil, nil, err
			}
			ttls = append(ttls, t...)
			if k > 0 {
				out = append(out, ',')
			}
			out = append(out, nested...)
		}
		b = withField(b, "content", append(out, ']'))
	}
	return b, ttls, nil
}

// parseCacheControl returns the TTL that the cache_control value raw, at
// path, asks for.
func parseCacheControl(path string, raw []byte) (time.Duration, error) {
	var cc struct {
		Type string `json:"type"`
		TTL  string `json:"ttl"`
	}
	if json.Unmarshal(raw, &cc) != nil {
		return 0, invalid(path, "Input should be a valid dictionary")
	}
	if cc.Type != "ephemeral" {
		return 0, invalid(path+".type", "Input should be 'ephemeral'")
	}
	switch cc.TTL {
	case "", "5m":
		return 5 * time.Minute, nil
	case "1h":
		return time.Hour, nil
	}
	return 0, invalid(path+".ttl", "Input should be '5m' or '1h'")
}

// prefixHashes returns, for each block of pr, the hash of the prompt's
// prefix that ends with it, for model. The hash covers the blocks in their
// canonical form, with their role and the position of their message, so
// that key order, whitespace and cache_control do not change it.
func (pr *prompt) prefixHashes(model string) [][sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%q\n", model)
	out := make([][sha256.Size]byte, len(pr.blocks))
	for i, b := range pr.blocks {
		msg := b.msg
		if msg >= 0 {
			msg -= pr.firstMessage
		}
		fmt.Fprintf(h, "%s %d %s ", b.role, msg, b.typ)
		h.Write(canonical(b.body))
		h.Write([]byte{'\n'})
		h.Sum(out[i][:0])
	}
	return out
}
