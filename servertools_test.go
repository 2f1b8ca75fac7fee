package toolrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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

// serverBlocks returns the JSON of each block of conv whose type is one of
// types, decoded, in order.
func serverBlocks(t *testing.T, conv []toolruntest.MessageParam, types ...string) []any {
	t.Helper()
	var out []any
	for _, m := range conv {
		for _, b := range m.Content {
			for _, typ := range types {
				if b.Type != typ {
					continue
				}
				var v any
				if err := json.Unmarshal(b.Raw, &v); err != nil {
					t.Fatalf("block %s: %v", b.Raw, err)
				}
				out = append(out, v)
			}
		}
	}
	return out
}

// TestServerToolsStreamed checks a streamed run whose responses hold a
// server_tool_use (its input streamed in input_json_delta events, as the
// API streams it), a pause_turn while the server tool works, and its
// web_search_tool_result: the run continues after the pause, only the
// client tool runs, and every later request carries the server's blocks
// as the server sent them.
func TestServerToolsStreamed(t *testing.T) {
	for _, noThread := range []bool{false, true} {
		t.Run(map[bool]string{false: "thread", true: "no thread"}[noThread], func(t *testing.T) {
			var calls counter
			search := toolruntest.ServerToolUse("srvtoolu_01", "web_search", map[string]any{"query": "weather Paris", "max_uses": 2})
			found := toolruntest.ServerToolResult("web_search_tool_result", "srvtoolu_01", []map[string]any{
				{"type": "web_search_result", "url": "https://example.com/paris", "title": "Paris – météo", "encrypted_content": "Zm9v", "page_age": "2 days"},
			})
			first := toolruntest.Reply{Content: []toolruntest.Block{toolruntest.Text("Searching."), search}, StopReason: "pause_turn"}
			s := toolruntest.New(t, toolruntest.Script(
				first,
				toolruntest.Message(found, toolruntest.Text("And the forecast:"),
					toolruntest.ToolUse("toolu_01", "get_weather", map[string]any{"city": "Paris"})),
				toolruntest.Message(toolruntest.Text("Sunny.")),
			))
			params := userParams("Weather in Paris?")
			params.Tools = []anthropic.BetaToolUnionParam{{OfWebSearchTool20250305: &anthropic.BetaWebSearchTool20250305Param{}}}
			r := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&calls)},
				&toolrun.Options{Logger: discard(), Stream: true, NoThread: noThread})
			res, err := r.Run(bounded(t))
			if err != nil || res.StopReason != toolrun.StopEndTurn || res.Turns != 3 {
				t.Fatalf("Run = %v, %v; want end_turn after 3 turns", res, err)
			}
			if got := calls.get("get_weather"); got != 1 || res.ToolCalls != 1 {
				t.Errorf("get_weather ran %d times (%d calls), want 1", got, res.ToolCalls)
			}
			checkHistory(t, res.Messages)
			var want []any
			for _, b := range []toolruntest.Block{search, found} {
				var v any
				if err := json.Unmarshal(b.Raw, &v); err != nil {
					t.Fatal(err)
				}
				want = append(want, v)
			}
			reqs := s.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want 3", len(reqs))
			}
			for i, req := range reqs {
				if !req.Stream {
					t.Errorf("request %d was not streamed", i+1)
				}
			}
			conv := func(i int) []toolruntest.MessageParam { return reqs[i].Conversation }
			// The request after the pause continues with the server_tool_use as
			// streamed, its input whole; the last carries both blocks.
			if diff := cmp.Diff(want[:1], serverBlocks(t, conv(1), "server_tool_use", "web_search_tool_result")); diff != "" {
				t.Errorf("the request after pause_turn, server blocks (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, serverBlocks(t, conv(2), "server_tool_use", "web_search_tool_result")); diff != "" {
				t.Errorf("the last request, server blocks (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, historyBlocks(t, res.Messages, "server_tool_use", "web_search_tool_result")); diff != "" {
				t.Errorf("the run's history, server blocks (-want +got):\n%s", diff)
			}
		})
	}
}

// historyBlocks returns the JSON of each block of msgs whose type is one of
// types, as the runner would send it, decoded, in order.
func historyBlocks(t *testing.T, msgs []anthropic.BetaMessageParam, types ...string) []any {
	t.Helper()
	raw, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var decoded []struct{ Content []map[string]any }
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatal(err)
	}
	var out []any
	for _, m := range decoded {
		for _, b := range m.Content {
			for _, typ := range types {
				if b["type"] == typ {
					out = append(out, b)
				}
			}
		}
	}
	return out
}

// TestServerToolsAcrossCompaction checks that server tool blocks and the
// container survive a compaction, client-side and server-side: the
// compaction's request and every request after it pass toolruntest's
// checks of what the API accepts, the summary request holds the server's
// blocks as sent, and the container a response reported goes out on every
// later request, the compaction's included.
func TestServerToolsAcrossCompaction(t *testing.T) {
	for _, clientSide := range []bool{true, false} {
		t.Run(map[bool]string{true: "client-side", false: "server-side"}[clientSide], func(t *testing.T) {
			search := toolruntest.ServerToolUse("srvtoolu_01", "web_search", map[string]any{"query": "weather Oslo"})
			found := toolruntest.ServerToolResult("web_search_tool_result", "srvtoolu_01", []map[string]any{
				{"type": "web_search_result", "url": "https://example.com/oslo", "title": "Oslo", "encrypted_content": "YmFy", "page_age": nil},
			})
			var summaryReq *toolruntest.Request
			s := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
				msgs := req.Conversation
				last := msgs[len(msgs)-1]
				switch {
				case last.Role == "user" && len(last.Content) == 1 && strings.HasPrefix(last.Content[0].Text, "Summarize the conversation"):
					summaryReq = req
					return toolruntest.Message(toolruntest.Text("Searched Oslo's weather; sunny."))
				case len(msgs) == 1 && msgs[0].Role == "user" && !strings.Contains(msgs[0].Content[0].Text, "compacted"):
					r := toolruntest.Message(search, found, toolruntest.ToolUse("toolu_01", "get_weather", map[string]any{"city": "Oslo"}))
					r.Container = "container_0c"
					r.Usage = &toolruntest.Usage{InputTokens: 5000, OutputTokens: 10}
					return r
				}
				return toolruntest.Message(toolruntest.Text("done"))
			}})
			var calls counter
			var compactions int
			params := userParams("Weather in Oslo?")
			params.Tools = []anthropic.BetaToolUnionParam{{OfWebSearchTool20250305: &anthropic.BetaWebSearchTool20250305Param{}}}
			res, err := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
				Logger:     discard(),
				Compaction: toolrun.Compaction{Threshold: 3000, ClientSide: clientSide},
				OnEvent: func(ctx context.Context, e toolrun.Event) {
					if _, ok := e.(toolrun.Compacted); ok {
						compactions++
					}
				},
			}).Run(bounded(t))
			if err != nil || res.StopReason != toolrun.StopEndTurn || res.Text() != "done" {
				t.Fatalf("Run = %v, %v; want end_turn done", res, err)
			}
			if compactions != 1 || calls.get("get_weather") != 1 {
				t.Fatalf("%d compactions, get_weather ran %d times; want 1 and 1", compactions, calls.get("get_weather"))
			}
			checkHistory(t, res.Messages)
			reqs := s.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want 3: the turn, the compaction, the turn after", len(reqs))
			}
			var containers []string
			for i, req := range reqs {
				if req.Status != 200 {
					t.Errorf("request %d answered %d, want 200: %s", i+1, req.Status, req.Body)
				}
				containers = append(containers, sentContainer(t, req))
			}
			if diff := cmp.Diff([]string{"", "container_0c", "container_0c"}, containers); diff != "" {
				t.Errorf("containers sent (-want +got):\n%s", diff)
			}
			if clientSide {
				if summaryReq == nil {
					t.Fatal("no summary request")
				}
				var want []any
				for _, b := range []toolruntest.Block{search, found} {
					var v any
					if err := json.Unmarshal(b.Raw, &v); err != nil {
						t.Fatal(err)
					}
					want = append(want, v)
				}
				if diff := cmp.Diff(want, serverBlocks(t, summaryReq.Conversation, "server_tool_use", "web_search_tool_result")); diff != "" {
					t.Errorf("the summary request's server blocks (-want +got):\n%s", diff)
				}
			} else if _, ok := reqs[1].Params.Raw["compaction"]; !ok {
				t.Errorf("the second request is not the compaction's: %s", reqs[1].Body)
			}
		})
	}
}
