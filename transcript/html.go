package transcript

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var reportTemplate string

var reportTmpl = template.Must(template.New("report").Parse(reportTemplate))

// maxShown bounds the bytes of one piece of text the report shows.
const maxShown = 64 << 10

// WriteHTML writes a report of t to w: one self-contained HTML page with a
// timeline of the turns where each model request and tool call is a bar as
// long as it took, the failures with their errors and stacks, a chart of
// the tokens of each turn, and the conversation.
//
// The page needs nothing else: no script (it has none), no stylesheet, no
// font, no image that is not inline. All text from the model and the tools
// is escaped by html/template as it is written, and a Content-Security-Policy
// that allows no script, no request and no frame guards the page should
// something slip through: the page treats the run's text as untrusted.
func WriteHTML(w io.Writer, t *Transcript) error {
	var buf bytes.Buffer
	if err := reportTmpl.Execute(&buf, buildReport(t)); err != nil {
		return fmt.Errorf("transcript: rendering the report: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// ViewFile writes the report of the transcript in the file named in to the
// file named out (see [WriteHTML]). It is the command line's "view"
// command.
func ViewFile(in, out string) error {
	t, err := ReadFile(in)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, t); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// The view model of the template.
type (
	report struct {
		Title        string
		Model        string
		Started      string
		Elapsed      string
		Meta         []keyValue
		Stop         *stopView
		Incomplete   bool
		Torn         bool
		Turns        int
		Calls        int
		Failures     int
		InputTokens  int64
		OutputTokens int64
		Axis         []tick
		Timeline     []timelineTurn
		Chart        chart
		FailureList  []failureView
		Conversation []messageView
	}
	keyValue struct{ Key, Value string }
	stopView struct {
		Reason, Detail, Error string
		Class                 string // ok, warn, bad
	}
	tick         struct{ Left, Label string }
	timelineTurn struct {
		Number int
		Rows   []timelineRow
	}
	timelineRow struct {
		Label, Sub string
		Class      string // the bar's classes
		Left       string // percent of the run, formatted
		Width      string
		Title      string
		Href       string // an anchor in the page, or ""
		Duration   string
	}
	chart struct {
		Width, Height int
		Max           int64
		Axis          []chartTick
		Bars          []chartBar
		Labels        []chartLabel
	}
	chartTick struct {
		Y     int
		Label string
	}
	chartBar struct {
		X, Y, W, H int
		Class      string
		Title      string
	}
	chartLabel struct {
		X, Y  int
		Label string
	}
	failureView struct {
		Anchor, Tool, ID, Error, Stack, Duration string
		Turn                                     int
	}
	messageView struct {
		Role   string // system, user, assistant, tool
		Turn   int
		Blocks []blockView
	}
	blockView struct {
		Kind     string // text, thinking, tool_use, tool_result, other
		Anchor   string
		Text     string
		Name, ID string
		IsError  bool
		Error    string
		Stack    string
		Duration string
		Decision string
		// Truncated reports that the model received the result cut short.
		Truncated bool
		// Images are the image blocks of a tool result, shown inline.
		Images []imageView
	}
	imageView struct {
		Src template.URL // a data: URL, which the page's CSP allows
		Alt string
	}
)

// inlineImageTypes are the media types of images the report shows inline:
// those the API accepts.
var inlineImageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// imagesOf returns the base64 image blocks of a JSON array of content
// blocks, as data: URLs. A block of another media type, or whose data is
// not base64, is left out: its placeholder in the text says it was there.
func imagesOf(raw json.RawMessage) []imageView {
	var blocks []struct {
		Type   string `json:"type"`
		Source struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		} `json:"source"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	var out []imageView
	for i, b := range blocks {
		src := b.Source
		if b.Type != "image" || src.Type != "base64" || !inlineImageTypes[src.MediaType] {
			continue
		}
		if _, err := base64.StdEncoding.DecodeString(src.Data); err != nil {
			continue
		}
		out = append(out, imageView{
			Src: template.URL("data:" + src.MediaType + ";base64," + src.Data),
			Alt: fmt.Sprintf("image %d of the result (%s)", i+1, src.MediaType),
		})
	}
	return out
}

func buildReport(t *Transcript) *report {
	rep := &report{Title: "toolrun run report", Torn: t.Torn != ""}
	for k, v := range t.Header.Meta {
		rep.Meta = append(rep.Meta, keyValue{k, v})
	}
	slices.SortFunc(rep.Meta, func(a, b keyValue) int { return strings.Compare(a.Key, b.Key) })
	if name := t.Header.Meta["name"]; name != "" {
		rep.Title = name + " · toolrun run report"
	}
	turns := t.Turns()

	// The run's span, for the timeline.
	start := t.Header.Time
	end := start
	for _, e := range t.Entries {
		if start.IsZero() || (!e.Time.IsZero() && e.Time.Before(start)) {
			start = e.Time
		}
		if e.Time.After(end) {
			end = e.Time
		}
	}
	if !start.IsZero() {
		rep.Started = start.Format("2006-01-02 15:04:05.000 MST")
	}
	span := end.Sub(start)
	rep.Elapsed = formatDuration(span)
	if span <= 0 {
		span = time.Millisecond
	}
	pct := func(d time.Duration) float64 { return max(0, min(100, float64(d)/float64(span)*100)) }
	for i := 0; i <= 4; i++ {
		rep.Axis = append(rep.Axis, tick{Left: fmt.Sprintf("%.1f", float64(i)*25), Label: formatDuration(span * time.Duration(i) / 4)})
	}
	bar := func(row *timelineRow, from, to time.Time) {
		left := pct(from.Sub(start))
		width := max(0.4, pct(to.Sub(from)))
		left = min(left, 100-width)
		row.Left, row.Width = fmt.Sprintf("%.3f", left), fmt.Sprintf("%.3f", width)
	}

	if st := t.Stop(); st != nil {
		sv := &stopView{Reason: string(st.StopReason), Detail: st.Detail, Error: st.Error, Class: "warn"}
		switch st.StopReason {
		case "end_turn":
			sv.Class = "ok"
		case "error":
			sv.Class = "bad"
		}
		rep.Stop = sv
		rep.Turns = st.Turns
		if st.Usage != nil {
			rep.InputTokens, rep.OutputTokens = st.Usage.InputTokens, st.Usage.OutputTokens
		}
	} else {
		rep.Incomplete = true
	}

	// The conversation starts with the first request's system prompt and
	// messages.
	for _, e := range t.Entries {
		if e.Type == TypeRequest {
			rep.Model, rep.Conversation = requestConversation(e.Body)
			break
		}
	}

	var chartTurns []chartTurn
	countTurns := rep.Stop == nil
	if countTurns {
		// The failed attempts of streams asked for again are billed too.
		rep.InputTokens, rep.OutputTokens = 0, 0
		for _, e := range t.Entries {
			if e.Type == TypeStreamRetried && e.Usage != nil {
				rep.InputTokens += e.Usage.InputTokens
				rep.OutputTokens += e.Usage.OutputTokens
			}
		}
	}
	for _, tn := range turns {
		tt := timelineTurn{Number: tn.Number}
		if tn.Request != nil {
			row := timelineRow{Label: fmt.Sprintf("turn %d", tn.Number), Sub: "model", Class: "model-bar", Href: fmt.Sprintf("#turn-%d", tn.Number)}
			to := end
			if tn.Response != nil {
				to = tn.Response.Time
				row.Duration = formatDuration(tn.Response.Time.Sub(tn.Request.Time))
			} else {
				row.Class += " unfinished"
				row.Duration = "no response"
			}
			bar(&row, tn.Request.Time, to)
			row.Title = fmt.Sprintf("turn %d: model request, %s", tn.Number, row.Duration)
			tt.Rows = append(tt.Rows, row)
		}
		var assistant messageView
		if tn.Response != nil {
			if r, err := parseResponse(tn.Response); err == nil {
				if rep.Model == "" {
					rep.Model = r.Model
				}
				chartTurns = append(chartTurns, chartTurn{n: tn.Number, in: r.Usage.InputTokens + r.Usage.CacheCreationInputTokens + r.Usage.CacheReadInputTokens, out: r.Usage.OutputTokens, cached: r.Usage.CacheReadInputTokens})
				if countTurns {
					rep.Turns++
					rep.InputTokens += r.Usage.InputTokens
					rep.OutputTokens += r.Usage.OutputTokens
				}
				assistant = messageView{Role: "assistant", Turn: tn.Number, Blocks: contentBlocks(r.Content)}
			}
		}
		results := messageView{Role: "tool", Turn: tn.Number}
		for _, c := range tn.Calls {
			rep.Calls++
			row := timelineRow{Label: c.Tool, Sub: c.ID, Href: "#call-" + c.ID}
			anchor := "call-" + c.ID
			var from, to time.Time
			switch {
			case c.Started != nil:
				from = c.Started.Time
			case c.Decision != nil:
				from = c.Decision.Time
			case c.Finished != nil:
				from = c.Finished.Time
			}
			class := "ok"
			switch {
			case c.Discarded:
				class = "discarded"
			case c.Finished == nil && c.Started != nil:
				class = "unfinished"
			case c.Finished == nil:
				class = "pending"
			case !c.Finished.Ran && c.Decision != nil && c.Decision.Decision != nil && c.Decision.Decision.Kind.String() != "allow":
				class = "denied"
			case c.Finished.IsError:
				class = "failed"
			}
			switch {
			case c.Finished != nil && c.Finished.Ran:
				to = from.Add(c.Finished.Duration())
				row.Duration = formatDuration(c.Finished.Duration())
			case c.Finished == nil && c.Started != nil:
				to = end
				row.Duration = "did not finish"
			default:
				to = from
				row.Duration = "not run"
			}
			row.Class = "tool-bar " + class
			if !from.IsZero() {
				bar(&row, from, to)
			} else {
				row.Left, row.Width = "0", "0.4"
			}
			row.Title = fmt.Sprintf("%s (%s): %s, %s", c.Tool, c.ID, class, row.Duration)
			tt.Rows = append(tt.Rows, row)

			if c.Discarded {
				continue
			}
			b := blockView{Kind: "tool_result", Anchor: anchor, Name: c.Tool, ID: c.ID, Duration: row.Duration}
			if c.Decision != nil && c.Decision.Decision != nil && c.Decision.Decision.Kind.String() != "allow" {
				b.Decision = c.Decision.Decision.Kind.String() + " by " + c.Decision.By
				if c.Decision.Decision.Reason != "" {
					b.Decision += ": " + c.Decision.Decision.Reason
				}
			}
			if f := c.Finished; f != nil {
				b.Text = shown(f.OutputText())
				b.Images = imagesOf(f.Output)
				b.IsError, b.Error, b.Stack, b.Truncated = f.IsError, shown(f.Error), shown(f.Stack), f.Truncated
				if b.Text == b.Error {
					b.Text = "" // the error, sent as the result: shown once
				}
				if f.IsError {
					rep.Failures++
					rep.FailureList = append(rep.FailureList, failureView{Anchor: anchor, Tool: c.Tool, ID: c.ID, Turn: tn.Number,
						Error: shown(firstNonEmpty(f.Error, f.OutputText())), Stack: b.Stack, Duration: row.Duration})
				}
			} else if c.Started != nil {
				b.Text = "(the call did not finish: the transcript ends while it runs)"
			} else {
				b.Text = "(no result recorded)"
			}
			results.Blocks = append(results.Blocks, b)
		}
		rep.Timeline = append(rep.Timeline, tt)
		if len(assistant.Blocks) > 0 || tn.Response != nil {
			rep.Conversation = append(rep.Conversation, assistant)
		}
		if len(results.Blocks) > 0 {
			rep.Conversation = append(rep.Conversation, results)
		}
	}
	rep.Chart = buildChart(chartTurns)
	return rep
}

type chartTurn struct {
	n               int
	in, out, cached int64
}

// buildChart lays out a bar chart of the input and output tokens of each
// turn, in SVG units.
func buildChart(turns []chartTurn) chart {
	const (
		left, right, top, bottom = 64, 16, 16, 36
		height                   = 240
		slot                     = 56
	)
	c := chart{Height: height, Width: max(480, left+right+slot*len(turns))}
	for _, t := range turns {
		c.Max = max(c.Max, t.in, t.out)
	}
	scale := niceCeil(c.Max)
	plot := height - top - bottom
	for i := 0; i <= 4; i++ {
		v := scale * int64(i) / 4
		c.Axis = append(c.Axis, chartTick{Y: top + plot - int(int64(plot)*int64(i)/4), Label: fmt.Sprint(v)})
	}
	y := func(v int64) int { return int(int64(plot) * v / scale) }
	for i, t := range turns {
		x := left + i*slot + 8
		hin, hout := y(t.in), y(t.out)
		c.Bars = append(c.Bars,
			chartBar{X: x, Y: top + plot - hin, W: 18, H: max(hin, 1), Class: "in", Title: fmt.Sprintf("turn %d: %d input tokens (%d read from cache)", t.n, t.in, t.cached)},
			chartBar{X: x + 20, Y: top + plot - hout, W: 18, H: max(hout, 1), Class: "out", Title: fmt.Sprintf("turn %d: %d output tokens", t.n, t.out)},
		)
		c.Labels = append(c.Labels, chartLabel{X: x + 19, Y: height - bottom + 16, Label: fmt.Sprint(t.n)})
	}
	return c
}

// niceCeil returns a round number at least v, for the top of an axis.
func niceCeil(v int64) int64 {
	if v <= 0 {
		return 1
	}
	p := int64(1)
	for p*10 < v {
		p *= 10
	}
	for _, m := range []int64{1, 2, 4, 5, 8, 10} {
		if p*m >= v {
			return p * m
		}
	}
	return p * 10
}

// requestConversation returns the model and the system prompt and messages
// of a request body as the conversation's first messages.
func requestConversation(body json.RawMessage) (string, []messageView) {
	var p struct {
		Model    string          `json:"model"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &p) != nil {
		return "", nil
	}
	var out []messageView
	if len(p.System) > 0 && string(p.System) != "null" {
		out = append(out, messageView{Role: "system", Blocks: rawContentBlocks(p.System)})
	}
	for _, m := range p.Messages {
		out = append(out, messageView{Role: m.Role, Blocks: rawContentBlocks(m.Content)})
	}
	return p.Model, out
}

// rawContentBlocks returns content that is a string or an array of blocks.
func rawContentBlocks(raw json.RawMessage) []blockView {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []blockView{{Kind: "text", Text: shown(s)}}
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return []blockView{{Kind: "other", Text: shown(string(raw))}}
	}
	return contentBlocks(blocks)
}

func contentBlocks(raw []json.RawMessage) []blockView {
	var out []blockView
	for _, r := range raw {
		var b block
		if json.Unmarshal(r, &b) != nil {
			out = append(out, blockView{Kind: "other", Text: shown(string(r))})
			continue
		}
		switch b.Type {
		case "text":
			out = append(out, blockView{Kind: "text", Text: shown(b.Text)})
		case "thinking":
			out = append(out, blockView{Kind: "thinking", Text: shown(b.Thinking)})
		case "tool_use":
			out = append(out, blockView{Kind: "tool_use", Name: b.Name, ID: b.ID, Text: shown(prettyJSON(b.Input))})
		case "tool_result":
			out = append(out, blockView{Kind: "tool_result", ID: b.ToolUseID, IsError: b.IsError, Text: shown(contentText(b.Content)), Images: imagesOf(b.Content)})
		default:
			out = append(out, blockView{Kind: "other", Name: b.Type, Text: shown(prettyJSON(r))})
		}
	}
	return out
}

func prettyJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}

// shown returns s cut to maxShown bytes, saying how much was left out.
func shown(s string) string {
	if len(s) <= maxShown {
		return s
	}
	cut := maxShown
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n… (%d more bytes not shown)", len(s)-cut)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// formatDuration formats d for a person: 850µs, 12.3ms, 1.25s, 2m3s.
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Minute:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
