package transcript_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
	"github.com/toolrun/toolrun/transcript"
)

// TestRecorderGolden pins the transcript of a run with a call that
// succeeds, one that fails, one that panics, one denied and one skipped.
func TestRecorderGolden(t *testing.T) {
	got := normalize(record(t, recordedTools().list(), &transcript.RecorderOptions{Meta: map[string]string{"name": "golden run"}}))
	golden(t, "run.jsonl", got)

	// Each line is one JSON object, and the lines say what happened.
	tr := readBytes(t, got)
	want := []string{
		"1:request", "1:response",
		"1:decision", "1:decision", "1:decision", "1:decision", "1:tool_finished", "1:decision", "1:tool_finished",
		"1:tool_started", "1:tool_finished", "1:tool_started", "1:tool_finished", "1:tool_started", "1:tool_finished",
		"1:turn_finished",
		"2:request", "2:response", "2:decision", "2:tool_started", "2:tool_finished", "2:turn_finished",
		"3:request", "3:response", "3:turn_finished", "3:run_stopped",
	}
	if diff := cmp.Diff(want, types(tr)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	calls := map[string]*transcript.Call{}
	for _, tn := range tr.Turns() {
		for _, c := range tn.Calls {
			calls[c.ID] = c
		}
	}
	tests := []struct {
		name, id                   string
		wantError, wantOutput      string
		wantStack, wantRan         bool
		wantDecision, wantDecideBy string
	}{
		{name: "succeeds", id: "toolu_1", wantOutput: "sunny in Paris", wantRan: true, wantDecision: "allow", wantDecideBy: "default"},
		{name: "fails", id: "toolu_2", wantError: "database is down", wantOutput: "database is down", wantRan: true, wantDecision: "allow", wantDecideBy: "default"},
		{name: "panics", id: "toolu_3", wantError: `tool "parse" panicked: assignment to entry in nil map`, wantOutput: `tool "parse" panicked: assignment to entry in nil map`, wantStack: true, wantRan: true, wantDecision: "allow", wantDecideBy: "default"},
		{name: "denied", id: "toolu_4", wantError: `tool call denied: tool "delete_files" is not allowed in this run`, wantOutput: `tool call denied: tool "delete_files" is not allowed in this run`, wantDecision: "deny", wantDecideBy: "policy"},
		{name: "skipped", id: "toolu_5", wantOutput: "cached answer", wantDecision: "skip", wantDecideBy: "policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := calls[tt.id]
			if c == nil || c.Finished == nil || c.Decision == nil {
				t.Fatalf("call %s = %+v, want a decision and a result", tt.id, c)
			}
			f := c.Finished
			if f.Error != tt.wantError {
				t.Errorf("error = %q, want %q", f.Error, tt.wantError)
			}
			if got := f.OutputText(); got != tt.wantOutput {
				t.Errorf("output = %q, want %q", got, tt.wantOutput)
			}
			if got, want := f.IsError, tt.wantError != ""; got != want {
				t.Errorf("is_error = %v, want %v", got, want)
			}
			if got := f.Stack != ""; got != tt.wantStack {
				t.Errorf("has stack = %v, want %v", got, tt.wantStack)
			}
			if f.Ran != tt.wantRan {
				t.Errorf("ran = %v, want %v", f.Ran, tt.wantRan)
			}
			if got := c.Decision.Decision.Kind.String(); got != tt.wantDecision || c.Decision.By != tt.wantDecideBy {
				t.Errorf("decision = %s by %s, want %s by %s", got, c.Decision.By, tt.wantDecision, tt.wantDecideBy)
			}
		})
	}
}

// TestRecorderUnnormalized checks what normalize hides: real times that go
// forward, real durations, and a real stack.
func TestRecorderUnnormalized(t *testing.T) {
	tr := readBytes(t, record(t, recordedTools().list(), nil))
	prev := tr.Header.Time
	if prev.IsZero() {
		t.Fatal("header has no time")
	}
	for _, e := range tr.Entries {
		if e.Time.Before(prev) {
			t.Errorf("%s line at %v is before the line before it, at %v", e.Type, e.Time, prev)
		}
		prev = e.Time
		switch {
		case e.Type == transcript.TypeResponse && e.DurationMS <= 0:
			t.Errorf("response of turn %d has duration %v, want > 0", e.Turn, e.DurationMS)
		case e.Type == transcript.TypeToolFinished && e.Ran && e.DurationMS <= 0:
			t.Errorf("call %s ran for %v ms, want > 0", e.ToolUseID, e.DurationMS)
		case e.Type == transcript.TypeToolFinished && e.ToolUseID == "toolu_3" && !strings.Contains(e.Stack, "helpers_test.go"):
			t.Errorf("stack of the panic does not name the tool's function:\n%s", e.Stack)
		case e.Type == transcript.TypeRunStopped && (e.Usage == nil || e.Usage.InputTokens == 0 || e.Turns != 3 || e.ToolCalls != 6 || e.ToolFailures != 2):
			t.Errorf("run_stopped = %+v, want usage, 3 turns, 6 calls, 2 failures (the denial is a decision)", e)
		}
	}
}

// TestRecorderLinesAreWrittenWhole checks that each line reaches the
// writer in one Write, and is flushed if the writer buffers.
func TestRecorderLinesAreWrittenWhole(t *testing.T) {
	var w writes
	var out bytes.Buffer
	bw := bufio.NewWriterSize(&w, 1<<20) // bigger than the transcript: only Flush moves it
	rec := transcript.NewRecorder(bw, nil)
	events := []struct {
		e     toolrun.Event
		lines int // written so far, the header included
	}{
		{toolrun.ToolStarted{Turn: 1, Call: toolrun.ToolCall{ID: "toolu_1", Name: "t", Input: json.RawMessage(`{"a": 1}`)}}, 2},
		{toolrun.Delta{Turn: 2, Text: "x"}, 2}, // not recorded
		{toolrun.TurnFinished{Turn: 2}, 3},
	}
	for i, ev := range events {
		rec.Observe(context.Background(), ev.e)
		if got, want := len(w.lines), ev.lines; got != want {
			t.Fatalf("after event %d, %d writes reached the writer, want %d", i, got, want)
		}
	}
	for i, l := range w.lines {
		out.WriteString(l)
		if strings.Count(l, "\n") != 1 || !strings.HasSuffix(l, "\n") {
			t.Errorf("write %d = %q, want one whole line", i, l)
		}
	}
	if _, err := transcript.Read(&out); err != nil {
		t.Errorf("Read: %v", err)
	}
}

type writes struct{ lines []string }

func (w *writes) Write(p []byte) (int, error) {
	w.lines = append(w.lines, string(p))
	return len(p), nil
}

// TestRecorderWriteError checks that a failing writer does not break the
// run, and that Err reports the failure.
func TestRecorderWriteError(t *testing.T) {
	w := &failingWriter{after: 3}
	rec := transcript.NewRecorder(w, nil)
	s := toolruntest.New(t, toolruntest.Script(script()...))
	res, err := toolrun.New(client(s), userParams("go"), recordedTools().list(), runOptions(rec.Observe)).Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %v, %v; want end_turn and no error", res.StopReason, err)
	}
	if err := rec.Err(); !errors.Is(err, errDiskFull) {
		t.Errorf("Err() = %v, want %v", err, errDiskFull)
	}
	if got, want := w.n, 4; got != want {
		t.Errorf("%d writes after the failure, want none (%d in all)", got-want, want)
	}
}

var errDiskFull = errors.New("disk full")

type failingWriter struct{ after, n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.n++
	if w.n > w.after {
		return 0, errDiskFull
	}
	return len(p), nil
}

// TestRecorderRedactOption checks that the application's own redaction
// applies to every string, JSON bodies included, after the built-in redaction.
func TestRecorderRedactOption(t *testing.T) {
	b := record(t, recordedTools().list(), &transcript.RecorderOptions{
		Meta:   map[string]string{"customer": "Paris"},
		Redact: func(s string) string { return strings.ReplaceAll(s, "Paris", "[CITY]") },
	})
	if bytes.Contains(b, []byte("Paris")) {
		t.Errorf("transcript has %q:\n%s", "Paris", b)
	}
	tr := readBytes(t, b)
	if got, want := tr.Header.Meta["customer"], "[CITY]"; got != want {
		t.Errorf("meta customer = %q, want %q", got, want)
	}
	for _, e := range tr.Entries {
		if e.ToolUseID == "toolu_1" && e.Type == transcript.TypeToolFinished {
			if got, want := e.OutputText(), "sunny in [CITY]"; got != want {
				t.Errorf("output = %q, want %q", got, want)
			}
		}
	}
}

// TestRecordsCompaction: a compaction is recorded with its summary, and
// its own request and response are recorded marked as a compaction's, so
// that Turns and Replay leave them out: the turns read as the model's
// turns, and the replay serves each recorded turn to the turn it answered.
func TestRecordsCompaction(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		msgs := req.Conversation
		if last := msgs[len(msgs)-1]; last.Role == "user" && len(last.Content) == 1 && strings.HasPrefix(last.Content[0].Text, "Summarize") {
			return toolruntest.Message(toolruntest.Text("The user asked for the time twice."))
		}
		if strings.Contains(msgs[0].Content[0].Text, "compacted") {
			return toolruntest.Message(toolruntest.Text("done"))
		}
		r := toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", len(msgs)), "clock", nil))
		r.Usage = &toolruntest.Usage{InputTokens: 5000, OutputTokens: 5}
		return r
	}})
	clock := toolrun.NewTool("clock", "The time", func(ctx context.Context, in struct{}) (string, error) { return "noon", nil })
	var buf bytes.Buffer
	rec := transcript.NewRecorder(&buf, nil)
	_, err := toolrun.New(s.Client(), anthropic.BetaMessageNewParams{
		Model: "claude-test", MaxTokens: 100,
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("time?"))},
	}, []toolrun.Tool{clock}, &toolrun.Options{
		Logger: slog.New(slog.DiscardHandler), OnEvent: rec.Observe,
		Compaction: toolrun.Compaction{Threshold: 4000, ClientSide: true},
	}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transcript.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []transcript.Entry
	for _, e := range tr.Entries {
		if e.Type == transcript.TypeCompacted {
			got = append(got, e)
		}
	}
	if len(got) != 1 || got[0].Summary != "The user asked for the time twice." || got[0].Before != 3 || got[0].After != 1 || !got[0].ClientSide || got[0].Usage == nil {
		t.Errorf("compacted lines = %+v, want one with the summary, 3 → 1 messages", got)
	}
	var lines []string
	for _, e := range tr.Entries {
		if e.Type == transcript.TypeRequest || e.Type == transcript.TypeResponse {
			lines = append(lines, fmt.Sprintf("%s %d compaction=%v", e.Type, e.Turn, e.Compaction))
		}
	}
	want := []string{
		"request 1 compaction=false", "response 1 compaction=false",
		"request 2 compaction=true", "response 2 compaction=true",
		"request 2 compaction=false", "response 2 compaction=false",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("request and response lines (-want +got):\n%s", diff)
	}
	for _, tn := range tr.Turns() {
		if tn.Request == nil || tn.Request.Compaction || tn.Response == nil || tn.Response.Compaction {
			t.Errorf("turn %d = request %+v, response %+v; want the turn's own", tn.Number, tn.Request, tn.Response)
		}
	}
	// Replayed with or without the recorded run's compaction, each turn
	// gets the response its turn got, never the summary.
	for _, c := range []toolrun.Compaction{{}, {Threshold: 4000, ClientSide: true}} {
		rep, err := transcript.Replay(t.Context(), tr, []toolrun.Tool{clock}, &transcript.ReplayOptions{
			Options: toolrun.Options{Logger: slog.New(slog.DiscardHandler), Compaction: c},
		})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Result == nil {
			t.Fatalf("replay with %+v: no result; report:\n%s", c, rep)
		}
		if rep.Diverged() || rep.Result.Text() != "done" || rep.Result.Turns != 2 {
			t.Errorf("replay with %+v of a run that compacted: %d turns ending in %q, want the recorded 2 ending in \"done\"; report:\n%s", c, rep.Result.Turns, rep.Result.Text(), rep)
		}
	}
}

// TestRecorderStreamRetried: a streamed response asked for again (a
// RequestSent with Attempt 2) is written as a stream_retried line, as in
// format 1, with the attempt, the failure and the wait.
func TestRecorderStreamRetried(t *testing.T) {
	var buf syncBuffer
	rec := transcript.NewRecorder(&buf, nil)
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Reply{Content: []toolruntest.Block{toolruntest.Text("Sun")}, Fault: toolruntest.Fault{StreamErrorAfter: 4, RetryAfter: 3 * time.Millisecond}},
		toolruntest.Message(toolruntest.Text("Sunny.")),
	))
	opts := &toolrun.Options{Logger: discard(), Stream: true, OnEvent: rec.Observe}
	if _, err := toolrun.New(client(s), userParams("Weather?"), nil, opts).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	tr := readBytes(t, buf.Bytes())
	if diff := cmp.Diff([]string{"1:request", "1:stream_retried", "1:response", "1:turn_finished", "1:run_stopped"}, types(tr)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	var retried, run toolrun.Usage
	for _, e := range tr.Entries {
		if e.Type == transcript.TypeStreamRetried && (e.Attempt != 2 || e.Error == "" || e.DelayMS != 3) {
			t.Errorf("stream_retried line = attempt %d, error %q, delay %vms; want attempt 2, the failure, 3ms", e.Attempt, e.Error, e.DelayMS)
		}
		switch {
		case e.Usage == nil:
		case e.Type == transcript.TypeStreamRetried:
			retried = *e.Usage
		case e.Type == transcript.TypeRunStopped:
			run = *e.Usage
		}
	}
	// The failed attempt reported its input in message_start: billed, and
	// in the run's usage, but in no response line.
	billed := s.Requests()[0].Usage
	if retried.InputTokens == 0 || retried.InputTokens != billed.InputTokens {
		t.Errorf("stream_retried usage = %+v; want the failed attempt's input, %d tokens", retried, billed.InputTokens)
	}

	// A transcript cut off before run_stopped (a crashed process) counts
	// its tokens from its lines: the failed attempt's are among them.
	var cut bytes.Buffer
	for _, line := range bytes.SplitAfter(buf.Bytes(), []byte("\n")) {
		if !bytes.Contains(line, []byte(`"run_stopped"`)) {
			cut.Write(line)
		}
	}
	var page bytes.Buffer
	if err := transcript.WriteHTML(&page, readBytes(t, cut.Bytes())); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("<b>%d</b><span>input tokens</span>", run.InputTokens)
	if !strings.Contains(page.String(), want) {
		t.Errorf("the report of the cut transcript lacks %q (the run counted %+v)", want, run)
	}
}
