// Package pricing prices Claude's models: the list prices of today's model
// families ([Default]), and the lookup of a model's price by its name
// ([Find]) that a runner's cost budget, [github.com/toolrun/toolrun.Result]'s
// cost and a thread's cost use. Prices change when models do, not when
// the runner does, so they are kept apart from it; a program sets its own
// in [github.com/toolrun/toolrun.Budget.Prices].
package pricing

import "strings"

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

// Default returns the list prices of today's model families, by model
// name prefix, per million tokens. A model's name is matched after its
// platform's wrapping is taken off: Bedrock's region prefix ("us.",
// "global.", …), "anthropic." and version suffix ("-v1:0"), an ARN's path,
// and Vertex's "@date", so that "claude-sonnet-4-5-20250929",
// "us.anthropic.claude-sonnet-4-5-20250929-v1:0" and
// "claude-sonnet-4-5@20250929" are one model. The longest prefix that
// matches wins. The figures may lag behind the price list: set
// [github.com/toolrun/toolrun.Budget.Prices] to override them. Each call returns a new map.
func Default() map[string]Price {
	return map[string]Price{
		"claude-opus":       {InputPerMTok: 5, OutputPerMTok: 25},
		"claude-opus-4":     {InputPerMTok: 15, OutputPerMTok: 75}, // 4 and 4.1
		"claude-opus-4-5":   {InputPerMTok: 5, OutputPerMTok: 25},
		"claude-opus-4-6":   {InputPerMTok: 5, OutputPerMTok: 25},
		"claude-opus-4-7":   {InputPerMTok: 5, OutputPerMTok: 25},
		"claude-opus-4-8":   {InputPerMTok: 5, OutputPerMTok: 25},
		"claude-sonnet":     {InputPerMTok: 3, OutputPerMTok: 15},
		"claude-haiku":      {InputPerMTok: 1, OutputPerMTok: 5},
		"claude-fable":      {InputPerMTok: 3, OutputPerMTok: 15},
		"claude-mythos":     {InputPerMTok: 15, OutputPerMTok: 75},
		"claude-3-opus":     {InputPerMTok: 15, OutputPerMTok: 75},
		"claude-3-sonnet":   {InputPerMTok: 3, OutputPerMTok: 15},
		"claude-3-5-sonnet": {InputPerMTok: 3, OutputPerMTok: 15},
		"claude-3-7-sonnet": {InputPerMTok: 3, OutputPerMTok: 15},
		"claude-3-haiku":    {InputPerMTok: 0.25, OutputPerMTok: 1.25},
		"claude-3-5-haiku":  {InputPerMTok: 0.8, OutputPerMTok: 4},
	}
}

// defaultPrices is Default, made once for Find.
var defaultPrices = Default()

// modelKey takes a platform's wrapping off a model name (see Default).
func modelKey(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 { // an ARN or a Vertex resource path
		m = m[i+1:]
	}
	if i := strings.Index(m, "anthropic."); i >= 0 && !strings.Contains(m[:i], "claude") {
		m = m[i+len("anthropic."):] // Bedrock: [region.]anthropic.claude-…
	}
	if i := strings.IndexByte(m, '@'); i >= 0 { // Vertex: claude-…@date
		m = m[:i]
	}
	if i := strings.LastIndex(m, "-v"); i >= 0 && strings.Contains(m[i:], ":") { // Bedrock: …-v1:0
		m = m[:i]
	}
	return m
}

// Find returns the price of model from prices, else from [Default], by
// the longest prefix of its name as Default matches names (a platform's
// wrapping taken off), with the cache prices derived from the input price
// where zero, and whether either table had one. It is the lookup a runner
// prices a response with ([github.com/toolrun/toolrun.Budget.Prices]).
func Find(prices map[string]Price, model string) (Price, bool) {
	key := modelKey(model)
	find := func(table map[string]Price) (Price, bool) {
		best, found := "", false
		for prefix := range table {
			if p := modelKey(prefix); strings.HasPrefix(key, p) && len(p) >= len(best) {
				best, found = p, true
			}
		}
		for prefix, price := range table {
			if modelKey(prefix) == best {
				return price, found
			}
		}
		return Price{}, false
	}
	p, ok := find(prices)
	if !ok {
		p, ok = find(defaultPrices)
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
