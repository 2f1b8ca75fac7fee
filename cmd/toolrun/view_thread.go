package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/transcript"
)

// A thread's report is the story of one thread of "toolrun serve" told
// from the transcripts --record wrote, one per run: every run in the
// order it started, each call with the decision a person took on it
// (who, when, what, why) and its result, which may come in a later run
// than the call, the time each call waited for that person drawn on one
// time axis with the runs, each run's stop and cost in dollars. A deny is
// the person's decision and is drawn as one; only a tool that failed is
// a failure. Like the report of one run, the page runs no script and
// loads nothing.

// errNoThreadRuns is returned when no transcript records a run of the
// thread asked for.
var errNoThreadRuns = errors.New("no transcript records a run of the thread")

// threadFilePrefix is how serve names the transcripts of thread in its
// record directory: the first 8 bytes of the thread id's SHA-256, in hex,
// then "-" and the run's.
func threadFilePrefix(thread string) string {
	sum := sha256.Sum256([]byte(thread))
	return hex.EncodeToString(sum[:8]) + "-"
}

// readThreadRuns reads the transcripts of thread's runs: those of the
// record directory whose names serve gives them, if args is one
// directory, else the files args names; either way only those whose
// header names the thread, ordered by their start.
func (c *cli) readThreadRuns(thread string, args []string) ([]*transcript.Transcript, error) {
	files := args
	if len(args) == 1 {
		if fi, err := os.Stat(args[0]); err == nil && fi.IsDir() {
			files, err = filepath.Glob(filepath.Join(args[0], threadFilePrefix(thread)+"*.jsonl"))
			if err != nil {
				return nil, err
			}
		}
	}
	var runs []*transcript.Transcript
	for _, name := range files {
		t, err := c.readTranscript(name)
		if err != nil {
			return nil, err
		}
		if t.Header.Meta["thread"] == thread {
			runs = append(runs, t)
		}
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%w %q in %s", errNoThreadRuns, thread, strings.Join(args, ", "))
	}
	slices.SortStableFunc(runs, func(a, b *transcript.Transcript) int { return a.Header.Time.Compare(b.Header.Time) })
	return runs, nil
}

// threadCall is a call of a thread, as its report shows it.
type threadCall struct {
	ID, Tool string
	Input    string
	Run      int // the run (from 1) whose response made it
	AskedAt  time.Time
	// WaitFrom is when the call began waiting for a person (its
	// deferral), zero if it never did.
	WaitFrom time.Time
	// Decision is the person's, or a rule's; Who names whoever took
	// it: the person (the token's or login's name), or the rule.
	Decision  *toolrun.Decision
	Who       string
	Person    bool
	DecidedAt time.Time
	// Result is what the model got, ResultRun the run that gave it.
	Result    string
	IsError   bool
	Failed    bool
	ResultRun int
	ResultAt  time.Time
	Duration  time.Duration
}

// Verb names the call's decision in the past tense.
func (c *threadCall) Verb() string {
	if c.Decision == nil {
		return ""
	}
	switch c.Decision.Kind {
	case toolrun.Allow:
		if len(c.Decision.Input) > 0 {
			return "approved with an edit"
		}
		if c.Decision.Always {
			return "approved (always, for the run)"
		}
		return "approved"
	case toolrun.Deny:
		return "denied"
	case toolrun.Skip:
		return "answered in the tool's place"
	}
	return c.Decision.Kind.String()
}

// Class is the call's decision as a CSS class.
func (c *threadCall) Class() string {
	if c.Decision == nil {
		if !c.WaitFrom.IsZero() {
			return "pending"
		}
		return ""
	}
	return map[toolrun.DecisionKind]string{toolrun.Allow: "approve", toolrun.Deny: "deny", toolrun.Skip: "respond"}[c.Decision.Kind]
}

// Wait is how long the call waited for a person.
func (c *threadCall) Wait() time.Duration {
	if c.WaitFrom.IsZero() || c.DecidedAt.IsZero() {
		return 0
	}
	return c.DecidedAt.Sub(c.WaitFrom)
}

// threadRun is one run of a thread.
type threadRun struct {
	N          int
	ID         string
	Start, End time.Time
	Stop       string
	Detail     string
	Model      string
	Usage      toolrun.Usage
	Cost       float64
	CostKnown  bool
	Calls      []*threadCall
	// Answered are the calls of earlier runs whose results this run
	// gave, once a person had decided them.
	Answered []*threadCall
}

// threadReport is the data of the report's template.
type threadReport struct {
	Thread         string
	Runs           []*threadRun
	Cost           float64
	CostIncomplete bool
	Decisions      int
	Denials        int
	Failures       int
	Waited         time.Duration
	Axis           []axisRow
	From           time.Time
	Span           time.Duration
}

// axisRow is one row of the time axis: a run, or a call that waited or
// ran, with its bars.
type axisRow struct {
	Label string
	Class string
	Bars  []axisBar
}

// axisBar is a span of the axis, placed in percent of it.
type axisBar struct {
	Class, Title, Text string
	Style              template.CSS
}

// responseModel returns the model a recorded response names.
func responseModel(e *transcript.Entry) string {
	var r struct {
		Model string `json:"model"`
	}
	json.Unmarshal(e.Body, &r)
	return r.Model
}

// buildThreadReport tells the story of thread from its runs' transcripts,
// in order.
func buildThreadReport(thread string, ts []*transcript.Transcript) *threadReport {
	rep := &threadReport{Thread: thread}
	calls := map[string]*threadCall{}
	// A run's stop records the thread's usage so far: a run's own is the
	// difference from the run before. Its model is the last a response
	// named, in this run or before (a run that only gives the results of
	// decided calls may make its first request after them).
	var before toolrun.Usage
	model := ""
	for i, t := range ts {
		run := &threadRun{N: i + 1, ID: t.Header.Meta["run"], Start: t.Header.Time}
		s := t.Stop()
		if s != nil {
			run.End, run.Stop, run.Detail = s.Time, string(s.StopReason), s.Detail
			if s.Error != "" && run.Detail == "" {
				run.Detail = s.Error
			}
		}
		for _, tn := range t.Turns() {
			if tn.Response != nil {
				if m := responseModel(tn.Response); m != "" {
					model, run.Model = m, m
				}
			}
			for _, c := range tn.Calls {
				if c.Discarded {
					continue
				}
				tc := calls[c.ID]
				if tc == nil {
					tc = &threadCall{ID: c.ID, Tool: c.Tool, Input: prettyJSON(c.Input), Run: run.N}
					if tn.Response != nil {
						tc.AskedAt = tn.Response.Time
					}
					calls[c.ID] = tc
					run.Calls = append(run.Calls, tc)
				}
				for _, d := range c.Decisions {
					if d.Decision == nil {
						continue
					}
					if tc.AskedAt.IsZero() {
						tc.AskedAt = d.Time
					}
					if d.Decision.Kind == toolrun.Defer {
						if tc.WaitFrom.IsZero() {
							tc.WaitFrom = d.Time
						}
						continue
					}
					dd := *d.Decision
					tc.Decision, tc.DecidedAt, tc.Person = &dd, d.Time, toolrun.DecidedBy(d.By) == toolrun.ByApproval
					tc.Who = d.By
					if tc.Person {
						tc.Who = dd.Who
						if tc.Who == "" {
							tc.Who = "a person the run did not name"
						}
						if !dd.At.IsZero() {
							tc.DecidedAt = dd.At
						}
					}
				}
				if f := c.Finished; f != nil {
					tc.Result, tc.IsError, tc.ResultRun, tc.ResultAt = f.OutputText(), f.IsError, run.N, f.Time
					if f.Error != "" && tc.Result == "" {
						tc.Result = f.Error
					}
					tc.Duration = f.Duration()
					refused := tc.Decision != nil && (tc.Decision.Kind == toolrun.Deny || tc.Decision.Kind == toolrun.Skip)
					tc.Failed = f.IsError && !refused
					if tc.Run != run.N {
						run.Answered = append(run.Answered, tc)
					}
				}
			}
		}
		if s != nil && s.Usage != nil {
			u := *s.Usage
			if u.InputTokens >= before.InputTokens && u.OutputTokens >= before.OutputTokens {
				run.Usage = toolrun.Usage{InputTokens: u.InputTokens - before.InputTokens, OutputTokens: u.OutputTokens - before.OutputTokens,
					CacheCreationInputTokens: u.CacheCreationInputTokens - before.CacheCreationInputTokens, CacheReadInputTokens: u.CacheReadInputTokens - before.CacheReadInputTokens}
			} else {
				run.Usage = u // a thread whose usage started again (a branch, say): the stop's own
			}
			before = u
			run.Cost, run.CostKnown = run.Usage.CostUSD(model, nil)
		}
		rep.Runs = append(rep.Runs, run)
		rep.Cost += run.Cost
		rep.CostIncomplete = rep.CostIncomplete || !run.CostKnown
	}
	for _, tc := range calls {
		if tc.Person && tc.Decision != nil {
			rep.Decisions++
			rep.Waited += tc.Wait()
			if tc.Decision.Kind == toolrun.Deny {
				rep.Denials++
			}
		}
		if tc.Failed {
			rep.Failures++
		}
	}
	rep.axis()
	return rep
}

// axis lays the runs and the calls that waited or ran on one time axis.
func (rep *threadReport) axis() {
	var from, to time.Time
	see := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if from.IsZero() || t.Before(from) {
			from = t
		}
		if t.After(to) {
			to = t
		}
	}
	for _, r := range rep.Runs {
		see(r.Start)
		see(r.End)
		for _, c := range r.Calls {
			see(c.AskedAt)
			see(c.WaitFrom)
			see(c.DecidedAt)
			see(c.ResultAt)
		}
	}
	if from.IsZero() {
		return
	}
	rep.From, rep.Span = from, to.Sub(from)
	total := float64(max(rep.Span, time.Millisecond))
	bar := func(class, title, text string, a, z time.Time) axisBar {
		x := float64(a.Sub(from)) / total * 100
		w := max(float64(z.Sub(a))/total*100, 0.4)
		w = min(w, 100-x)
		return axisBar{Class: class, Title: title, Text: text, Style: template.CSS(fmt.Sprintf("left:%.3f%%;width:%.3f%%", x, w))}
	}
	for _, r := range rep.Runs {
		end := r.End
		if end.IsZero() {
			end = r.Start
		}
		rep.Axis = append(rep.Axis, axisRow{Label: fmt.Sprintf("run %d", r.N), Class: "run", Bars: []axisBar{bar("run", "run "+r.ID+": "+r.Stop, "", r.Start, end)}})
		for _, c := range r.Calls {
			row := axisRow{Label: c.Tool, Class: "callrow"}
			if !c.WaitFrom.IsZero() {
				end := c.DecidedAt
				if end.IsZero() {
					end = to
				}
				text := "wait " + roundDur(c.Wait())
				title := "waited " + roundDur(c.Wait()) + " for a person"
				if c.Person {
					text += " → " + c.Class() + " by " + c.Who
					title += "; " + c.Verb() + " by " + c.Who
				}
				row.Bars = append(row.Bars, bar("wait", title, text, c.WaitFrom, end))
			}
			if !c.ResultAt.IsZero() {
				start := c.ResultAt.Add(-c.Duration)
				switch {
				case c.Class() == "deny":
					row.Bars = append(row.Bars, bar("denial", "the model was told of the denial", "", start, c.ResultAt))
				case c.Failed:
					row.Bars = append(row.Bars, bar("failed", "the tool failed", "", start, c.ResultAt))
				default:
					row.Bars = append(row.Bars, bar("ran", "the tool ran "+roundDur(c.Duration), "", start, c.ResultAt))
				}
			}
			if len(row.Bars) > 0 {
				rep.Axis = append(rep.Axis, row)
			}
		}
	}
}

// roundDur says d as a person reads it.
func roundDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func prettyJSON(b json.RawMessage) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}

var threadTemplate = template.Must(template.New("thread").Funcs(template.FuncMap{
	"stamp":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 UTC") },
	"dollars": func(v float64) string { return fmt.Sprintf("$%.4f", v) },
	"dur":     roundDur,
	"sub":     func(a, b time.Time) time.Duration { return a.Sub(b) },
}).Parse(threadHTML))

// writeThreadHTML writes the report of thread's runs, ts in order.
func writeThreadHTML(w io.Writer, thread string, ts []*transcript.Transcript) error {
	return threadTemplate.Execute(w, buildThreadReport(thread, ts))
}

const threadHTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>toolrun · thread {{.Thread}}</title>
<style>
body{margin:0;font:14px/1.45 system-ui,sans-serif;color:#1d2330;background:#f6f7f9}
main{max-width:70em;padding:1em 1.2em}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em} dt{color:#667085} dd{margin:0}
pre{font:12.5px/1.4 ui-monospace,monospace;background:#f6f7f9;border:1px solid #d9dee7;border-radius:4px;padding:.5em;margin:.2em 0;white-space:pre-wrap;overflow-wrap:anywhere;max-height:18em;overflow:auto}
.box{background:#fff;border:1px solid #d9dee7;border-radius:6px;padding:.4em 1em .8em;margin:0 0 1em}
h3{display:flex;gap:.6em;align-items:baseline;font-size:1em} h3 .end{margin-left:auto;font-weight:normal}
.facts{color:#667085;margin:.2em 0}
.call{border-left:3px solid #d9dee7;padding:.2em 0 .3em .8em;margin:.6em 0}
.decision{padding:.4em .7em;border-radius:4px;border:1px solid #d9dee7;margin:.3em 0}
.decision.approve{background:#ecf8f0;border-color:#9fd8b2} .decision.deny{background:#f3ecfb;border-color:#b99be0}
.decision.respond{background:#f1f5ff;border-color:#a9bdf2} .decision.pending{background:#fffbe6;border-color:#f5c26b}
.decision.rule{background:#f6f7f9}
.result.failed pre{border-color:#b42318;background:#fde2e1} .result.denial pre{border-style:dashed}
.muted{color:#667085}
.axis .row{display:grid;grid-template-columns:9em 1fr;gap:.6em;align-items:center;min-height:1.5em}
.axis .track{position:relative;height:1.3em;border-left:1px solid #d9dee7}
.axis .bar{position:absolute;top:.2em;height:.9em;border-radius:2px;min-width:2px}
.axis .bar span{position:absolute;left:.3em;top:-.15em;font-size:.75em;white-space:nowrap}
.bar.run{background:#9db4f0} .bar.wait{background:repeating-linear-gradient(45deg,#f5c26b 0 6px,#fbe3b6 6px 12px)}
.bar.ran{background:#137a3a} .bar.denial{background:#8a63c9} .bar.failed{background:#b42318}
.row.run .label{font-weight:600}
</style></head>
<body><main>
<h1>Thread <code>{{.Thread}}</code></h1>
<dl>
<dt>Runs</dt><dd id="runs-count">{{len .Runs}}</dd>
<dt>Cost</dt><dd id="cost">{{dollars .Cost}}{{if .CostIncomplete}} (incomplete: a model had no price){{end}}</dd>
<dt>Decisions by a person</dt><dd id="decisions">{{.Decisions}}{{if .Denials}} ({{.Denials}} denied){{end}}</dd>
<dt>Tool failures</dt><dd id="failures">{{.Failures}}</dd>
<dt>Waiting for a person</dt><dd id="waited">{{dur .Waited}}</dd>
</dl>
<h2>Time</h2>
<section class="box axis" id="axis">
<p class="muted">From {{stamp .From}}, {{dur .Span}} in all.</p>
{{range .Axis}}<div class="row {{.Class}}"><span class="label">{{.Label}}</span><span class="track">{{range .Bars}}<span class="bar {{.Class}}" style="{{.Style}}" title="{{.Title}}">{{if .Text}}<span>{{.Text}}</span>{{end}}</span>{{end}}</span></div>
{{end}}</section>
<h2>Runs</h2>
{{range .Runs}}<section class="box run" id="run-{{.N}}" data-run="{{.ID}}">
<h3>Run {{.N}} <code>{{.ID}}</code><span class="end">{{if .Stop}}stopped: {{.Stop}}{{else}}no stop recorded (killed, or still running){{end}}</span></h3>
<p class="facts">started {{stamp .Start}}{{if not .End.IsZero}}, ran {{dur (sub .End .Start)}}{{end}} · <span class="cost">{{if .CostKnown}}{{dollars .Cost}}{{else}}cost unknown{{end}}</span> ({{.Usage.InputTokens}} in, {{.Usage.OutputTokens}} out{{if .Model}}, {{.Model}}{{end}})</p>
{{if .Detail}}<p class="facts">{{.Detail}}</p>{{end}}
{{range .Answered}}<p class="facts answered">Gave the result of {{.Tool}} ({{.ID}}) of run {{.Run}}, {{.Verb}} by {{.Who}}.</p>{{end}}
{{range .Calls}}<div class="call" id="call-{{.ID}}">
<b>{{.Tool}}</b> <span class="muted">{{.ID}} · {{stamp .AskedAt}}</span>
<pre>{{.Input}}</pre>
{{if .Decision}}<div class="decision {{if .Person}}{{.Class}}{{else}}rule {{.Class}}{{end}}"><b>{{.Verb}}</b> by <span class="by">{{.Who}}</span> <span class="muted">at {{stamp .DecidedAt}}{{if not .WaitFrom.IsZero}}, after a wait of {{dur .Wait}}{{end}}</span>{{if .Decision.Reason}}<br>Reason: {{.Decision.Reason}}{{end}}</div>
{{else if not .WaitFrom.IsZero}}<div class="decision pending"><b>waiting for a person</b> <span class="muted">since {{stamp .WaitFrom}}</span></div>{{end}}
{{if not .ResultAt.IsZero}}<div class="result{{if .Failed}} failed{{else if eq .Class "deny"}} denial{{end}}"><span class="muted">{{if .Failed}}Failed{{else if eq .Class "deny"}}The model was told{{else}}Result{{end}}{{if ne .ResultRun .Run}} (in run {{.ResultRun}}){{end}}, {{stamp .ResultAt}}</span><pre>{{.Result}}</pre></div>{{end}}
</div>
{{end}}</section>
{{end}}</main></body></html>
`
