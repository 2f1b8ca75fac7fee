package toolrun_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/toolrun/toolrun"
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
