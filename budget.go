package toolrun

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// Budget bounds what a run may spend. A zero field means no bound. The run
// stops with [StopBudget] before the step that could exceed a bound — before
// a request whose input (estimated) and output (at most max_tokens) could
// pass a token or cost budget, before the tool calls that would pass
// ToolCalls — and [Result.Budget] names the bound.
//
// Input tokens count every input token of a request: uncached, written to
// the cache and read from it. The next request's input is estimated as the
// last request's input plus a quarter of the bytes added to the history
// since (a request with no previous one: a quarter of its bytes), which is
// close to the API's count for English text and JSON.
type Budget struct {
	InputTokens  int64
	OutputTokens int64
	// CostUSD bounds the cost of the run's requests, priced with
	// [Options.Prices] (or [DefaultPrices]) by model.
	CostUSD float64
	// WallTime bounds the run's time from its first step in this process.
	WallTime time.Duration
	// ToolCalls bounds the tool calls answered.
	ToolCalls int
}

// Price is what a model costs, in US dollars per million tokens. Cache
// writes cost 1.25 times the input price for the 5-minute TTL and 2 times
// for the 1-hour TTL, and cache reads 0.1 times, as the API prices them;
// set the fields to price a model otherwise.
type Price struct {
	InputPerMTok  float64
	OutputPerMTok float64
	// CacheWrite5mPerMTok, CacheWrite1hPerMTok and CacheReadPerMTok, if
	// zero, are derived from InputPerMTok.
	CacheWrite5mPerMTok float64
	CacheWrite1hPerMTok float64
	CacheReadPerMTok    float64
}

// DefaultPrices prices the models by name prefix; the longest prefix that
// matches a model wins. The figures are list prices per million tokens and
// may lag behind the price list: set [Options.Prices] to override them.
var DefaultPrices = map[string]Price{
	"claude-opus":   {InputPerMTok: 5, OutputPerMTok: 25},
	"claude-sonnet": {InputPerMTok: 3, OutputPerMTok: 15},
	"claude-haiku":  {InputPerMTok: 1, OutputPerMTok: 5},
	"claude-fable":  {InputPerMTok: 3, OutputPerMTok: 15},
	"claude-mythos": {InputPerMTok: 15, OutputPerMTok: 75},
}

// priceOf returns the price of model from prices, else DefaultPrices, by
// longest prefix, with the cache prices filled in.
func priceOf(prices map[string]Price, model string) (Price, bool) {
	find := func(table map[string]Price) (Price, bool) {
		best, found := "", false
		for prefix := range table {
			if strings.HasPrefix(model, prefix) && len(prefix) >= len(best) {
				best, found = prefix, true
			}
		}
		return table[best], found
	}
	p, ok := find(prices)
	if !ok {
		p, ok = find(DefaultPrices)
	}
	if p.CacheWrite5mPerMTok == 0 {
		p.CacheWrite5mPerMTok = 1.25 * p.InputPerMTok
	}
	if p.CacheWrite1hPerMTok == 0 {
		p.CacheWrite1hPerMTok = 2 * p.InputPerMTok
	}
	if p.CacheReadPerMTok == 0 {
		p.CacheReadPerMTok = 0.1 * p.InputPerMTok
	}
	return p, ok
}

// costOf returns the cost of a response's usage in US dollars.
func costOf(p Price, m *anthropic.BetaMessage) float64 {
	u := m.Usage
	write1h := u.CacheCreation.Ephemeral1hInputTokens
	write5m := u.CacheCreationInputTokens - write1h
	return (float64(u.InputTokens)*p.InputPerMTok +
		float64(write5m)*p.CacheWrite5mPerMTok +
		float64(write1h)*p.CacheWrite1hPerMTok +
		float64(u.CacheReadInputTokens)*p.CacheReadPerMTok +
		float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
}

// checkBudget returns a stop for the request params is about to make, if
// it could pass a bound, or nil.
func (r *Runner) checkBudget(params *anthropic.BetaMessageNewParams) *Result {
	b := r.opts.Budget
	if b == (Budget{}) {
		return nil
	}
	if b.WallTime > 0 && time.Since(r.started) >= b.WallTime {
		return budgetStop("wall_time", fmt.Sprintf("wall-time budget of %s used up (%s so far)", b.WallTime, time.Since(r.started).Round(time.Millisecond)))
	}
	if b.InputTokens == 0 && b.OutputTokens == 0 && b.CostUSD == 0 {
		return nil
	}
	in := r.estimateInput(params)
	out := params.MaxTokens
	used := r.usage.InputTokens + r.usage.CacheCreationInputTokens + r.usage.CacheReadInputTokens
	if b.InputTokens > 0 && used+in > b.InputTokens {
		return budgetStop("input_tokens", fmt.Sprintf("input-token budget of %d would be exceeded: %d used, the next request has about %d", b.InputTokens, used, in))
	}
	if b.OutputTokens > 0 && r.usage.OutputTokens+out > b.OutputTokens {
		return budgetStop("output_tokens", fmt.Sprintf("output-token budget of %d could be exceeded: %d used, the next request may write up to %d (max_tokens)", b.OutputTokens, r.usage.OutputTokens, out))
	}
	if b.CostUSD > 0 {
		p, _ := priceOf(r.opts.Prices, string(params.Model))
		// Priced as uncached input: the most the request can cost.
		next := (float64(in)*p.InputPerMTok + float64(out)*p.OutputPerMTok) / 1e6
		if r.cost+next > b.CostUSD {
			return budgetStop("cost_usd", fmt.Sprintf("cost budget of $%.4f could be exceeded: $%.4f spent, the next request may cost up to $%.4f", b.CostUSD, r.cost, next))
		}
	}
	return nil
}

func budgetStop(name, detail string) *Result {
	return &Result{StopReason: StopBudget, Budget: name, Detail: detail}
}

// estimateInput estimates the input tokens of the request params would make.
func (r *Runner) estimateInput(params *anthropic.BetaMessageNewParams) int64 {
	if r.lastInput > 0 && r.lastInputMsgs <= len(params.Messages) {
		b, err := json.Marshal(params.Messages[r.lastInputMsgs:])
		if err == nil {
			return r.lastInput + int64(len(b)+3)/4
		}
	}
	b, err := json.Marshal(params)
	if err != nil {
		return 0
	}
	return int64(len(b)+3) / 4
}

// DefaultMaxResultBytes bounds the text of a tool result sent to the model
// when neither [ToolConfig.MaxResultBytes] nor [Options.MaxResultBytes] is
// set.
const DefaultMaxResultBytes = 100_000

// resultLimit returns the text limit of a tool's results, or 0 for none.
func (r *Runner) resultLimit(e *toolEntry) int {
	n := r.opts.MaxResultBytes
	if e != nil && e.config.MaxResultBytes != 0 {
		n = e.config.MaxResultBytes
	}
	switch {
	case n < 0:
		return 0
	case n == 0:
		return DefaultMaxResultBytes
	}
	return n
}

// truncateContent cuts the text blocks of content so their text adds up to
// at most limit bytes, at a UTF-8 boundary, and tells the model so at the
// end. Non-text blocks are kept. It reports whether it cut anything; the
// caller's slice is not changed.
func truncateContent(content []Content, limit int) ([]Content, bool) {
	total := 0
	for _, c := range content {
		if c.OfText != nil {
			total += len(c.OfText.Text)
		}
	}
	if limit <= 0 || total <= limit {
		return content, false
	}
	out := make([]Content, 0, len(content)+1)
	left := limit
	for _, c := range content {
		if c.OfText == nil {
			out = append(out, c)
			continue
		}
		text := c.OfText.Text
		if len(text) > left {
			cut := left
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			text = text[:cut]
		}
		left -= len(text)
		if text == "" {
			continue
		}
		t := *c.OfText
		t.Text = text
		out = append(out, Content{OfText: &t})
	}
	out = append(out, Text(fmt.Sprintf("[toolrun: this result was truncated from %d to %d bytes of text; the full result was kept for the operator. Ask for less, or for a part of it, if you need the rest.]", total, limit)))
	return out, true
}
