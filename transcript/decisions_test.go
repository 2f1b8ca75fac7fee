package transcript_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
	"github.com/toolrun/toolrun/transcript"
)

// personWait is how long the person of approvalRun takes to decide.
const personWait = 70 * time.Second

// personDecided is when the person of approvalRun decides, by their own
// clock: before the run goes on, whose lines retime dates.
var personDecided = time.Date(2025, 6, 1, 12, 1, 2, 500e6, time.UTC)

// retime makes a recorded transcript deterministic, as normalize does, and
// puts personWait between each stop awaiting approval and the line after
// it: line n gets 2025-06-01T12:00:00Z plus n×20ms (plus the waits before
// it), and every call lasts 15ms.
func retime(b []byte) []byte {
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	var shift time.Duration
	for i, line := range bytes.SplitAfter(b, []byte("\n")) {
		ts := base.Add(time.Duration(i)*20*time.Millisecond + shift).Format(time.RFC3339Nano)
		line = timeRE.ReplaceAll(line, []byte(`"time":"`+ts+`"`))
		if bytes.Contains(line, []byte(`"type":"tool_finished"`)) {
			line = durationRE.ReplaceAll(line, []byte(`"duration_ms":15`))
		}
		out.Write(line)
		if bytes.Contains(line, []byte(`"stop_reason":"awaiting_approval"`)) && bytes.Contains(line, []byte(`"type":"run_stopped"`)) {
			shift += personWait
		}
	}
	return out.Bytes()
}

// approvalRun records a run whose policies and person decide every way
// there is: a call deferred to a person, who approves it with an edited
// input and Always; a later call of that tool approved by the Always; a
// call denied and one skipped by policies; calls allowed by no rule. The
// person takes personWait to decide, and the first response reads most of
// its input from the cache. Its header holds the CLI's settings, as
// "toolrun run" writes them.
func approvalRun(t *testing.T) *transcript.Transcript {
	t.Helper()
	tools := []toolrun.Tool{
		toolrun.NewTool("search", "Searches", func(ctx context.Context, in struct {
			Q string `json:"q"`
		}) (string, error) {
			return "3 results for " + in.Q, nil
		}),
		toolrun.NewTool("deploy", "Deploys", func(ctx context.Context, in struct {
			Env string `json:"env"`
		}) (string, error) {
			return "deployed to " + in.Env, nil
		}),
		toolrun.NewTool("delete_branch", "Deletes a branch", func(ctx context.Context, in struct{}) (string, error) { return "deleted", nil }),
		toolrun.NewTool("lookup", "Looks up", func(ctx context.Context, in struct{}) (string, error) { return "looked up", nil }),
	}
	first := toolruntest.Message(toolruntest.Text("Searching, then deploying."),
		toolruntest.ToolUse("toolu_1", "search", map[string]string{"q": "release notes"}),
		toolruntest.ToolUse("toolu_2", "deploy", map[string]string{"env": "prod"}),
		toolruntest.ToolUse("toolu_3", "delete_branch", nil),
		toolruntest.ToolUse("toolu_4", "lookup", nil),
	)
	first.Usage = &toolruntest.Usage{InputTokens: 12, CacheCreationInputTokens: 120, CacheReadInputTokens: 4900, OutputTokens: 60}
	second := toolruntest.Message(toolruntest.ToolUse("toolu_5", "deploy", map[string]string{"env": "prod"}), toolruntest.ToolUse("toolu_6", "search", map[string]string{"q": "status"}))
	second.Usage = &toolruntest.Usage{InputTokens: 40, CacheReadInputTokens: 5020, OutputTokens: 30}
	final := toolruntest.Message(toolruntest.Text("Deployed to staging."))
	final.Usage = &toolruntest.Usage{InputTokens: 25, CacheReadInputTokens: 5100, OutputTokens: 8}
	s := toolruntest.New(t, toolruntest.Script(first, second, final))

	var buf syncBuffer
	rec := transcript.NewRecorder(&buf, &transcript.RecorderOptions{Meta: map[string]string{
		"name": "approvals", "model": "claude-test", "toolrun.tools": `{"workdir":"/srv/app","fs":true,"shell":false}`}})
	pol := policy.Chain(policy.DenyTools("delete_branch"), func(ctx context.Context, c toolrun.PolicyCall) toolrun.Decision {
		switch c.Name {
		case "lookup":
			d := policy.Skip(toolrun.Text("cached answer"))
			d.Reason = "answered from the cache"
			return d
		case "deploy":
			return policy.Defer("deploys need a person")
		}
		return toolrun.Decision{}
	})
	r := toolrun.New(client(s), userParams("Ship the release."), tools, &toolrun.Options{Logger: discard(), OnEvent: rec.Observe, Policy: pol, MaxParallelTools: 1})
	res, err := r.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("Run = %v, %v; want awaiting_approval", res.StopReason, err)
	}
	d := toolrun.Decision{}
	d.Input, d.Always, d.Reason = json.RawMessage(`{"env":"staging"}`), true, "staging first"
	d.Who, d.At = "alice@example.com", personDecided
	if err := r.Decide("toolu_2", d); err != nil {
		t.Fatal(err)
	}
	if res, err = r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %v, %v; want end_turn", res.StopReason, err)
	}
	return readBytes(t, retime(buf.Bytes()))
}

// canceledRun records a run cancelled while a call runs, as Ctrl-C
// cancels the CLI's: one call done, one running.
func canceledRun(t *testing.T) *transcript.Transcript {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tools := []toolrun.Tool{
		toolrun.NewTool("search", "Searches", func(ctx context.Context, in struct{}) (string, error) { return "found", nil }),
		toolrun.NewTool("build", "Builds", func(ctx context.Context, in struct{}) (string, error) {
			cancel() // the person presses Ctrl-C while it builds
			<-ctx.Done()
			return "", ctx.Err()
		}),
	}
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "search", nil)),
		toolruntest.Message(toolruntest.ToolUse("toolu_2", "build", nil)),
		toolruntest.Message(toolruntest.Text("never sent")),
	))
	var buf syncBuffer
	rec := transcript.NewRecorder(&buf, &transcript.RecorderOptions{Meta: map[string]string{"name": "cancelled"}})
	res, err := toolrun.New(client(s), userParams("Build it."), tools, &toolrun.Options{Logger: discard(), OnEvent: rec.Observe}).Run(ctx)
	if res == nil || res.StopReason != toolrun.StopCanceled || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, %v; want canceled", res, err)
	}
	return readBytes(t, retime(buf.Bytes()))
}

// barWidth returns the width, in percent, of the first bar of class class
// whose title starts with title.
func barWidth(t *testing.T, page, class, title string) float64 {
	t.Helper()
	re := regexp.MustCompile(`<a class="` + regexp.QuoteMeta(class) + `" href="[^"]*" style="left:[0-9.]+%;width:([0-9.]+)%" title="` + regexp.QuoteMeta(title))
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no bar of class %q titled %q in the page", class, title)
	}
	w, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestReportDecisions checks that the report shows every decision, on the
// timeline and in the conversation, with who took it, when, why and the
// edited input; draws the person's wait as its own segment and breaks the
// time axis there; counts no denial or skip as a failure; gives token
// cards that add up to the chart; and shows the CLI's settings readably.
func TestReportDecisions(t *testing.T) {
	tr := approvalRun(t)
	page := writeHTML(t, tr)
	html := func(s string) string { return strings.NewReplacer(`"`, "&#34;").Replace(s) }
	tests := []struct {
		name string
		re   string
		want int
	}{
		// In the conversation.
		{"the deferral", regexp.QuoteMeta(`deferred by a policy to a person: <span class="why">deploys need a person</span>`), 1},
		{"the person's approval, with the wait, who and when", regexp.QuoteMeta(`approved by a person, always for this tool, after 1m10s waiting (<span class="who">alice@example.com</span>, decided <span class="at">2025-06-01 12:01:02.500 UTC</span>): <span class="why">staging first</span>`), 1},
		{"the edited input, in the conversation and the trail", regexp.QuoteMeta(`<pre class="edited">{` + "\n" + `  ` + html(`"env": "staging"`) + "\n}</pre>"), 2},
		// The decision trail: every decision of a rule or a person, in
		// order, a person's under their name and at their own time.
		{"the trail", `<section class="card" id="trail">\n<h2>Decision trail</h2>`, 1},
		{"a trail row per decision of a rule or a person", `<tr class="(allow|deny|skip|defer)"><td class="when">`, 5},
		{"the deferral in the trail", `<tr class="defer"><td class="when">2025-06-01 12:00:[0-9.]+ UTC</td><td class="who">a policy</td><td><a href="#call-toolu_2">deploy</a> <code>toolu_2</code></td><td>deferred to a person</td><td class="why">deploys need a person</td><td></td></tr>`, 1},
		{"the person's decision in the trail", regexp.QuoteMeta(`<tr class="allow"><td class="when">2025-06-01 12:01:02.500 UTC</td><td class="who">alice@example.com</td><td><a href="#call-toolu_2">deploy</a> <code>toolu_2</code></td><td>approved, always for this tool, input edited</td><td class="why">staging first</td><td><pre class="edited">`), 1},
		{"the Always approval in the trail", `<tr class="allow"><td class="when">[^<]+</td><td class="who">an earlier Always approval</td><td><a href="#call-toolu_5">deploy</a>`, 1},
		{"the denial in the trail", `<tr class="deny"><td class="when">[^<]+</td><td class="who">a policy</td><td><a href="#call-toolu_3">delete_branch</a>`, 1},
		{"the skip in the trail", `<tr class="skip"><td class="when">[^<]+</td><td class="who">a policy</td><td><a href="#call-toolu_4">lookup</a>`, 1},
		{"the Always approval", regexp.QuoteMeta(`</span> allowed by an earlier Always approval of the tool</li>`), 1},
		{"the denial", regexp.QuoteMeta(`denied by a policy: <span class="why">tool ` + html(`"delete_branch"`) + ` is not allowed in this run</span>`), 1},
		{"the skip", regexp.QuoteMeta(`skipped by a policy, answered without running: <span class="why">answered from the cache</span>`), 1},
		{"calls allowed by no rule", regexp.QuoteMeta(`</span> allowed by no rule (the default)</li>`), 2},
		{"when, since the start", `<span class="when">&#43;[0-9.ms]+ \(12:0[01]:[0-9.]+\)</span>`, 7},
		// On the timeline.
		{"a decision mark per decision", `<i class="mk (allow|deny|skip|defer)" style="left:[0-9.]+%" title="`, 7},
		{"the deferral marked", `<i class="mk defer"`, 1},
		{"the decision column", `<div class="dec (deny|skip|allow|allow-default|defer)" title="`, 6},
		{"approved by the person, by name", regexp.QuoteMeta(`<div class="dec allow" title="approved, always · alice@example.com">`), 1},
		{"approved by Always", regexp.QuoteMeta(`<div class="dec allow" title="approved · always">`), 1},
		{"denied", regexp.QuoteMeta(`<div class="dec deny" title="denied · policy">`), 1},
		{"skipped", regexp.QuoteMeta(`<div class="dec skip" title="skipped · policy">`), 1},
		{"the wait as its own row", `<div class="row wait">`, 1},
		{"the wait's bar", `<a class="wait-bar" href="" style="left:[0-9.]+%;width:[0-9.]+%" title="the run awaited approval for 1m10s \(the time axis is broken here\)"`, 1},
		{"the wait on the call's row", `<i class="wait-seg" style="left:[0-9.]+%;width:[0-9.]+%" title="waiting for a person: 1m10s"`, 1},
		{"the axis break, labelled", `<i class="brk" style="left:[0-9.]+%;width:[0-9.]+%" title="the time axis is broken here: 1m10s wait">//</i>`, 1},
		{"denied and skipped bars", `<a class="tool-bar (denied|skipped)"`, 2},
		{"no failed bar", `<a class="tool-bar failed"`, 0},
		{"the denial's message not in red", `<div class="refusal" title="what the model was told"><div class="err">tool call denied: `, 1},
		{"no failure box", `<div class="failure">`, 0},
		// The cards.
		{"no failures", `id="stat-failures"><b>0</b>`, 1},
		{"denials and skips counted apart", regexp.QuoteMeta(`<small>1 denied · 1 skipped</small>`), 1},
		{"one decision by a person", `id="stat-approvals"><b>1</b>`, 1},
		{"the wait in the cards", regexp.QuoteMeta(`<small>1m10s waiting for approval</small>`), 1},
		{"input tokens, cache included", `id="stat-input"><b>15,217</b><span>input tokens</span><small>77 uncached · 120 cache write · 15,020 cache read</small>`, 1},
		{"output tokens", `id="stat-output"><b>98</b>`, 1},
		{"the cards agree with the run's count", `id="tokens-differ"`, 0},
		{"a stacked input bar per part", `<rect class="(in|in-write|in-read)"`, 3 + 2 + 2},
		// The settings.
		{"no raw settings in the header", regexp.QuoteMeta(`toolrun.tools: <code>`), 0},
		{"the settings, readable", regexp.QuoteMeta(`<details class="settings meta" id="settings"><summary>run settings</summary><div>toolrun.tools</div><pre>{` + "\n  " + html(`"workdir": "/srv/app",`)), 1},
		{"no failure card", `id="failures"`, 0},
		{"no script", `(?i)<script`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(regexp.MustCompile(tt.re).FindAllStringIndex(page, -1)); got != tt.want {
				t.Errorf("%d matches of %s, want %d", got, tt.re, tt.want)
			}
		})
	}
	// The trail is in the order of the decisions' times, a person's by
	// their own clock.
	_, trail, _ := strings.Cut(page, `id="trail"`)
	trail, _, _ = strings.Cut(trail, "</table>")
	var whens []string
	for _, m := range regexp.MustCompile(`<td class="when">([^<]+)</td><td class="who">([^<]+)</td>`).FindAllStringSubmatch(trail, -1) {
		whens = append(whens, m[1]+" "+m[2])
	}
	if !slices.IsSorted(whens) || len(whens) != 5 || !strings.HasSuffix(whens[3], "alice@example.com") {
		t.Errorf("the trail's rows are\n%s\nwant 5, in the order of their times, alice's fourth", strings.Join(whens, "\n"))
	}
	// The input tokens of the card are those the chart draws: the sum of
	// the input bars' titles (each stacked part repeats its bar's title:
	// each turn counts once).
	seen := map[string]bool{}
	var chartIn int64
	for _, m := range regexp.MustCompile(`<title>(turn \d+): (\d+) input tokens`).FindAllStringSubmatch(page, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			n, _ := strconv.ParseInt(m[2], 10, 64)
			chartIn += n
		}
	}
	if chartIn != 15217 {
		t.Errorf("the chart draws %d input tokens, want the card's 15217", chartIn)
	}
	// The bars of the model and the tools stay readable: with the wait
	// drawn to scale, a 15ms call would be a sliver of 70s.
	for _, b := range []struct{ class, title string }{
		{"tool-bar ok", "search (toolu_1)"},
		{"tool-bar ok", "deploy (toolu_2)"},
		{"model-bar", "turn 2: model request"},
	} {
		if w := barWidth(t, page, b.class, b.title); w < 2 {
			t.Errorf("the bar of %s is %.3f%% of the timeline, want at least 2%%: the wait squashes it", b.title, w)
		}
	}
}

// TestReportCanceled checks that a run cancelled while a call runs is
// shown as cancelled: no red error, no failure, the call in flight named.
func TestReportCanceled(t *testing.T) {
	page := writeHTML(t, canceledRun(t))
	tests := []struct {
		name string
		re   string
		want int
	}{
		{"the banner", `<div class="banner cancel" id="canceled"><b>Cancelled.</b> The run was stopped on request \(Ctrl-C, or its context was cancelled\): cancelled during the tool calls of turn 2\. Stopped while running: build \(toolu_2\)\.`, 1},
		{"the badge", `<span class="badge cancel" id="stop-reason">canceled</span>`, 1},
		{"no error box", `The run stopped with an error`, 0},
		{"the call's bar", `<a class="tool-bar canceled"`, 1},
		{"the call's status", `<span class="status cancelled">cancelled</span>`, 1},
		{"no failures", `id="stat-failures"><b>0</b>`, 1},
		{"no red bar", `<a class="tool-bar (failed|unfinished)"`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(regexp.MustCompile(tt.re).FindAllStringIndex(page, -1)); got != tt.want {
				t.Errorf("%d matches of %s, want %d", got, tt.re, tt.want)
			}
		})
	}
}

// screenshotDir is where the browser tests write their screenshots: the
// directory in TOOLRUN_SCREENSHOTS, which CI keeps, or a temporary one.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TOOLRUN_SCREENSHOTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReportDecisionsInChromium loads the reports of approvalRun and
// canceledRun in headless Chromium and takes their screenshots: the
// decisions, the wait and its axis break, and the cancellation are in the
// page the browser built, and no script is.
func TestReportDecisionsInChromium(t *testing.T) {
	bin := chromium(t)
	dir := screenshotDir(t)
	for _, c := range []struct {
		name  string
		tr    *transcript.Transcript
		wants []string
	}{
		{"decisions", approvalRun(t), []string{`class="row wait"`, `class="brk"`, `class="mk defer"`, `<ul class="decisions">`, `class="dec deny"`, `class="dec skip"`, `id="settings"`, `id="trail"`, `<td class="who">alice@example.com</td>`}},
		{"canceled", canceledRun(t), []string{`id="canceled"`, `class="tool-bar canceled"`, `class="badge cancel"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var page bytes.Buffer
			if err := transcript.WriteHTML(&page, c.tr); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "report-"+c.name+".html")
			if err := os.WriteFile(file, page.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			dom := string(runChromium(t, bin, "--dump-dom", "file://"+file))
			for _, want := range c.wants {
				if !strings.Contains(dom, want) {
					t.Errorf("the loaded page has no %s", want)
				}
			}
			if strings.Contains(strings.ToLower(dom), "<script") {
				t.Error("the loaded page has a script")
			}
			shot := filepath.Join(dir, "report-"+c.name+".png")
			runChromium(t, bin, "--screenshot="+shot, "--window-size=1280,1800", "--hide-scrollbars", "file://"+file)
			b, err := os.ReadFile(shot)
			if err != nil {
				t.Fatalf("no screenshot: %v", err)
			}
			if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 20<<10 {
				t.Errorf("the screenshot is %d bytes, want a PNG of at least 20 KiB", len(b))
			}
			t.Logf("screenshot: %s", shot)
		})
	}
}
