//go:build review5

package toolrun_test

import (
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestReview5TurnCompactedByTheAPIBudgeted checks the budget check of a
// request that the API may compact on its way (context_management's
// compact_20260112, which Options leave to the caller's params): such a
// request is billed for the compaction (usage.iterations, which the run now
// counts) on top of the turn, but the check before it bounds only the
// turn (its input, and max_tokens of output). A turn that writes its whole
// max_tokens after the API compacted the history is billed past a
// Budget.OutputTokens the check admitted it under, though the docs say
// every request is checked first and the checks assume the worst.
func TestReview5TurnCompactedByTheAPIBudgeted(t *testing.T) {
	p := userParams(strings.Repeat("a", 200_000)) // over the edit's least trigger, 50,000 tokens
	p.MaxTokens = 1024
	p.Betas = []anthropic.AnthropicBeta{anthropic.AnthropicBetaCompact2026_01_12}
	p.ContextManagement = anthropic.BetaContextManagementConfigParam{Edits: []anthropic.BetaContextManagementConfigEditUnionParam{
		{OfCompact20260112: &anthropic.BetaCompact20260112EditParam{Trigger: anthropic.BetaInputTokensTriggerParam{Value: 50_000}}},
	}}
	long := toolruntest.Message(toolruntest.Text("The report..."))
	long.StopReason = "max_tokens"
	long.Usage = &toolruntest.Usage{InputTokens: 200, OutputTokens: 1024} // the turn writes its whole max_tokens
	s := toolruntest.New(t, toolruntest.Script(long))

	budget := toolrun.Budget{OutputTokens: 1024} // admits one turn's max_tokens
	res, err := toolrun.New(client(s), p, nil, &toolrun.Options{Logger: discard(), Budget: budget}).Run(t.Context())
	if len(s.Requests()) == 0 {
		t.Fatalf("Run = %q, %v: nothing sent; the test wants the request admitted", res.StopReason, err)
	}
	if its := s.Requests()[0].Usage; its == nil {
		t.Fatal("the server recorded no usage")
	}
	if billed := s.Usage().OutputTokens; billed > budget.OutputTokens {
		t.Errorf("the server billed %d output tokens (the compaction's summary and the turn), past Budget.OutputTokens %d; Run = %q, %v, counted %d",
			billed, budget.OutputTokens, res.StopReason, err, res.Usage.OutputTokens)
	}
}
