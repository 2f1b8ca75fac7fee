package toolrun_test

import (
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/pricing"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestFailedStreamOutputBudgeted checks the output side of the stream-retry
// accounting: a streamed attempt that fails after the model wrote most of
// its answer, but before its message_delta reported the output, may have
// been billed for all of it (the toolruntest server bills it), so the
// budget counts it at its max_tokens and refuses a retry that could then
// pass Budget.OutputTokens; Result.Usage keeps what the API reported
// apart from that bound, and the two together bound the bill.
func TestFailedStreamOutputBudgeted(t *testing.T) {
	answer := toolruntest.Message(toolruntest.Text(strings.Repeat("The report, line by line. ", 140))) // ~900 output tokens
	broken := answer
	broken.Fault.StreamErrorAfter = 6 // after message_start and some deltas: the stream began
	tests := []struct {
		name       string
		budget     toolrun.Budget
		wantStop   toolrun.StopReason
		wantSent   int
		unreported int64 // Result.Usage.UnreportedOutputTokens
	}{
		// Admits one request of max_tokens 1024, not the failed attempt's
		// bound and a retry's.
		{name: "retry refused", budget: toolrun.Budget{OutputTokens: 1100}, wantStop: toolrun.StopBudget, wantSent: 1, unreported: 1023},
		// Admits both: the retry answers, and the bound stays counted.
		{name: "retry admitted", budget: toolrun.Budget{OutputTokens: 2048}, wantStop: toolrun.StopEndTurn, wantSent: 2, unreported: 1023},
		// $0.02 admits one request (max_tokens at $15 per million tokens
		// is $0.01536) and not two: the unreported output is priced too.
		{name: "retry refused by cost", budget: toolrun.Budget{CostUSD: 0.02, Prices: map[string]pricing.Price{"claude-test": {InputPerMTok: 3, OutputPerMTok: 15}}},
			wantStop: toolrun.StopBudget, wantSent: 1, unreported: 1023},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := userParams("Write the report.")
			p.MaxTokens = 1024
			s := toolruntest.New(t, toolruntest.Script(broken, answer))
			res, err := toolrun.New(client(s), p, nil, &toolrun.Options{
				Logger: discard(), Stream: true,
				StreamRetry: toolrun.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
				Budget:      tt.budget,
			}).Run(t.Context())
			billed := s.Usage().OutputTokens
			if res.StopReason != tt.wantStop || len(s.Requests()) != tt.wantSent {
				t.Fatalf("Run = %q, %v after %d requests; want %q after %d", res.StopReason, err, len(s.Requests()), tt.wantStop, tt.wantSent)
			}
			if b := tt.budget.OutputTokens; b > 0 && billed > b {
				t.Errorf("the server billed %d output tokens over %d requests, past Budget.OutputTokens %d (the run counted %+v)",
					billed, len(s.Requests()), b, res.Usage)
			}
			if b, cost := tt.budget.CostUSD, float64(billed)*15/1e6; b > 0 && cost > b {
				t.Errorf("the server billed %d output tokens, $%.4f, past Budget.CostUSD $%.4f", billed, cost, b)
			}
			u := res.Usage
			if u.UnreportedOutputTokens != tt.unreported {
				t.Errorf("Result.Usage.UnreportedOutputTokens = %d, want %d (max_tokens less message_start's 1)", u.UnreportedOutputTokens, tt.unreported)
			}
			// What the API reported: message_start's 1 for the failed
			// attempt, and the whole answer's for a retry.
			if want := 1 + billed - s.Requests()[0].Usage.OutputTokens; u.OutputTokens != want {
				t.Errorf("Result.Usage.OutputTokens = %d, want %d: 1 for the failed attempt and what the retry reported (the server billed %d)",
					u.OutputTokens, want, billed)
			}
			if u.OutputTokens+u.UnreportedOutputTokens < billed {
				t.Errorf("Result.Usage.OutputTokens %d + UnreportedOutputTokens %d < %d billed: the bound does not bound the bill",
					u.OutputTokens, u.UnreportedOutputTokens, billed)
			}
		})
	}
}
