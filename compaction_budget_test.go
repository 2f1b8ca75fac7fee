package toolrun_test

import (
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestTurnCompactedByTheAPIBudgeted checks the budget check of a request
// that the API may compact on its way (context_management's
// compact_20260112, which Options leave to the caller's params): such a
// request is billed for the compaction (usage.iterations) on top of the
// turn, so the check counts its max_tokens twice, and its input twice. A
// budget that admits one turn's max_tokens refuses it, before it is sent;
// one that admits two is not billed past; and without the edit, one turn's
// max_tokens is enough.
func TestTurnCompactedByTheAPIBudgeted(t *testing.T) {
	long := toolruntest.Message(toolruntest.Text("The report..."))
	long.StopReason = "max_tokens"
	long.Usage = &toolruntest.Usage{InputTokens: 200, OutputTokens: 1024} // the turn writes its whole max_tokens
	tests := []struct {
		name     string
		compact  bool
		budget   toolrun.Budget
		wantSent int
		wantStop toolrun.StopReason
	}{
		{name: "one max_tokens, compacted", compact: true, budget: toolrun.Budget{OutputTokens: 1024}, wantSent: 0, wantStop: toolrun.StopBudget},
		{name: "two max_tokens, compacted", compact: true, budget: toolrun.Budget{OutputTokens: 2048}, wantSent: 1, wantStop: toolrun.StopMaxTokens},
		{name: "one max_tokens, not compacted", budget: toolrun.Budget{OutputTokens: 1024}, wantSent: 1, wantStop: toolrun.StopMaxTokens},
		// The input: ~50,000 tokens read by the compaction and then,
		// compacted, by the turn; the estimate counts a token a byte.
		{name: "input of one request, compacted", compact: true, budget: toolrun.Budget{InputTokens: 250_000}, wantSent: 0, wantStop: toolrun.StopBudget},
		{name: "input of one request, not compacted", budget: toolrun.Budget{InputTokens: 250_000}, wantSent: 1, wantStop: toolrun.StopMaxTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := userParams(strings.Repeat("a", 200_000)) // over the edit's least trigger, 50,000 tokens
			p.MaxTokens = 1024
			if tt.compact {
				p.Betas = []anthropic.AnthropicBeta{anthropic.AnthropicBetaCompact2026_01_12}
				p.ContextManagement = anthropic.BetaContextManagementConfigParam{Edits: []anthropic.BetaContextManagementConfigEditUnionParam{
					{OfCompact20260112: &anthropic.BetaCompact20260112EditParam{Trigger: anthropic.BetaInputTokensTriggerParam{Value: 50_000}}},
				}}
			}
			s := toolruntest.New(t, toolruntest.Script(long))
			res, err := toolrun.New(client(s), p, nil, &toolrun.Options{Logger: discard(), Budget: tt.budget}).Run(t.Context())
			if len(s.Requests()) != tt.wantSent || res.StopReason != tt.wantStop {
				t.Fatalf("Run = %q, %v (%s) after %d requests; want %q after %d", res.StopReason, err, res.Detail, len(s.Requests()), tt.wantStop, tt.wantSent)
			}
			billed := s.Usage()
			if b := tt.budget.OutputTokens; b > 0 && billed.OutputTokens > b {
				t.Errorf("the server billed %d output tokens (a compaction's summary and the turn), past Budget.OutputTokens %d; counted %d",
					billed.OutputTokens, b, res.Usage.OutputTokens)
			}
			if in := billed.InputTokens + billed.CacheCreationInputTokens + billed.CacheReadInputTokens; tt.budget.InputTokens > 0 && in > tt.budget.InputTokens {
				t.Errorf("the server billed %d input tokens, past Budget.InputTokens %d", in, tt.budget.InputTokens)
			}
		})
	}
}
