package toolrun

import (
	"fmt"
	"unicode/utf8"
)

// This file holds how a tool result is cut for the model: the limit of a
// tool's results, the cut and its note, and CutResult for a driver that
// carries results through a channel of bounded size.

// defaultMaxResultBytes bounds the text of a tool result sent to the model
// when neither [ToolConfig.MaxResultBytes] nor [Options.MaxResultBytes] is
// set.
const defaultMaxResultBytes = 100_000

// resultLimit returns the text limit of a tool's results, or 0 for none.
func (r *Runner) resultLimit(e *toolEntry) int {
	n := r.opts.MaxResultBytes
	if e != nil && e.config.MaxResultBytes != 0 {
		n = e.config.MaxResultBytes
	}
	switch {
	case n < 0:
		return 0
	case n == 0:
		return defaultMaxResultBytes
	}
	return n
}

// truncateContent cuts the text blocks of content so their text adds up to
// at most limit bytes, at a UTF-8 boundary, and tells the model so at the
// end. Non-text blocks are kept. It reports whether it cut anything; the
// caller's slice is not changed.
func truncateContent(content []Content, limit int) ([]Content, bool) {
	total := 0
	for _, c := range content {
		if c.OfText != nil {
			total += len(c.OfText.Text)
		}
	}
	if limit <= 0 || total <= limit || alreadyCut(content, limit) {
		return content, false
	}
	out := make([]Content, 0, len(content)+1)
	left := limit
	for _, c := range content {
		if c.OfText == nil {
			out = append(out, c)
			continue
		}
		text := c.OfText.Text
		if len(text) > left {
			cut := left
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			text = text[:cut]
		}
		left -= len(text)
		if text == "" {
			continue
		}
		t := *c.OfText
		t.Text = text
		out = append(out, Content{OfText: &t})
	}
	out = append(out, Text(fmt.Sprintf(cutNote, total, limit)))
	return out, true
}

// cutNote is the note that ends a result cut for the model: the text's
// length before the cut and the limit.
const cutNote = "[toolrun: this result was truncated from %d to %d bytes of text; the full result was kept for the operator. Ask for less, or for a part of it, if you need the rest.]"

// alreadyCut reports whether content is a result cut to limit already
// (by driver.CutResult on another machine): its text without the last
// block is within limit and the last block is the note for limit. Such a
// result is sent as it is, as the cut it is.
func alreadyCut(content []Content, limit int) bool {
	n := len(content)
	if n == 0 || content[n-1].OfText == nil {
		return false
	}
	var total, lim int
	note := content[n-1].OfText.Text
	if _, err := fmt.Sscanf(note, cutNote, &total, &lim); err != nil || lim != limit || total <= limit || note != fmt.Sprintf(cutNote, total, lim) {
		return false
	}
	rest := 0
	for _, c := range content[:n-1] {
		if c.OfText != nil {
			rest += len(c.OfText.Text)
		}
	}
	return rest <= limit
}

// CutResult returns res as the model receives it from this runner: with
// its text cut to the result limit of its tool ([ToolConfig.MaxResultBytes],
// else [Options.MaxResultBytes]) and the note that says so, and Truncated
// set; res itself if it is within the limit. A runner that sends a cut
// result sends it as it is, so the model sees exactly what it sees of the
// whole result in process. A driver that runs a call on one machine and
// carries its result through a channel of bounded size (an activity's
// result, a queue) cuts it there; what it no longer carries is the text
// past the limit, which the model never sees. res is not changed.
func (r *Runner) cutResult(res *ToolResult) *ToolResult {
	if res == nil {
		return nil
	}
	cut, ok := truncateContent(res.Content, r.resultLimit(r.tool(res.Call)))
	if !ok {
		return res
	}
	c := *res
	c.Content, c.Truncated = cut, true
	return &c
}
