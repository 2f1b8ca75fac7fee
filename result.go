package toolrun

import (
	"fmt"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun/pricing"
)

// StopReason says why a run stopped. Every way out of a run has one.
type StopReason string

// The reasons a run stops.
const (
	// StopEndTurn: the model answered without calling tools (end_turn or a
	// stop sequence).
	StopEndTurn StopReason = "end_turn"
	// StopMaxTurns: the run reached Options.MaxTurns. The run's error
	// wraps [ErrMaxTurns].
	StopMaxTurns StopReason = "max_turns"
	// StopMaxTokens: a response was cut off at max_tokens. Tool calls in it
	// are answered as not run, since their input may be incomplete. The
	// run's error wraps [ErrMaxTokens] and [ErrIncomplete].
	StopMaxTokens StopReason = "max_tokens"
	// StopRefusal: the model refused. Tool calls in the response are
	// answered as not run.
	StopRefusal StopReason = "refusal"
	// StopContextWindow: the model's context window was exceeded. The
	// run's error wraps [ErrContextWindow] and [ErrIncomplete].
	StopContextWindow StopReason = "model_context_window_exceeded"
	// StopIncomplete: the model stopped with a stop_reason the runner does
	// not know, named in Result.Detail; its answer is taken as unfinished
	// and its calls are answered as not run. The run's error wraps
	// [ErrIncomplete].
	StopIncomplete StopReason = "incomplete"
	// StopAwaitingApproval: a call was deferred; see Result.Pending. It is
	// a suspension, not an error.
	StopAwaitingApproval StopReason = "awaiting_approval"
	// StopHook: a hook returned [StopRun]; see Result.Detail.
	StopHook StopReason = "hook"
	// StopBudget: the next step could pass a bound of Options.Budget; see
	// Result.Budget and Result.Detail. The run's error wraps [ErrBudget].
	StopBudget StopReason = "budget"
	// StopCanceled: the context was cancelled.
	StopCanceled StopReason = "canceled"
	// StopError: a request, a hook or a checkpoint failed, or the model
	// sent, twice in a row, a response the runner cannot answer validly
	// (two tool_use blocks with one id, say: the error then wraps
	// [ErrMalformedResponse], and the history is left as it was before
	// the response); see Result.Err.
	StopError StopReason = "error"
	// StopPayloadTooLarge: a driver that carries the run's State between
	// processes (the Temporal module) found the State, or what a step
	// returns, larger than what carries it allows; see Result.Detail. It
	// is made with [State.Stop], and is final.
	StopPayloadTooLarge StopReason = "payload_too_large"
)

// stopMalformed is the reason a State written by an earlier version gives
// for a run stopped by a malformed response; it reads as [StopError].
const stopMalformed StopReason = "malformed_response"

// BudgetKind names a bound of [Budget].
type BudgetKind string

// The bounds of a [Budget], as [Result.Budget] names them.
const (
	BudgetInputTokens  BudgetKind = "input_tokens"
	BudgetOutputTokens BudgetKind = "output_tokens"
	BudgetCostUSD      BudgetKind = "cost_usd"
	BudgetWallTime     BudgetKind = "wall_time"
	BudgetToolCalls    BudgetKind = "tool_calls"
)

// Usage adds up the tokens of a run's responses, as the API reported them.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	// UnreportedOutputTokens is not a count the API reported but a bound
	// on what it did not: for each streamed attempt that failed after its
	// message_start and before its message_delta (which is where the API
	// reports a response's output), what the attempt may have written
	// beyond the output_tokens of its message_start, which OutputTokens
	// holds: its max_tokens, less that count (see [Budget]). The API may
	// have billed anything from nothing to all of it. Budgets count it as
	// written, so OutputTokens plus UnreportedOutputTokens bounds the
	// output billed; OutputTokens alone is what the API reported, and
	// [Result.CostUSD] prices only that.
	UnreportedOutputTokens int64 `json:"unreported_output_tokens,omitempty"`
}

// CostUSD prices u in US dollars at model's price in prices, else in
// [pricing.Default], found by the longest prefix of the model's name as
// pricing.Default says (a platform's wrapping of the name taken off), and
// reports whether either table has a price for it. It is the sum a
// runner's [Result.CostUSD] makes per response, for a usage read back
// later (a report, a server's thread): it prices the output the API
// reported, not UnreportedOutputTokens, and cache writes at the 5-minute
// rate, since a Usage does not say which of them were written for an hour.
func (u Usage) CostUSD(model string, prices map[string]pricing.Price) (float64, bool) {
	p, ok := pricing.Find(prices, model)
	if !ok {
		return 0, false
	}
	return (float64(u.InputTokens)*p.InputPerMTok +
		float64(u.CacheCreationInputTokens)*p.CacheWrite5mPerMTok +
		float64(u.CacheReadInputTokens)*p.CacheReadPerMTok +
		float64(u.OutputTokens)*p.OutputPerMTok) / 1e6, true
}

func (u *Usage) add(v Usage) {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.CacheCreationInputTokens += v.CacheCreationInputTokens
	u.CacheReadInputTokens += v.CacheReadInputTokens
	u.UnreportedOutputTokens += v.UnreportedOutputTokens
}

// outputBound is the most output the usage may have been billed for: what
// was reported, and the bound on what was not.
func (u Usage) outputBound() int64 { return u.OutputTokens + u.UnreportedOutputTokens }

// inputTotal is every input token: uncached, written to the cache and read
// from it.
func (u Usage) inputTotal() int64 {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// usageOf returns what m is billed for: its top-level usage and that of
// each of its compaction iterations (see billedParts).
func usageOf(m *anthropic.BetaMessage) Usage {
	var u Usage
	for _, p := range billedParts(m) {
		u.add(p.Usage)
	}
	return u
}

// contextUsage returns the top-level usage of m: the input the model read
// to write m, so the size of the context that the next request extends.
// It leaves a compaction out (which read the context before it was
// compacted): the compaction threshold and the input estimate of a budget
// measure the context, not the bill.
func contextUsage(m *anthropic.BetaMessage) Usage {
	return Usage{
		InputTokens:              m.Usage.InputTokens,
		OutputTokens:             m.Usage.OutputTokens,
		CacheCreationInputTokens: m.Usage.CacheCreationInputTokens,
		CacheReadInputTokens:     m.Usage.CacheReadInputTokens,
	}
}

// billedUsage is one part of what a response is billed for, with its cache
// writes of the one-hour TTL apart, since they cost more.
type billedUsage struct {
	Usage
	cacheWrite1h int64
}

// billedParts returns what m is billed for, part by part: its top-level
// usage, then each usage.iterations entry of type "compaction".
//
// The API leaves a compaction's tokens out of the top-level usage (the
// SDK's doc of Usage.Iterations says so): a compaction request of its own
// (Compaction.ClientSide false) answers with a top-level usage of 0 and
// the compaction's cost in its one iteration, and a turn that the API
// compacted on its way (context_management's compact_20260112) has the
// turn at the top level and the compaction beside it. Every other entry
// (a "message" of a server tool loop, a "fallback_message") is already in
// the top-level usage, which sums them, so summing every iteration
// instead would count those twice. An "advisor_message" entry is not
// added either: it is billed at the advisor model's rates, which one price
// per response cannot express, and the SDK does not say whether the
// top-level usage holds it.
func billedParts(m *anthropic.BetaMessage) []billedUsage {
	parts := []billedUsage{{Usage: contextUsage(m), cacheWrite1h: m.Usage.CacheCreation.Ephemeral1hInputTokens}}
	for _, it := range m.Usage.Iterations {
		if it.Type != "compaction" {
			continue
		}
		parts = append(parts, billedUsage{
			Usage: Usage{
				InputTokens:              it.InputTokens,
				OutputTokens:             it.OutputTokens,
				CacheCreationInputTokens: it.CacheCreationInputTokens,
				CacheReadInputTokens:     it.CacheReadInputTokens,
			},
			cacheWrite1h: it.CacheCreation.Ephemeral1hInputTokens,
		})
	}
	return parts
}

// Result is how a run ended and what it cost.
type Result struct {
	StopReason StopReason
	// Detail says more about the stop in words: the limit reached, the
	// hook's reason, the failed turn.
	Detail string
	// Err is the error that stopped the run, as Run returns it: for
	// StopError, StopCanceled and the limits the
	// caller set (StopMaxTurns wraps [ErrMaxTurns], StopBudget
	// [ErrBudget]). It is nil for the model's own stops, StopHook and
	// StopAwaitingApproval.
	Err error
	// Message is the last response received, or nil if none was.
	Message *anthropic.BetaMessage
	// Messages is the history as it stands: valid to send again, with every
	// tool_use answered by its tool_result.
	Messages []anthropic.BetaMessageParam
	// Pending lists the calls awaiting a decision, for StopAwaitingApproval.
	Pending []PendingCall
	// Usage adds up every response of the run, compactions included, as
	// the API bills them: a response's top-level usage and the
	// usage.iterations of each compaction in it, which the top-level
	// usage leaves out; and what each failed stream attempt reported (see
	// [Budget]), with a bound on the output it did not report in
	// Usage.UnreportedOutputTokens.
	Usage Usage
	// CostUSD is what the responses cost, priced by Budget.Prices or
	// [pricing.Default]. It is complete only if CostComplete is true.
	CostUSD float64
	// CostComplete reports that every response's model had a price. A
	// response of a model with no known price adds nothing to CostUSD and
	// is logged at Warn.
	CostComplete bool
	// Budget names the bound of Options.Budget that stopped the run, for
	// StopBudget.
	Budget BudgetKind
	// Turns counts the model requests that got a response.
	Turns int
	// ToolCalls counts the calls answered, run or not.
	ToolCalls int
	// ToolFailures counts the calls answered with is_error for a failure:
	// the tool's error, a timeout, a panic, invalid input, an unknown tool,
	// a call not run or interrupted. A denied or skipped call is a
	// decision, not a failure, and is not counted, even though the model
	// gets a denial as an is_error result; [ToolDecided] reports each
	// decision.
	ToolFailures int
	// ToolDenials counts the calls a policy, a rule or a person denied,
	// which ToolFailures leaves out, so that an operator sees how often
	// the model asked for what it may not do. A skipped call (answered
	// with a result given in place of running it) is neither.
	ToolDenials int
}

// Text returns the text blocks of the last response, joined. A runner
// that received no response itself (a finished run re-opened from its
// Store or resumed from its State) has no Message; Text then reads the
// history's last message if the model wrote it, as its final answer.
func (r *Result) Text() string {
	if r == nil {
		return ""
	}
	if r.Message != nil {
		return messageText(r.Message)
	}
	var b strings.Builder
	if n := len(r.Messages); n > 0 && r.Messages[n-1].OfAssistant != nil {
		for _, c := range r.Messages[n-1].OfAssistant.Content {
			if c.OfText != nil {
				b.WriteString(c.OfText.Text)
			}
		}
	}
	return b.String()
}

func messageText(m *anthropic.BetaMessage) string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// Turn is one model response handed to the caller by [Runner.Next] and
// [Runner.Turns], before the runner acts on it.
//
// After the caller is done with a turn, the next call of Next answers its
// tool calls (running the tools) and appends the response and the results
// to the history, then any messages the caller added with
// [Runner.AppendMessages] meanwhile (after a final answer, the run goes on
// with them). A caller who took the turn over with [Runner.SetMessages] or
// [Runner.RetryTurn] has the runner leave the turn out and send the
// history as the caller left it, as the official tool runners do; the
// caller who wants the turn in the history then puts it there
// (Message.ToParam()) with its tool results.
type Turn struct {
	// Number counts the run's turns from 1.
	Number int
	// Message is the model's response.
	Message *anthropic.BetaMessage
	// ToolCalls are the client tool calls of Message, in order.
	ToolCalls []ToolCall
}

// count renders n things, in the singular for one.
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
