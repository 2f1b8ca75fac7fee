package transcript_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolrun/toolrun/transcript"
)

func writeHTML(t *testing.T, tr *transcript.Transcript) string {
	t.Helper()
	var buf bytes.Buffer
	if err := transcript.WriteHTML(&buf, tr); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestWriteHTMLGolden pins the report of the golden transcript, and checks
// the parts a person looks for.
func TestWriteHTMLGolden(t *testing.T) {
	tr, err := transcript.ReadFile("testdata/run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	page := writeHTML(t, tr)
	golden(t, "report.html", []byte(page))

	tests := []struct {
		name string
		re   string
		want int
	}{
		{"a bar per tool call", `<a class="tool-bar `, 6},
		{"a bar per model request", `<a class="model-bar"`, 3},
		{"failed calls marked", `<a class="tool-bar failed"`, 2},
		{"the denied call marked", `<a class="tool-bar denied"`, 1},
		{"the skipped call marked", `<a class="tool-bar skipped"`, 1},
		{"failures, not the denial or the skip", `id="stat-failures"><b>2</b>`, 1},
		{"the denial in no failure list", `<h3><a href="#call-toolu_4">`, 0},
		{"the decisions of a transcript written before the report showed them", `<ul class="decisions"><li class="(allow|deny|skip)">`, 6},
		{"the denial's decision", regexp.QuoteMeta(`<div class="dec deny" title="denied · policy">`), 1},
		{"a timeline row per turn", `<div class="turn" id="timeline-turn-\d"`, 3},
		{"two token bars per turn", `<rect class="(in|out)"`, 6},
		{"failures with their errors", `<div class="err">(database is down|tool &#34;parse&#34; panicked: assignment to entry in nil map|tool call denied: tool &#34;delete_files&#34; is not allowed in this run)</div>`, 5},
		{"the panic's stack", `<pre class="stack">goroutine 7 \[running\]:`, 2},
		{"the conversation's messages", `<div class="msg (system|user|assistant|tool)"`, 2 + 3 + 2},
		{"strict CSP", regexp.QuoteMeta(`<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">`), 1},
		{"no script", `(?i)<script`, 0},
		{"no external resource", `(?i)(src|href)="?(https?:)?//`, 0},
		{"the stop", `id="stop-reason">end_turn<`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(regexp.MustCompile(tt.re).FindAllStringIndex(page, -1)); got != tt.want {
				t.Errorf("%d matches of %s, want %d", got, tt.re, tt.want)
			}
		})
	}
}

var (
	tagRE          = regexp.MustCompile(`<[a-zA-Z][^>]*>`)
	quotedRE       = regexp.MustCompile(`"[^"]*"`)
	eventHandlerRE = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
)

// hostile are texts a model or a tool could return to attack the report.
var hostile = []string{
	`<script>document.title='pwned'</script>`,
	`<img src=x onerror="document.body.dataset.pwned=1">`,
	`"><svg onload=alert(1)>`,
	`</pre></div><iframe src="https://evil.example/">`,
	`<style>body{display:none}</style>`,
}

// hostileTranscript returns a transcript with payload in every field the
// report shows.
func hostileTranscript(t *testing.T, payload string) *transcript.Transcript {
	t.Helper()
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	lines := []string{
		`{"type":"header","time":"2025-06-01T12:00:00Z","format":"toolrun.transcript","version":1,"meta":{"name":` + q(payload) + `,` + q(payload) + `:"x","toolrun.tools":` + q(payload) + `}}`,
		`{"type":"request","time":"2025-06-01T12:00:00.1Z","turn":1,"body":{"model":` + q(payload) + `,"max_tokens":10,"system":` + q(payload) + `,"messages":[{"role":"user","content":` + q(payload) + `}]}}`,
		`{"type":"response","time":"2025-06-01T12:00:00.2Z","turn":1,"body":{"id":"msg_1","model":"m","content":[{"type":"text","text":` + q(payload) + `},{"type":"thinking","thinking":` + q(payload) + `},{"type":"tool_use","id":` + q(payload) + `,"name":` + q(payload) + `,"input":{"x":` + q(payload) + `}},{"type":` + q(payload) + `}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5}}}`,
		`{"type":"decision","time":"2025-06-01T12:00:00.3Z","turn":1,"tool_use_id":` + q(payload) + `,"tool":` + q(payload) + `,"decision":{"kind":"deny","reason":` + q(payload) + `},"by":` + q(payload) + `}`,
		`{"type":"run_stopped","time":"2025-06-01T12:00:00.31Z","turn":1,"stop_reason":"awaiting_approval","detail":` + q(payload) + `}`,
		`{"type":"decision","time":"2025-06-01T12:00:00.35Z","turn":1,"tool_use_id":` + q(payload) + `,"tool":` + q(payload) + `,"decision":{"kind":"allow","reason":` + q(payload) + `,"input":{"x":` + q(payload) + `},"always":true,"who":` + q(payload) + `,"at":"2025-06-01T12:00:00.34Z"},"by":"approval"}`,
		`{"type":"tool_finished","time":"2025-06-01T12:00:00.4Z","turn":1,"tool_use_id":` + q(payload) + `,"tool":` + q(payload) + `,"output":[{"type":"text","text":` + q(payload) + `}],"is_error":true,"error":` + q(payload) + `,"stack":` + q(payload) + `}`,
		`{"type":"run_stopped","time":"2025-06-01T12:00:00.5Z","turn":1,"stop_reason":` + q(payload) + `,"detail":` + q(payload) + `,"error":` + q(payload) + `}`,
	}
	tr, err := transcript.Read(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestWriteHTMLEscapes checks that no text of the run reaches the page as
// markup, wherever the report shows it.
func TestWriteHTMLEscapes(t *testing.T) {
	for _, payload := range hostile {
		t.Run(payload, func(t *testing.T) {
			page := writeHTML(t, hostileTranscript(t, payload))
			if strings.Contains(page, payload) {
				t.Errorf("the page has %q unescaped", payload)
			}
			for _, tag := range []string{"<script", "<img", "<iframe", "<style>body", "<svg onload"} {
				if strings.Contains(page, tag) {
					t.Errorf("the page has %q", tag)
				}
			}
			// No tag has an event handler attribute. In text "<" is
			// escaped, so every match of tagRE is markup; in an attribute
			// value '"' is, so quotedRE drops whole values.
			for _, tag := range tagRE.FindAllString(page, -1) {
				if eventHandlerRE.MatchString(quotedRE.ReplaceAllString(tag, `""`)) {
					t.Errorf("the page has an event handler: %s", tag)
				}
			}
			// It is there, escaped, for a person to read.
			escaped := strings.NewReplacer("<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(payload)
			if !strings.Contains(page, escaped) {
				t.Errorf("the page does not show %q escaped", payload)
			}
			// So is the name of the person who decided, under the call's
			// result and in the decision trail.
			for _, at := range []string{`<span class="who">` + escaped + `</span>`, `<td class="who">` + escaped + `</td>`} {
				if !strings.Contains(page, at) {
					t.Errorf("the page does not show the decider's name as %s", at)
				}
			}
		})
	}
}

// TestWriteHTMLKilledRun renders a transcript cut short during a call: the
// page says the run did not stop, and the call did not finish.
func TestWriteHTMLKilledRun(t *testing.T) {
	full, err := transcript.ReadFile("testdata/run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	killed := &transcript.Transcript{Header: full.Header, Torn: `{"type":"tool_fin`}
	for _, e := range full.Entries {
		killed.Entries = append(killed.Entries, e)
		if e.Type == transcript.TypeToolStarted && e.ToolUseID == "toolu_6" {
			break
		}
	}
	page := writeHTML(t, killed)
	for _, want := range []string{`id="incomplete"`, `id="torn"`, `<a class="tool-bar unfinished"`, "did not finish"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page has no %q", want)
		}
	}
}

func TestViewFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "report.html")
	if err := transcript.ViewFile("testdata/run.jsonl", out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) || !bytes.Contains(b, []byte(`class="tool-bar`)) {
		t.Errorf("ViewFile wrote %d bytes that are not the report", len(b))
	}
	if err := transcript.ViewFile(filepath.Join(t.TempDir(), "missing.jsonl"), out); !os.IsNotExist(err) {
		t.Errorf("ViewFile of a missing file: %v, want a not-exist error", err)
	}
}
