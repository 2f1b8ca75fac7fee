package toolrun

import (
	"encoding/json"
	"slices"

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
// OfSystem). That is sound because no one but the runner can reach the
// values behind those pointers: everything that hands out or takes in
// messages copies them whole (New, Messages, Params, SetMessages,
// AppendMessages, Result.Messages, State and Resume), and a BeforeRequest
// hook gets a copy of the history, which the runner encodes afresh. A
// message the caller replaces, or one that compaction or a hook puts in,
// has a new pointer and is encoded afresh; one kept in place is not,
// wherever it moves to.
//
// The rest of a request is encoded every turn (the system prompt and the
// other params are small), but for the tool list, which is known by its
// elements: a tool definition is never written through (see toolSet), and
// a list in which an element was replaced, in place or not, is encoded
// again.

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

	// link is the run's message thread, on unless Options.NoThread (thread.go).
	// A stopped run drops it with the rest of the cache, and starts a new
	// thread if it goes on.
	link threadLink
}

// toolsJSON is the request JSON of a tool list, known by its elements (the
// pointers of their unions): list is a copy of them, so that a list
// written in place since is seen to differ.
type toolsJSON struct {
	list []anthropic.BetaToolUnionParam
	json []byte
}

// toolsBody returns the request JSON of tools, a non-empty list. The
// encoding of a toolSet's own list is kept on the set, so that the runners
// built from the same tools encode their definitions once between them.
func (c *wireCache) toolsBody(tools []anthropic.BetaToolUnionParam) ([]byte, error) {
	if t := c.tools; t != nil && slices.Equal(t.list, tools) {
		return t.json, nil
	}
	s := c.set
	shared := s != nil && slices.Equal(s.defs, tools)
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
	t := &toolsJSON{list: slices.Clone(tools), json: b}
	c.tools = t
	if shared {
		s.defsJSON.Store(t)
	}
	return b, nil
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
	head, ok := headOf(params)
	if !ok {
		return nil, false
	}
	encs, ok := c.encode(params.Messages)
	if !ok {
		return nil, false
	}
	return c.assemble(params, head, stream, encs, 0, false)
}

// bodySize returns len of what body would return, without assembling it:
// the runner measures every request against the API's size limit, and
// building a body as long as the whole history only to measure it made
// each turn of a long run allocate the history again.
func (c *wireCache) bodySize(params *anthropic.BetaMessageNewParams, stream bool) (int, bool) {
	head, ok := headOf(params)
	if !ok {
		return 0, false
	}
	encs, ok := c.encode(params.Messages)
	if !ok {
		return 0, false
	}
	var tools []byte
	if len(params.Tools) > 0 {
		var err error
		if tools, err = c.toolsBody(params.Tools); err != nil {
			return 0, false
		}
	}
	// Each term is what assemble appends, in its order.
	n := len(head) - 1
	comma := len(head) > 2
	if comma {
		n++
	}
	if stream {
		n += len(`"stream":true,`)
		comma = true
	}
	switch {
	case tools != nil:
		n += len(`"tools":`) + len(tools) + 1
		comma = true
	case params.Tools != nil:
		n += len(`"tools":[],`)
		comma = true
	}
	if params.Messages == nil {
		if comma {
			n--
		}
		return n + 1, true
	}
	n += len(`"messages":[`) + len(`]}`)
	for i, enc := range encs {
		if i > 0 {
			n++
		}
		n += len(enc)
	}
	return n, true
}

// headOf returns the JSON of params without messages and tools, or false
// when the client must marshal them (an override or extra fields at the
// top, or a failure).
func headOf(params *anthropic.BetaMessageNewParams) ([]byte, bool) {
	if _, ok := params.Overrides(); ok || params.ExtraFields() != nil {
		return nil, false
	}
	rest := *params
	rest.Messages, rest.Tools = nil, nil
	head, err := rest.MarshalJSON()
	if err != nil || len(head) < 2 || head[len(head)-1] != '}' {
		return nil, false
	}
	return head, true
}

// encode returns the request JSON of each message of msgs, from the cache
// where it has them, and keeps the cache to msgs; or false if a message
// fails to encode. The list is the cache's scratch, valid until the next
// call.
func (c *wireCache) encode(msgs []anthropic.BetaMessageParam) ([][]byte, bool) {
	encs := c.scratch[:0]
	var moved map[messageKey][]byte
	kept := 0
	for i := range msgs {
		m := &msgs[i]
		key, cacheable := keyOf(m)
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
			var err error
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
	}
	clear(c.entries[kept:])
	c.entries = c.entries[:kept]
	if moved != nil {
		clear(moved)
		c.spare = moved
	}
	c.scratch = encs
	return encs, true
}

// learn adds m's encoding to the cache, as the message after those of the
// last request: a reply, whose JSON the thread compares with the next
// request's (thread.go) and which that request then reuses.
func (c *wireCache) learn(m *anthropic.BetaMessageParam) ([]byte, bool) {
	enc, err := m.MarshalJSON()
	if err != nil {
		return nil, false
	}
	if key, ok := keyOf(m); ok {
		c.entries = append(c.entries, wireEntry{key, enc})
	}
	return enc, true
}

// assemble returns the request body of params from head (headOf), with
// encs[from:] as its messages (encs being the encoding of every message,
// as encode gives them) and no tools if omitTools: a request that
// continues a message thread (thread.go) sends only what follows what the
// thread holds.
func (c *wireCache) assemble(params *anthropic.BetaMessageNewParams, head []byte, stream bool, encs [][]byte, from int, omitTools bool) ([]byte, bool) {
	var tools []byte
	if len(params.Tools) > 0 && !omitTools {
		var err error
		if tools, err = c.toolsBody(params.Tools); err != nil {
			return nil, false
		}
	}
	size := len(head) + len(`,"stream":true,"tools":,"messages":[]`) + len(tools)
	for _, enc := range encs[min(from, len(encs)):] {
		size += len(enc) + 1
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
	if params.Messages == nil { // omitted, as marshalling omits it (omitzero)
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
	return append(b, ']', '}'), true
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
