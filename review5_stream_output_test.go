//go:build review5

package toolrun_test

import (
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestReview5FailedStreamOutputBudgeted checks the output side of the
// stream-retry accounting: a streamed attempt that fails after the model
// wrote most of its answer is billed for that output (the toolruntest
// server bills it, as TestStreamRetriesAreBudgeted relies on for input),
// but the runner counts only the output_tokens of message_start (1), so
// Result.Usage.OutputTokens falls short of the bill and the retry's check
// against Budget.OutputTokens lets the run be billed past it.
func TestReview5FailedStreamOutputBudgeted(t *testing.T) {
	p := userParams("Write the report.")
	p.MaxTokens = 1024
	answer := toolruntest.Message(toolruntest.Text(strings.Repeat("The report, line by line. ", 140))) // ~900 output tokens
	broken := answer
	broken.Fault.StreamErrorAfter = 6 // after message_start and some deltas: the stream began
	const budget = 1100               // admits one request of max_tokens 1024, not two answers of ~900

	s := toolruntest.New(t, toolruntest.Script(broken, answer))
	res, err := toolrun.New(client(s), p, nil, &toolrun.Options{
		Logger: discard(), Stream: true,
		StreamRetry: toolrun.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
		Budget:      toolrun.Budget{OutputTokens: budget},
	}).Run(t.Context())
	billed := s.Usage().OutputTokens
	if billed > budget {
		t.Errorf("the server billed %d output tokens over %d requests, past Budget.OutputTokens %d (Run = %q, %v; the run counted %d)",
			billed, len(s.Requests()), budget, res.StopReason, err, res.Usage.OutputTokens)
	}
	if res.Usage.OutputTokens != billed {
		t.Errorf("Result.Usage.OutputTokens = %d, the server billed %d over %d requests: the failed attempt's output is left out",
			res.Usage.OutputTokens, billed, len(s.Requests()))
	}
}
