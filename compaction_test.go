package toolrun_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestClientSideCompaction covers the pitfalls of the client-side
// compaction of other SDKs: the summary request carries the whole history
// including the latest turn and its results (nothing left out, no tool_use
// split from its tool_result), the history afterwards is valid, and the run
// does not compact again straight after compacting.
func TestClientSideCompaction(t *testing.T) {
	var summaryRequests []*toolruntest.Request
	s := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		msgs := req.Conversation
		last := msgs[len(msgs)-1]
		if last.Role == "user" && len(last.Content) == 1 && strings.HasPrefix(last.Content[0].Text, "Summarize the conversation") {
			summaryRequests = append(summaryRequests, req)
			return toolruntest.Message(toolruntest.Text("Checked Oslo twice; both sunny."))
		}
		n := 0
		for _, m := range msgs {
			for _, b := range m.Content {
				if b.Type == "tool_result" {
					n++
				}
			}
		}
		if strings.Contains(msgs[0].Content[0].Text, "compacted") || n >= 4 {
			return toolruntest.Message(toolruntest.Text("done"))
		}
		r := toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", len(msgs)), "get_weather", map[string]any{"city": "Oslo"}))
		r.Usage = &toolruntest.Usage{InputTokens: int64(1000 * len(msgs)), OutputTokens: 10}
		return r
	}})
	var calls counter
	var compactions []toolrun.Compacted
	r := toolrun.New(client(s), userParams("weather twice"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
		Logger:     discard(),
		Compaction: toolrun.Compaction{Threshold: 3000, ClientSide: true},
		OnEvent: func(ctx context.Context, e toolrun.Event) {
			if c, ok := e.(toolrun.Compacted); ok {
				compactions = append(compactions, c)
			}
		},
	})
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != toolrun.StopEndTurn || res.Text() != "done" {
		t.Fatalf("Run = %q %q, want end_turn done", res.StopReason, res.Text())
	}
	if len(compactions) != 1 || len(summaryRequests) != 1 {
		t.Fatalf("compacted %d times with %d summary requests, want once", len(compactions), len(summaryRequests))
	}
	// The summary request saw the whole history: the user's question, both
	// tool turns with their results, then the request for a summary.
	got := roles(summaryRequests[0])
	want := []string{"user:text", "assistant:tool_use", "user:tool_result", "assistant:tool_use", "user:tool_result", "user:text"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summary request history (-want +got):\n%s", diff)
	}
	c := compactions[0]
	if c.Before != 5 || c.After != 1 || c.InputTokens != 3000 || !c.ClientSide || c.Summary != "Checked Oslo twice; both sunny." {
		t.Errorf("Compacted = %+v", c)
	}
	reqs := s.Requests()
	after := reqs[len(reqs)-1]
	if len(after.Conversation) != 1 || !strings.Contains(after.Conversation[0].Content[0].Text, "Checked Oslo twice") {
		t.Errorf("request after compaction = %v, want the summary alone", roles(after))
	}
	checkHistory(t, res.Messages)
	if res.Turns != 3 {
		t.Errorf("Turns = %d, want 3 (the compaction is not a turn)", res.Turns)
	}
}

// TestServerSideCompaction: with the default (server-side) compaction the
// runner sends the compaction param with the beta, the history becomes the
// compaction block the API returned, and the run goes on from it.
func TestServerSideCompaction(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		msgs := req.Conversation
		if msgs[0].Role == "assistant" { // after the compaction
			return toolruntest.Message(toolruntest.Text("done"))
		}
		r := toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", len(msgs)), "get_weather", map[string]any{"city": "Oslo"}))
		r.Usage = &toolruntest.Usage{InputTokens: int64(1000 * len(msgs)), OutputTokens: 10}
		return r
	}})
	var calls counter
	var compactions []toolrun.Compacted
	res, err := toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
		Logger:     discard(),
		Compaction: toolrun.Compaction{Threshold: 3000, Instructions: "Keep the cities."},
		OnEvent: func(ctx context.Context, e toolrun.Event) {
			if c, ok := e.(toolrun.Compacted); ok {
				compactions = append(compactions, c)
			}
		},
	}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != toolrun.StopEndTurn || len(compactions) != 1 || compactions[0].ClientSide || compactions[0].Summary == "" {
		t.Fatalf("stop %q with compactions %+v, want end_turn after one server-side compaction", res.StopReason, compactions)
	}
	var compactReq, after *toolruntest.Request
	for i, r := range s.Requests() {
		if _, ok := r.Params.Raw["compaction"]; ok {
			compactReq, after = r, s.Requests()[i+1]
		}
	}
	if compactReq == nil {
		t.Fatal("no request carried the compaction param")
	}
	if got := compactReq.Header.Get("anthropic-beta"); !strings.Contains(got, "compact-2026-09-04") {
		t.Errorf("anthropic-beta = %q, want the compaction beta", got)
	}
	if got := string(compactReq.Params.Raw["compaction"]); !strings.Contains(got, "Keep the cities.") {
		t.Errorf("compaction = %s, want the instructions", got)
	}
	if diff := cmp.Diff([]string{"assistant:compaction"}, roles(after)); diff != "" {
		t.Errorf("history after compaction (-want +got):\n%s", diff)
	}
	if calls.get("get_weather") != 2 {
		t.Errorf("tool ran %d times, want 2", calls.get("get_weather"))
	}
}

// TestCompactionLowThreshold: a threshold below what the compacted history
// itself takes compacts once, not on every turn.
func TestCompactionLowThreshold(t *testing.T) {
	summaries, turns := 0, 0
	s := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		msgs := req.Conversation
		last := msgs[len(msgs)-1]
		if last.Role == "user" && len(last.Content) == 1 && strings.HasPrefix(last.Content[0].Text, "Summarize the conversation") {
			summaries++
			return toolruntest.Message(toolruntest.Text("Still checking Oslo."))
		}
		turns++
		var r toolruntest.Reply
		if turns >= 6 {
			r = toolruntest.Message(toolruntest.Text("done"))
		} else {
			r = toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", turns), "get_weather", map[string]any{"city": "Oslo"}))
		}
		r.Usage = &toolruntest.Usage{InputTokens: 1000, OutputTokens: 10}
		return r
	}})
	var calls counter
	res, err := toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
		Logger: discard(), MaxTurns: 20, Compaction: toolrun.Compaction{Threshold: 10, ClientSide: true},
	}).Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
	}
	if summaries != 1 {
		t.Errorf("compacted %d times over %d turns, want once: the input never grew after the compaction", summaries, res.Turns)
	}
	checkHistory(t, res.Messages)
}
