package transcript

import (
	"bytes"
	"context"
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

	"github.com/toolrun/toolrun"
)

//go:embed report.html.tmpl
var reportTemplate string

var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{"count": count}).Parse(reportTemplate))

// count formats a number of tokens for a person: 15,217.
func count(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// maxShown bounds the bytes of one piece of text the report shows.
const maxShown = 64 << 10

// WriteHTML writes a report of t to w: one self-contained HTML page with a
// timeline of the turns where each model request and tool call is a bar as
// long as it took, the failures with their errors and stacks, a chart of
// the tokens of each turn, and the conversation.
//
// Each decision of a call (allowed, denied, skipped or deferred; by a
// policy, a person, an earlier Always approval or no rule) is marked on
// the call's row when it was taken, and listed with its reason and any
// edited input under the call's result, with the name of the person who
// took it and their time of deciding when the caller of Decide gave them
// ([toolrun.Decision].Who and At); the decision trail lists the decisions
// of rules and people, in order, in one table. A wait for a person (from a stop
// awaiting approval until the run went on) is a row of its own; when it is
// long beside the rest of the run, the time axis breaks there and the wait
// takes a fixed width, so that the other bars keep theirs. Denials and
// skips are counted apart, not as failures; a cancelled run is shown as
// cancelled, not as an error. The token cards add up the chart's bars:
// input tokens include those written to and read from the cache. The
// header's meta that toolrun writes for itself (keys starting "toolrun.")
// is shown apart, as readable settings.
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
		Title      string
		Model      string
		Started    string
		Elapsed    string
		Meta       []keyValue
		Settings   []keyValue // the meta of toolrun itself ("toolrun.tools"), pretty-printed
		Stop       *stopView
		Canceled   *canceledView
		Incomplete bool
		Torn       bool
		Turns      int
		Calls      int
		// Refused counts the calls a rule or a person denied or skipped,
		// which are no failures.
		Denied, Skipped int
		Failures        int
		// Approvals counts the decisions of a person; Waited is how long
		// the run waited for them.
		Approvals   int
		Waited      string
		Tokens      tokenView
		Axis        []tick
		Breaks      []axisBreak
		Timeline    []timelineTurn
		Chart       chart
		FailureList []failureView
		// Trail is the decision trail: every decision a rule or a person
		// took, in the order of their times, with who took it and when.
		Trail        []trailView
		Conversation []messageView
	}
	keyValue struct{ Key, Value string }
	stopView struct {
		Reason, Detail, Error string
		Class                 string // ok, warn, bad, cancel
	}
	canceledView struct {
		Detail, Error string
		InFlight      []string // the calls that were running
	}
	// tokenView is what the token cards show: the sums of the chart's
	// bars, with the input split as the API bills it.
	tokenView struct {
		Input, Output                   int64
		Uncached, CacheWrite, CacheRead int64
		// RunInput and RunOutput are the run's own count, from its stop,
		// when it differs from the chart's (its extra billing, such as
		// compaction inside a response, has no bar).
		RunInput, RunOutput int64
		Differs             bool
	}
	tick struct {
		Left, Label string
		// Align is "end" for a label that ends where a break starts,
		// "start" for one that starts where a break ends, or "".
		Align string
	}
	axisBreak struct {
		Left, Width string
		Label       string
	}
	timelineTurn struct {
		Number int
		Rows   []timelineRow
	}
	timelineRow struct {
		Label, Sub string
		Class      string // the bar's classes
		RowClass   string // the row's: failed, wait
		Left       string // percent of the axis, formatted
		Width      string
		Title      string
		Href       string // an anchor in the page, or ""
		Duration   string
		// Decision is the short text of the call's decision, and
		// DecisionClass its kind.
		Decision, DecisionClass string
		// Waits are the parts of the row spent waiting for a person, and
		// Marks the moments of its decisions.
		Waits []span
		Marks []mark
	}
	span  struct{ Left, Width, Title string }
	mark  struct{ Left, Class, Title string }
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
		// Status says what became of a call that is not a plain result:
		// denied, skipped, cancelled, awaiting approval.
		Status   string
		Error    string
		Stack    string
		Duration string
		// Decisions are the call's decisions, in order.
		Decisions []decisionView
		// Truncated reports that the model received the result cut short.
		Truncated bool
		// Images are the image blocks of a tool result, shown inline.
		Images []imageView
	}
	decisionView struct {
		Class  string // allow, deny, skip, defer
		When   string // since the run's start, and the clock time
		Text   string // "approved by a person (always for this tool)"
		Reason string
		// Input is the input the decision ran the call with, when it
		// edited the model's.
		Input string
		// Who and At are who took a person's decision and when, as the
		// caller of Decide recorded them; empty when unknown.
		Who, At string
	}
	// trailView is a row of the decision trail.
	trailView struct {
		When     string // when the decision was taken
		Who      string // the person's name, or which rule
		Tool, ID string
		Href     string // the call's result in the conversation, if shown
		Class    string // allow, deny, skip, defer
		Decision string // "approved", "denied", ...
		Reason   string
		Input    string // the edited input, if any
		at       time.Time
	}
	imageView struct {
		Src template.URL // a data: URL, which the page's CSP allows
		Alt string
	}
)

// settingsPrefix starts the meta keys that toolrun writes for itself, such
// as the CLI's "toolrun.tools": shown apart, pretty-printed.
const settingsPrefix = "toolrun."

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

// wait is a stretch of a run spent waiting for a person: from a stop
// awaiting approval to the next line, the run going on.
type wait struct {
	from, to time.Time
	broken   bool // drawn as a break of the time axis
}

// piece is a part of the time axis: real time from..to drawn from x0 to x1
// percent.
type piece struct {
	from, to time.Time
	x0, x1   float64
	broken   bool
}

// axis maps the times of a run to the percent of the timeline's width. A
// long wait for a person is a break: it takes a fixed share of the width,
// whatever it lasted, so the bars of the model and the tools stay readable.
type axis struct{ pieces []piece }

// breakShare is the width of the timeline, in percent, that one break
// takes, and maxBreakShare what all of them may.
const breakShare, maxBreakShare = 8.0, 32.0

// newAxis lays out the axis from start to end with the waits, which are in
// order and do not overlap. A wait longer than a tenth of the rest of the
// run is a break.
func newAxis(start, end time.Time, waits []wait) axis {
	span := end.Sub(start)
	if span <= 0 {
		span = time.Millisecond
		end = start.Add(span)
	}
	var waited time.Duration
	for _, w := range waits {
		waited += w.to.Sub(w.from)
	}
	active := span - waited
	nBreaks := 0
	for i := range waits {
		if d := waits[i].to.Sub(waits[i].from); d > 0 && d*10 > active {
			waits[i].broken = true
			nBreaks++
		}
	}
	var brokenTime time.Duration
	for _, w := range waits {
		if w.broken {
			brokenTime += w.to.Sub(w.from)
		}
	}
	linear := span - brokenTime // drawn to scale
	share := min(breakShare, maxBreakShare/float64(max(nBreaks, 1)))
	scale := (100 - share*float64(nBreaks)) / float64(max(linear, 1))
	var a axis
	cur, x := start, 0.0
	for _, w := range waits {
		if !w.broken {
			continue
		}
		x1 := x + float64(w.from.Sub(cur))*scale
		a.pieces = append(a.pieces, piece{from: cur, to: w.from, x0: x, x1: x1})
		a.pieces = append(a.pieces, piece{from: w.from, to: w.to, x0: x1, x1: x1 + share, broken: true})
		cur, x = w.to, x1+share
	}
	a.pieces = append(a.pieces, piece{from: cur, to: end, x0: x, x1: 100})
	return a
}

// pos returns where t is on the axis, in percent.
func (a axis) pos(t time.Time) float64 {
	for _, p := range a.pieces {
		if t.After(p.to) {
			continue
		}
		if !t.After(p.from) {
			return p.x0
		}
		return p.x0 + (p.x1-p.x0)*float64(t.Sub(p.from))/float64(p.to.Sub(p.from))
	}
	if n := len(a.pieces); n > 0 {
		return a.pieces[n-1].x1
	}
	return 0
}

// ticks returns the labels of the axis: a few in each stretch drawn to
// scale, none inside a break.
func (a axis) ticks(start time.Time) []tick {
	var out []tick
	var label func(time.Duration) string
	add := func(x float64, t time.Time, align string) {
		if n := len(out); n > 0 && x-mustFloat(out[n-1].Left) < 6 {
			return // too close to the last one to read
		}
		out = append(out, tick{Left: fmt.Sprintf("%.1f", x), Label: label(t.Sub(start)), Align: align})
	}
	for k, p := range a.pieces {
		if p.broken {
			continue
		}
		label = formatDuration
		if p.to.Sub(p.from) < 10*time.Second && p.from.Sub(start) >= time.Minute {
			// Past a minute, seconds are too coarse for a short stretch.
			label = func(d time.Duration) string {
				return fmt.Sprintf("%dm%05.2fs", int(d.Minutes()), (d % time.Minute).Seconds())
			}
		}
		n := max(1, int((p.x1-p.x0)/25+0.5))
		for i := 0; i <= n; i++ {
			frac := float64(i) / float64(n)
			align := ""
			switch {
			case i == 0 && k > 0:
				align = "start" // after a break
			case i == n && k < len(a.pieces)-1:
				align = "end" // before a break
			}
			add(p.x0+(p.x1-p.x0)*frac, p.from.Add(time.Duration(float64(p.to.Sub(p.from))*frac)), align)
		}
	}
	return out
}

func mustFloat(s string) float64 {
	var f float64
	fmt.Sscan(s, &f)
	return f
}

func pctString(f float64) string { return fmt.Sprintf("%.3f", max(0, min(100, f))) }

// decisionText returns the short text of a decision line for the
// timeline, and the class of its kind.
func decisionText(e *Entry) (string, string) {
	if e == nil || e.Decision == nil {
		return "", ""
	}
	d := e.Decision
	who := byName(e.By)
	if e.By == string(toolrun.ByApproval) && d.Who != "" {
		who = d.Who
	}
	switch d.Kind {
	case toolrun.Allow:
		switch e.By {
		case string(toolrun.ByApproval):
			if d.Always {
				return "approved, always · " + who, "allow"
			}
			return "approved · " + who, "allow"
		case string(toolrun.ByAlways):
			return "approved · always", "allow"
		case string(toolrun.ByDefault), "":
			return "allowed", "allow-default"
		}
		if len(d.Input) > 0 {
			return "allowed, edited · " + who, "allow"
		}
		return "allowed · " + who, "allow"
	case toolrun.Deny:
		return "denied · " + who, "deny"
	case toolrun.Skip:
		return "skipped · " + who, "skip"
	case toolrun.Defer:
		return "awaiting approval", "defer"
	}
	return d.Kind.String() + " · " + who, ""
}

// byName says who took a decision, for a person.
func byName(by string) string {
	switch by {
	case string(toolrun.ByApproval):
		return "person"
	case string(toolrun.ByAlways):
		return "always"
	case string(toolrun.ByDefault), "":
		return "no rule"
	case "options":
		return "policy"
	}
	return by
}

// decisionLong returns a decision line as the conversation shows it.
func decisionLong(e *Entry, start time.Time, prev *Entry) decisionView {
	d := e.Decision
	v := decisionView{Class: d.Kind.String(), When: "+" + formatDuration(e.Time.Sub(start)) + " (" + e.Time.Format("15:04:05.000") + ")", Reason: d.Reason}
	by := map[string]string{
		string(toolrun.ByPolicy): "by a policy", "options": "by a policy", string(toolrun.ByApproval): "by a person",
		string(toolrun.ByAlways): "by an earlier Always approval of the tool", string(toolrun.ByDefault): "by no rule (the default)", "": "by no rule (the default)",
	}[e.By]
	if by == "" {
		by = "by " + e.By
	}
	switch d.Kind {
	case toolrun.Allow:
		v.Text = "allowed " + by
		if e.By == string(toolrun.ByApproval) {
			v.Text = "approved " + by
			if d.Always {
				v.Text += ", always for this tool"
			}
		}
	case toolrun.Deny:
		v.Text = "denied " + by
	case toolrun.Skip:
		v.Text = "skipped " + by + ", answered without running"
	case toolrun.Defer:
		v.Text = "deferred " + by + " to a person"
	default:
		v.Text = d.Kind.String() + " " + by
	}
	if prev != nil && prev.Decision != nil && prev.Decision.Kind == toolrun.Defer {
		v.Text += ", after " + formatDuration(e.Time.Sub(prev.Time)) + " waiting"
	}
	if d.Kind == toolrun.Allow && len(d.Input) > 0 {
		v.Input = shown(prettyJSON(d.Input))
	}
	v.Who = d.Who
	if !d.At.IsZero() {
		v.At = d.At.UTC().Format(trailTime)
	}
	return v
}

// trailTime is how the decision trail writes a decision's time.
const trailTime = "2006-01-02 15:04:05.000 MST"

// trailRow returns the decision trail's row of decision line e of call c.
// A decision without a time of its own (a rule's, or a person's whose
// caller gave none) is dated by its line.
func trailRow(e *Entry, c *Call) trailView {
	d := e.Decision
	v := trailView{Tool: c.Tool, ID: c.ID, Class: d.Kind.String(), Reason: d.Reason, Who: d.Who}
	if !c.Discarded {
		v.Href = "#call-" + c.ID
	}
	at := e.Time
	if !d.At.IsZero() {
		at = d.At
	}
	v.at, v.When = at, at.UTC().Format(trailTime)
	if v.Who == "" {
		v.Who = map[string]string{
			string(toolrun.ByPolicy): "a policy", "options": "a policy", string(toolrun.ByApproval): "a person (unnamed)",
			string(toolrun.ByAlways): "an earlier Always approval", string(toolrun.ByDefault): "no rule", "": "no rule",
		}[e.By]
		if v.Who == "" {
			v.Who = e.By
		}
	}
	switch d.Kind {
	case toolrun.Allow:
		v.Decision = "allowed"
		if e.By == string(toolrun.ByApproval) {
			v.Decision = "approved"
			if d.Always {
				v.Decision += ", always for this tool"
			}
		}
		if len(d.Input) > 0 {
			v.Decision += ", input edited"
			v.Input = shown(prettyJSON(d.Input))
		}
	case toolrun.Deny:
		v.Decision = "denied"
	case toolrun.Skip:
		v.Decision = "skipped"
	case toolrun.Defer:
		v.Decision = "deferred to a person"
	default:
		v.Decision = d.Kind.String()
	}
	return v
}

func buildReport(t *Transcript) *report {
	rep := &report{Title: "toolrun run report", Torn: t.Torn != ""}
	for k, v := range t.Header.Meta {
		if strings.HasPrefix(k, settingsPrefix) {
			rep.Settings = append(rep.Settings, keyValue{k, shown(prettyJSON(json.RawMessage(v)))})
			continue
		}
		rep.Meta = append(rep.Meta, keyValue{k, v})
	}
	slices.SortFunc(rep.Meta, func(a, b keyValue) int { return strings.Compare(a.Key, b.Key) })
	slices.SortFunc(rep.Settings, func(a, b keyValue) int { return strings.Compare(a.Key, b.Key) })
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
	rep.Elapsed = formatDuration(end.Sub(start))

	// The waits for a person: from each stop awaiting approval to the line
	// after it, when the run went on.
	var waits []wait
	var waited time.Duration
	for i, e := range t.Entries {
		if e.Type != TypeRunStopped || e.StopReason != toolrun.StopAwaitingApproval {
			continue
		}
		for _, next := range t.Entries[i+1:] {
			if !next.Time.IsZero() {
				if next.Time.After(e.Time) {
					waits = append(waits, wait{from: e.Time, to: next.Time})
					waited += next.Time.Sub(e.Time)
				}
				break
			}
		}
	}
	if waited > 0 {
		rep.Waited = formatDuration(waited)
	}
	ax := newAxis(start, end, waits)
	rep.Axis = ax.ticks(start)
	for _, w := range waits {
		if w.broken {
			l, r := ax.pos(w.from), ax.pos(w.to)
			rep.Breaks = append(rep.Breaks, axisBreak{Left: pctString(l), Width: pctString(r - l), Label: formatDuration(w.to.Sub(w.from)) + " wait"})
		}
	}
	bar := func(row *timelineRow, from, to time.Time) {
		left, right := ax.pos(from), ax.pos(to)
		width := max(0.4, right-left)
		left = min(left, 100-width)
		row.Left, row.Width = pctString(left), pctString(width)
	}

	st := t.Stop()
	canceled := st != nil && st.StopReason == toolrun.StopCanceled
	if st != nil {
		sv := &stopView{Reason: string(st.StopReason), Detail: st.Detail, Error: st.Error, Class: "warn"}
		switch st.StopReason {
		case toolrun.StopEndTurn:
			sv.Class = "ok"
		case toolrun.StopError:
			sv.Class = "bad"
		case toolrun.StopCanceled:
			sv.Class, sv.Error = "cancel", "" // not an error: the banner says what happened
			rep.Canceled = &canceledView{Detail: st.Detail, Error: st.Error}
		}
		rep.Stop = sv
		rep.Turns = st.Turns
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

	// The tokens: each turn's response, with the failed attempts of its
	// streams, and each compaction.
	retried := map[int]toolrun.Usage{}
	var compactions []chartTurn
	for _, e := range t.Entries {
		switch {
		case e.Type == TypeStreamRetried && e.Usage != nil:
			u := retried[e.Turn]
			u.InputTokens += e.Usage.InputTokens
			u.OutputTokens += e.Usage.OutputTokens
			u.CacheCreationInputTokens += e.Usage.CacheCreationInputTokens
			u.CacheReadInputTokens += e.Usage.CacheReadInputTokens
			retried[e.Turn] = u
		case e.Type == TypeCompacted && e.Usage != nil:
			compactions = append(compactions, chartTurnOf(fmt.Sprintf("c%d", e.Turn), *e.Usage, e.Turn))
		}
	}

	var chartTurns []chartTurn
	countTurns := rep.Stop == nil
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
				u := r.Usage
				if x, ok := retried[tn.Number]; ok {
					u.InputTokens += x.InputTokens
					u.OutputTokens += x.OutputTokens
					u.CacheCreationInputTokens += x.CacheCreationInputTokens
					u.CacheReadInputTokens += x.CacheReadInputTokens
				}
				for _, c := range compactions {
					if c.turn+1 == tn.Number {
						chartTurns = append(chartTurns, c)
					}
				}
				chartTurns = append(chartTurns, chartTurnOf(fmt.Sprint(tn.Number), u, tn.Number))
				if countTurns {
					rep.Turns++
				}
				assistant = messageView{Role: "assistant", Turn: tn.Number, Blocks: contentBlocks(r.Content)}
			}
		}
		results := messageView{Role: "tool", Turn: tn.Number}
		var waitRows []timelineRow
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
			kind := toolrun.Allow
			if c.Decision != nil && c.Decision.Decision != nil {
				kind = c.Decision.Decision.Kind
			}
			callCanceled := canceled && (c.Finished == nil && c.Started != nil ||
				c.Finished != nil && c.Finished.IsError && strings.HasSuffix(c.Finished.Error, context.Canceled.Error()))
			class := "ok"
			switch {
			case c.Discarded:
				class = "discarded"
			case callCanceled:
				class = "canceled"
			case c.Finished == nil && c.Started != nil:
				class = "unfinished"
			case c.Finished == nil && kind == toolrun.Defer:
				class = "pending"
			case c.Finished == nil:
				class = "pending"
			case !c.Finished.Ran && kind == toolrun.Deny:
				class = "denied"
			case !c.Finished.Ran && kind == toolrun.Skip:
				class = "skipped"
			case c.Finished.IsError:
				class = "failed"
			}
			switch {
			case callCanceled && c.Finished == nil:
				to = end
				row.Duration = "cancelled"
			case c.Finished != nil && c.Finished.Ran:
				to = from.Add(c.Finished.Duration())
				row.Duration = formatDuration(c.Finished.Duration())
			case c.Finished == nil && c.Started != nil:
				to = end
				row.Duration = "did not finish"
			case c.Finished == nil && kind == toolrun.Defer:
				to = from
				row.Duration = "awaiting"
			default:
				to = from
				row.Duration = "not run"
			}
			row.Class = "tool-bar " + class
			if class == "failed" {
				row.RowClass = "failed"
			}
			if !from.IsZero() {
				bar(&row, from, to)
			} else {
				row.Left, row.Width = "0", "0.4"
			}
			row.Decision, row.DecisionClass = decisionText(c.Decision)
			row.Title = fmt.Sprintf("%s (%s): %s, %s", c.Tool, c.ID, class, row.Duration)
			// The decisions on the row, and the wait between a deferral and
			// the answer.
			var views []decisionView
			for i, d := range c.Decisions {
				if d.Decision == nil {
					continue
				}
				var prev *Entry
				if i > 0 {
					prev = c.Decisions[i-1]
				}
				v := decisionLong(d, start, prev)
				views = append(views, v)
				if d.By != string(toolrun.ByDefault) && d.By != "" {
					rep.Trail = append(rep.Trail, trailRow(d, c))
				}
				title := v.Text + " at " + v.When
				if v.Reason != "" {
					title += ": " + v.Reason
				}
				row.Marks = append(row.Marks, mark{Left: pctString(ax.pos(d.Time)), Class: v.Class, Title: title})
				if d.By == string(toolrun.ByApproval) {
					rep.Approvals++
				}
				if prev != nil && prev.Decision != nil && prev.Decision.Kind == toolrun.Defer && d.Time.After(prev.Time) {
					l, r := ax.pos(prev.Time), ax.pos(d.Time)
					row.Waits = append(row.Waits, span{Left: pctString(l), Width: pctString(max(0.4, r-l)),
						Title: fmt.Sprintf("waiting for a person: %s", formatDuration(d.Time.Sub(prev.Time)))})
				}
			}
			tt.Rows = append(tt.Rows, row)

			if c.Discarded {
				continue
			}
			b := blockView{Kind: "tool_result", Anchor: anchor, Name: c.Tool, ID: c.ID, Duration: row.Duration, Decisions: views}
			switch class {
			case "denied":
				b.Status = "denied"
				rep.Denied++
			case "skipped":
				b.Status = "skipped"
				rep.Skipped++
			case "canceled":
				b.Status, b.Duration = "cancelled", ""
				if rep.Canceled != nil {
					rep.Canceled.InFlight = append(rep.Canceled.InFlight, c.Tool+" ("+c.ID+")")
				}
			}
			if f := c.Finished; f != nil {
				b.Text = shown(f.OutputText())
				b.Images = imagesOf(f.Output)
				b.IsError, b.Error, b.Stack, b.Truncated = f.IsError, shown(f.Error), shown(f.Stack), f.Truncated
				if b.Text == b.Error {
					b.Text = "" // the error, sent as the result: shown once
				}
				if class == "failed" {
					rep.Failures++
					rep.FailureList = append(rep.FailureList, failureView{Anchor: anchor, Tool: c.Tool, ID: c.ID, Turn: tn.Number,
						Error: shown(firstNonEmpty(f.Error, f.OutputText())), Stack: b.Stack, Duration: row.Duration})
				} else {
					b.IsError = false // a denial, a skip or a cancellation: no failure
				}
			} else if class == "canceled" {
				b.Text = "(the run was cancelled while the call ran: it has no result)"
			} else if c.Started != nil {
				b.Text = "(the call did not finish: the transcript ends while it runs)"
			} else if kind == toolrun.Defer {
				b.Status = "awaiting approval"
				b.Text = "(awaiting a person's decision when the transcript ends)"
			} else {
				b.Text = "(no result recorded)"
			}
			results.Blocks = append(results.Blocks, b)
		}
		// The waits that began in this turn, each a row of its own.
		for _, w := range waits {
			if tn.Response == nil || w.from.Before(tn.Response.Time) || (tn.Finished != nil && w.from.After(tn.Finished.Time)) {
				continue
			}
			var names []string
			for _, c := range tn.Calls {
				for _, d := range c.Decisions {
					if d.Decision != nil && d.Decision.Kind == toolrun.Defer && !d.Time.After(w.from) {
						names = append(names, c.Tool)
						break
					}
				}
			}
			row := timelineRow{Label: "waiting for a person", Sub: strings.Join(names, ", "), Class: "wait-bar", RowClass: "wait",
				Duration: formatDuration(w.to.Sub(w.from))}
			bar(&row, w.from, w.to)
			row.Title = fmt.Sprintf("the run awaited approval for %s", row.Duration)
			if w.broken {
				row.Title += " (the time axis is broken here)"
			}
			waitRows = append(waitRows, row)
		}
		tt.Rows = append(tt.Rows, waitRows...)
		rep.Timeline = append(rep.Timeline, tt)
		if len(assistant.Blocks) > 0 || tn.Response != nil {
			rep.Conversation = append(rep.Conversation, assistant)
		}
		if len(results.Blocks) > 0 {
			rep.Conversation = append(rep.Conversation, results)
		}
	}
	// Compactions after the last turn.
	last := 0
	if n := len(turns); n > 0 {
		last = turns[n-1].Number
	}
	for _, c := range compactions {
		if c.turn+1 > last {
			chartTurns = append(chartTurns, c)
		}
	}
	for _, c := range chartTurns {
		rep.Tokens.Uncached += c.uncached
		rep.Tokens.CacheWrite += c.write
		rep.Tokens.CacheRead += c.read
		rep.Tokens.Output += c.out
	}
	rep.Tokens.Input = rep.Tokens.Uncached + rep.Tokens.CacheWrite + rep.Tokens.CacheRead
	if st != nil && st.Usage != nil {
		u := st.Usage
		rep.Tokens.RunInput = u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
		rep.Tokens.RunOutput = u.OutputTokens
		rep.Tokens.Differs = rep.Tokens.RunInput != rep.Tokens.Input || rep.Tokens.RunOutput != rep.Tokens.Output
	}
	rep.Chart = buildChart(chartTurns)
	slices.SortStableFunc(rep.Trail, func(a, b trailView) int { return a.at.Compare(b.at) })
	return rep
}

// chartTurn is one pair of bars of the token chart: a turn's, or a
// compaction's.
type chartTurn struct {
	label                      string
	turn                       int
	uncached, write, read, out int64
}

func chartTurnOf(label string, u toolrun.Usage, turn int) chartTurn {
	return chartTurn{label: label, turn: turn, uncached: u.InputTokens, write: u.CacheCreationInputTokens, read: u.CacheReadInputTokens, out: u.OutputTokens}
}

// buildChart lays out a bar chart of the input and output tokens of each
// turn, in SVG units: the input bar stacks the uncached tokens, those
// written to the cache and those read from it.
func buildChart(turns []chartTurn) chart {
	const (
		left, right, top, bottom = 64, 16, 16, 36
		height                   = 240
		slot                     = 56
	)
	c := chart{Height: height, Width: max(480, left+right+slot*len(turns))}
	for _, t := range turns {
		c.Max = max(c.Max, t.uncached+t.write+t.read, t.out)
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
		in := t.uncached + t.write + t.read
		what := "turn " + t.label
		if strings.HasPrefix(t.label, "c") {
			what = fmt.Sprintf("compaction after turn %d", t.turn)
		}
		title := fmt.Sprintf("%s: %d input tokens (%d uncached, %d written to the cache, %d read from it)", what, in, t.uncached, t.write, t.read)
		// Stacked from the bottom: uncached, cache writes, cache reads.
		base := top + plot
		parts := []struct {
			v     int64
			class string
		}{{t.uncached, "in"}, {t.write, "in-write"}, {t.read, "in-read"}}
		drawn := false
		acc := int64(0)
		for _, p := range parts {
			if p.v == 0 {
				continue
			}
			y0, y1 := base-y(acc), base-y(acc+p.v)
			acc += p.v
			c.Bars = append(c.Bars, chartBar{X: x, Y: y1, W: 18, H: max(y0-y1, 1), Class: p.class, Title: title})
			drawn = true
		}
		if !drawn {
			c.Bars = append(c.Bars, chartBar{X: x, Y: base - 1, W: 18, H: 1, Class: "in", Title: title})
		}
		hout := y(t.out)
		c.Bars = append(c.Bars, chartBar{X: x + 20, Y: top + plot - hout, W: 18, H: max(hout, 1), Class: "out", Title: fmt.Sprintf("%s: %d output tokens", what, t.out)})
		c.Labels = append(c.Labels, chartLabel{X: x + 19, Y: height - bottom + 16, Label: t.label})
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

// prettyJSON returns raw indented, or as it is if it is not JSON or its
// indented form would be far longer than the report shows: indenting
// deeply nested JSON (a hostile transcript's) grows with the square of
// its depth, and would cost the report seconds and hundreds of megabytes
// a block for text it cuts anyway.
func prettyJSON(raw json.RawMessage) string {
	if indentedSize(raw) > 4*maxShown {
		return string(raw)
	}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}

// indentedSize returns about how many bytes json.Indent with a two-space
// indent makes of raw: raw less its white space, plus a newline and the
// indent of its depth for each value in an object or array.
func indentedSize(raw []byte) int {
	n, depth, inString := 0, 0, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			n++
			switch c {
			case '\\':
				i++
				n++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inString = true
		case '{', '[':
			depth++
			n += 1 + 2*depth
		case '}', ']':
			depth = max(0, depth-1)
			n += 1 + 2*depth
		case ',':
			n += 1 + 2*depth
		}
		n++
	}
	return n
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
