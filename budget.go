package toolrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun/pricing"
)

// Budget bounds what a run may spend. A zero field means no bound. The run
// stops with [StopBudget] before the step that could exceed a bound, and
// [Result.Budget] names the bound. How the next request's tokens and cost
// are estimated, what a failed stream counts, and how the wall time is
// counted across a resume are in the package documentation's section
// Budgets.
type Budget struct {
	InputTokens  int64
	OutputTokens int64
	// CostUSD bounds the cost of the run's requests, priced with
	// [Budget.Prices] (or [pricing.Default]) by model: the model a response
	// names, or, when that one has no price (a gateway that renames
	// models), the model its request named, with a Warn.
	CostUSD float64
	// WallTime bounds the run's time from the runner's first step in this
	// process, as a deadline on its requests and tools.
	WallTime time.Duration
	// ToolCalls bounds the tool calls answered.
	ToolCalls int
	// Prices prices models for CostUSD and [Result.CostUSD], by model name
	// prefix (see [pricing.Default] for how names match); models it lacks are
	// priced by pricing.Default.
	Prices map[string]pricing.Price
}

// costOf returns the cost of a response's usage in US dollars: of each
// part it is billed for (billedParts), a compaction's included.
func costOf(p pricing.Price, m *anthropic.BetaMessage) float64 {
	var cost float64
	for _, u := range billedParts(m) {
		write5m := u.CacheCreationInputTokens - u.cacheWrite1h
		cost += (float64(u.InputTokens)*p.InputPerMTok +
			float64(write5m)*p.CacheWrite5mPerMTok +
			float64(u.cacheWrite1h)*p.CacheWrite1hPerMTok +
			float64(u.CacheReadInputTokens)*p.CacheReadPerMTok +
			float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
	}
	return cost
}

// checkBudget returns a stop for the request params is about to make, if
// it could pass a bound, or nil. Every request is checked: the turns',
// their retries (a malformed response's in request, a failed stream's in
// sendStream) and compaction's. lastInput and lastMsgs are the input tokens
// and messages of the last request whose history params extends (zero for
// none). The error is for a cost budget the model has no price for.
func (r *Runner) checkBudget(params *anthropic.BetaMessageNewParams, lastInput int64, lastMsgs int) (*Result, error) {
	return r.checkNext(params, func() int64 { return r.estimateInput(params, lastInput, lastMsgs) })
}

// checkNext is checkBudget with the request's input bounded by input,
// called only when a token or cost bound needs it.
func (r *Runner) checkNext(params *anthropic.BetaMessageNewParams, input func() int64) (*Result, error) {
	b := r.opts.Budget
	if b.InputTokens == 0 && b.OutputTokens == 0 && b.CostUSD == 0 && b.WallTime == 0 && b.ToolCalls == 0 {
		return nil, nil
	}
	if r.wallTimeUsed() {
		return r.wallTimeStop(), nil
	}
	if b.InputTokens == 0 && b.OutputTokens == 0 && b.CostUSD == 0 {
		return nil, nil
	}
	in := input()
	if compactsOnTheWay(params) {
		in *= 2 // the compaction's input, and the turn's
	}
	out := outputBound(params)
	u := r.st.Usage
	if b.InputTokens > 0 && u.inputTotal()+in > b.InputTokens {
		return budgetStop(BudgetInputTokens, fmt.Sprintf("input-token budget of %d would be exceeded: %d used, the next request has at most %d", b.InputTokens, u.inputTotal(), in)), nil
	}
	if b.OutputTokens > 0 && u.outputBound()+out > b.OutputTokens {
		bound := "max_tokens"
		if out > params.MaxTokens {
			bound = "max_tokens twice: the API may compact it on its way"
		}
		used := fmt.Sprint(u.OutputTokens)
		if u.UnreportedOutputTokens > 0 {
			used = fmt.Sprintf("%d (%d reported, and up to %d that failed stream attempts did not report)", u.outputBound(), u.OutputTokens, u.UnreportedOutputTokens)
		}
		return budgetStop(BudgetOutputTokens, fmt.Sprintf("output-token budget of %d could be exceeded: %s used, the next request may write up to %d (%s)",
			b.OutputTokens, used, out, bound)), nil
	}
	if b.CostUSD > 0 {
		p, ok := pricing.Find(r.opts.Budget.Prices, string(params.Model))
		if !ok {
			return nil, fmt.Errorf("toolrun: no price for the model %q: Budget.CostUSD cannot bound it; price it in Budget.Prices", params.Model)
		}
		// The input at the dearest rate it can be billed at: the most the
		// request can cost. Output that failed attempts may have written
		// but did not report is priced here too, at this request's rate.
		spent := r.st.CostUSD + float64(u.UnreportedOutputTokens)*p.OutputPerMTok/1e6
		next := (float64(in)*inputRate(p, r.cacheTierOf(params)) + float64(out)*p.OutputPerMTok) / 1e6
		if spent+next > b.CostUSD {
			return budgetStop(BudgetCostUSD, fmt.Sprintf("cost budget of $%.4f could be exceeded: $%.4f spent, the next request may cost up to $%.4f", b.CostUSD, spent, next)), nil
		}
	}
	return nil, nil
}

// compactsOnTheWay reports whether the API may compact the request params
// would make before it answers it: its params carry a compact_20260112
// edit (the caller's; the runner's own compaction is a request of its own).
func compactsOnTheWay(params *anthropic.BetaMessageNewParams) bool {
	for _, e := range params.ContextManagement.Edits {
		if e.OfCompact20260112 != nil {
			return true
		}
	}
	return false
}

// outputBound bounds the output the request params would make may be
// billed for: its max_tokens, twice if the API may compact it on its way
// (the summary, which nothing documented bounds more tightly, and the
// turn). See [Budget].
func outputBound(params *anthropic.BetaMessageNewParams) int64 {
	if compactsOnTheWay(params) {
		return 2 * params.MaxTokens
	}
	return params.MaxTokens
}

// Budget.WallTime is kept by the functions below, and only by them: the
// clock starts with a driver's first call in this runner (runContext), a
// deadline bounds everything in flight (runContext), the time is used up
// once the clock passes the bound (wallTimeUsed: a stop before a request,
// and the hold of a wall-time stop, halted) or the deadline ended the work
// (wallTimeEnded, for fail), and the stop says so (wallTimeStop).

// runContext returns the context of one call of a driver: with
// Budget.WallTime, a deadline on everything in flight (requests, tools),
// counted from the run's first step in this process.
func (r *Runner) runContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.started.IsZero() {
		r.started = time.Now()
	}
	if b := r.opts.Budget.WallTime; b > 0 {
		return context.WithDeadlineCause(ctx, r.started.Add(b), errWallTime)
	}
	return ctx, func() {}
}

// wallTimeUsed reports whether Budget.WallTime, counted from this runner's
// first step, has passed.
func (r *Runner) wallTimeUsed() bool {
	b := r.opts.Budget.WallTime
	return b > 0 && !r.started.IsZero() && time.Since(r.started) >= b
}

// wallTimeEnded reports whether err, the failure of work under ctx, is
// the end of Budget.WallTime's deadline.
func wallTimeEnded(ctx context.Context, err error) bool {
	return errors.Is(context.Cause(ctx), errWallTime) || errors.Is(err, errWallTime)
}

// errWallTime is the cause of the context of a run whose Budget.WallTime
// has passed.
var errWallTime = errors.New("toolrun: wall-time budget used up")

// wallTimeStop is the stop of a run whose Budget.WallTime is used up.
func (r *Runner) wallTimeStop() *Result {
	return budgetStop(BudgetWallTime, fmt.Sprintf("wall-time budget of %s used up", r.opts.Budget.WallTime))
}

func budgetStop(kind BudgetKind, detail string) *Result {
	return &Result{StopReason: StopBudget, Budget: kind, Detail: detail}
}

// estimateInput bounds from above the input tokens of the request params
// would make: the last request's input, counted by the API, plus one token
// per UTF-8 byte of the messages added since (no tokenizer makes more
// tokens than bytes, in any script). It counts one token per byte of the
// whole request instead when there is no last request, or its count does
// not bound the messages params repeats: the history was replaced since
// (SetMessages), or a BeforeRequest hook, which may change any part of a
// request, made the last one and may make this one.
//
// The flat turn (the common case, see bench/) encodes only the new
// messages, as before; the whole request is encoded through the wire
// cache, so that the send that follows finds its messages encoded. With a
// cost budget it also notes the breakpoints in what it encoded
// (r.breakpoints), for the rate the input is priced at.
func (r *Runner) estimateInput(params *anthropic.BetaMessageNewParams, lastInput int64, lastMsgs int) int64 {
	scan := r.opts.Budget.CostUSD > 0
	if lastInput > 0 && lastMsgs <= len(params.Messages) && !r.inputStale && r.opts.BeforeRequest == nil {
		if b, err := json.Marshal(params.Messages[lastMsgs:]); err == nil {
			if scan {
				r.breakpoints = max(r.breakpoints, breakpointsIn(b))
			}
			return lastInput + int64(len(b))
		}
	}
	b, ok := r.wireCache().body(params, false)
	if !ok {
		var err error
		if b, err = json.Marshal(params); err != nil {
			return 0
		}
	}
	if scan {
		r.breakpoints = breakpointsIn(b)
	}
	return int64(len(b))
}

// cacheTier is the dearest kind of cache write a request's input may be
// billed at.
type cacheTier uint8

const (
	tierNone cacheTier = iota // no breakpoint: plain input only
	tier5m                    // a breakpoint of the 5-minute TTL
	tier1h                    // a breakpoint of the 1-hour TTL, and maybe 5-minute ones
)

// breakpointsIn returns the dearest breakpoint in a request's JSON (or a
// part of it). A key "cache_control" (or a "ttl" of "1h") in a tool's input
// or a text reads as one too, which prices the request higher, never
// lower: inside a JSON string, quotes are escaped.
func breakpointsIn(b []byte) cacheTier {
	switch {
	case bytes.Contains(b, []byte(`"ttl":"1h"`)):
		return tier1h
	case bytes.Contains(b, []byte(`"cache_control"`)):
		return tier5m
	}
	return tierNone
}

// cacheTierOf returns the dearest breakpoint the request params would make
// has: the runner's own (params.CacheControl, with Options.CacheTTL) or
// one in the history, system prompt or tools (r.breakpoints, as the
// estimates found them).
func (r *Runner) cacheTierOf(params *anthropic.BetaMessageNewParams) cacheTier {
	t := r.breakpoints
	switch cc := params.CacheControl; {
	case cc.TTL == anthropic.BetaCacheControlEphemeralTTLTTL1h:
		t = max(t, tier1h)
	case cc != (anthropic.BetaCacheControlEphemeralParam{}):
		t = max(t, tier5m)
	}
	return t
}

// inputRate returns the dearest rate, per million tokens, input with
// breakpoints up to t can be billed at.
func inputRate(p pricing.Price, t cacheTier) float64 {
	rate := p.InputPerMTok
	if t >= tier5m {
		rate = max(rate, p.CacheWrite5mPerMTok)
	}
	if t >= tier1h {
		rate = max(rate, p.CacheWrite1hPerMTok)
	}
	return rate
}
