package toolrunotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolrunotel"
	"github.com/toolrun/toolrun/toolruntest"
	"go.opentelemetry.io/otel"
)

type weatherIn struct {
	City string `json:"city"`
}

func weatherTool() toolrun.Tool {
	return toolrun.NewTool("get_weather", "Current weather for a city",
		func(ctx context.Context, in weatherIn) (string, error) { return "sunny in " + in.City, nil })
}

func lookupTool() toolrun.Tool {
	return toolrun.NewTool("lookup", "Looks a station up",
		func(ctx context.Context, in struct{}) (string, error) { return "", errors.New("station offline") })
}

// usage returns a reply's usage.
func usage(in, out, cacheRead, cacheWrite int64) *toolruntest.Usage {
	return &toolruntest.Usage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: cacheRead, CacheCreationInputTokens: cacheWrite}
}

// twoTools is a run whose first turn calls a tool that succeeds and one that
// fails, and whose second turn answers.
var twoTools = []toolruntest.Reply{
	{
		ID: "msg_1",
		Content: []toolruntest.Block{
			toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Paris"}),
			toolruntest.ToolUse("t2", "lookup", nil),
		},
		Usage: usage(100, 20, 30, 5),
	},
	{ID: "msg_2", Content: []toolruntest.Block{toolruntest.Text("Sunny.")}, Usage: usage(50, 10, 0, 0)},
}

// chatAttrs returns the attributes of a chat span that ended with a
// response.
func chatAttrs(turn int, id, finish string, in, out, cacheRead, cacheWrite int64) map[string]any {
	return map[string]any{
		"gen_ai.operation.name":                    "chat",
		"gen_ai.provider.name":                     "anthropic",
		"gen_ai.request.model":                     "claude-test",
		"gen_ai.request.max_tokens":                int64(1024),
		"toolrun.turn":                             int64(turn),
		"gen_ai.response.id":                       id,
		"gen_ai.response.model":                    "claude-test",
		"gen_ai.response.finish_reasons":           []string{finish},
		"gen_ai.usage.input_tokens":                in + cacheRead + cacheWrite,
		"gen_ai.usage.output_tokens":               out,
		"gen_ai.usage.cache_read.input_tokens":     cacheRead,
		"gen_ai.usage.cache_creation.input_tokens": cacheWrite,
	}
}

// toolAttrs returns the attributes of a tool span, plus extra.
func toolAttrs(turn int, name, id string, ran bool, extra map[string]any) map[string]any {
	m := map[string]any{
		"gen_ai.operation.name": "execute_tool",
		"gen_ai.tool.name":      name,
		"gen_ai.tool.call.id":   id,
		"gen_ai.tool.type":      "function",
		"toolrun.turn":          int64(turn),
		"toolrun.tool.ran":      ran,
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// runAttrs returns the attributes of a run span, plus extra.
func runAttrs(stop toolrun.StopReason, in, out, cacheRead, cacheWrite int64, extra map[string]any) map[string]any {
	m := map[string]any{
		"gen_ai.operation.name":                    "invoke_agent",
		"gen_ai.provider.name":                     "anthropic",
		"gen_ai.agent.name":                        "weather-bot",
		"gen_ai.request.model":                     "claude-test",
		"toolrun.stop_reason":                      string(stop),
		"gen_ai.usage.input_tokens":                in + cacheRead + cacheWrite,
		"gen_ai.usage.output_tokens":               out,
		"gen_ai.usage.cache_read.input_tokens":     cacheRead,
		"gen_ai.usage.cache_creation.input_tokens": cacheWrite,
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestSpans(t *testing.T) {
	const (
		run   = "invoke_agent weather-bot"
		chat  = "chat claude-test"
		tool  = "execute_tool get_weather"
		fail  = "execute_tool lookup"
		allow = "allow"
	)
	tests := []struct {
		name    string
		replies []toolruntest.Reply
		tools   []toolrun.Tool
		opts    toolrun.Options
		// drive runs the runner; nil means one Run that must succeed.
		drive func(t *testing.T, ctx context.Context, r *toolrun.Runner)
		want  []span
	}{
		{
			name:    "a tool that succeeds and one that fails",
			replies: twoTools,
			tools:   []toolrun.Tool{weatherTool(), lookupTool()},
			want: []span{
				{Name: chat, Parent: run, Kind: "client", Attrs: chatAttrs(1, "msg_1", "tool_use", 100, 20, 30, 5)},
				{Name: tool, Parent: run, Kind: "internal", Attrs: toolAttrs(1, "get_weather", "t1", true, map[string]any{
					"toolrun.decision": allow, "toolrun.decided_by": "default"})},
				{Name: fail, Parent: run, Kind: "internal", Status: "Error: station offline",
					Attrs: toolAttrs(1, "lookup", "t2", true, map[string]any{
						"toolrun.decision": allow, "toolrun.decided_by": "default", "error.type": "tool_error"}),
					Events: []string{"exception: station offline"}},
				{Name: chat, Parent: run, Kind: "client", Attrs: chatAttrs(2, "msg_2", "end_turn", 50, 10, 0, 0)},
				{Name: run, Parent: "caller", Kind: "internal", Attrs: runAttrs(toolrun.StopEndTurn, 150, 30, 30, 5, nil)},
			},
		},
		{
			name: "a call denied and a call of an unknown tool",
			replies: []toolruntest.Reply{
				{ID: "msg_1", Content: []toolruntest.Block{
					toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Paris"}),
					toolruntest.ToolUse("t2", "get_wether", nil),
				}, Usage: usage(10, 5, 0, 0)},
				{ID: "msg_2", Content: []toolruntest.Block{toolruntest.Text("I may not.")}, Usage: usage(20, 5, 0, 0)},
			},
			tools: []toolrun.Tool{weatherTool()},
			opts:  toolrun.Options{Policy: policy.DenyTools("get_weather")},
			want: []span{
				{Name: chat, Parent: run, Kind: "client", Attrs: chatAttrs(1, "msg_1", "tool_use", 10, 5, 0, 0)},
				{Name: tool, Parent: run, Kind: "internal",
					Status: `Error: tool call denied: tool "get_weather" is not allowed in this run`,
					Attrs: toolAttrs(1, "get_weather", "t1", false, map[string]any{
						"toolrun.decision": "deny", "toolrun.decided_by": "policy", "error.type": "denied"}),
					Events: []string{`exception: tool call denied: tool "get_weather" is not allowed in this run`}},
				{Name: "execute_tool get_wether", Parent: run, Kind: "internal",
					Status: `Error: unknown tool "get_wether"; available tools: get_weather`,
					Attrs:  toolAttrs(1, "get_wether", "t2", false, map[string]any{"error.type": "unknown_tool"}),
					Events: []string{`exception: unknown tool "get_wether"; available tools: get_weather`}},
				{Name: chat, Parent: run, Kind: "client", Attrs: chatAttrs(2, "msg_2", "end_turn", 20, 5, 0, 0)},
				{Name: run, Parent: "caller", Kind: "internal", Attrs: runAttrs(toolrun.StopEndTurn, 30, 10, 0, 0, nil)},
			},
		},
		{
			name:    "a request that fails",
			replies: []toolruntest.Reply{toolruntest.ServerError()},
			drive: func(t *testing.T, ctx context.Context, r *toolrun.Runner) {
				if _, err := r.Run(ctx); err == nil {
					t.Fatal("Run succeeded, want the request's error")
				}
			},
			want: []span{
				{Name: chat, Parent: run, Kind: "client",
					Status: "Error: $REQUEST_ERR",
					Attrs: map[string]any{
						"gen_ai.operation.name":     "chat",
						"gen_ai.provider.name":      "anthropic",
						"gen_ai.request.model":      "claude-test",
						"gen_ai.request.max_tokens": int64(1024),
						"toolrun.turn":              int64(1),
						"error.type":                "api_error",
					},
					Events: []string{"exception: $REQUEST_ERR"}},
				{Name: run, Parent: "caller", Kind: "internal",
					Status: "Error: $RUN_ERR",
					Attrs:  runAttrs(toolrun.StopError, 0, 0, 0, 0, map[string]any{"error.type": "api_error"}),
					Events: []string{"exception: $RUN_ERR"}},
			},
		},
		{
			name: "a run suspended for approval and resumed",
			replies: []toolruntest.Reply{
				{ID: "msg_1", Content: []toolruntest.Block{toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})}, Usage: usage(10, 5, 0, 0)},
				{ID: "msg_2", Content: []toolruntest.Block{toolruntest.Text("Sunny.")}, Usage: usage(20, 5, 0, 0)},
			},
			tools: []toolrun.Tool{weatherTool()},
			opts: toolrun.Options{Policy: func(ctx context.Context, call toolrun.PolicyCall) toolrun.Decision {
				return policy.Defer("weather costs money")
			}},
			drive: func(t *testing.T, ctx context.Context, r *toolrun.Runner) {
				res, err := r.Run(ctx)
				if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
					t.Fatalf("Run = %v, %v; want awaiting approval", res.StopReason, err)
				}
				if err := r.Decide("t1", toolrun.Decision{}); err != nil {
					t.Fatal(err)
				}
				if _, err := r.Run(ctx); err != nil {
					t.Fatal(err)
				}
			},
			want: []span{
				{Name: chat, Parent: run + "#1", Kind: "client", Attrs: chatAttrs(1, "msg_1", "tool_use", 10, 5, 0, 0)},
				{Name: run, Parent: "caller", Kind: "internal", Attrs: runAttrs(toolrun.StopAwaitingApproval, 10, 5, 0, 0, map[string]any{
					"toolrun.pending_calls": int64(1)})},
				{Name: tool, Parent: run + "#2", Kind: "internal", Attrs: toolAttrs(1, "get_weather", "t1", true, map[string]any{
					"toolrun.decision": allow, "toolrun.decided_by": "approval"})},
				{Name: chat, Parent: run + "#2", Kind: "client", Attrs: chatAttrs(2, "msg_2", "end_turn", 20, 5, 0, 0)},
				// A resumed run has the model of its first request, if any.
				{Name: run, Parent: "caller", Kind: "internal", Attrs: runAttrs(toolrun.StopEndTurn, 20, 5, 0, 0, nil)},
			},
		},
		{
			name: "a streamed response retried",
			replies: []toolruntest.Reply{
				{Content: []toolruntest.Block{toolruntest.Text("Sun")}, Fault: toolruntest.Fault{StreamErrorAfter: 4, RetryAfter: time.Millisecond}},
				{ID: "msg_2", Content: []toolruntest.Block{toolruntest.Text("Sunny.")}, Usage: usage(10, 5, 0, 0)},
			},
			opts: toolrun.Options{Stream: true},
			want: []span{
				// The tokens of both attempts: the failed one reported its
				// input (16) and message_start's 1 output token in its
				// TurnError, and may have written up to max_tokens (1024)
				// less that 1 without reporting it.
				{Name: chat, Parent: run, Kind: "client",
					Attrs: func() map[string]any {
						m := chatAttrs(1, "msg_2", "end_turn", 10+16, 5+1, 0, 0)
						m["gen_ai.request.stream"] = true
						m["gen_ai.response.time_to_first_chunk"] = positive
						m["toolrun.usage.unreported_output_tokens"] = int64(1023)
						return m
					}(),
					Events: []string{"toolrun.stream_retried: $STREAM_ERR"}},
				{Name: run, Parent: "caller", Kind: "internal", Attrs: func() map[string]any {
					m := runAttrs(toolrun.StopEndTurn, 10+16, 5+1, 0, 0, nil)
					m["toolrun.usage.unreported_output_tokens"] = int64(1023)
					return m
				}()},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t)
			s := toolruntest.New(t, toolruntest.Script(tt.replies...))
			obs := toolrunotel.New(toolrunotel.Options{TracerProvider: rec.tp, MeterProvider: rec.mp, AgentName: "weather-bot"})
			opts := tt.opts
			opts.Logger = discard()
			opts.MaxParallelTools = 1 // spans end in call order
			// The errors' texts, from the client, stand in the wants as
			// $RUN_ERR (the run's), $REQUEST_ERR (a request's) and
			// $STREAM_ERR (a failed stream's).
			var replace []string
			opts.OnEvent = func(ctx context.Context, e toolrun.Event) {
				switch e := e.(type) {
				case toolrun.RunStopped:
					if err := e.Result.Err; err != nil {
						replace = append(replace, err.Error(), "$RUN_ERR")
						var te *toolrun.TurnError
						if errors.As(err, &te) {
							replace = append(replace, te.Err.Error(), "$REQUEST_ERR")
						}
					}
				case toolrun.RequestSent:
					if e.Attempt > 1 {
						replace = append(replace, e.Err.Error(), "$STREAM_ERR")
					}
				}
				obs.Observe(ctx, e)
			}
			r := toolrun.New(s.Client(option.WithMaxRetries(0)), userParams("Weather?"), tt.tools, &opts)

			ctx, caller := rec.tp.Tracer("test").Start(t.Context(), "caller")
			if tt.drive != nil {
				tt.drive(t, ctx, r)
			} else if _, err := r.Run(ctx); err != nil {
				t.Fatal(err)
			}
			caller.End()

			got := rec.ended(t, toolrunotel.ScopeName, replace...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("spans (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	const model = "gen_ai.operation.name=chat gen_ai.provider.name=anthropic gen_ai.request.model=claude-test gen_ai.response.model=claude-test"
	tests := []struct {
		name    string
		replies []toolruntest.Reply
		tools   []toolrun.Tool
		opts    toolrun.Options
		want    []point
	}{
		{
			name:    "a tool that succeeds and one that fails",
			replies: twoTools,
			tools:   []toolrun.Tool{weatherTool(), lookupTool()},
			want: []point{
				{Metric: "gen_ai.client.operation.duration", Attrs: model, Count: 2},
				// Input tokens count the cache's: (100+30+5) + 50.
				{Metric: "gen_ai.client.token.usage", Attrs: model + " gen_ai.token.type=input", Count: 2, Sum: 185},
				{Metric: "gen_ai.client.token.usage", Attrs: model + " gen_ai.token.type=output", Count: 2, Sum: 30},
				{Metric: "gen_ai.execute_tool.duration", Attrs: "error.type=tool_error gen_ai.operation.name=execute_tool gen_ai.tool.name=lookup", Count: 1},
				{Metric: "gen_ai.execute_tool.duration", Attrs: "gen_ai.operation.name=execute_tool gen_ai.tool.name=get_weather", Count: 1},
			},
		},
		{
			name:    "a streamed response",
			replies: []toolruntest.Reply{{Content: []toolruntest.Block{toolruntest.Text("Sunny.")}, Usage: usage(10, 5, 0, 0)}},
			opts:    toolrun.Options{Stream: true},
			want: []point{
				{Metric: "gen_ai.client.operation.duration", Attrs: model, Count: 1},
				{Metric: "gen_ai.client.operation.time_to_first_chunk", Attrs: "gen_ai.operation.name=chat gen_ai.provider.name=anthropic gen_ai.request.model=claude-test", Count: 1},
				{Metric: "gen_ai.client.token.usage", Attrs: model + " gen_ai.token.type=input", Count: 1, Sum: 10},
				{Metric: "gen_ai.client.token.usage", Attrs: model + " gen_ai.token.type=output", Count: 1, Sum: 5},
			},
		},
		{
			name:    "a request that fails",
			replies: []toolruntest.Reply{toolruntest.ServerError()},
			want: []point{
				{Metric: "gen_ai.client.operation.duration", Attrs: "error.type=api_error gen_ai.operation.name=chat gen_ai.provider.name=anthropic gen_ai.request.model=claude-test", Count: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t)
			s := toolruntest.New(t, toolruntest.Script(tt.replies...))
			obs := toolrunotel.New(toolrunotel.Options{TracerProvider: rec.tp, MeterProvider: rec.mp})
			opts := tt.opts
			opts.Logger = discard()
			opts.OnEvent = obs.Observe
			r := toolrun.New(s.Client(option.WithMaxRetries(0)), userParams("Weather?"), tt.tools, &opts)
			_, _ = r.Run(t.Context()) // failures are among the cases
			if diff := cmp.Diff(tt.want, rec.points(t)); diff != "" {
				t.Errorf("metrics (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGlobalProviders checks that zero Options record through the global
// providers, as they are when New is called.
func TestGlobalProviders(t *testing.T) {
	rec := newRecorder(t)
	prevTP, prevMP := otel.GetTracerProvider(), otel.GetMeterProvider()
	otel.SetTracerProvider(rec.tp)
	otel.SetMeterProvider(rec.mp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetMeterProvider(prevMP)
	})
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("Hello."))))
	obs := toolrunotel.New(toolrunotel.Options{})
	r := toolrun.New(s.Client(), userParams("Hi"), nil, &toolrun.Options{Logger: discard(), OnEvent: obs.Observe})
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sp := range rec.ended(t, toolrunotel.ScopeName) {
		names = append(names, sp.Name+" < "+sp.Parent)
	}
	if diff := cmp.Diff([]string{"chat claude-test < invoke_agent", "invoke_agent < "}, names); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	var metrics []string
	for _, p := range rec.points(t) {
		metrics = append(metrics, p.Metric)
	}
	if diff := cmp.Diff([]string{"gen_ai.client.operation.duration", "gen_ai.client.token.usage", "gen_ai.client.token.usage"}, metrics); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

// TestCancelledRun checks that a run cancelled while a tool runs ends the
// tool's span with the run's, and that neither has an error status.
func TestCancelledRun(t *testing.T) {
	rec := newRecorder(t)
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Reply{ID: "msg_1", Content: []toolruntest.Block{toolruntest.ToolUse("t1", "block", nil)}, Usage: usage(10, 5, 0, 0)}))
	ctx, cancel := context.WithCancel(t.Context())
	block := toolrun.NewTool("block", "", func(ctx context.Context, in struct{}) (string, error) {
		cancel()
		<-ctx.Done()
		return "", ctx.Err()
	})
	obs := toolrunotel.New(toolrunotel.Options{TracerProvider: rec.tp, MeterProvider: rec.mp})
	r := toolrun.New(s.Client(), userParams("Go"), []toolrun.Tool{block}, &toolrun.Options{Logger: discard(), OnEvent: obs.Observe})
	if _, err := r.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	want := []span{
		{Name: "chat claude-test", Parent: "invoke_agent", Kind: "client", Attrs: chatAttrs(1, "msg_1", "tool_use", 10, 5, 0, 0)},
		{Name: "execute_tool block", Parent: "invoke_agent", Kind: "internal", Attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool",
			"gen_ai.tool.name":      "block",
			"gen_ai.tool.call.id":   "t1",
			"gen_ai.tool.type":      "function",
			"toolrun.turn":          int64(1),
			"toolrun.decision":      "allow",
			"toolrun.decided_by":    "default",
		}},
		{Name: "invoke_agent", Kind: "internal", Attrs: func() map[string]any {
			m := runAttrs(toolrun.StopCanceled, 10, 5, 0, 0, nil)
			delete(m, "gen_ai.agent.name")
			return m
		}()},
	}
	if diff := cmp.Diff(want, rec.ended(t, toolrunotel.ScopeName)); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	// The tool did not finish: its duration is not recorded.
	for _, p := range rec.points(t) {
		if p.Metric == toolrunotel.ToolDurationName {
			t.Errorf("tool duration recorded for a call that did not finish: %+v", p)
		}
	}
}

// TestCompactionSpan: a compaction's request has a chat span of its own,
// marked toolrun.compaction, with the tokens it is billed for (a
// server-side compaction's are in usage.iterations, its top-level usage
// is 0), so that the chat spans, and the run span, add up to what the API
// billed.
func TestCompactionSpan(t *testing.T) {
	rec := newRecorder(t)
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
		toolruntest.Message(toolruntest.Text("Sunny.")),
	))
	obs := toolrunotel.New(toolrunotel.Options{TracerProvider: rec.tp, MeterProvider: rec.mp})
	r := toolrun.New(s.Client(), userParams("Weather in Oslo?"), []toolrun.Tool{weatherTool()}, &toolrun.Options{
		Logger: discard(), OnEvent: obs.Observe, Compaction: toolrun.Compaction{Threshold: 1},
	})
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	var chats, compactions int
	var in, out int64
	for _, sp := range rec.ended(t, toolrunotel.ScopeName) {
		if sp.Attrs["gen_ai.operation.name"] != "chat" {
			continue
		}
		chats++
		in += sp.Attrs["gen_ai.usage.input_tokens"].(int64)
		o := sp.Attrs["gen_ai.usage.output_tokens"].(int64)
		out += o
		if sp.Attrs["toolrun.compaction"] == true {
			compactions++
			if o == 0 {
				t.Errorf("compaction span has 0 output tokens; want the summary's: attrs %v", sp.Attrs)
			}
		}
	}
	billed := s.Usage()
	if chats != 3 || compactions != 1 {
		t.Errorf("%d chat spans, %d of them marked toolrun.compaction; want 3, 1", chats, compactions)
	}
	if want := billed.InputTokens + billed.CacheReadInputTokens + billed.CacheCreationInputTokens; in != want || out != billed.OutputTokens {
		t.Errorf("chat spans count %d input and %d output tokens, the API billed %d and %d", in, out, want, billed.OutputTokens)
	}
}
