package toolruntest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/toolruntest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

const model = "claude-sonnet-4-5"

// question returns the parameters of a one-message request.
func question(text string) anthropic.BetaMessageNewParams {
	return anthropic.BetaMessageNewParams{
		Model:     model,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(text))},
	}
}

// decode decodes the JSON s into a value that cmp can compare.
func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}

// inputTokens is the package's documented approximation for req.
func inputTokens(req *toolruntest.Request) int {
	raw := req.Params.Raw
	return (len(raw["system"]) + len(raw["messages"]) + len(raw["tools"]) + 3) / 4
}

// replyCases are replies, with the message the SDK should decode from each
// ("{{input}}" stands for the computed input tokens).
var replyCases = []struct {
	name  string
	reply toolruntest.Reply
	want  string
}{
	{
		name:  "text",
		reply: toolruntest.Message(toolruntest.Text("Hello, world.")),
		want: `{"id":"msg_toolruntest_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
			"content":[{"type":"text","text":"Hello, world."}],"stop_reason":"end_turn","stop_sequence":null,
			"usage":{"input_tokens":{{input}},"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":4}}`,
	},
	{
		name: "tool use",
		reply: toolruntest.Message(
			toolruntest.Text("Let me check."),
			toolruntest.ToolUse("toolu_01", "get_weather", map[string]any{"city": "Paris", "days": 3}),
		),
		want: `{"id":"msg_toolruntest_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
			"content":[{"type":"text","text":"Let me check."},
				{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Paris","days":3}}],
			"stop_reason":"tool_use","stop_sequence":null,
			"usage":{"input_tokens":{{input}},"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":10}}`,
	},
	{
		name: "parallel tool uses of unknown tools, nil input, non-ASCII",
		reply: toolruntest.Message(
			toolruntest.ToolUse("toolu_01", "no_such_tool", nil),
			toolruntest.ToolUse("toolu_02", "lookup", map[string]string{"q": "naïve café ☕"}),
		),
		want: `{"id":"msg_toolruntest_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
			"content":[{"type":"tool_use","id":"toolu_01","name":"no_such_tool","input":{}},
				{"type":"tool_use","id":"toolu_02","name":"lookup","input":{"q":"naïve café ☕"}}],
			"stop_reason":"tool_use","stop_sequence":null,
			"usage":{"input_tokens":{{input}},"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":7}}`,
	},
	{
		name:  "thinking",
		reply: toolruntest.Message(toolruntest.Thinking("Six times seven.", "sig_abc"), toolruntest.Text("42")),
		want: `{"id":"msg_toolruntest_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
			"content":[{"type":"thinking","thinking":"Six times seven.","signature":"sig_abc"},{"type":"text","text":"42"}],
			"stop_reason":"end_turn","stop_sequence":null,
			"usage":{"input_tokens":{{input}},"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":5}}`,
	},
	{
		name: "every field set",
		reply: toolruntest.Reply{
			Content:    []toolruntest.Block{toolruntest.Text("Cut")},
			StopReason: "max_tokens",
			Usage:      &toolruntest.Usage{InputTokens: 10, OutputTokens: 20, CacheCreationInputTokens: 30, CacheReadInputTokens: 40},
			ID:         "msg_custom",
			Model:      "claude-custom",
		},
		want: `{"id":"msg_custom","type":"message","role":"assistant","model":"claude-custom",
			"content":[{"type":"text","text":"Cut"}],"stop_reason":"max_tokens","stop_sequence":null,
			"usage":{"input_tokens":10,"cache_creation_input_tokens":30,"cache_read_input_tokens":40,
				"cache_creation":{"ephemeral_5m_input_tokens":30,"ephemeral_1h_input_tokens":0},"output_tokens":20}}`,
	},
	{
		name: "raw block",
		reply: toolruntest.Message(
			toolruntest.Block{Raw: json.RawMessage(`{"type":"redacted_thinking","data":"c2VjcmV0"}`)},
			toolruntest.Text("Done."),
		),
		want: `{"id":"msg_toolruntest_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
			"content":[{"type":"redacted_thinking","data":"c2VjcmV0"},{"type":"text","text":"Done."}],
			"stop_reason":"end_turn","stop_sequence":null,
			"usage":{"input_tokens":{{input}},"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2}}`,
	},
	{
		name:  "no content",
		reply: toolruntest.Reply{},
		want: `{"id":"msg_toolruntest_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
			"content":[],"stop_reason":"end_turn","stop_sequence":null,
			"usage":{"input_tokens":{{input}},"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}`,
	},
}

func TestReplyJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range replyCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := toolruntest.New(nil, toolruntest.Script(tc.reply))
			defer s.Close()
			client := s.Client()

			msg, err := client.Beta.Messages.New(t.Context(), question("What now?"))
			if err != nil {
				t.Fatalf("New: %v", err)
			}

			reqs := s.Requests()
			if len(reqs) != 1 {
				t.Fatalf("got %d requests, want 1", len(reqs))
			}
			req := reqs[0]
			want := strings.ReplaceAll(tc.want, "{{input}}", strconv.Itoa(inputTokens(req)))
			if diff := cmp.Diff(decode(t, want), decode(t, msg.RawJSON())); diff != "" {
				t.Errorf("message mismatch (-want +got):\n%s", diff)
			}
			// This version of the SDK sends an API key as a bearer token.
			if got, want := req.Header.Get("Authorization"), "Bearer "+toolruntest.TestAPIKey; got != want {
				t.Errorf("got Authorization %q, want %q", got, want)
			}
			if req.Status != http.StatusOK || req.Attempt != 1 || req.Stream {
				t.Errorf("got Status %d, Attempt %d, Stream %t; want 200, 1, false", req.Status, req.Attempt, req.Stream)
			}
			if errs := s.Errors(); len(errs) > 0 {
				t.Errorf("got server errors: %v", errors.Join(errs...))
			}
		})
	}
}

func TestReplyStreamMatchesJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range replyCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reply := tc.reply
			if reply.ID == "" {
				reply.ID = "msg_same" // the default ID differs between the two requests
			}
			s := toolruntest.New(nil, toolruntest.Script(reply, reply))
			defer s.Close()
			client := s.Client()

			want, err := client.Beta.Messages.New(t.Context(), question("What now?"))
			if err != nil {
				t.Fatalf("New: %v", err)
			}

			stream := client.Beta.Messages.NewStreaming(t.Context(), question("What now?"))
			defer stream.Close()
			var got anthropic.BetaMessage
			deltas := make(map[int64]int) // content block index → number of deltas
			for stream.Next() {
				ev := stream.Current()
				if err := got.Accumulate(ev); err != nil {
					t.Fatalf("Accumulate: %v", err)
				}
				if ev.Type == "content_block_delta" && ev.Delta.Type != "signature_delta" {
					deltas[ev.Index]++
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}

			if diff := cmp.Diff(decode(t, want.RawJSON()), decode(t, got.RawJSON())); diff != "" {
				t.Errorf("streamed message differs from JSON message (-json +streamed):\n%s", diff)
			}
			for i, b := range reply.Content {
				if b.Raw == nil && b.Type == "tool_use" && deltas[int64(i)] < 2 {
					t.Errorf("tool_use block %d came in %d input_json_delta events, want at least 2", i, deltas[int64(i)])
				}
			}
			reqs := s.Requests()
			if len(reqs) != 2 || reqs[0].Stream || !reqs[1].Stream || !reqs[1].Params.Stream {
				t.Errorf("got requests %+v, want one JSON then one streamed", reqs)
			}
		})
	}
}

// TestWireFormat pins the exact bytes the server sends. Run with -update to
// rewrite testdata after an intended change.
func TestWireFormat(t *testing.T) {
	t.Parallel()
	reply := toolruntest.Reply{
		Content: []toolruntest.Block{
			toolruntest.Thinking("Weather needs a tool.", "sig_01"),
			toolruntest.Text("Checking the weather."),
			toolruntest.ToolUse("toolu_01", "get_weather", map[string]string{"city": "Paris"}),
		},
		Usage: &toolruntest.Usage{InputTokens: 100, OutputTokens: 30, CacheReadInputTokens: 5},
	}
	tests := []struct {
		name   string
		body   string
		golden string
	}{
		{
			name:   "json",
			body:   `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"Weather in Paris?"}]}`,
			golden: "message.json",
		},
		{
			name:   "stream",
			body:   `{"model":"claude-sonnet-4-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"Weather in Paris?"}]}`,
			golden: "message.sse",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := toolruntest.New(nil, toolruntest.Script(reply))
			defer s.Close()
			res, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			got, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply toolruntest.Reply
		body  string
		want  http.Header
	}{
		{
			name:  "json",
			reply: toolruntest.Message(toolruntest.Text("Hi")),
			body:  `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"Hi"}]}`,
			want:  http.Header{"Content-Type": {"application/json"}, "Request-Id": {"req_toolruntest_1"}},
		},
		{
			name:  "stream",
			reply: toolruntest.Message(toolruntest.Text("Hi")),
			body:  `{"model":"m","max_tokens":1,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`,
			want:  http.Header{"Content-Type": {"text/event-stream"}, "Request-Id": {"req_toolruntest_1"}},
		},
		{
			name:  "rate limited",
			reply: toolruntest.RateLimited(10 * time.Millisecond),
			body:  `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"Hi"}]}`,
			want: http.Header{
				"Content-Type": {"application/json"}, "Request-Id": {"req_toolruntest_1"},
				"Retry-After": {"0.01"}, "Retry-After-Ms": {"10"},
			},
		},
		{
			name:  "invalid",
			reply: toolruntest.Message(toolruntest.Text("Hi")),
			body:  `{"model":"m","max_tokens":1,"messages":[]}`,
			want:  http.Header{"Content-Type": {"application/json"}, "Request-Id": {"req_toolruntest_1"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := toolruntest.New(nil, toolruntest.Script(tc.reply))
			defer s.Close()
			res, err := http.Post(s.URL+"/v1/messages?beta=true", "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			got := make(http.Header)
			for k := range tc.want {
				got[k] = res.Header.Values(k)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("headers mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// invalidBodies are request bodies that the server must reject, each with a
// part of the message it must reject it with.
var invalidBodies = []struct {
	name string
	body string
	want string
}{
	{"not JSON", `{"model":`, "request body is not a valid JSON object"},
	{"no model", `{"max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`, "model: Field required"},
	{"zero max_tokens", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"Hi"}]}`, "max_tokens: Input should be greater than or equal to 1"},
	{"no messages", `{"model":"m","max_tokens":10,"messages":[]}`, "messages: at least one message is required"},
	{"bad role", `{"model":"m","max_tokens":10,"messages":[{"role":"robot","content":"Hi"}]}`, "messages.0.role: Input should be 'user', 'assistant' or 'system'"},
	{"assistant first", `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":"Hi"}]}`, `messages: first message must use the "user" role`},
	{
		"tool_use without result",
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hi"},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"t","input":{}}]},
			{"role":"user","content":"Well?"}]}`,
		"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01.",
	},
	{
		"tool_result after text",
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hi"},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"t","input":{}}]},
			{"role":"user","content":[{"type":"text","text":"Here:"},{"type":"tool_result","tool_use_id":"toolu_01","content":"x"}]}]}`,
		"messages.2.content.1: `tool_result` blocks must come before any other content",
	},
	{
		"unknown tool_use_id",
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_09","content":"x"}]}]}`,
		"messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_09.",
	},
	{
		"tool_use answered twice",
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hi"},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"t","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01"},{"type":"tool_result","tool_use_id":"toolu_01"}]}]}`,
		"messages.2.content.1: each `tool_use` must have a single result",
	},
	{
		"consecutive assistant messages after tool_use",
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hi"},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"t","input":{}}]},
			{"role":"assistant","content":"More"},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01"}]}]}`,
		"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01.",
	},
	{"empty content", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[]}]}`, "messages.0: all messages must have non-empty content"},
	{"empty text", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, "messages.0.content.0: text content blocks must be non-empty"},
	{"bad tool name", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hi"}],"tools":[{"name":"a tool","input_schema":{"type":"object"}}]}`, "tools.0.name: String should match pattern"},
	{"bad schema", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hi"}],"tools":[{"name":"t","input_schema":{"type":"string"}}]}`, "tools.0.input_schema.type: Input should be 'object'"},
	{
		"duplicate tools",
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hi"}],
			"tools":[{"name":"t","input_schema":{"type":"object"}},{"name":"t","input_schema":{"type":"object"}}]}`,
		"tools: Tool names must be unique",
	},
}

func TestValidationThroughSDK(t *testing.T) {
	t.Parallel()
	for _, tc := range invalidBodies {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := toolruntest.New(nil, toolruntest.Script(toolruntest.Message(toolruntest.Text("Fine."))))
			defer s.Close()
			client := s.Client()

			var res anthropic.BetaMessage
			err := client.Post(t.Context(), "v1/messages", json.RawMessage(tc.body), &res)
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("got error %v, want an *anthropic.Error", err)
			}
			if apiErr.StatusCode != http.StatusBadRequest || apiErr.Type() != "invalid_request_error" {
				t.Errorf("got %d %s, want 400 invalid_request_error", apiErr.StatusCode, apiErr.Type())
			}
			if !strings.Contains(apiErr.Message, tc.want) {
				t.Errorf("got message %q, want it to contain %q", apiErr.Message, tc.want)
			}
			errs := s.Errors()
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Errorf("got server errors %v, want one containing %q", errs, tc.want)
			}

			// The rejected request used up no reply.
			msg, err := client.Beta.Messages.New(t.Context(), question("Try again"))
			if err != nil {
				t.Fatalf("New after a rejected request: %v", err)
			}
			if got := msg.Content[0].Text; got != "Fine." {
				t.Errorf("got reply %q, want %q", got, "Fine.")
			}
			var statuses []int
			for _, r := range s.Requests() {
				statuses = append(statuses, r.Status)
			}
			if diff := cmp.Diff([]int{400, 200}, statuses); diff != "" {
				t.Errorf("statuses mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestToolConversation runs a whole tool-use conversation through the SDK,
// the way a runner does, with two tools called in parallel.
func TestToolConversation(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(
			toolruntest.Text("I'll look both up."),
			toolruntest.ToolUse("toolu_01", "get_weather", map[string]string{"city": "Paris"}),
			toolruntest.ToolUse("toolu_02", "get_weather", map[string]string{"city": "Rome"}),
		),
		toolruntest.Message(toolruntest.ToolUse("toolu_03", "get_time", map[string]string{"tz": "CET"})),
		toolruntest.Message(toolruntest.Text("Sunny in both, and it is noon.")),
	))
	defer s.Close()
	client := s.Client()

	schema := anthropic.BetaToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}
	params := question("Weather in Paris and Rome, and the time?")
	params.System = []anthropic.BetaTextBlockParam{{Text: "Be brief."}}
	params.Tools = []anthropic.BetaToolUnionParam{
		{OfTool: &anthropic.BetaToolParam{Name: "get_weather", Description: anthropic.String("Weather for a city."), InputSchema: schema}},
		{OfTool: &anthropic.BetaToolParam{Name: "get_time", InputSchema: anthropic.BetaToolInputSchemaParam{Properties: map[string]any{}}}},
	}
	var msg *anthropic.BetaMessage
	for turn := 0; ; turn++ {
		var err error
		msg, err = client.Beta.Messages.New(t.Context(), params)
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		if msg.StopReason != anthropic.BetaStopReasonToolUse {
			break
		}
		params.Messages = append(params.Messages, msg.ToParam())
		var results []anthropic.BetaContentBlockParamUnion
		for _, b := range msg.Content {
			if b.Type == "tool_use" {
				results = append(results, anthropic.NewBetaToolResultBlock(b.ID, "result of "+b.Name, false))
			}
		}
		params.Messages = append(params.Messages, anthropic.NewBetaUserMessage(results...))
	}
	if got, want := msg.Content[0].Text, "Sunny in both, and it is noon."; got != want {
		t.Errorf("got final text %q, want %q", got, want)
	}
	if errs := s.Errors(); len(errs) > 0 {
		t.Fatalf("got server errors: %v", errors.Join(errs...))
	}

	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("got %d requests, want 3", len(reqs))
	}
	last := reqs[2].Params
	if diff := cmp.Diff(`[{"text":"Be brief.","type":"text"}]`, string(last.System)); diff != "" {
		t.Errorf("system mismatch (-want +got):\n%s", diff)
	}
	var tools []string
	for _, td := range last.Tools {
		tools = append(tools, td.Name+": "+td.Description)
	}
	if diff := cmp.Diff([]string{"get_weather: Weather for a city.", "get_time: "}, tools); diff != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", diff)
	}
	// A plain-data view of the conversation the server saw last.
	type result struct{ Role, Type, ID, Text string }
	var got []result
	for _, m := range last.Messages {
		for _, b := range m.Content {
			r := result{Role: m.Role, Type: b.Type, ID: b.ID + b.ToolUseID, Text: b.Text}
			if b.Type == "tool_result" {
				r.Text = b.ResultText()
			}
			got = append(got, r)
		}
	}
	want := []result{
		{"user", "text", "", "Weather in Paris and Rome, and the time?"},
		{"assistant", "text", "", "I'll look both up."},
		{"assistant", "tool_use", "toolu_01", ""},
		{"assistant", "tool_use", "toolu_02", ""},
		{"user", "tool_result", "toolu_01", "result of get_weather"},
		{"user", "tool_result", "toolu_02", "result of get_weather"},
		{"assistant", "tool_use", "toolu_03", ""},
		{"user", "tool_result", "toolu_03", "result of get_time"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conversation mismatch (-want +got):\n%s", diff)
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	fast := func(r toolruntest.Reply) toolruntest.Reply {
		r.Fault.RetryAfter = time.Millisecond
		return r
	}
	tests := []struct {
		name     string
		fault    toolruntest.Reply
		wantType string
	}{
		{"rate limited", toolruntest.RateLimited(time.Millisecond), "rate_limit_error"},
		{"overloaded", fast(toolruntest.Overloaded()), "overloaded_error"},
		{"server error", fast(toolruntest.ServerError()), "api_error"},
		{"custom", toolruntest.Reply{Fault: toolruntest.Fault{Status: 503, ErrorType: "api_error", Message: "down", RetryAfter: time.Millisecond}}, "api_error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
					t.Parallel()
					s := toolruntest.New(nil, toolruntest.Script(tc.fault, toolruntest.Message(toolruntest.Text("Finally."))))
					defer s.Close()
					client := s.Client()

					var text string
					if stream {
						st := client.Beta.Messages.NewStreaming(t.Context(), question("Hi"))
						var msg anthropic.BetaMessage
						for st.Next() {
							msg.Accumulate(st.Current())
						}
						if err := st.Err(); err != nil {
							t.Fatalf("stream: %v", err)
						}
						text = msg.Content[0].Text
					} else {
						msg, err := client.Beta.Messages.New(t.Context(), question("Hi"))
						if err != nil {
							t.Fatalf("New: %v", err)
						}
						text = msg.Content[0].Text
					}
					if text != "Finally." {
						t.Errorf("got %q, want %q", text, "Finally.")
					}

					type attempt struct {
						Attempt, Status int
						RetryCount      string
					}
					var got []attempt
					for _, r := range s.Requests() {
						got = append(got, attempt{r.Attempt, r.Status, r.Header.Get("X-Stainless-Retry-Count")})
					}
					want := []attempt{{1, tc.fault.Fault.Status, "0"}, {2, 200, "1"}}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("attempts mismatch (-want +got):\n%s", diff)
					}
				})
			}

			// Without retries the SDK reports the fault.
			s := toolruntest.New(nil, toolruntest.Script(tc.fault))
			defer s.Close()
			client := s.Client(option.WithMaxRetries(0))
			_, err := client.Beta.Messages.New(t.Context(), question("Hi"))
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("got error %v, want an *anthropic.Error", err)
			}
			if apiErr.StatusCode != tc.fault.Fault.Status || string(apiErr.Type()) != tc.wantType {
				t.Errorf("got %d %s, want %d %s", apiErr.StatusCode, apiErr.Type(), tc.fault.Fault.Status, tc.wantType)
			}
		})
	}
}

func TestStreamErrorAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		fault      toolruntest.Fault
		wantEvents []string
		wantType   string
		wantMsg    string
	}{
		{
			name:       "default",
			fault:      toolruntest.Fault{StreamErrorAfter: 3},
			wantEvents: []string{"message_start", "content_block_start"}, // the SDK skips the ping
			wantType:   "overloaded_error",
			wantMsg:    "Overloaded",
		},
		{
			name:       "custom error after every event",
			fault:      toolruntest.Fault{StreamErrorAfter: 100, ErrorType: "api_error", Message: "boom"},
			wantEvents: []string{"message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"},
			wantType:   "api_error",
			wantMsg:    "boom",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := toolruntest.New(nil, toolruntest.Script(toolruntest.Reply{Content: []toolruntest.Block{toolruntest.Text("Hello there")}, Fault: tc.fault}))
			defer s.Close()
			client := s.Client()
			stream := client.Beta.Messages.NewStreaming(t.Context(), question("Hi"))
			defer stream.Close()
			var events []string
			for stream.Next() {
				events = append(events, stream.Current().Type)
			}
			if diff := cmp.Diff(tc.wantEvents, events); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
			var apiErr *anthropic.Error
			if err := stream.Err(); !errors.As(err, &apiErr) {
				t.Fatalf("got stream error %v, want an *anthropic.Error", err)
			}
			if string(apiErr.Type()) != tc.wantType || apiErr.Message != tc.wantMsg {
				t.Errorf("got %s %q, want %s %q", apiErr.Type(), apiErr.Message, tc.wantType, tc.wantMsg)
			}
			if n := len(s.Requests()); n != 1 {
				t.Errorf("got %d requests, want 1: the SDK does not retry a failed stream", n)
			}
		})
	}
}

func TestDropAfter(t *testing.T) {
	t.Parallel()
	reply := toolruntest.Reply{
		Content: []toolruntest.Block{toolruntest.Text("Hello there"), toolruntest.ToolUse("toolu_01", "t", map[string]int{"n": 1})},
	}
	tests := []struct {
		name      string
		stream    bool
		dropAfter int
	}{
		{"json, some bytes", false, 20},
		{"json, all but the last byte", false, 1 << 20},
		{"stream, some events", true, 4},
		{"stream, every event", true, 1 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := reply
			r.Fault.DropAfter = tc.dropAfter
			s := toolruntest.New(nil, toolruntest.Script(r))
			defer s.Close()
			client := s.Client(option.WithMaxRetries(0))

			var err error
			if tc.stream {
				stream := client.Beta.Messages.NewStreaming(t.Context(), question("Hi"))
				for stream.Next() {
				}
				err = stream.Err()
				stream.Close()
			} else {
				_, err = client.Beta.Messages.New(t.Context(), question("Hi"))
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("got error %v, want io.ErrUnexpectedEOF", err)
			}
			if reqs := s.Requests(); len(reqs) != 1 || reqs[0].Status != http.StatusOK {
				t.Errorf("got requests %+v, want one answered with 200", reqs)
			}
		})
	}

	t.Run("json retried", func(t *testing.T) {
		t.Parallel()
		r := reply
		r.Fault = toolruntest.Fault{DropAfter: 10, RetryAfter: time.Millisecond}
		s := toolruntest.New(nil, toolruntest.Script(r, reply))
		defer s.Close()
		client := s.Client()
		msg, err := client.Beta.Messages.New(t.Context(), question("Hi"))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if got := msg.Content[0].Text; got != "Hello there" {
			t.Errorf("got %q, want %q", got, "Hello there")
		}
		if reqs := s.Requests(); len(reqs) != 2 || reqs[1].Attempt != 2 {
			t.Errorf("got requests %+v, want the same body twice", reqs)
		}
	})
}

func TestEventDelay(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(nil, toolruntest.Script(toolruntest.Reply{
		Content: []toolruntest.Block{toolruntest.Text("Slowly but surely")},
		Fault:   toolruntest.Fault{EventDelay: time.Millisecond},
	}))
	defer s.Close()
	client := s.Client()
	stream := client.Beta.Messages.NewStreaming(t.Context(), question("Hi"))
	defer stream.Close()
	var msg anthropic.BetaMessage
	for stream.Next() {
		msg.Accumulate(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got := msg.Content[0].Text; got != "Slowly but surely" {
		t.Errorf("got %q, want %q", got, "Slowly but surely")
	}
}

func TestScriptEnded(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(nil, toolruntest.Script(toolruntest.Message(toolruntest.Text("Only one."))))
	defer s.Close()
	client := s.Client()
	if _, err := client.Beta.Messages.New(t.Context(), question("One")); err != nil {
		t.Fatalf("first New: %v", err)
	}
	_, err := client.Beta.Messages.New(t.Context(), question("Two"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("got error %v, want an *anthropic.Error", err)
	}
	if apiErr.StatusCode != http.StatusInternalServerError || !strings.Contains(apiErr.Message, "script ran out") {
		t.Errorf("got %d %q, want 500 and a message that the script ran out", apiErr.StatusCode, apiErr.Message)
	}
	errs := s.Errors()
	if len(errs) != 1 || !errors.Is(errs[0], toolruntest.ErrScriptEnded) {
		t.Errorf("got server errors %v, want one ErrScriptEnded", errs)
	}
	if n := len(s.Requests()); n != 2 {
		t.Errorf("got %d requests, want 2: the SDK must not retry a script overrun", n)
	}
}

func TestEmptyScript(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(nil, toolruntest.Script())
	defer s.Close()
	client := s.Client()
	_, err := client.Messages.New(t.Context(), anthropic.MessageNewParams{
		Model:     model,
		MaxTokens: 10,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))},
	})
	if err == nil {
		t.Fatal("got no error, want one")
	}
	if errs := s.Errors(); len(errs) != 1 || !errors.Is(errs[0], toolruntest.ErrScriptEnded) {
		t.Errorf("got server errors %v, want one ErrScriptEnded", errs)
	}
}

func TestServerFunc(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(nil, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		last := r.Params.Messages[len(r.Params.Messages)-1]
		return toolruntest.Message(toolruntest.Text("echo: " + last.Content[0].Text))
	}})
	defer s.Close()
	client := s.Client()

	// Concurrent runs, as parallel tests and benchmarks drive it.
	const runs = 50
	var wg sync.WaitGroup
	errs := make([]error, runs)
	for i := range runs {
		wg.Go(func() {
			q := fmt.Sprintf("question %d", i)
			msg, err := client.Beta.Messages.New(t.Context(), question(q))
			if err != nil {
				errs[i] = err
				return
			}
			if got, want := msg.Content[0].Text, "echo: "+q; got != want {
				errs[i] = fmt.Errorf("got %q, want %q", got, want)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if len(reqs) != runs {
		t.Fatalf("got %d requests, want %d", len(reqs), runs)
	}
	ids := make(map[string]bool)
	for _, r := range reqs {
		if r.Status != http.StatusOK || r.Attempt != 1 {
			t.Errorf("got Status %d, Attempt %d, want 200, 1", r.Status, r.Attempt)
		}
		ids[string(r.Body)] = true
	}
	if len(ids) != runs {
		t.Errorf("got %d distinct bodies, want %d", len(ids), runs)
	}
}

func TestServerFuncPanic(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(nil, toolruntest.Options{Func: func(*toolruntest.Request) toolruntest.Reply {
		panic("responder bug")
	}})
	defer s.Close()
	client := s.Client()
	_, err := client.Beta.Messages.New(t.Context(), question("Hi"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusInternalServerError {
		t.Fatalf("got error %v, want a 500 *anthropic.Error", err)
	}
	errs := s.Errors()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "responder panicked: responder bug") {
		t.Errorf("got server errors %v, want one about the panic", errs)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("got %d requests, want 1: the SDK must not retry a panic", n)
	}
}

func TestCountTokens(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(nil, toolruntest.Script())
	defer s.Close()
	client := s.Client()
	res, err := client.Beta.Messages.CountTokens(t.Context(), anthropic.BetaMessageCountTokensParams{
		Model:    model,
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("How many tokens is this?"))},
	})
	if err != nil {
		t.Fatalf("CountTokens: %v", err)
	}
	const messages = `[{"content":[{"text":"How many tokens is this?","type":"text"}],"role":"user"}]`
	if want := int64((len(messages) + 3) / 4); res.InputTokens != want {
		t.Errorf("got %d input tokens, want %d", res.InputTokens, want)
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("got %d recorded requests, want 0: count_tokens is not a message request", n)
	}
	if errs := s.Errors(); len(errs) != 0 {
		t.Errorf("got server errors %v", errs)
	}
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(nil, toolruntest.Script())
	defer s.Close()
	var res json.RawMessage
	client := s.Client()
	err := client.Get(t.Context(), "v1/models", nil, &res)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Type() != "not_found_error" {
		t.Fatalf("got error %v, want a 404 not_found_error", err)
	}
	if errs := s.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "GET /v1/models") {
		t.Errorf("got server errors %v, want one naming GET /v1/models", errs)
	}
}

func TestCloseWaitsForInFlight(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	release := make(chan struct{})
	s := toolruntest.New(nil, toolruntest.Options{Func: func(*toolruntest.Request) toolruntest.Reply {
		close(entered)
		<-release
		return toolruntest.Message(toolruntest.Text("Made it."))
	}})
	client := s.Client()

	done := make(chan error, 1)
	go func() {
		msg, err := client.Beta.Messages.New(t.Context(), question("Hi"))
		if err == nil && msg.Content[0].Text != "Made it." {
			err = fmt.Errorf("got %q, want %q", msg.Content[0].Text, "Made it.")
		}
		done <- err
	}()
	<-entered
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	close(release)
	if err := <-done; err != nil {
		t.Errorf("request in flight during Close: %v", err)
	}
	<-closed
	if _, err := client.Beta.Messages.New(t.Context(), question("Hi"), option.WithMaxRetries(0)); err == nil {
		t.Error("request after Close succeeded, want an error")
	}
}

func TestCloseEndsSlowStream(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(nil, toolruntest.Script(toolruntest.Reply{
		Content: []toolruntest.Block{toolruntest.Text("Never")},
		Fault:   toolruntest.Fault{EventDelay: time.Hour},
	}))
	client := s.Client()
	stream := client.Beta.Messages.NewStreaming(t.Context(), question("Hi"))
	defer stream.Close()
	s.Close() // must not wait for an hour
	for stream.Next() {
	}
	if err := stream.Err(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("got stream error %v, want io.ErrUnexpectedEOF", err)
	}
	s.Close() // a second Close is harmless
}

func TestRequestsAreCopies(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(nil, toolruntest.Script(toolruntest.Message(toolruntest.Text("Hi"))))
	defer s.Close()
	client := s.Client()
	if _, err := client.Beta.Messages.New(t.Context(), question("Hi")); err != nil {
		t.Fatal(err)
	}
	s.Requests()[0].Status = 999
	if got := s.Requests()[0].Status; got != http.StatusOK {
		t.Errorf("got Status %d after changing a copy, want 200", got)
	}
	if !bytes.Contains(s.Requests()[0].Body, []byte(`"max_tokens":1024`)) {
		t.Errorf("got body %s, want the raw request body", s.Requests()[0].Body)
	}
}

func TestToolUsePanics(t *testing.T) {
	defer func() {
		r := recover()
		if msg, ok := r.(string); !ok || !strings.HasPrefix(msg, "toolruntest: ") {
			t.Errorf("got panic %v, want one prefixed with toolruntest: ", r)
		}
	}()
	toolruntest.ToolUse("toolu_01", "t", make(chan int))
}

func TestResultText(t *testing.T) {
	tests := []struct {
		name  string
		block toolruntest.Block
		want  string
	}{
		{"string", toolruntest.Block{Type: "tool_result", Content: json.RawMessage(`"42"`)}, "42"},
		{"blocks", toolruntest.Block{Type: "tool_result", Content: json.RawMessage(`[{"type":"text","text":"4"},{"type":"image","source":{}},{"type":"text","text":"2"}]`)}, "42"},
		{"no content", toolruntest.Block{Type: "tool_result"}, ""},
		{"text block", toolruntest.Text("plain"), "plain"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.block.ResultText(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// BenchmarkServer measures a round trip through the SDK client and the
// server, with many runs in flight at once.
func BenchmarkServer(b *testing.B) {
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("stream=%t", stream), func(b *testing.B) {
			s := toolruntest.New(nil, toolruntest.Options{Func: func(*toolruntest.Request) toolruntest.Reply {
				return toolruntest.Message(
					toolruntest.Text("Checking."),
					toolruntest.ToolUse("toolu_01", "get_weather", map[string]string{"city": "Paris"}),
				)
			}})
			defer s.Close()
			client := s.Client()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if stream {
						st := client.Beta.Messages.NewStreaming(b.Context(), question("Weather in Paris?"))
						for st.Next() {
						}
						if err := st.Err(); err != nil {
							b.Error(err)
						}
						st.Close()
					} else if _, err := client.Beta.Messages.New(b.Context(), question("Weather in Paris?")); err != nil {
						b.Error(err)
					}
				}
			})
		})
	}
}
