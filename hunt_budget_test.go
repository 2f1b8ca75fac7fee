//go:build hunt

package toolrun_test

import (
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestHuntCostBudgetPricesCacheWrites: Budget says the run stops "before a
// request whose input (estimated) and output (at most max_tokens) could
// pass a ... cost budget", with input bounded at "a token a byte". But
// checkBudget (budget.go, "Priced as uncached input: the most the request
// can cost") prices the estimate at InputPerMTok, while a cache write
// costs 1.25x (5-minute TTL) or 2x (1-hour TTL) that, as Price's own doc
// and costOf say. With Options.CacheTTL "1h" (the runner puts the
// breakpoint itself) a request whose input is all written to the cache
// costs up to twice the bound the check allowed for. Here the reply bills
// one token per byte of the request body (the worst case the check itself
// assumes), all as 1-hour cache writes: the request passes a check of
// about $3 per MTok of input and costs $6 per MTok, so the run ends past
// its cost budget. What should hold: the check prices the input at the
// highest input rate the request can be billed at (the 1-hour write rate
// when a breakpoint may write to the 1-hour cache, else the 5-minute one),
// and Result.CostUSD never exceeds Budget.CostUSD.
func TestHuntCostBudgetPricesCacheWrites(t *testing.T) {
	p := userParams("Summarise this: " + strings.Repeat("lorem ipsum dolor sit amet ", 200))
	p.Model = "claude-sonnet-4-5"
	p.MaxTokens = 16
	reply := func(req *toolruntest.Request) toolruntest.Reply {
		n := int64(len(req.Body)) // a token a byte: the check's own worst case
		r := toolruntest.Message(toolruntest.Text("done"))
		r.Usage = &toolruntest.Usage{CacheCreationInputTokens: n, CacheCreation1hInputTokens: n, OutputTokens: 1}
		return r
	}
	opts := func(b toolrun.Budget) *toolrun.Options {
		return &toolrun.Options{Logger: discard(), CacheTTL: "1h", Budget: b}
	}

	// The size of the request, as sent.
	probe := toolruntest.New(t, toolruntest.Options{Func: reply})
	if _, err := toolrun.New(client(probe), p, nil, opts(toolrun.Budget{})).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	size := float64(len(probe.Requests()[0].Body))

	// A budget that admits the request priced as uncached input ($3/MTok,
	// with room to spare for the estimate and max_tokens), and not the
	// same tokens written to the 1-hour cache ($6/MTok).
	budget := 4 * size / 1e6
	s := toolruntest.New(t, toolruntest.Options{Func: reply})
	res, err := toolrun.New(client(s), p, nil, opts(toolrun.Budget{CostUSD: budget})).Run(t.Context())
	if len(s.Requests()) == 0 {
		t.Fatalf("no request was sent (stop %q, %v): the estimate did not fit the budget; the test's sizes need a look", res.StopReason, err)
	}
	if res.CostUSD > budget {
		t.Errorf("Result.CostUSD = $%.6f past Budget.CostUSD $%.6f (stop %q, %v): the check priced cache writes as uncached input",
			res.CostUSD, budget, res.StopReason, err)
	}
}

// TestHuntStreamRetriesAreBudgeted: the README promises that "every
// request is checked first, compaction's and retries' included", and
// Result.Usage adds up every response. A streamed response that fails
// mid-stream is requested again inside sendStream (stream.go), below
// request.go's budget check and its account: the failed attempts' usage
// (billed: the toolruntest server bills a message a fault cut short, as
// the API does for a stream it began) is never added, and no retry is
// checked against the budget. With Options.StreamRetry allowing a few
// attempts, a run whose one request was admitted by Budget.InputTokens
// is billed several times that request's input and ends past the budget,
// and Result.Usage says it stayed within. What should hold: each failed
// attempt's usage (message_start's input, the output so far) is
// accounted, and each retry is checked against the budget like the first
// attempt.
func TestHuntStreamRetriesAreBudgeted(t *testing.T) {
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
	budget := size + size/5 // admits the request at a token a byte, with room
	fails := int(float64(budget)/perRequest) + 1

	var replies []toolruntest.Reply
	for range fails {
		r := done
		r.Fault.StreamErrorAfter = 3 // after message_start: the stream began
		replies = append(replies, r)
	}
	s := toolruntest.New(t, toolruntest.Script(append(replies, done)...))
	res, err := toolrun.New(client(s), p, nil, &toolrun.Options{
		Logger: discard(), Stream: true,
		StreamRetry: toolrun.RetryPolicy{MaxAttempts: fails + 1, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
		Budget:      toolrun.Budget{InputTokens: budget},
	}).Run(t.Context())
	billed := s.Usage()
	billedIn := billed.InputTokens + billed.CacheCreationInputTokens + billed.CacheReadInputTokens
	counted := res.Usage.InputTokens + res.Usage.CacheCreationInputTokens + res.Usage.CacheReadInputTokens
	if billedIn > budget {
		t.Errorf("the server billed %d input tokens over %d requests, past Budget.InputTokens %d (stop %q, %v; the run counted %d)",
			billedIn, len(s.Requests()), budget, res.StopReason, err, counted)
	}
	if counted != billedIn {
		t.Errorf("Result.Usage counts %d input tokens, the server billed %d: failed stream attempts are left out", counted, billedIn)
	}
}

// TestHuntInputBudgetAfterSetMessages: Budget promises that "the next
// request's input is bounded from above by the last request's input plus
// one token per byte added to the history since", "for any script". The
// estimate (budget.go estimateInput) counts only the messages past the
// last request's count (params.Messages[lastMsgs:]), so a history
// replaced with SetMessages, as its doc says to change a message ("put a
// new value in its place"), with the same number of messages or more but
// larger ones before that point, is estimated at the last request's
// input: the larger message is not counted at all. Here the one user
// message is replaced by a 1 MB one; the request passes a 50,000-token
// input budget and is billed about 260,000 tokens. Likewise, by reading,
// a BeforeRequest hook that replaces an earlier message on a later
// request (the check runs on the hook's params). What should hold: a history
// that is not the last request's plus new messages (a message replaced:
// another pointer at an index below lastMsgs) is estimated in full, or the
// replaced messages are counted.
func TestHuntInputBudgetAfterSetMessages(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.Text("What shall I read?")),
		toolruntest.Message(toolruntest.Text("read it")),
	))
	const budget = 50_000
	r := toolrun.New(client(s), userParams("hello"), nil, &toolrun.Options{
		Logger: discard(), MaxTurns: 5, Budget: toolrun.Budget{InputTokens: budget},
	})
	if _, err := r.Next(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Take the turn over: the history is one user message again, a large
	// one.
	r.SetMessages([]anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(
		"Read this log: " + strings.Repeat("0123456789abcdef ", 1<<20/17)))})
	res, err := r.Run(t.Context())
	billed := s.Usage()
	in := billed.InputTokens + billed.CacheCreationInputTokens + billed.CacheReadInputTokens
	if in > budget {
		t.Errorf("the server billed %d input tokens, past Budget.InputTokens %d (stop %q, %v): the replaced message was not estimated", in, budget, res.StopReason, err)
	}
}
