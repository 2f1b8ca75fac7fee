package toolrun

import (
	"encoding/json"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

// This file holds the incremental encoding of requests. Marshalling the
// params of a request re-encodes the whole history, so that a long run pays
// O(n) per turn and O(n²) in all, most of it in reflection. The runner
// keeps instead the request JSON of each message it has sent, and encodes
// only the messages it has not: a turn's assistant message and tool
// results, or whatever the caller put in their place.
//
// A message is known by the pointer its union holds (OfUser, OfAssistant,
// OfSystem), which the history shares with the values the runner and the
// caller build: a message the caller replaces, or one that compaction or a
// BeforeRequest hook puts in, has a new pointer and is encoded afresh; one
// kept in place is not, wherever it moves to. The history's message values
// are never written through (the runner builds new ones; the docs of
// SetMessages and BeforeRequest ask the same of the caller), so the pointer
// is enough, and no edit needs to tell the cache what it changed.

// wireCache holds the request JSON of the messages of the last request.
type wireCache struct {
	entries []wireEntry
	// spare is reused, between requests, as the map of the entries that
	// moved; it is nil while unused.
	spare map[messageKey][]byte
	// scratch is reused as the list of one request's encodings.
	scratch [][]byte
	// tools is the request JSON of the last request's tool list; set is
	// the runner's tool set, which keeps the JSON of its own list.
	tools *toolsJSON
	set   *toolSet
	// system is the JSON of the last thread request's system prompt, whose
	// first element and length are systemOf and systemLen (systemJSON).
	system    string
	systemOf  *anthropic.BetaTextBlockParam
	systemLen int
	// head is the JSON of the plain params headOf, without messages,
	// tools and thread (headJSON).
	head   []byte
	headOf *anthropic.BetaMessageNewParams

	// link is the run's message thread, on unless Options.NoThread (thread.go).
	// A stopped run drops it with the rest of the cache, and starts a new
	// thread if it goes on.
	link threadLink
}

// toolsJSON is the request JSON of a tool list, known by the list's first
// element and length. A tool list the runner sends is never written
// through: it is a toolSet's (shared, never changed) or the runner's own,
// rebuilt when it changes, and a BeforeRequest hook gets a copy. So its
// identity is enough, as a message's pointer is, and a turn does not
// encode the tools' schemas again: they are most of what a request
// carries besides the messages (issue 15, CPU at 10 turns).
type toolsJSON struct {
	first *anthropic.BetaToolUnionParam
	n     int
	json  []byte
}

// toolsBody returns the request JSON of tools, a non-empty list. The
// encoding of a toolSet's own list is kept on the set, so that the runners
// built from the same tools encode their definitions once between them.
func (c *wireCache) toolsBody(tools []anthropic.BetaToolUnionParam) ([]byte, error) {
	first := &tools[0]
	if t := c.tools; t != nil && t.first == first && t.n == len(tools) {
		return t.json, nil
	}
	s := c.set
	shared := s != nil && len(s.defs) == len(tools) && &s.defs[0] == first
	if shared {
		if t := s.defsJSON.Load(); t != nil {
			c.tools = t
			return t.json, nil
		}
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return nil, err
	}
	t := &toolsJSON{first: first, n: len(tools), json: b}
	c.tools = t
	if shared {
		s.defsJSON.Store(t)
	}
	return b, nil
}

// systemJSON returns the JSON of a request's system prompt, known by its
// first element and length as a tool list is (toolsJSON): the runner's
// system prompt is its own (New clones it; a BeforeRequest hook gets a
// copy) and is never written through, so a thread turn does not encode it
// again to see whether it changed (thread.go).
func (c *wireCache) systemJSON(system []anthropic.BetaTextBlockParam) (string, error) {
	if len(system) == 0 {
		if system == nil {
			return "null", nil
		}
		return "[]", nil
	}
	if c.systemOf == &system[0] && c.systemLen == len(system) {
		return c.system, nil
	}
	b, err := json.Marshal(system)
	if err != nil {
		return "", err
	}
	c.system, c.systemOf, c.systemLen = string(b), &system[0], len(system)
	return c.system, nil
}

type wireEntry struct {
	key  messageKey
	json []byte
}

// messageKey is the identity of a message value.
type messageKey struct {
	user      *anthropic.BetaUserMessageParam
	assistant *anthropic.BetaAssistantMessageParam
	system    *anthropic.BetaSystemMessageParam
}

// keyOf returns the identity of m, or false for a message that is not
// cached: one with no variant set, or with an override or extra fields,
// whose JSON does not follow from the variant alone.
func keyOf(m *anthropic.BetaMessageParam) (messageKey, bool) {
	k := messageKey{m.OfUser, m.OfAssistant, m.OfSystem}
	if k == (messageKey{}) {
		return k, false
	}
	if _, ok := m.Overrides(); ok || m.ExtraFields() != nil {
		return k, false
	}
	return k, true
}

// body returns the request JSON of params, equal (as JSON) to what
// marshalling them gives, encoding only the messages not cached; or false
// when params must be marshalled by the client: they carry an override or
// extra fields at the top, or a message fails to encode (the client then
// reports the error).
func (c *wireCache) body(params *anthropic.BetaMessageNewParams, stream bool) ([]byte, bool) {
	return c.bodyFrom(params, stream, 0, false, nil)
}

// bodyFrom is body with only params.Messages[from:] in the body's
// messages (the cache still learns them all), and no tools if omitTools:
// a request that continues a message thread (thread.go). keys, if not nil,
// are the messages' keys as keyOf gives them, the zero key for one it
// does not cache: the thread has them already.
func (c *wireCache) bodyFrom(params *anthropic.BetaMessageNewParams, stream bool, from int, omitTools bool, keys []messageKey) ([]byte, bool) {
	if _, ok := params.Overrides(); ok || params.ExtraFields() != nil {
		return nil, false
	}
	rest := *params
	rest.Messages, rest.Tools = nil, nil
	head, err := c.headJSON(&rest)
	if err != nil || len(head) < 2 || head[len(head)-1] != '}' {
		return nil, false
	}
	var tools []byte
	if len(params.Tools) > 0 && !omitTools {
		if tools, err = c.toolsBody(params.Tools); err != nil {
			return nil, false
		}
	}
	msgs := params.Messages
	size := len(head) + len(`,"stream":true,"tools":,"messages":[]`) + len(tools)
	encs := c.scratch[:0]
	var moved map[messageKey][]byte
	kept := 0
	for i := range msgs {
		m := &msgs[i]
		var key messageKey
		var cacheable bool
		if keys != nil {
			key = keys[i]
			cacheable = key != messageKey{}
		} else {
			key, cacheable = keyOf(m)
		}
		var enc []byte
		switch {
		case !cacheable:
		case i < len(c.entries) && c.entries[i].key == key:
			enc = c.entries[i].json
		default:
			if moved == nil {
				moved = c.index(i)
			}
			enc = moved[key]
		}
		if enc == nil {
			if enc, err = m.MarshalJSON(); err != nil {
				clear(encs)
				c.drop()
				return nil, false
			}
		}
		if cacheable {
			// The entries before kept are not read again in this loop
			// (moved holds its own references to those after i).
			if kept < len(c.entries) {
				c.entries[kept] = wireEntry{key, enc}
			} else {
				c.entries = append(c.entries, wireEntry{key, enc})
			}
			kept++
		}
		encs = append(encs, enc)
		size += len(enc) + 1
	}
	clear(c.entries[kept:])
	c.entries = c.entries[:kept]
	if moved != nil {
		clear(moved)
		c.spare = moved
	}

	b := make([]byte, 0, size)
	b = append(b, head[:len(head)-1]...)
	if len(head) > 2 {
		b = append(b, ',')
	}
	// "stream" goes before the messages, where the client's own setting
	// of it (option.WithJSONSet) finds it at once.
	if stream {
		b = append(b, `"stream":true,`...)
	}
	switch {
	case tools != nil:
		b = append(b, `"tools":`...)
		b = append(b, tools...)
		b = append(b, ',')
	case params.Tools != nil && !omitTools: // empty, and not omitted (omitzero)
		b = append(b, `"tools":[],`...)
	}
	if msgs == nil { // omitted, as marshalling omits it (omitzero)
		if b[len(b)-1] == ',' {
			b = b[:len(b)-1]
		}
		return append(b, '}'), true
	}
	b = append(b, `"messages":[`...)
	for i, enc := range encs[min(from, len(encs)):] {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, enc...)
	}
	clear(encs)
	c.scratch = encs[:0]
	return append(b, ']', '}'), true
}

// headJSON returns the JSON of rest, params without messages and tools.
// The params of a run are mostly the same from turn to turn but for the
// thread field, and marshalling them walks every field of the SDK's
// struct by reflection (issue 15: CPU per turn at 10 turns, concurrent
// runs). So the JSON of plain params (see plainHead) without the thread is
// kept, known by the params' memory, and the thread's JSON is added to it.
// Params that are not plain are marshalled every time: a field that holds
// a pointer, a map or a slice the caller may still write through is not
// known by its memory.
func (c *wireCache) headJSON(rest *anthropic.BetaMessageNewParams) ([]byte, error) {
	k := *rest
	k.Thread = anthropic.BetaMessageThreadParamUnion{}
	// Headers, not in the JSON.
	k.Betas, k.UserProfileID, k.WorkspaceID = nil, param.Opt[string]{}, param.Opt[string]{}
	if !plainHead(&k) {
		return rest.MarshalJSON()
	}
	if c.head == nil || !sameMemory(&k, c.headOf) {
		b, err := k.MarshalJSON()
		if err != nil || len(b) < 2 || b[len(b)-1] != '}' {
			return rest.MarshalJSON()
		}
		c.head, c.headOf = b, &k
	}
	if param.IsOmitted(rest.Thread) {
		return c.head, nil
	}
	thread, err := rest.Thread.MarshalJSON()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(c.head)+len(`,"thread":`)+len(thread))
	b = append(b, c.head[:len(c.head)-1]...)
	if len(c.head) > 2 {
		b = append(b, ',')
	}
	b = append(b, `"thread":`...)
	b = append(b, thread...)
	return append(b, '}'), nil
}

// plainHead reports whether k, params without messages, tools, thread and
// headers,
// sets only the model, max_tokens, cache_control and a system prompt
// without citations, and none of them with extra fields: values that
// cannot change under the runner's feet. The system prompt's array is
// the run's own (New clones it, and a BeforeRequest hook gets a copy), and
// its blocks then hold strings only.
func plainHead(k *anthropic.BetaMessageNewParams) bool {
	for i := range k.System {
		b := &k.System[i]
		if len(b.Citations) > 0 || b.ExtraFields() != nil || b.CacheControl.ExtraFields() != nil {
			return false
		}
		if _, ok := b.Overrides(); ok {
			return false
		}
	}
	if k.CacheControl.ExtraFields() != nil {
		return false
	}
	if _, ok := k.CacheControl.Overrides(); ok {
		return false
	}
	plain := anthropic.BetaMessageNewParams{Model: k.Model, MaxTokens: k.MaxTokens, CacheControl: k.CacheControl, System: k.System}
	return sameMemory(&plain, k)
}

// index returns the entries from i on by key, for messages that moved.
func (c *wireCache) index(i int) map[messageKey][]byte {
	m := c.spare
	if m == nil {
		m = make(map[messageKey][]byte, len(c.entries)-i)
	}
	c.spare = nil
	for _, e := range c.entries[min(i, len(c.entries)):] {
		m[e.key] = e.json
	}
	return m
}

// drop forgets every entry.
func (c *wireCache) drop() {
	clear(c.entries)
	c.entries = c.entries[:0]
}

// wireRequest returns params and the options that send them as body.
func wireRequest(params *anthropic.BetaMessageNewParams, body []byte, opts []option.RequestOption) (anthropic.BetaMessageNewParams, []option.RequestOption) {
	// The client reads params for the beta and workspace headers, the
	// timeout, the structured output and its OpenTelemetry spans (which,
	// in content mode, record params.Messages themselves), and marshals
	// them: an override keeps that marshalling trivial, and the body
	// replaces its result.
	p := *params
	param.SetJSON(emptyObject, &p)
	return p, append(opts, option.WithRequestBody("application/json", body))
}

var emptyObject = json.RawMessage(`{}`)

// wireCache returns the runner's cache of request JSON, made on first use.
func (r *Runner) wireCache() *wireCache {
	if r.wire == nil {
		r.wire = &wireCache{set: r.set}
	}
	return r.wire
}
