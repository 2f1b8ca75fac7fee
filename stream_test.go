package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// eventLog records the events of a run; it is safe for concurrent use, as
// OnEvent needs.
type eventLog struct {
	mu     sync.Mutex // guards events
	events []toolrun.Event
}

func (l *eventLog) add(_ context.Context, e toolrun.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) all() []toolrun.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]toolrun.Event(nil), l.events...)
}

// kind names an event by its type, with the tool call's id for the events
// of a call.
func kind(e toolrun.Event) string {
	name := strings.TrimPrefix(fmt.Sprintf("%T", e), "toolrun.")
	switch e := e.(type) {
	case toolrun.Delta:
		switch {
		case e.Thinking != "":
			return name + " thinking"
		case e.ToolInput != "":
			return name + " input"
		}
		return name + " text"
	case toolrun.ToolDecided:
		return name + " " + e.Call.ID
	case toolrun.ToolStarted:
		return name + " " + e.Call.ID
	case toolrun.ToolFinished:
		return name + " " + e.Result.Call.ID
	}
	return name
}

// kinds returns the kinds of events, with each run of deltas of one kind
// written once.
func kinds(events []toolrun.Event) []string {
	var out []string
	for _, e := range events {
		k := kind(e)
		if strings.HasPrefix(k, "Delta ") && len(out) > 0 && out[len(out)-1] == k {
			continue
		}
		out = append(out, k)
	}
	return out
}

// all returns the events of type E.
// retries returns the RequestSent events of requests sent again.
func retries(events []toolrun.Event) []toolrun.RequestSent {
	var out []toolrun.RequestSent
	for _, e := range all[toolrun.RequestSent](events) {
		if e.Attempt > 1 {
			out = append(out, e)
		}
	}
	return out
}

func all[E toolrun.Event](events []toolrun.Event) []E {
	var out []E
	for _, e := range events {
		if v, ok := e.(E); ok {
			out = append(out, v)
		}
	}
	return out
}

// runGoroutines returns the stacks of the goroutines running code of the
// package toolrun itself.
func runGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/toolrun/toolrun.") {
			out = append(out, g)
		}
	}
	return out
}

// checkNoRunGoroutines fails the test if more goroutines of the runner are
// left than before, the number runGoroutines counted before the run (those
// of other tests, which may still be ending). A tool's own goroutine may
// take a moment to return after its ctx is cancelled, so it polls, for a
// bounded time, before it fails.
func checkNoRunGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := runGoroutines()
		if len(left) <= before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of the runner left:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// bounded returns a context for a run that must end: a runner that breaks
// ends in a failure, not a hung test.
func bounded(t *testing.T) context.Context {
	// Minutes, not seconds: a run of hundreds of turns takes seconds on a
	// quiet machine and ten times that on a loaded one (the suite runs
	// beside builds). The cause says what hung when it is reached.
	ctx, cancel := context.WithTimeoutCause(t.Context(), 10*time.Minute, errors.New("the run under test did not end within 10 minutes: it hung"))
	t.Cleanup(cancel)
	return ctx
}

// slow returns r with each event of its stream delayed by d.
func slow(r toolruntest.Reply, d time.Duration) toolruntest.Reply {
	r.Fault.EventDelay = d
	return r
}

func TestEventsStreamDeltas(t *testing.T) {
	var calls counter
	s := toolruntest.New(t, toolruntest.Script(
		slow(toolruntest.Message(
			toolruntest.Thinking("The user wants the weather.", "sig_1"),
			toolruntest.Text("Let me check."),
			toolruntest.ToolUse("toolu_1", "get_weather", map[string]any{"city": "Paris"}),
		), time.Millisecond),
		slow(toolruntest.Message(toolruntest.Text("It is sunny in Paris.")), time.Millisecond),
	))
	var observed eventLog
	r := toolrun.New(client(s), userParams("Weather in Paris?"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
		Logger: discard(), Stream: true, OnEvent: observed.add,
	})
	var events []toolrun.Event
	for e, err := range r.Events(bounded(t)) {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	want := []string{
		"RequestSent", "Delta thinking", "Delta text", "Delta input", "ResponseReceived",
		"ToolDecided toolu_1", "ToolStarted toolu_1", "ToolFinished toolu_1", "TurnFinished",
		"RequestSent", "Delta text", "ResponseReceived", "TurnFinished", "RunStopped",
	}
	if diff := cmp.Diff(want, kinds(events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// OnEvent saw the same events, in the same order.
	if diff := cmp.Diff(kinds(events), kinds(observed.all())); diff != "" {
		t.Errorf("OnEvent's events differ from Events' (-Events +OnEvent):\n%s", diff)
	}

	got := map[string]string{}
	for _, e := range events {
		switch e := e.(type) {
		case toolrun.Delta:
			switch {
			case e.Text != "":
				got[fmt.Sprintf("text %d.%d", e.Turn, e.Index)] += e.Text
			case e.Thinking != "":
				got[fmt.Sprintf("thinking %d.%d", e.Turn, e.Index)] += e.Thinking
			case e.ToolInput != "":
				got[fmt.Sprintf("input %d.%d %s %s", e.Turn, e.Index, e.ID, e.Name)] += e.ToolInput
			}
		case toolrun.RequestSent:
			if !e.Streamed {
				t.Errorf("RequestSent of turn %d: Streamed is false", e.Turn)
			}
		}
	}
	wantDeltas := map[string]string{
		"thinking 1.0":                  "The user wants the weather.",
		"text 1.1":                      "Let me check.",
		"input 1.2 toolu_1 get_weather": `{"city":"Paris"}`,
		"text 2.0":                      "It is sunny in Paris.",
	}
	if diff := cmp.Diff(wantDeltas, got); diff != "" {
		t.Errorf("deltas put together (-want +got):\n%s", diff)
	}
	texts := 0
	for _, d := range all[toolrun.Delta](events) {
		if d.Text != "" {
			texts++
		}
	}
	if n := texts; n < 4 {
		t.Errorf("got %d text deltas, want the text of each turn in pieces", n)
	}

	res := r.Result()
	if res == nil || res.StopReason != toolrun.StopEndTurn || res.Text() != "It is sunny in Paris." {
		t.Fatalf("Result = %+v, want end_turn with the final text", res)
	}
	if got := calls.get("get_weather"); got != 1 {
		t.Errorf("tool ran %d times, want 1", got)
	}
	for i, req := range s.Requests() {
		if !req.Stream {
			t.Errorf("request %d was not streamed", i+1)
		}
	}
	checkHistory(t, res.Messages)
}

// summary is what a Result says, in comparable form.
type summary struct {
	StopReason                     toolrun.StopReason
	Detail, Text, Messages, Msg    string
	Usage                          toolrun.Usage
	Turns, ToolCalls, ToolFailures int
	Pending                        []toolrun.PendingCall
}

func summarize(t *testing.T, res *toolrun.Result) summary {
	t.Helper()
	msgs, err := json.Marshal(res.Messages)
	if err != nil {
		t.Fatal(err)
	}
	sum := summary{StopReason: res.StopReason, Detail: res.Detail, Text: res.Text(), Messages: string(msgs),
		Usage: res.Usage, Turns: res.Turns, ToolCalls: res.ToolCalls, ToolFailures: res.ToolFailures, Pending: res.Pending}
	if res.Message != nil {
		param, err := json.Marshal(res.Message.ToParam())
		if err != nil {
			t.Fatal(err)
		}
		sum.Msg = fmt.Sprintf("%s %s %s %s", res.Message.ID, res.Message.Model, res.Message.StopReason, param)
	}
	return sum
}

func TestStreamedRunMatchesRun(t *testing.T) {
	tests := []struct {
		name   string
		script []toolruntest.Reply
	}{
		{"tool loop", []toolruntest.Reply{
			toolruntest.Message(toolruntest.Thinking("Weather, then.", "sig"), toolruntest.Text("Let me check."),
				toolruntest.ToolUse("toolu_1", "get_weather", map[string]any{"city": "Paris"})),
			toolruntest.Message(toolruntest.Text("It is sunny in Paris.")),
		}},
		{"parallel calls, one failing", []toolruntest.Reply{
			toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Rome"}),
				toolruntest.ToolUse("t2", "get_wether", map[string]any{"city": "Oslo"}),
				toolruntest.ToolUse("t3", "get_weather", map[string]any{"days": "two"})),
			toolruntest.Message(toolruntest.Text("Rome is sunny; the rest failed.")),
		}},
		{"max_tokens", []toolruntest.Reply{{
			Content:    []toolruntest.Block{toolruntest.Text("Checking"), toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Par"})},
			StopReason: "max_tokens",
		}}},
		{"pause_turn", []toolruntest.Reply{
			{Content: []toolruntest.Block{toolruntest.Text("Searching...")}, StopReason: "pause_turn"},
			toolruntest.Message(toolruntest.Text("Found it.")),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := func(stream bool) (summary, map[string]int) {
				var calls counter
				var observed eventLog
				s := toolruntest.New(t, toolruntest.Script(tt.script...))
				r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
					Logger: discard(), OnEvent: observed.add, Stream: stream,
				})
				res, err := r.Run(t.Context())
				if err != nil && !errors.Is(err, toolrun.ErrIncomplete) {
					t.Fatalf("stream %v: %v", stream, err)
				}
				checkHistory(t, res.Messages)
				counts := map[string]int{}
				for _, e := range observed.all() {
					if k := kind(e); !strings.HasPrefix(k, "Delta ") {
						counts[k]++
					}
				}
				for i, req := range s.Requests() {
					if req.Stream != stream {
						t.Errorf("stream %v: request %d streamed: %v", stream, i+1, req.Stream)
					}
				}
				return summarize(t, res), counts
			}
			want, wantCounts := run(false)
			got, gotCounts := run(true)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the streamed run's result differs from Run's (-Run +streamed):\n%s", diff)
			}
			// Code written for the events of one works for the other: the
			// same events, deltas aside.
			if diff := cmp.Diff(wantCounts, gotCounts); diff != "" {
				t.Errorf("events but deltas (-Run +streamed):\n%s", diff)
			}
		})
	}
}

// toolMessage is the first reply of the fault tests: text, then a call.
func toolMessage() toolruntest.Reply {
	return toolruntest.Message(toolruntest.Text("Let me check."), toolruntest.ToolUse("toolu_1", "get_weather", map[string]any{"city": "Paris"}))
}

// inToolBlock counts the events of toolMessage up to the first input
// delta of its tool_use block: message_start, ping, the text block (start,
// three deltas, stop), content_block_start and one delta.
const inToolBlock = 9

func TestStreamFaultRetried(t *testing.T) {
	tests := []struct {
		name       string
		fault      toolruntest.Fault
		retry      toolrun.RetryPolicy
		wantAPIErr bool
		wantDelay  time.Duration // if non-zero
	}{
		{name: "error event in a tool_use block", fault: toolruntest.Fault{StreamErrorAfter: inToolBlock}, wantAPIErr: true},
		{name: "connection dropped in a tool_use block", fault: toolruntest.Fault{DropAfter: inToolBlock}},
		{name: "connection dropped after message_start", fault: toolruntest.Fault{DropAfter: 1}},
		{
			// The backoff would outlast the test; the server's retry-after
			// wins.
			name:       "retry-after honoured",
			fault:      toolruntest.Fault{StreamErrorAfter: inToolBlock, RetryAfter: 2 * time.Millisecond},
			retry:      toolrun.RetryPolicy{InitialBackoff: time.Hour},
			wantAPIErr: true,
			wantDelay:  2 * time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			faulty := toolMessage()
			faulty.Fault = tt.fault
			s := toolruntest.New(t, toolruntest.Script(faulty, toolMessage(), toolruntest.Message(toolruntest.Text("It is sunny in Paris."))))
			retry := tt.retry
			if retry == (toolrun.RetryPolicy{}) {
				retry.InitialBackoff = time.Millisecond
			}
			var calls counter
			var observed eventLog
			r := toolrun.New(client(s), userParams("Weather in Paris?"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
				Logger: discard(), Stream: true, StreamRetry: retry, OnEvent: observed.add,
			})
			res, err := r.Run(bounded(t))
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != toolrun.StopEndTurn || res.Turns != 2 || res.ToolCalls != 1 {
				t.Errorf("got %q after %d turns and %d calls, want end_turn after 2 turns and 1 call", res.StopReason, res.Turns, res.ToolCalls)
			}
			checkHistory(t, res.Messages)
			if got := calls.get("get_weather"); got != 1 {
				t.Errorf("tool ran %d times, want 1: none from the broken response", got)
			}
			events := observed.all()
			if n := len(all[toolrun.ToolStarted](events)); n != 1 {
				t.Errorf("got %d ToolStarted, want 1", n)
			}
			retried := retries(events)
			if len(retried) != 1 {
				t.Fatalf("got %d retried requests, want 1", len(retried))
			}
			rt := retried[0]
			var se *toolrun.TurnError
			if rt.Turn != 1 || rt.Attempt != 2 || !errors.As(rt.Err, &se) || se.Attempt != 1 || se.Turn != 1 || se.Events == 0 {
				t.Errorf("RequestSent = %+v, want turn 1, attempt 2, a *TurnError of attempt 1 after some events", rt)
			}
			if first := all[toolrun.RequestSent](events)[0]; first.Attempt != 1 || first.Err != nil || first.Delay != 0 {
				t.Errorf("first RequestSent = %+v, want attempt 1 with no error and no delay", first)
			}
			var apiErr *anthropic.Error
			if got := errors.As(rt.Err, &apiErr); got != tt.wantAPIErr {
				t.Errorf("failure %v is an *anthropic.Error: %v, want %v", rt.Err, got, tt.wantAPIErr)
			}
			if tt.wantDelay != 0 && rt.Delay != tt.wantDelay {
				t.Errorf("Delay = %v, want the server's retry-after, %v", rt.Delay, tt.wantDelay)
			}
			// The turn was requested again with the same history.
			var attempts []int
			for _, req := range s.Requests() {
				attempts = append(attempts, req.Attempt)
			}
			if diff := cmp.Diff([]int{1, 2, 1}, attempts); diff != "" {
				t.Errorf("attempts of each request body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStreamRetriesExhausted(t *testing.T) {
	broken := func() toolruntest.Reply {
		r := toolruntest.Message(toolruntest.Text("It is"), toolruntest.Text(" sunny."))
		r.Fault.StreamErrorAfter = 4
		return r
	}
	s := toolruntest.New(t, toolruntest.Script(toolMessage(), broken(), broken(), toolruntest.Message(toolruntest.Text("It is sunny."))))
	var calls counter
	tools := []toolrun.Tool{weatherTool(&calls)}
	opts := &toolrun.Options{Logger: discard(), Stream: true, StreamRetry: toolrun.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond}}
	r := toolrun.New(client(s), userParams("Weather in Paris?"), tools, opts)
	res, err := r.Run(t.Context())
	var te *toolrun.TurnError
	if !errors.As(err, &te) || te.Turn != 2 || te.Attempt != 2 || te.Events == 0 {
		t.Fatalf("err = %v, want a *TurnError for turn 2, attempt 2, after some events", err)
	}
	if res.StopReason != toolrun.StopError || !strings.Contains(res.Detail, "turn 2") || !strings.Contains(err.Error(), "turn 2") {
		t.Errorf("stop = %q (%q), err %q; want StopError naming turn 2", res.StopReason, res.Detail, err)
	}
	if res.Turns != 1 || len(res.Messages) != 3 {
		t.Errorf("after the failure: %d turns, %d messages; want 1 turn and 3 messages, nothing of turn 2", res.Turns, len(res.Messages))
	}
	checkHistory(t, res.Messages)

	// The state survives a trip through JSON, and the run goes on from it.
	b, err := json.Marshal(r.State())
	if err != nil {
		t.Fatal(err)
	}
	var st toolrun.State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if calls := st.Calls(); calls != nil {
		t.Errorf("State.Calls() = %+v, want nil: a failed response leaves no turn", calls)
	}
	r2, err := toolrun.Resume(client(s), &st, tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err = r2.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != toolrun.StopEndTurn || res.Text() != "It is sunny." || res.Turns != 2 {
		t.Errorf("resumed run: %q %q after %d turns, want end_turn \"It is sunny.\" after 2", res.StopReason, res.Text(), res.Turns)
	}
	if got := calls.get("get_weather"); got != 1 {
		t.Errorf("tool ran %d times, want 1", got)
	}
	checkHistory(t, res.Messages)
}

func TestEventsConsumerBreaks(t *testing.T) {
	tests := []struct {
		name     string
		script   []toolruntest.Reply
		breakAt  func(toolrun.Event) bool
		tools    []string
		wantRuns map[string]int // tool runs before the break
		wantTurn int            // turns taken before the break
	}{
		{
			name: "mid-stream",
			script: []toolruntest.Reply{
				slow(toolruntest.Message(toolruntest.Text("Let me run a."), toolruntest.ToolUse("t1", "a", nil)), time.Millisecond),
				toolruntest.Message(toolruntest.Text("Let me run a."), toolruntest.ToolUse("t1", "a", nil)),
				toolruntest.Message(toolruntest.Text("done")),
			},
			breakAt: func(e toolrun.Event) bool {
				d, ok := e.(toolrun.Delta)
				return ok && d.Text != ""
			},
			tools:    []string{"a"},
			wantRuns: map[string]int{},
			wantTurn: 0,
		},
		{
			name: "between two tools",
			script: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("t1", "a", nil), toolruntest.ToolUse("t2", "b", nil)),
				toolruntest.Message(toolruntest.Text("done")),
			},
			breakAt: func(e toolrun.Event) bool {
				f, ok := e.(toolrun.ToolFinished)
				return ok && f.Result.Call.ID == "t1"
			},
			tools:    []string{"a", "b"},
			wantRuns: map[string]int{"a": 1},
			wantTurn: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(tt.script...))
			var runs counter
			var tools []toolrun.Tool
			for _, name := range tt.tools {
				tools = append(tools, toolrun.NewTool(name, "", func(ctx context.Context, in struct{}) (string, error) {
					runs.inc(name)
					return name + " done", nil
				}))
			}
			r := toolrun.New(client(s), userParams("go"), tools, &toolrun.Options{Logger: discard(), Stream: true, MaxParallelTools: 1})
			before := len(runGoroutines())
			broke := false
			for e, err := range r.Events(bounded(t)) {
				if err != nil {
					t.Fatal(err)
				}
				if tt.breakAt(e) {
					broke = true
					break
				}
			}
			if !broke {
				t.Fatal("the run ended before the event to break at")
			}
			checkNoRunGoroutines(t, before)
			res := r.Result()
			if res == nil || res.StopReason != toolrun.StopCanceled || res.Turns != tt.wantTurn {
				t.Fatalf("after the break: Result = %+v, want canceled after %d turns", res, tt.wantTurn)
			}
			for _, name := range tt.tools {
				if got, want := runs.get(name), tt.wantRuns[name]; got != want {
					t.Errorf("before resuming, %s ran %d times, want %d", name, got, want)
				}
			}
			checkHistory(t, r.Messages())
			if _, err := json.Marshal(r.State()); err != nil {
				t.Fatal(err)
			}

			res, err := r.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != toolrun.StopEndTurn || res.Text() != "done" {
				t.Errorf("resumed: %q %q, want end_turn \"done\"", res.StopReason, res.Text())
			}
			for _, name := range tt.tools {
				if got := runs.get(name); got != 1 {
					t.Errorf("%s ran %d times in all, want 1", name, got)
				}
			}
			checkHistory(t, res.Messages)
		})
	}
}

func TestCancelMidStream(t *testing.T) {
	// Thirty text deltas, each 20ms apart: a run that did not stop promptly
	// would see them all.
	var blocks []toolruntest.Block
	for i := range 10 {
		blocks = append(blocks, toolruntest.Text(fmt.Sprintf("Paragraph %d. ", i)))
	}
	const total = 30
	s := toolruntest.New(t, toolruntest.Script(slow(toolruntest.Message(blocks...), 20*time.Millisecond)))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	deltas := 0
	r := toolrun.New(client(s), userParams("go"), nil, &toolrun.Options{Logger: discard(), Stream: true})
	before := len(runGoroutines())
	var err error
	for e, e2 := range r.Events(ctx) {
		if d, ok := e.(toolrun.Delta); ok && d.Text != "" {
			if deltas++; deltas == 1 {
				cancel()
			}
		}
		err = e2
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	var te *toolrun.TurnError
	if !errors.As(err, &te) || te.Turn != 1 {
		t.Errorf("err = %v, want a *TurnError for turn 1", err)
	}
	res := r.Result()
	if res.StopReason != toolrun.StopCanceled || res.Turns != 0 {
		t.Errorf("Result = %q after %d turns, want canceled after 0", res.StopReason, res.Turns)
	}
	if deltas >= total {
		t.Errorf("got all %d deltas; the stream did not stop when ctx was cancelled", deltas)
	}
	if calls := r.State().Calls(); calls != nil {
		t.Errorf("State.Calls() = %+v, want nil", calls)
	}
	checkHistory(t, res.Messages)
	checkNoRunGoroutines(t, before)
}

func ExampleRunner_Events() {
	s := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.Text("Let me check."), toolruntest.ToolUse("toolu_1", "get_weather", map[string]string{"city": "Paris"})),
		toolruntest.Message(toolruntest.Text("It is sunny in Paris.")),
	))
	defer s.Close()
	weather := toolrun.NewTool("get_weather", "Current weather for a city",
		func(ctx context.Context, in struct {
			City string `json:"city"`
		}) (string, error) {
			return "sunny, 21°C in " + in.City, nil
		})
	r := toolrun.New(s.Client(), anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Weather in Paris?"))},
	}, []toolrun.Tool{weather}, &toolrun.Options{Stream: true})
	for e, err := range r.Events(context.Background()) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch e := e.(type) {
		case toolrun.Delta:
			fmt.Print(e.Text)
		case toolrun.ToolStarted:
			fmt.Printf("\n-> %s %s\n", e.Call.Name, e.Call.Input)
		case toolrun.ToolFinished:
			fmt.Printf("<- %s\n", e.Result.Content[0].OfText.Text)
		case toolrun.RunStopped:
			fmt.Printf("\n[%s after %d turns]\n", e.Result.StopReason, e.Result.Turns)
		}
	}
	// Output:
	// Let me check.
	// -> get_weather {"city":"Paris"}
	// <- sunny, 21°C in Paris
	// It is sunny in Paris.
	// [end_turn after 2 turns]
}
