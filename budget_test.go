package toolrun_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// loopServer calls get_weather on every turn, with usage set by hand so the
// budgets below can be computed: each response reports 1,000 input tokens
// (600 uncached, 300 read from the cache, 100 written to it) and 50 output.
func loopServer(t *testing.T) *toolruntest.Server {
	return toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		r := toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", len(req.Conversation)), "get_weather", map[string]any{"city": "Oslo"}))
		r.Usage = &toolruntest.Usage{InputTokens: 600, CacheReadInputTokens: 300, CacheCreationInputTokens: 100, OutputTokens: 50}
		return r
	}})
}

func TestBudgets(t *testing.T) {
	tests := []struct {
		name       string
		budget     toolrun.Budget
		maxTokens  int64
		wantBudget toolrun.BudgetKind
		wantTurns  int
	}{
		// Each request has ~1,000 input tokens: after 3 turns 3,000 are used
		// and the 4th would pass 3,500.
		{"input tokens", toolrun.Budget{InputTokens: 3500}, 100, "input_tokens", 3},
		// max_tokens 100 per request: 3 turns use 150, a 4th could reach 250.
		{"output tokens", toolrun.Budget{OutputTokens: 240}, 100, "output_tokens", 3},
		// claude-sonnet: $3/$15 per MTok; a turn costs 600×3 + 100×3.75 +
		// 300×0.3 + 50×15 = 3015 µ$; the next request may cost up to
		// (1000+Δ)×3 + 100×15 µ$ ≈ 4.7 m$: after 2 turns 6.0 + 4.7 < 12,
		// after 3 turns 9.0 + 4.7 > 12.
		{"cost", toolrun.Budget{CostUSD: 0.012}, 100, "cost_usd", 3},
		{"tool calls", toolrun.Budget{ToolCalls: 2}, 100, "tool_calls", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := loopServer(t)
			var calls counter
			params := userParams("go")
			params.Model = "claude-sonnet-5-5"
			params.MaxTokens = tt.maxTokens
			log, logs := newLogger()
			res, err := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
				Logger: log, Budget: tt.budget, MaxTurns: -1,
			}).Run(t.Context())
			if !errors.Is(err, toolrun.ErrBudget) {
				t.Fatalf("got error %v, want one wrapping ErrBudget", err)
			}
			if res.StopReason != toolrun.StopBudget || res.Budget != tt.wantBudget || res.Turns != tt.wantTurns {
				t.Errorf("stop = %q (%q) after %d turns, want budget (%q) after %d; detail %q",
					res.StopReason, res.Budget, res.Turns, tt.wantBudget, tt.wantTurns, res.Detail)
			}
			if rec := logs.find(t, "toolrun: run stopped"); rec == nil || rec["level"] != "WARN" {
				t.Errorf("run stopped record = %v, want a warning", rec)
			}
			checkHistory(t, res.Messages)
		})
	}
}

func TestCostIsPriced(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Reply{
		Content: []toolruntest.Block{toolruntest.Text("hi")},
		Usage:   &toolruntest.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000, CacheReadInputTokens: 1_000_000, CacheCreationInputTokens: 1_000_000},
	}))
	params := userParams("go")
	params.Model = "claude-custom-1"
	res, err := toolrun.New(client(s), params, nil, &toolrun.Options{
		Budget: toolrun.Budget{Prices: map[string]toolrun.Price{"claude-custom": {InputPerMTok: 2, OutputPerMTok: 10}}},
	}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// 2 + 10 + 0.1×2 (read) + 1.25×2 (5-minute write)
	if want := 14.7; res.CostUSD < want-1e-9 || res.CostUSD > want+1e-9 {
		t.Errorf("CostUSD = %v, want %v", res.CostUSD, want)
	}
}

func TestWallTimeBudget(t *testing.T) {
	s := loopServer(t)
	// The tool outlasts the budget, which is generous enough for the first
	// request on a loaded machine under -race (10 ms was not).
	slow := toolrun.NewTool("get_weather", "", func(ctx context.Context, in weatherIn) (string, error) {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		return "ok", nil
	})
	res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{slow}, &toolrun.Options{
		Logger: discard(), Budget: toolrun.Budget{WallTime: 2 * time.Second}, MaxTurns: 50,
	}).Run(t.Context())
	if !errors.Is(err, toolrun.ErrBudget) {
		t.Fatalf("got error %v, want one wrapping ErrBudget", err)
	}
	// The first request always goes out; the tool then takes longer than
	// the whole budget, so the run stops before the second.
	if res.StopReason != toolrun.StopBudget || res.Budget != "wall_time" || res.Turns != 1 {
		t.Errorf("stop = %q (%q) after %d turns, want wall_time after 1", res.StopReason, res.Budget, res.Turns)
	}
}

func TestCachingByDefault(t *testing.T) {
	tests := []struct {
		name string
		opts toolrun.Options
		want string
	}{
		{"default", toolrun.Options{}, `{"type":"ephemeral"}`},
		{"one hour", toolrun.Options{CacheTTL: "1h"}, `{"ttl":"1h","type":"ephemeral"}`},
		{"off", toolrun.Options{NoCache: true}, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("hi"))))
			if _, err := toolrun.New(client(s), userParams("go"), nil, &tt.opts).Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := string(s.Requests()[0].Params.Raw["cache_control"]); got != tt.want {
				t.Errorf("cache_control = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestResultTruncation(t *testing.T) {
	big := strings.Repeat("é", 100) // 200 bytes
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "big", nil), toolruntest.ToolUse("t2", "unbounded", nil)),
		toolruntest.Message(toolruntest.Text("ok")),
	))
	bigTool := toolrun.NewTool("big", "", func(ctx context.Context, in struct{}) (string, error) { return big, nil })
	unbounded := toolrun.NewTool("unbounded", "", func(ctx context.Context, in struct{}) (string, error) { return big, nil })
	unbounded.MaxResultBytes = -1
	var seen []*toolrun.ToolResult
	_, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{bigTool, unbounded}, &toolrun.Options{
		Logger: discard(), MaxResultBytes: 51, MaxParallelTools: 1,
		AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
			seen = append(seen, r)
			return nil
		},
	}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	results := toolResults(s.Requests()[1])
	got := results[0].ResultText()
	if !strings.HasPrefix(got, strings.Repeat("é", 25)+"[toolrun: this result was truncated from 200 to 51 bytes") {
		t.Errorf("truncated result = %q, want 25 whole runes and a note", got)
	}
	if results[1].ResultText() != big {
		t.Errorf("unbounded result was cut: %q", results[1].ResultText())
	}
	if len(seen) != 2 || seen[0].Content[0].OfText.Text != big || !seen[0].Truncated || seen[1].Truncated {
		t.Errorf("hooks saw %+v, want the whole first result marked Truncated", seen)
	}
}
