package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

type weatherIn struct {
	City  string `json:"city" jsonschema:"the city name"`
	Units string `json:"units,omitempty" jsonschema:"celsius or fahrenheit"`
	Days  int    `json:"days,omitempty"`
}

func weatherTool(calls *counter) *toolrun.FuncTool {
	return toolrun.NewTool("get_weather", "Current weather for a city",
		func(ctx context.Context, in weatherIn) (string, error) {
			calls.inc("get_weather")
			return "sunny in " + in.City, nil
		})
}

func TestRunToolLoop(t *testing.T) {
	var calls counter
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.Text("Let me check."), toolruntest.ToolUse("toolu_1", "get_weather", map[string]any{"city": "Paris"})),
		toolruntest.Message(toolruntest.Text("It is sunny in Paris.")),
	))
	r := toolrun.New(client(s), userParams("Weather in Paris?"), []toolrun.Tool{weatherTool(&calls)}, nil)
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.StopReason, toolrun.StopEndTurn; got != want {
		t.Errorf("StopReason = %q, want %q", got, want)
	}
	if got, want := res.Text(), "It is sunny in Paris."; got != want {
		t.Errorf("Text() = %q, want %q", got, want)
	}
	if got, want := calls.get("get_weather"), 1; got != want {
		t.Errorf("tool ran %d times, want %d", got, want)
	}
	if res.Turns != 2 || res.ToolCalls != 1 || res.ToolFailures != 0 {
		t.Errorf("Turns, ToolCalls, ToolFailures = %d, %d, %d, want 2, 1, 0", res.Turns, res.ToolCalls, res.ToolFailures)
	}
	if res.Usage.InputTokens == 0 || res.Usage.OutputTokens == 0 {
		t.Errorf("Usage = %+v, want input and output tokens counted", res.Usage)
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("got %d requests, want 2", len(reqs))
	}
	// The tool's definition went out with its inferred schema.
	if got := reqs[0].Params.Tools; len(got) != 1 || got[0].Name != "get_weather" {
		t.Fatalf("tools sent = %+v, want get_weather", got)
	}
	var schema map[string]any
	if err := json.Unmarshal(reqs[0].Params.Tools[0].InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{"city"}, schema["required"]); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
	results := toolResults(reqs[1])
	if len(results) != 1 || results[0].ToolUseID != "toolu_1" || results[0].IsError || results[0].ResultText() != "sunny in Paris" {
		t.Errorf("tool results = %+v, want one result for toolu_1 with the tool's text", results)
	}
	checkHistory(t, res.Messages)
	if got, want := len(res.Messages), 4; got != want {
		t.Errorf("history has %d messages, want %d", got, want)
	}
}

func TestToolOutputs(t *testing.T) {
	type point struct {
		X int `json:"x"`
		Y int `json:"y"`
	}
	png := []byte("\x89PNG fake")
	raw, err := toolrun.NewRawTool("raw", "", []byte(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
		func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil })
	if err != nil {
		t.Fatal(err)
	}
	tools := []toolrun.Tool{
		toolrun.NewTool("text", "", func(ctx context.Context, in struct{}) (string, error) { return "plain", nil }),
		toolrun.NewTool("json", "", func(ctx context.Context, in struct{}) (point, error) { return point{1, 2}, nil }),
		toolrun.NewTool("image", "", func(ctx context.Context, in struct{}) ([]toolrun.Content, error) {
			return []toolrun.Content{toolrun.Text("a chart"), toolrun.Image("image/png", png)}, nil
		}),
		toolrun.NewTool("pdf", "", func(ctx context.Context, in struct{}) (toolrun.Content, error) {
			return toolrun.PDF([]byte("%PDF-1.4")), nil
		}),
		raw,
	}
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(
			toolruntest.ToolUse("t1", "text", nil),
			toolruntest.ToolUse("t2", "json", nil),
			toolruntest.ToolUse("t3", "image", nil),
			toolruntest.ToolUse("t4", "pdf", nil),
			toolruntest.ToolUse("t5", "raw", map[string]string{"q": "echo"}),
		),
		toolruntest.Message(toolruntest.Text("done")),
	))
	if _, err := toolrun.New(client(s), userParams("go"), tools, nil).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	results := toolResults(s.Requests()[1])
	var got []string
	for _, r := range results {
		got = append(got, string(r.Content))
	}
	want := []string{
		`[{"text":"plain","type":"text"}]`,
		`[{"text":"{\"x\":1,\"y\":2}","type":"text"}]`,
		`[{"text":"a chart","type":"text"},{"source":{"data":"iVBORyBmYWtl","media_type":"image/png","type":"base64"},"type":"image"}]`,
		`[{"source":{"data":"JVBERi0xLjQ=","media_type":"application/pdf","type":"base64"},"type":"document"}]`,
		`[{"text":"{\"q\":\"echo\"}","type":"text"}]`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result contents (-want +got):\n%s", diff)
	}
}

// TestToolFailures covers every way a call can fail: each reaches the model
// as an is_error result with a useful text, is logged with its details, and
// the run goes on.
func TestToolFailures(t *testing.T) {
	tests := []struct {
		name      string
		tool      toolrun.Tool
		call      toolruntest.Block
		wantText  []string // substrings of the result sent to the model
		wantLog   string   // the log record's message
		wantStack bool
		wantRan   bool
	}{
		{
			name: "invalid input",
			tool: weatherTool(&counter{}),
			call: toolruntest.ToolUse("t1", "get_weather", map[string]any{"units": 3, "days": "two"}),
			wantText: []string{`invalid input for tool "get_weather"`, "/city", `required property "city"`, "missing",
				"/days", `type "integer"`, `"two"`, "/units", `type "string"`},
			wantLog: "toolrun: tool call failed",
		},
		{
			name: "handler error",
			tool: toolrun.NewTool("fail", "", func(ctx context.Context, in struct{}) (string, error) {
				return "", errors.New("database is down")
			}),
			call:     toolruntest.ToolUse("t1", "fail", nil),
			wantText: []string{"database is down"},
			wantLog:  "toolrun: tool call failed",
			wantRan:  true,
		},
		{
			name: "panic",
			tool: toolrun.NewTool("boom", "", func(ctx context.Context, in struct{}) (string, error) {
				var m map[string]int
				//lint:ignore SA5000 the tool panics on purpose
				m["x"] = 1 // panics: assignment to entry in nil map
				return "", nil
			}),
			call:      toolruntest.ToolUse("t1", "boom", nil),
			wantText:  []string{`tool "boom" panicked`, "assignment to entry in nil map"},
			wantLog:   "toolrun: tool call failed",
			wantStack: true,
			wantRan:   true,
		},
		{
			name:     "unknown tool",
			tool:     weatherTool(&counter{}),
			call:     toolruntest.ToolUse("t1", "get_wether", map[string]any{"city": "Oslo"}),
			wantText: []string{`unknown tool "get_wether"`, "available tools: get_weather"},
			wantLog:  "toolrun: tool call failed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(tt.call),
				toolruntest.Message(toolruntest.Text("I see.")),
			))
			log, logs := newLogger()
			var finished []*toolrun.ToolResult
			r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{tt.tool}, &toolrun.Options{
				Logger: log,
				OnEvent: func(ctx context.Context, e toolrun.Event) {
					if f, ok := e.(toolrun.ToolFinished); ok {
						finished = append(finished, f.Result)
					}
				},
			})
			res, err := r.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != toolrun.StopEndTurn || res.ToolFailures != 1 {
				t.Errorf("StopReason, ToolFailures = %q, %d, want end_turn, 1", res.StopReason, res.ToolFailures)
			}
			results := toolResults(s.Requests()[1])
			if len(results) != 1 || !results[0].IsError {
				t.Fatalf("results = %+v, want one is_error result", results)
			}
			text := results[0].ResultText()
			for _, want := range tt.wantText {
				if !strings.Contains(text, want) {
					t.Errorf("result text %q does not contain %q", text, want)
				}
			}
			rec := logs.find(t, tt.wantLog)
			if rec == nil {
				t.Fatalf("no log record %q in %v", tt.wantLog, logs.records(t))
			}
			for _, key := range []string{"tool", "tool_use_id", "turn", "duration", "error"} {
				if _, ok := rec[key]; !ok {
					t.Errorf("log record lacks %q: %v", key, rec)
				}
			}
			if rec["level"] != "ERROR" || rec["tool_use_id"] != "t1" {
				t.Errorf("log record = %v, want level ERROR and tool_use_id t1", rec)
			}
			stack, _ := rec["stack"].(string)
			if got := strings.Contains(stack, "runner_test.go"); got != tt.wantStack {
				t.Errorf("stack names the panicking test function: %v, want %v (stack %q)", got, tt.wantStack, stack)
			}
			if len(finished) != 1 || finished[0].Ran != tt.wantRan || finished[0].Err == nil {
				t.Errorf("ToolFinished = %+v, want one failed result with Ran %v", finished, tt.wantRan)
			}
		})
	}
}

func TestFailureErrorsAreTyped(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(
			toolruntest.ToolUse("t1", "boom", nil),
			toolruntest.ToolUse("t2", "nope", nil),
			toolruntest.ToolUse("t3", "get_weather", map[string]any{}),
		),
		toolruntest.Message(toolruntest.Text("ok")),
	))
	boom := toolrun.NewTool("boom", "", func(ctx context.Context, in struct{}) (string, error) { panic("kaput") })
	errs := map[string]error{}
	_, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{boom, weatherTool(&counter{})}, &toolrun.Options{
		Logger: discard(),
		AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
			errs[r.Call.ID] = r.Err
			return nil
		},
		MaxParallelTools: 1,
	}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var pe *toolrun.PanicError
	if !errors.As(errs["t1"], &pe) || pe.Value != "kaput" {
		t.Errorf("t1 error = %v, want a *PanicError with value kaput", errs["t1"])
	}
	if !errors.Is(errs["t2"], toolrun.ErrUnknownTool) {
		t.Errorf("t2 error = %v, want ErrUnknownTool", errs["t2"])
	}
	var ve *toolrun.ValidationError
	if !errors.As(errs["t3"], &ve) || ve.Tool != "get_weather" || len(ve.Violations) != 1 || ve.Violations[0].Pointer != "/city" {
		t.Errorf("t3 error = %#v, want a *ValidationError for /city", errs["t3"])
	}
}

func TestAfterToolHook(t *testing.T) {
	fail := toolrun.NewTool("fail", "", func(ctx context.Context, in struct{}) (string, error) {
		return "", errors.New("secret token abc123 rejected")
	})
	t.Run("replace result", func(t *testing.T) {
		s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "fail", nil)), toolruntest.Message(toolruntest.Text("ok"))))
		_, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{fail}, &toolrun.Options{
			Logger: discard(),
			AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
				if r.Err != nil {
					r.Content = []toolrun.Content{toolrun.Text("the service is unavailable; try later")}
					r.IsError = false
				}
				return nil
			},
		}).Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := toolResults(s.Requests()[1])
		if len(got) != 1 || got[0].IsError || got[0].ResultText() != "the service is unavailable; try later" {
			t.Errorf("result = %+v, want the hook's replacement, not an error", got)
		}
	})
	t.Run("end run", func(t *testing.T) {
		s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "fail", nil))))
		stopErr := errors.New("tool failures are fatal here")
		res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{fail}, &toolrun.Options{
			Logger: discard(),
			AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
				if r.Err != nil {
					return stopErr
				}
				return nil
			},
		}).Run(t.Context())
		if !errors.Is(err, stopErr) || res.StopReason != toolrun.StopError {
			t.Errorf("Run = %v, %v; want StopError wrapping the hook's error", res.StopReason, err)
		}
		if got := len(s.Requests()); got != 1 {
			t.Errorf("requests = %d, want 1: the run ended before sending the result", got)
		}
		checkHistory(t, res.Messages)
	})
}

func TestStopReasons(t *testing.T) {
	var calls counter
	tests := []struct {
		name       string
		reply      toolruntest.Reply
		want       toolrun.StopReason
		wantDetail string
		wantErr    error // and ErrIncomplete, if non-nil
	}{
		{"end_turn", toolruntest.Message(toolruntest.Text("done")), toolrun.StopEndTurn, "", nil},
		{"stop_sequence", toolruntest.Reply{Content: []toolruntest.Block{toolruntest.Text("done")}, StopReason: "stop_sequence"}, toolrun.StopEndTurn, "", nil},
		{"refusal", toolruntest.Reply{Content: []toolruntest.Block{toolruntest.Text("I can't help with that.")}, StopReason: "refusal"}, toolrun.StopRefusal, "refused", nil},
		{"context window", toolruntest.Reply{Content: []toolruntest.Block{toolruntest.Text("partial")}, StopReason: "model_context_window_exceeded"}, toolrun.StopContextWindow, "context window", toolrun.ErrContextWindow},
		{"max_tokens with a truncated tool call", toolruntest.Reply{
			Content:    []toolruntest.Block{toolruntest.Text("Checking"), toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Par"})},
			StopReason: "max_tokens",
		}, toolrun.StopMaxTokens, "max_tokens", toolrun.ErrMaxTokens},
		{"a stop reason the runner does not know", toolruntest.Reply{
			Content:    []toolruntest.Block{toolruntest.Text("Checking"), toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Paris"})},
			StopReason: "some_new_reason",
		}, toolrun.StopIncomplete, `"some_new_reason"`, toolrun.ErrIncomplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(tt.reply))
			r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard()})
			res, err := r.Run(t.Context())
			if tt.wantErr == nil && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != nil && (!errors.Is(err, tt.wantErr) || !errors.Is(err, toolrun.ErrIncomplete) || res.Err != err) {
				t.Fatalf("err = %v (Result.Err %v), want one wrapping %v and ErrIncomplete", err, res.Err, tt.wantErr)
			}
			if res.StopReason != tt.want || !strings.Contains(res.Detail, tt.wantDetail) {
				t.Errorf("stop = %q (%q), want %q (containing %q)", res.StopReason, res.Detail, tt.want, tt.wantDetail)
			}
			checkHistory(t, res.Messages)
			// A run resumed from its State returns the same error.
			r2, err2 := toolrun.Resume(client(s), r.State(), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard()})
			if err2 != nil {
				t.Fatal(err2)
			}
			if _, err2 = r2.Run(t.Context()); (err2 == nil) != (tt.wantErr == nil) || (tt.wantErr != nil && !errors.Is(err2, tt.wantErr)) {
				t.Errorf("resumed run err = %v, want %v", err2, tt.wantErr)
			}
		})
	}
	if got := calls.get("get_weather"); got != 0 {
		t.Errorf("get_weather ran %d times; a call of a cut answer must not run", got)
	}
}

func TestPauseTurnResumed(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Reply{Content: []toolruntest.Block{toolruntest.Text("Searching the web...")}, StopReason: "pause_turn"},
		toolruntest.Message(toolruntest.Text("Found it.")),
	))
	res, err := toolrun.New(client(s), userParams("search"), nil, nil).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != toolrun.StopEndTurn || res.Text() != "Found it." || res.Turns != 2 {
		t.Errorf("got %q %q after %d turns, want end_turn \"Found it.\" after 2", res.StopReason, res.Text(), res.Turns)
	}
	second := s.Requests()[1].Conversation
	last := second[len(second)-1]
	if last.Role != "assistant" || last.Content[0].Text != "Searching the web..." {
		t.Errorf("second request ends with %+v, want the paused assistant turn sent back", last)
	}
}

func TestTurnLimit(t *testing.T) {
	var calls counter
	loop := func(req *toolruntest.Request) toolruntest.Reply {
		n := len(req.Conversation)
		return toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("toolu_%d", n), "get_weather", map[string]any{"city": "Rome"}))
	}
	t.Run("default is bounded", func(t *testing.T) {
		s := toolruntest.New(t, toolruntest.Options{Func: loop})
		log, logs := newLogger()
		res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: log}).Run(t.Context())
		if !errors.Is(err, toolrun.ErrMaxTurns) {
			t.Fatalf("got error %v, want one wrapping ErrMaxTurns", err)
		}
		if res.StopReason != toolrun.StopMaxTurns || res.Turns != 25 {
			t.Errorf("stop = %q after %d turns, want max_turns after 25", res.StopReason, res.Turns)
		}
		if !strings.Contains(res.Detail, "turn limit of 25 reached") {
			t.Errorf("Detail = %q, want it to name the limit", res.Detail)
		}
		if rec := logs.find(t, "toolrun: run stopped"); rec == nil || rec["level"] != "WARN" || rec["stop_reason"] != "max_turns" {
			t.Errorf("run stopped record = %v, want a WARN with stop_reason max_turns", rec)
		}
		checkHistory(t, res.Messages)
	})
	t.Run("raised and resumed", func(t *testing.T) {
		s := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
			if len(req.Conversation) >= 7 {
				return toolruntest.Message(toolruntest.Text("enough"))
			}
			return loop(req)
		}})
		var c counter
		r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&c)}, &toolrun.Options{Logger: discard(), MaxTurns: 2})
		res, _ := r.Run(t.Context())
		if res.StopReason != toolrun.StopMaxTurns || c.get("get_weather") != 1 {
			t.Fatalf("stop = %q with %d tool runs, want max_turns with 1: the last turn's call waits", res.StopReason, c.get("get_weather"))
		}
		checkHistory(t, res.Messages)
		r.SetMaxTurns(-1)
		res, err := r.Run(t.Context())
		if err != nil || res.StopReason != toolrun.StopEndTurn {
			t.Fatalf("after raising the limit: %v, %v; want end_turn", res.StopReason, err)
		}
		if got := c.get("get_weather"); got != 3 {
			t.Errorf("tool ran %d times, want 3 (each call once)", got)
		}
	})
}

func TestParallelToolsKeepOrder(t *testing.T) {
	// Each tool waits until all three have started, so the test only passes
	// if they run at once; they finish in reverse order.
	var started sync.WaitGroup
	started.Add(3)
	mk := func(name string, delay time.Duration) toolrun.Tool {
		return toolrun.NewTool(name, "", func(ctx context.Context, in struct{}) (string, error) {
			started.Done()
			started.Wait()
			time.Sleep(delay)
			return name + " done", nil
		})
	}
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("a1", "slow", nil), toolruntest.ToolUse("b2", "medium", nil), toolruntest.ToolUse("c3", "fast", nil)),
		toolruntest.Message(toolruntest.Text("ok")),
	))
	tools := []toolrun.Tool{mk("slow", 30*time.Millisecond), mk("medium", 15*time.Millisecond), mk("fast", 0)}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := toolrun.New(client(s), userParams("go"), tools, nil).Run(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range toolResults(s.Requests()[1]) {
		got = append(got, r.ToolUseID+"="+r.ResultText())
	}
	if diff := cmp.Diff([]string{"a1=slow done", "b2=medium done", "c3=fast done"}, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

func TestCancelDuringTool(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	sawCancel := make(chan error, 1)
	block := toolrun.NewTool("block", "", func(ctx context.Context, in struct{}) (string, error) {
		cancel()
		<-ctx.Done()
		sawCancel <- ctx.Err()
		return "", ctx.Err()
	})
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "block", nil))))
	res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{block}, &toolrun.Options{Logger: discard()}).Run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if res.StopReason != toolrun.StopCanceled {
		t.Errorf("StopReason = %q, want canceled", res.StopReason)
	}
	if got := <-sawCancel; !errors.Is(got, context.Canceled) {
		t.Errorf("tool saw ctx error %v, want context.Canceled", got)
	}
	checkHistory(t, res.Messages)
	if got := len(s.Requests()); got != 1 {
		t.Errorf("requests = %d, want 1", got)
	}
}

func TestCancelDuringRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Reply{Content: []toolruntest.Block{toolruntest.Text("slow")}, Fault: toolruntest.Fault{EventDelay: time.Minute}}))
	go func() {
		for len(s.Requests()) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	res, err := toolrun.New(client(s), userParams("go"), nil, &toolrun.Options{Logger: discard()}).Run(ctx)
	if !errors.Is(err, context.Canceled) || res.StopReason != toolrun.StopCanceled {
		t.Errorf("Run = %q, %v; want canceled", res.StopReason, err)
	}
	var te *toolrun.TurnError
	if !errors.As(err, &te) || te.Turn != 1 {
		t.Errorf("err = %v, want a *TurnError for turn 1", err)
	}
}

func TestRetriesVisibleInRequests(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.RateLimited(5*time.Millisecond),
		toolruntest.Reply{Fault: toolruntest.Fault{Status: 529, RetryAfter: 5 * time.Millisecond}},
		toolruntest.Message(toolruntest.Text("finally")),
	))
	res, err := toolrun.New(client(s), userParams("go"), nil, nil).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Text() != "finally" || res.Turns != 1 {
		t.Errorf("got %q after %d turns, want \"finally\" after 1", res.Text(), res.Turns)
	}
	var got []string
	for _, r := range s.Requests() {
		got = append(got, fmt.Sprintf("attempt %d: %d", r.Attempt, r.Status))
	}
	if diff := cmp.Diff([]string{"attempt 1: 429", "attempt 2: 529", "attempt 3: 200"}, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestAPIErrorKeepsRunResumable(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Reply{Fault: toolruntest.Fault{Status: 500, RetryAfter: time.Millisecond}},
		toolruntest.Reply{Fault: toolruntest.Fault{Status: 500, RetryAfter: time.Millisecond}},
		toolruntest.Reply{Fault: toolruntest.Fault{Status: 500, RetryAfter: time.Millisecond}},
		toolruntest.Message(toolruntest.Text("back")),
	))
	r := toolrun.New(client(s), userParams("go"), nil, &toolrun.Options{Logger: discard()})
	res, err := r.Run(t.Context())
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 || res.StopReason != toolrun.StopError {
		t.Fatalf("Run = %q, %v; want StopError with the API's 500", res.StopReason, err)
	}
	if !strings.Contains(err.Error(), "turn 1") {
		t.Errorf("error %q does not say which turn failed", err)
	}
	res, err = r.Run(t.Context())
	if err != nil || res.Text() != "back" {
		t.Errorf("second Run = %q, %v; want the run to go on", res.Text(), err)
	}
}

func TestToolTimeout(t *testing.T) {
	slow := toolrun.NewTool("slow", "", func(ctx context.Context, in struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	stubborn := toolrun.NewTool("stubborn", "", func(ctx context.Context, in struct{}) (string, error) {
		time.Sleep(200 * time.Millisecond) // ignores ctx
		return "late", nil
	})
	stubborn.Timeout = 20 * time.Millisecond
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "slow", nil), toolruntest.ToolUse("t2", "stubborn", nil)),
		toolruntest.Message(toolruntest.Text("ok")),
	))
	res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{slow, stubborn}, &toolrun.Options{
		Logger: discard(), Timeouts: toolrun.Timeouts{Tool: 10 * time.Millisecond},
	}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	results := toolResults(s.Requests()[1])
	want := []string{`tool "slow" timed out after 10ms`, `tool "stubborn" timed out after 20ms`}
	for i, r := range results {
		if !r.IsError || !strings.Contains(r.ResultText(), want[i]) {
			t.Errorf("result %d = %q (is_error %v), want an error containing %q", i, r.ResultText(), r.IsError, want[i])
		}
	}
	if res.ToolFailures != 2 {
		t.Errorf("ToolFailures = %d, want 2", res.ToolFailures)
	}
}

// TestToolWithoutProperties: a tool whose schema has no properties is still
// sent with an input_schema, which the API requires.
func TestToolWithoutProperties(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "ping", nil)), toolruntest.Message(toolruntest.Text("pong"))))
	ping, err := toolrun.NewRawTool("ping", "Ping", []byte(`{"type":"object"}`), func(ctx context.Context, in json.RawMessage) (string, error) {
		return "pong", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{ping}, nil).Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
	}
	if got := string(s.Requests()[0].Params.Tools[0].InputSchema); !strings.Contains(got, `"type":"object"`) {
		t.Errorf("input_schema = %s, want an object schema", got)
	}
}
