package toolrun_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/pricing"
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
		// (1000+Δ)×3.75 (all its input written to the cache, at the
		// 5-minute TTL of the runner's breakpoint) + 100×15 µ$ ≈ 6.1 m$:
		// after 2 turns 6.0 + 6.1 < 13.5, after 3 turns 9.0 + 6.1 > 13.5.
		{"cost", toolrun.Budget{CostUSD: 0.0135}, 100, "cost_usd", 3},
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
		Budget: toolrun.Budget{Prices: map[string]pricing.Price{"claude-custom": {InputPerMTok: 2, OutputPerMTok: 10}}},
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

// TestCostBudgetPricesCacheWrites checks that the cost check prices the
// next request's input at the dearest rate it can be billed at: a cache
// write at the longest TTL of its breakpoints (the runner's own, with
// Options.CacheTTL, or one a block carries), else plain input. Each reply
// bills a token per byte of the request body (the worst case the check
// assumes), all of it at the rate named; the budget admits the request at
// the rate the check should use or not, and Result.CostUSD never passes
// Budget.CostUSD.
func TestCostBudgetPricesCacheWrites(t *testing.T) {
	type billing int
	const (
		plain billing = iota
		write5m
		write1h
	)
	tests := []struct {
		name     string
		opts     toolrun.Options
		system   anthropic.BetaCacheControlEphemeralTTL // a breakpoint of this TTL on the system prompt, if set
		bill     billing
		perMTok  float64 // the budget, in $ per million bytes of the request
		wantSent bool
	}{
		// claude-sonnet: $3 input, $3.75 5-minute write, $6 1-hour write.
		{name: "1-hour TTL over budget", opts: toolrun.Options{CacheTTL: "1h"}, bill: write1h, perMTok: 4},
		{name: "1-hour TTL within budget", opts: toolrun.Options{CacheTTL: "1h"}, bill: write1h, perMTok: 7, wantSent: true},
		{name: "5-minute TTL over budget", bill: write5m, perMTok: 3.5},
		{name: "1-hour breakpoint in a block, caching off", opts: toolrun.Options{NoCache: true}, system: "1h", bill: write1h, perMTok: 4},
		{name: "caching off", opts: toolrun.Options{NoCache: true}, bill: plain, perMTok: 3.5, wantSent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := userParams("Summarise this: " + strings.Repeat("lorem ipsum dolor sit amet ", 200))
			p.Model = "claude-sonnet-4-5"
			p.MaxTokens = 16
			if tt.system != "" {
				p.System = []anthropic.BetaTextBlockParam{{Text: "You summarise.", CacheControl: anthropic.BetaCacheControlEphemeralParam{TTL: tt.system}}}
			}
			reply := func(req *toolruntest.Request) toolruntest.Reply {
				n := int64(len(req.Body)) // a token a byte: the check's own worst case
				r := toolruntest.Message(toolruntest.Text("done"))
				switch tt.bill {
				case plain:
					r.Usage = &toolruntest.Usage{InputTokens: n, OutputTokens: 1}
				case write5m:
					r.Usage = &toolruntest.Usage{CacheCreationInputTokens: n, OutputTokens: 1}
				case write1h:
					r.Usage = &toolruntest.Usage{CacheCreationInputTokens: n, CacheCreation1hInputTokens: n, OutputTokens: 1}
				}
				return r
			}
			opts := func(b toolrun.Budget) *toolrun.Options {
				o := tt.opts
				o.Logger, o.Budget = discard(), b
				return &o
			}
			// The size of the request, as sent.
			probe := toolruntest.New(t, toolruntest.Options{Func: reply})
			if _, err := toolrun.New(client(probe), p, nil, opts(toolrun.Budget{})).Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			budget := tt.perMTok * float64(len(probe.Requests()[0].Body)) / 1e6

			s := toolruntest.New(t, toolruntest.Options{Func: reply})
			res, err := toolrun.New(client(s), p, nil, opts(toolrun.Budget{CostUSD: budget})).Run(t.Context())
			if got := len(s.Requests()) > 0; got != tt.wantSent {
				t.Errorf("request sent: %v, want %v (stop %q, %v)", got, tt.wantSent, res.StopReason, err)
			}
			if !tt.wantSent && (res.StopReason != toolrun.StopBudget || res.Budget != toolrun.BudgetCostUSD || !errors.Is(err, toolrun.ErrBudget)) {
				t.Errorf("Run = %q (%q), %v; want a cost_usd budget stop", res.StopReason, res.Budget, err)
			}
			if res.CostUSD > budget {
				t.Errorf("Result.CostUSD = $%.6f past Budget.CostUSD $%.6f (stop %q, %v)", res.CostUSD, budget, res.StopReason, err)
			}
		})
	}
}

// TestStreamRetriesAreBudgeted checks that a streamed response retried
// after a failure mid-stream is accounted and budgeted like any request:
// each failed attempt's usage (the toolruntest server bills a message a
// fault cut short, as the API does a stream it began) is in Result.Usage,
// retried or not, and each retry is checked against the budget first, so
// the run stops with StopBudget rather than be billed past it.
func TestStreamRetriesAreBudgeted(t *testing.T) {
	p := userParams("Summarise this: " + strings.Repeat("lorem ipsum dolor sit amet ", 200))
	p.MaxTokens = 64
	done := toolruntest.Message(toolruntest.Text("done"))

	// One clean request: its size and the input the server bills for it.
	probe := toolruntest.New(t, toolruntest.Script(done))
	if _, err := toolrun.New(client(probe), p, nil, &toolrun.Options{Logger: discard(), Stream: true}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	size := int64(len(probe.Requests()[0].Body))
	perRequest := toolruntest.BilledInputTokens(probe.Usage())
	budget := size + size/5 // admits the first request at a token a byte, with room
	manyFails := int(float64(budget)/perRequest) + 1

	tests := []struct {
		name     string
		budget   toolrun.Budget
		fails    int // failed attempts before the good one
		attempts int // Options.StreamRetry.MaxAttempts
		wantStop toolrun.StopReason
	}{
		// Enough retries allowed to bill past the budget: the budget stops
		// them first.
		{name: "retries stopped by the budget", budget: toolrun.Budget{InputTokens: budget}, fails: manyFails, attempts: manyFails + 1, wantStop: toolrun.StopBudget},
		// The last attempt fails and is not retried: it is counted too.
		{name: "attempts used up", fails: 2, attempts: 2, wantStop: toolrun.StopError},
		{name: "retried to the end", fails: 2, attempts: 3, wantStop: toolrun.StopEndTurn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var replies []toolruntest.Reply
			for range tt.fails {
				r := done
				r.Fault.StreamErrorAfter = 3 // after message_start: the stream began
				replies = append(replies, r)
			}
			s := toolruntest.New(t, toolruntest.Script(append(replies, done)...))
			res, err := toolrun.New(client(s), p, nil, &toolrun.Options{
				Logger: discard(), Stream: true,
				StreamRetry: toolrun.RetryPolicy{MaxAttempts: tt.attempts, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
				Budget:      tt.budget,
			}).Run(t.Context())
			billed := s.Usage()
			billedIn := billed.InputTokens + billed.CacheCreationInputTokens + billed.CacheReadInputTokens
			counted := res.Usage.InputTokens + res.Usage.CacheCreationInputTokens + res.Usage.CacheReadInputTokens
			if res.StopReason != tt.wantStop {
				t.Errorf("Run = %q (%q), %v after %d requests; want %q", res.StopReason, res.Budget, err, len(s.Requests()), tt.wantStop)
			}
			if tt.wantStop == toolrun.StopBudget && (res.Budget != toolrun.BudgetInputTokens || !errors.Is(err, toolrun.ErrBudget)) {
				t.Errorf("Run = %q (%q), %v; want an input_tokens budget stop wrapping ErrBudget", res.StopReason, res.Budget, err)
			}
			if b := tt.budget.InputTokens; b > 0 && billedIn > b {
				t.Errorf("the server billed %d input tokens over %d requests, past Budget.InputTokens %d (stop %q, %v; the run counted %d)",
					billedIn, len(s.Requests()), b, res.StopReason, err, counted)
			}
			if counted != billedIn {
				t.Errorf("Result.Usage counts %d input tokens, the server billed %d over %d requests: failed stream attempts are left out", counted, billedIn, len(s.Requests()))
			}
		})
	}
}

// TestInputBudgetEstimatesReplacedMessages checks the input estimate of a
// request whose history is not the last request's plus new messages: a
// message replaced (by SetMessages, or by a BeforeRequest hook on a later
// request) below the last request's count is estimated, so a request far
// larger than the budget is not sent.
func TestInputBudgetEstimatesReplacedMessages(t *testing.T) {
	const budget = 50_000
	big := anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Read this log: " + strings.Repeat("0123456789abcdef ", 1<<20/17)))
	tests := []struct {
		name string
		run  func(t *testing.T, s *toolruntest.Server) (*toolrun.Result, error)
	}{
		{"SetMessages", func(t *testing.T, s *toolruntest.Server) (*toolrun.Result, error) {
			r := toolrun.New(client(s), userParams("hello"), nil, &toolrun.Options{
				Logger: discard(), MaxTurns: 5, Budget: toolrun.Budget{InputTokens: budget},
			})
			if _, err := r.Next(t.Context()); err != nil {
				t.Fatal(err)
			}
			// Take the turn over: the history is one user message again, a
			// large one.
			r.SetMessages([]anthropic.BetaMessageParam{big})
			return r.Run(t.Context())
		}},
		{"BeforeRequest", func(t *testing.T, s *toolruntest.Server) (*toolrun.Result, error) {
			var calls counter
			return toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
				Logger: discard(), MaxTurns: 5, Budget: toolrun.Budget{InputTokens: budget},
				BeforeRequest: func(ctx context.Context, turn int, params *anthropic.BetaMessageNewParams) error {
					if turn == 2 {
						params.Messages[0] = big // the first message, for this request only
					}
					return nil
				},
			}).Run(t.Context())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
				toolruntest.Message(toolruntest.Text("read it")),
			))
			res, err := tt.run(t, s)
			billed := s.Usage()
			if in := billed.InputTokens + billed.CacheCreationInputTokens + billed.CacheReadInputTokens; in > budget {
				t.Errorf("the server billed %d input tokens, past Budget.InputTokens %d (stop %q, %v): the replaced message was not estimated", in, budget, res.StopReason, err)
			}
			if res.StopReason != toolrun.StopBudget || res.Budget != toolrun.BudgetInputTokens || len(s.Requests()) != 1 {
				t.Errorf("Run = %q (%q), %v after %d requests; want an input_tokens budget stop after 1", res.StopReason, res.Budget, err, len(s.Requests()))
			}
		})
	}
}
