package toolruntest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/toolruntest"
)

// TestBindThinking checks the server's thinking block binding: a thinking
// block sent back behind the conversation it was made in passes, and one
// behind a changed conversation (an earlier message, the system prompt,
// the tools) or never sent fails with HTTP 400, or is dropped with
// prefix_mismatch_behavior drop_block. A moved cache breakpoint and a
// string written as a text block change nothing.
func TestBindThinking(t *testing.T) {
	t.Parallel()
	const (
		first   = `{"role":"user","content":"Weather in Paris?"}`
		reply   = `{"role":"assistant","content":[{"type":"thinking","thinking":"Call the tool.","signature":"sig_1"},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]}`
		result  = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"}]}`
		tools   = `"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]`
		system  = `"system":"Be brief."`
		drop    = `"thinking":{"type":"enabled","budget_tokens":1024,"block_binding":{"prefix_mismatch_behavior":"drop_block"}}`
		enabled = `"thinking":{"type":"enabled","budget_tokens":1024}`
	)
	body := func(messages string, extra ...string) string {
		fields := append([]string{`"model":"claude-sonnet-4-5"`, `"max_tokens":2048`, `"messages":[` + messages + `]`}, extra...)
		return "{" + strings.Join(fields, ",") + "}"
	}
	tests := []struct {
		name        string
		second      string
		wantStatus  int
		wantDropped []string
	}{
		{"unchanged", body(first+","+reply+","+result, system, tools, enabled), 200, nil},
		{"cache breakpoint and text block", body(`{"role":"user","content":[{"type":"text","text":"Weather in Paris?","cache_control":{"type":"ephemeral"}}]},`+reply+","+result,
			`"system":[{"type":"text","text":"Be brief."}]`, tools, enabled), 200, nil},
		{"earlier message changed", body(`{"role":"user","content":"Weather in Rome?"},`+reply+","+result, system, tools, enabled), 400, nil},
		{"system changed", body(first+","+reply+","+result, `"system":"Be long."`, tools, enabled), 400, nil},
		{"tools changed", body(first+","+reply+","+result, system, `"tools":[]`, enabled), 400, nil},
		{"unknown block", body(first+","+strings.ReplaceAll(reply, "sig_1", "sig_9")+","+result, system, tools, enabled), 400, nil},
		{"earlier message changed, drop", body(`{"role":"user","content":"Weather in Rome?"},`+reply+","+result, system, tools, drop), 200, []string{"messages.1.content.0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := toolruntest.Script(
				toolruntest.Message(toolruntest.Thinking("Call the tool.", "sig_1"), toolruntest.ToolUse("toolu_1", "get_weather", map[string]any{"city": "Paris"})),
				toolruntest.Message(toolruntest.Text("Sunny.")),
			)
			opts.BindThinking = true
			s := toolruntest.New(nil, opts)
			defer s.Close()
			for i, b := range []string{body(first, system, tools, enabled), tc.second} {
				res, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(b))
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				want := 200
				if i == 1 {
					want = tc.wantStatus
				}
				if res.StatusCode != want {
					t.Fatalf("request %d: got status %d, want %d; errors: %v", i+1, res.StatusCode, want, s.Errors())
				}
			}
			if diff := cmp.Diff(s.Requests()[1].DroppedThinking, tc.wantDropped); diff != "" {
				t.Errorf("DroppedThinking (-got +want):\n%s", diff)
			}
		})
	}
}
