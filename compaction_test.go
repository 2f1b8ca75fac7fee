package toolrun_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/pricing"
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

// billedUsage is the usage the fake server billed, as a toolrun.Usage.
func billedUsage(s *toolruntest.Server) toolrun.Usage {
	b := s.Usage()
	return toolrun.Usage{
		InputTokens:              b.InputTokens,
		OutputTokens:             b.OutputTokens,
		CacheCreationInputTokens: b.CacheCreationInputTokens,
		CacheReadInputTokens:     b.CacheReadInputTokens,
	}
}

// billedCost is what the fake server billed, priced by p.
func billedCost(s *toolruntest.Server, p pricing.Price) float64 {
	b := s.Usage()
	write5m := b.CacheCreationInputTokens - b.CacheCreation1hInputTokens
	return (float64(b.InputTokens)*p.InputPerMTok + float64(write5m)*1.25*p.InputPerMTok +
		float64(b.CacheCreation1hInputTokens)*2*p.InputPerMTok + float64(b.CacheReadInputTokens)*0.1*p.InputPerMTok +
		float64(b.OutputTokens)*p.OutputPerMTok) / 1e6
}

// TestServerSideCompactionIsAccounted: Result.Usage and Result.CostUSD
// are what the API billed, a server-side compaction included, and
// Compacted.Usage is the compaction's cost. The compaction's response has
// a top-level usage of 0: what it cost is in usage.iterations, which the
// runner once left out, so that every budget went on from a total without
// the compaction (hunt finding 4).
func TestServerSideCompactionIsAccounted(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	var calls counter
	var compacted []toolrun.Compacted
	price := pricing.Price{InputPerMTok: 3, OutputPerMTok: 15}
	res, err := toolrun.New(client(s), userParams("weather in Oslo, please, and keep a long note of it for later"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
		Logger:     discard(),
		Compaction: toolrun.Compaction{Threshold: 1},
		Budget:     toolrun.Budget{Prices: map[string]pricing.Price{"claude-test": price}},
		OnEvent: func(ctx context.Context, e toolrun.Event) {
			if c, ok := e.(toolrun.Compacted); ok {
				compacted = append(compacted, c)
			}
		},
	}).Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
	}
	if len(compacted) != 1 || compacted[0].ClientSide {
		t.Fatalf("compactions %+v, want one server-side", compacted)
	}
	if diff := cmp.Diff(billedUsage(s), res.Usage); diff != "" {
		t.Errorf("Result.Usage differs from what the API billed, compaction included (-billed +counted):\n%s", diff)
	}
	if got, want := res.CostUSD, billedCost(s, price); math.Abs(got-want) > 1e-12 || !res.CostComplete {
		t.Errorf("Result.CostUSD = %g (complete %v), want %g, what the API billed", got, res.CostComplete, want)
	}
	var compaction *toolruntest.Request
	for _, r := range s.Requests() {
		if _, ok := r.Params.Raw["compaction"]; ok {
			compaction = r
		}
	}
	if compaction == nil || compaction.Usage == nil {
		t.Fatal("no compaction request, or no usage for it")
	}
	c := *compaction.Usage
	want := toolrun.Usage{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CacheCreationInputTokens: c.CacheCreationInputTokens, CacheReadInputTokens: c.CacheReadInputTokens}
	if got := compacted[0].Usage; got != want || got.OutputTokens == 0 {
		t.Errorf("Compacted.Usage = %+v, want the compaction request's billed usage %+v", got, want)
	}
}

// TestTurnCompactedByTheAPIIsAccounted: a turn that the API compacted on
// its way (context_management's compact_20260112) is billed for the
// compaction and for the turn, in usage.iterations, and its top-level
// usage is the turn's alone: the run's usage and the turn's add the
// compaction once, and the turn's "message" iteration is not counted
// twice.
func TestTurnCompactedByTheAPIIsAccounted(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("Ok"))))
	// Over the edit's least trigger, 50,000 tokens (4 bytes a token).
	p := userParams(strings.Repeat("a", 200_000))
	p.Betas = []anthropic.AnthropicBeta{anthropic.AnthropicBetaCompact2026_01_12}
	p.ContextManagement = anthropic.BetaContextManagementConfigParam{Edits: []anthropic.BetaContextManagementConfigEditUnionParam{
		{OfCompact20260112: &anthropic.BetaCompact20260112EditParam{Trigger: anthropic.BetaInputTokensTriggerParam{Value: 50_000}}},
	}}
	var turns []toolrun.Usage
	res, err := toolrun.New(client(s), p, nil, &toolrun.Options{
		Logger: discard(),
		OnEvent: func(ctx context.Context, e toolrun.Event) {
			if f, ok := e.(toolrun.TurnFinished); ok {
				turns = append(turns, f.Usage)
			}
		},
	}).Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
	}
	if its := res.Message.Usage.Iterations; len(its) != 2 || its[0].Type != "compaction" {
		t.Fatalf("usage %s, want a compaction and a message iteration (the test's premise)", res.Message.Usage.RawJSON())
	}
	billed := billedUsage(s)
	if diff := cmp.Diff(billed, res.Usage); diff != "" {
		t.Errorf("Result.Usage (-billed +counted):\n%s", diff)
	}
	if diff := cmp.Diff([]toolrun.Usage{billed}, turns); diff != "" {
		t.Errorf("TurnFinished.Usage (-billed +counted):\n%s", diff)
	}
}

// TestCompactionWithLargeMaxTokens: with max_tokens above 21,333 (32k or
// 64k are common) a compaction's request is sent as a turn's is, with
// Timeouts.Request: without a timeout of its own the client refuses it
// unstreamed ("streaming is required for operations that may take longer
// than 10 minutes"), and every compaction failed (hunt finding 5).
func TestCompactionWithLargeMaxTokens(t *testing.T) {
	for _, clientSide := range []bool{false, true} {
		t.Run(map[bool]string{false: "server-side", true: "client-side"}[clientSide], func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Options{Func: compactingReplies})
			var calls counter
			p := userParams("weather")
			p.MaxTokens = 64000
			var compacted int
			res, err := toolrun.New(client(s), p, []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
				Logger:     discard(),
				Compaction: toolrun.Compaction{Threshold: 1, ClientSide: clientSide},
				OnEvent: func(ctx context.Context, e toolrun.Event) {
					if _, ok := e.(toolrun.Compacted); ok {
						compacted++
					}
				},
			}).Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn || compacted != 1 {
				t.Fatalf("Run = %q, %v after %d compactions; want end_turn after one", res.StopReason, err, compacted)
			}
		})
	}
}

// compactingReplies answers a run that compacts once: a tool call until
// the history is compacted, then "done"; a client-side compaction's
// summary request gets a summary.
func compactingReplies(req *toolruntest.Request) toolruntest.Reply {
	msgs := req.Conversation
	last := msgs[len(msgs)-1]
	switch {
	case msgs[0].Role == "assistant" || strings.HasPrefix(msgs[0].Content[0].Text, "This conversation was compacted"):
		return toolruntest.Message(toolruntest.Text("done"))
	case last.Role == "user" && len(last.Content) == 1 && strings.HasPrefix(last.Content[0].Text, "Summarize the conversation"):
		return toolruntest.Message(toolruntest.Text("Checked Oslo."))
	}
	return toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", len(msgs)), "get_weather", map[string]any{"city": "Oslo"}))
}

// TestCompactionRequestGoesThroughBeforeRequest: a compaction's request,
// which carries the whole history, goes through Options.BeforeRequest
// (given the turn it comes before) and is announced by a RequestSent and a
// ResponseReceived with Compaction set, as every request is: a secret the
// hook takes out of every request is not sent with it, and observers see
// every request the server gets (hunt finding 6).
func TestCompactionRequestGoesThroughBeforeRequest(t *testing.T) {
	const secret = "hunter2-SECRET"
	for _, clientSide := range []bool{false, true} {
		t.Run(map[bool]string{false: "server-side", true: "client-side"}[clientSide], func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Options{Func: compactingReplies})
			var calls counter
			var hookTurns []int
			redact := func(ctx context.Context, turn int, p *anthropic.BetaMessageNewParams) error {
				hookTurns = append(hookTurns, turn)
				for i, m := range p.Messages {
					if m.OfUser == nil {
						continue
					}
					var blocks []anthropic.BetaContentBlockParamUnion
					for _, b := range m.OfUser.Content {
						if b.OfText != nil && strings.Contains(b.OfText.Text, secret) {
							b = anthropic.NewBetaTextBlock(strings.ReplaceAll(b.OfText.Text, secret, "[redacted]"))
						}
						blocks = append(blocks, b)
					}
					p.Messages[i] = anthropic.NewBetaUserMessage(blocks...)
				}
				return nil
			}
			var events []string
			res, err := toolrun.New(client(s), userParams("weather in Oslo; my password is "+secret), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
				Logger:        discard(),
				Compaction:    toolrun.Compaction{Threshold: 1, ClientSide: clientSide},
				BeforeRequest: redact,
				OnEvent: func(ctx context.Context, e toolrun.Event) {
					switch e := e.(type) {
					case toolrun.RequestSent:
						events = append(events, fmt.Sprintf("request %d compaction=%v", e.Turn, e.Compaction))
					case toolrun.ResponseReceived:
						events = append(events, fmt.Sprintf("response %d compaction=%v", e.Turn, e.Compaction))
					case toolrun.Compacted:
						events = append(events, fmt.Sprintf("compacted %d", e.Turn))
					}
				},
			}).Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
			}
			for i, req := range s.Requests() {
				if strings.Contains(string(req.Body), secret) {
					t.Errorf("request %d of %d sent the secret that BeforeRequest redacts from every request", i+1, len(s.Requests()))
				}
			}
			want := []string{
				"request 1 compaction=false", "response 1 compaction=false",
				"request 2 compaction=true", "response 2 compaction=true", "compacted 1",
				"request 2 compaction=false", "response 2 compaction=false",
			}
			if diff := cmp.Diff(want, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if n := len(s.Requests()); n != 3 {
				t.Errorf("the server got %d requests, want 3, one RequestSent each", n)
			}
			if diff := cmp.Diff([]int{1, 2, 2}, hookTurns); diff != "" {
				t.Errorf("BeforeRequest's turns (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompactionStoppedByBeforeRequest: BeforeRequest stops the run at a
// compaction's request as at a turn's, before it is sent.
func TestCompactionStoppedByBeforeRequest(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Options{Func: compactingReplies})
	var calls counter
	res, err := toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
		Logger:     discard(),
		Compaction: toolrun.Compaction{Threshold: 1},
		BeforeRequest: func(ctx context.Context, turn int, p *anthropic.BetaMessageNewParams) error {
			if p.Compaction.OfSummarize != nil {
				return toolrun.StopRun("no compaction here")
			}
			return nil
		},
	}).Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopHook || res.Detail != "no compaction here" {
		t.Fatalf("Run = %q %q, %v; want a hook stop", res.StopReason, res.Detail, err)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("the server got %d requests, want 1: the compaction's is not sent", n)
	}
}
