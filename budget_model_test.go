package toolrun_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/pricing"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestCostBudgetRenamedModel: a gateway that names a model toolrun cannot
// price in its responses (the request names a priced one) leaves the cost
// budget on: the responses are priced as the request's model, and the run
// stops at the budget with the cost complete, instead of running on
// unbilled.
func TestCostBudgetRenamedModel(t *testing.T) {
	echo := toolrun.NewTool("echo", "Echo", func(ctx context.Context, in echoIn) (string, error) { return in.S, nil })
	var replies []toolruntest.Reply
	for i := range 10 {
		r := toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("toolu_%d", i), "echo", map[string]string{"s": "x"}))
		r.Model = "gateway-renamed-model"
		r.Usage = &toolruntest.Usage{InputTokens: 100_000, OutputTokens: 4_000} // $0.36 at claude-sonnet's price
		replies = append(replies, r)
	}
	srv := toolruntest.New(t, toolruntest.Script(replies...))
	params := userParams("go")
	params.Model = "claude-sonnet-4-5"
	params.MaxTokens = 4_000
	log, logs := newLogger()
	r := toolrun.New(client(srv), params, []toolrun.Tool{echo}, &toolrun.Options{Logger: log, Budget: toolrun.Budget{CostUSD: 1}})
	res, err := r.Run(context.Background())
	if !errors.Is(err, toolrun.ErrBudget) {
		t.Fatalf("got error %v, want ErrBudget", err)
	}
	if res.Budget != toolrun.BudgetCostUSD {
		t.Errorf("got budget %q, want %q", res.Budget, toolrun.BudgetCostUSD)
	}
	if !res.CostComplete || res.CostUSD > 1 || res.CostUSD < 0.7 {
		t.Errorf("got cost $%.4f (complete %v), want at most $1 and at least $0.70, complete", res.CostUSD, res.CostComplete)
	}
	if res.Turns != 2 {
		t.Errorf("got %d turns, want 2", res.Turns)
	}
	rec := logs.find(t, "toolrun: no price for the response's model; its responses are priced as the request's model")
	if rec["model"] != "gateway-renamed-model" || rec["request_model"] != "claude-sonnet-4-5" {
		t.Errorf("got log record %v, want the two models named", rec)
	}
}

// TestUsageCostUSD: a usage read back later is priced as the runner priced
// it while it ran (the same run's Result.CostUSD), by the longest prefix
// of the model's name with a platform's wrapping taken off, from the
// caller's prices before pricing.Default; a model neither table prices is
// said to have none.
func TestUsageCostUSD(t *testing.T) {
	var replies []toolruntest.Reply
	for i := range 3 {
		r := toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("toolu_%d", i), "echo", map[string]string{"s": "x"}))
		r.Usage = &toolruntest.Usage{InputTokens: 1_000 * int64(i+1), OutputTokens: 200, CacheCreationInputTokens: 300, CacheReadInputTokens: 4_000}
		replies = append(replies, r)
	}
	replies = append(replies, toolruntest.Message(toolruntest.Text("done")))
	echo := toolrun.NewTool("echo", "Echo", func(ctx context.Context, in echoIn) (string, error) { return in.S, nil })
	params := userParams("go")
	params.Model = "claude-sonnet-4-5"
	res, err := toolrun.New(client(toolruntest.New(t, toolruntest.Script(replies...))), params, []toolrun.Tool{echo}, nil).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := res.Usage.CostUSD(params.Model, nil)
	if !ok || math.Abs(got-res.CostUSD) > 1e-12 || res.CostUSD == 0 {
		t.Errorf("Usage.CostUSD = $%v (%v), want the run's Result.CostUSD $%v", got, ok, res.CostUSD)
	}

	u := toolrun.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000, CacheCreationInputTokens: 1_000_000, CacheReadInputTokens: 1_000_000, UnreportedOutputTokens: 5_000_000}
	tests := []struct {
		model  string
		prices map[string]pricing.Price
		want   float64
		ok     bool
	}{
		{"claude-sonnet-4-5", nil, 3 + 15 + 3.75 + 0.3, true},
		{"us.anthropic.claude-haiku-4-5-20251001-v1:0", nil, 1 + 5 + 1.25 + 0.1, true},
		{"claude-opus-4-1@20250805", nil, 15 + 75 + 18.75 + 1.5, true},
		{"claude-sonnet-4-5", map[string]pricing.Price{"claude-sonnet-4": {InputPerMTok: 1, OutputPerMTok: 2, CacheWrite5mPerMTok: 3, CacheReadPerMTok: 4}}, 10, true},
		{"gateway-model", nil, 0, false},
	}
	for _, tt := range tests {
		got, ok := u.CostUSD(tt.model, tt.prices)
		if ok != tt.ok || math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("CostUSD(%q) = $%v, %v; want $%v, %v", tt.model, got, ok, tt.want, tt.ok)
		}
	}
}
