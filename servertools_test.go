package toolrun_test

import (
	"bytes"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestServerTools checks a run with a server tool (web_search) in its
// params: the tool is sent with the client's, the server_tool_use blocks
// and their results stay in the history, only the client tool runs, and a
// pause_turn while the server tool works goes on.
func TestServerTools(t *testing.T) {
	for _, noThread := range []bool{false, true} {
		t.Run(map[bool]string{false: "thread", true: "no thread"}[noThread], func(t *testing.T) {
			var calls counter
			search := toolruntest.ServerToolUse("srvtoolu_01", "web_search", map[string]any{"query": "weather Paris"})
			found := toolruntest.ServerToolResult("web_search_tool_result", "srvtoolu_01", []map[string]any{
				{"type": "web_search_result", "url": "https://example.com", "title": "Paris", "encrypted_content": "abc", "page_age": nil},
			})
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Reply{Content: []toolruntest.Block{search}, StopReason: "pause_turn"},
				toolruntest.Message(found, toolruntest.Text("Let me check the forecast too."),
					toolruntest.ToolUse("toolu_01", "get_weather", map[string]any{"city": "Paris"})),
				toolruntest.Message(toolruntest.Text("Sunny.")),
			))
			params := userParams("Weather in Paris?")
			params.Tools = []anthropic.BetaToolUnionParam{{OfWebSearchTool20250305: &anthropic.BetaWebSearchTool20250305Param{}}}
			r := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard(), NoThread: noThread})
			res, err := r.Run(bounded(t))
			if err != nil || res.StopReason != toolrun.StopEndTurn || res.Turns != 3 {
				t.Fatalf("Run = %v, %v; want end_turn after 3 turns", res, err)
			}
			if got := calls.get("get_weather"); got != 1 || res.ToolCalls != 1 {
				t.Errorf("get_weather ran %d times (%d calls), want 1: the server tool is not the client's to run", got, res.ToolCalls)
			}
			checkHistory(t, res.Messages)
			reqs := s.Requests()
			if !bytes.Contains(reqs[0].Body, []byte(`"web_search"`)) || !bytes.Contains(reqs[0].Body, []byte(`"get_weather"`)) {
				t.Errorf("the first request did not send both tools: %s", reqs[0].Body)
			}
			conv, _ := historyJSON(reqs[len(reqs)-1].Conversation)
			for _, want := range []string{`"server_tool_use"`, `"web_search_tool_result"`, `"srvtoolu_01"`} {
				if !bytes.Contains(conv, []byte(want)) {
					t.Errorf("the last request's conversation has no %s: %s", want, conv)
				}
			}
		})
	}
}

// historyJSON is the blocks of a conversation, each its type and its
// JSON as sent, a line each.
func historyJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	for _, m := range v.([]toolruntest.MessageParam) {
		for _, blk := range m.Content {
			b.WriteString(blk.Type)
			b.Write(blk.Raw)
			b.WriteString("\n")
		}
	}
	return b.Bytes(), nil
}
