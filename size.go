package toolrun

import (
	"encoding/json"
	"fmt"
	"slices"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// This file holds the request size limit. The Messages API refuses a
// request body over 32 MB with a 413 before it reaches the model. A
// turn's tool results are what makes a request grow by more than a
// model's reply can, so they are fitted when the turn is committed: when
// the results would take the request past the limit, the largest are cut
// (an image or a document is left out, text is cut), each with a note
// that tells the model, until they fit. The history is changed only in
// the results toolrun itself writes, and before they are first sent, so
// nothing sent before changes. What still cannot fit (a history grown
// too large already, a caller's own message) stops the run with
// [ErrRequestTooLarge] before it is sent.

// maxRequestBytes is the Messages API's request size limit, 32 MB
// (decimal, the smaller reading).
const maxRequestBytes = 32_000_000

// requestHeadroom is what the fitting of results leaves for the parts of
// a request it does not measure: the system prompt and the other params,
// and the JSON around the messages.
const requestHeadroom = 1 << 20

// mediaCutNote is the note in place of an image or a document left out of
// a result: its kind and encoded size.
const mediaCutNote = "[toolrun: an %s of %d bytes was left out of this result: with it the request would pass the API's 32 MB limit. Ask for a smaller one if you need it.]"

// sizeCutNote ends a result whose text was cut to fit the request limit.
const sizeCutNote = "[toolrun: this result was cut from %d to %d bytes of text to keep the request within the API's 32 MB limit; the full result was kept for the operator.]"

// fitResults returns blocks, the tool_result blocks of a turn, cut so
// that they add at most budget bytes of JSON to the request: the largest
// result is cut first, its images and documents left out before its text
// is cut, each cut said in a note. blocks is not changed.
func fitResults(blocks []anthropic.BetaContentBlockParamUnion, budget int) []anthropic.BetaContentBlockParamUnion {
	sizes := make([]int, len(blocks))
	total := 0
	for i, b := range blocks {
		sizes[i] = resultSize(b)
		total += sizes[i]
	}
	if total <= budget {
		return blocks
	}
	out := slices.Clone(blocks)
	for total > budget {
		i := 0
		for j := range sizes {
			if sizes[j] > sizes[i] {
				i = j
			}
		}
		over := total - budget
		cut, ok := cutResult(out[i], sizes[i]-over)
		if !ok {
			break // nothing left to cut: the request check says so
		}
		n := resultSize(cut)
		if n >= sizes[i] {
			break // the cut gained nothing: the request check says so
		}
		out[i] = cut
		total += n - sizes[i]
		sizes[i] = n
	}
	return out
}

// cutResult returns b, a tool_result block, made smaller toward want bytes
// of JSON: its largest image or document left out, or if it has none its
// text cut; false when there is nothing left to cut.
func cutResult(b anthropic.BetaContentBlockParamUnion, want int) (anthropic.BetaContentBlockParamUnion, bool) {
	tr := b.OfToolResult
	if tr == nil {
		return b, false
	}
	content := slices.Clone(tr.Content)
	big, bigSize := -1, 0
	for i, c := range content {
		if c.OfImage == nil && c.OfDocument == nil {
			continue
		}
		if n := contentSize(c); n > bigSize {
			big, bigSize = i, n
		}
	}
	if big >= 0 {
		kind := "image"
		if content[big].OfDocument != nil {
			kind = "document"
		}
		content[big] = Text(fmt.Sprintf(mediaCutNote, kind, bigSize))
	} else {
		text := 0
		for _, c := range content {
			if c.OfText != nil {
				text += len(c.OfText.Text)
			}
		}
		// JSON escaping makes a text up to six times its size: cut it in
		// the ratio of its escaped size, less the note.
		escaped := 0
		for _, c := range content {
			escaped += contentSize(c)
		}
		limit := max(1, int(float64(text)*float64(want)/float64(max(1, escaped)))-len(sizeCutNote)-64) // truncateContent reads 0 as no limit
		if text == 0 || limit >= text {
			return b, false
		}
		cut, _ := truncateContent(content, limit)
		if n := len(cut); n > 0 && cut[n-1].OfText != nil {
			cut[n-1] = Text(fmt.Sprintf(sizeCutNote, text, limit))
		}
		content = cut
	}
	c := *tr
	c.Content = content
	return anthropic.BetaContentBlockParamUnion{OfToolResult: &c}, true
}

// resultSize is about the size of the JSON of b, a tool_result block, at
// least as large, without encoding its images and text: a base64 image of
// 40 MB costs a scan, not an encoding.
func resultSize(b anthropic.BetaContentBlockParamUnion) int {
	tr := b.OfToolResult
	if tr == nil {
		return jsonSize(b)
	}
	n := 128 + len(tr.ToolUseID)
	for _, c := range tr.Content {
		n += contentSize(c)
	}
	return n
}

// contentSize is about the size of the JSON of c, at least as large: a
// text counts each byte JSON may escape as 6, a base64 source its data.
func contentSize(c Content) int {
	switch {
	case c.OfText != nil && c.OfText.CacheControl.TTL == "" && len(c.OfText.Citations) == 0:
		return 64 + escapedSize(c.OfText.Text)
	case c.OfImage != nil && c.OfImage.Source.OfBase64 != nil:
		return 256 + len(c.OfImage.Source.OfBase64.Data)
	case c.OfDocument != nil && c.OfDocument.Source.OfBase64 != nil:
		return 512 + len(c.OfDocument.Source.OfBase64.Data) + escapedSize(c.OfDocument.Title.Value) + escapedSize(c.OfDocument.Context.Value)
	}
	return jsonSize(c)
}

// escapedSize is the most bytes s takes as a JSON string's contents.
func escapedSize(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c == '"', c == '\\', c == '<', c == '>', c == '&':
			n += 5
		case c == 0xE2: // U+2028 and U+2029, escaped as \u2028
			n += 3
		}
	}
	return n
}

// jsonSize is the size of v's JSON; a value that does not encode counts
// as 0 (the client reports it when the request is sent).
func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// resultBudget is how many bytes of JSON the tool results of the pending
// turn may add to the next request: the limit less the history, the
// pending response, the tool list and the headroom.
func (r *Runner) resultBudget(p *turnState) int {
	used := requestHeadroom + jsonSize(p.Message)
	var entries []wireEntry // the encodings of the last request, in its order
	if c := r.wire; c != nil {
		entries = c.entries
		if c.tools != nil && slices.Equal(c.tools.list, r.toolDefs) {
			used += len(c.tools.json)
		} else {
			used += jsonSize(r.toolDefs)
		}
	} else {
		used += jsonSize(r.toolDefs)
	}
	// The history is the last request's messages in the same order, so
	// the entries are walked beside it; only a message that moved or is
	// new sends the walk to a map of the rest, made once. A map made every
	// turn cost each turn of a long run an allocation as large as its
	// history.
	var known map[messageKey]int
	j := 0
	for i := range r.st.Params.Messages {
		m := &r.st.Params.Messages[i]
		if k, ok := keyOf(m); ok {
			if j < len(entries) && entries[j].key == k {
				used += len(entries[j].json)
				j++
				continue
			}
			if known == nil {
				known = make(map[messageKey]int, len(entries))
				for _, e := range entries {
					known[e.key] = len(e.json)
				}
			}
			if n, ok := known[k]; ok {
				used += n
				continue
			}
		}
		used += jsonSize(m)
	}
	return maxRequestBytes - used
}

// requestSize is the size of the body of a request with params, as the
// run sends it without a thread (a thread's request is smaller).
func (r *Runner) requestSize(params *anthropic.BetaMessageNewParams) int {
	if n, ok := r.wireCache().bodySize(params, false); ok {
		return n
	}
	return jsonSize(params)
}
