package toolruntest

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"time"
)

// maxBreakpoints is the most cache_control breakpoints a request may set,
// the automatic one included.
const maxBreakpoints = 4

// lookback is how many block boundaries the server checks for a cache hit
// from a breakpoint, the breakpoint's own included.
const lookback = 20

// minCacheable is the documented minimum cacheable prompt length of each
// model family, by model name prefix.
var minCacheable = []struct {
	prefix string
	tokens int64
}{
	{"claude-opus-5", 512},
	{"claude-fable-5", 512},
	{"claude-mythos-5", 512},
	{"claude-sonnet-5", 1024},
	{"claude-opus-4-8", 1024},
	{"claude-opus-4-7", 2048},
	{"claude-opus-4-6", 4096},
	{"claude-opus-4-5", 4096},
	{"claude-haiku-4-5", 4096},
	{"claude-opus-4", 1024},
	{"claude-sonnet-4", 1024},
	{"claude-3-7-sonnet", 1024},
	{"claude-3-5-haiku", 2048},
	{"claude-3-haiku", 2048},
}

// DefaultMinCacheableTokens is the minimum cacheable prompt length of a model
// that the table of [MinCacheableTokens] does not list.
const DefaultMinCacheableTokens = 1024

// MinCacheableTokens returns the minimum cacheable prompt length of model, in
// tokens: a cache breakpoint whose prefix is shorter caches nothing. It looks
// model up by the longest of these name prefixes, after the prompt caching
// documentation, and returns [DefaultMinCacheableTokens] for any other model:
//
//	 512  claude-opus-5, claude-fable-5, claude-mythos-5 (and their point releases)
//	1024  claude-sonnet-5, claude-opus-4-8, claude-sonnet-4 (4, 4.5, 4.6), claude-opus-4 (4, 4.1), claude-3-7-sonnet
//	2048  claude-opus-4-7, claude-3-5-haiku, claude-3-haiku
//	4096  claude-opus-4-6, claude-opus-4-5, claude-haiku-4-5
//
// [Options].MinCacheableTokens overrides the table for a server.
func MinCacheableTokens(model string) int64 {
	best, n := -1, int64(DefaultMinCacheableTokens)
	for _, e := range minCacheable {
		if strings.HasPrefix(model, e.prefix) && len(e.prefix) > best {
			best, n = len(e.prefix), e.tokens
		}
	}
	return n
}

// BilledInputTokens returns the input of u in units of the price of an
// uncached input token, by the multipliers of the prompt caching price list:
//
//	InputTokens + 1.25 × 5-minute cache writes + 2 × 1-hour cache writes + 0.1 × CacheReadInputTokens
//
// where the 1-hour writes are CacheCreation1hInputTokens and the 5-minute
// writes the rest of CacheCreationInputTokens. Compare two runs by it to see
// what caching saved.
func BilledInputTokens(u Usage) float64 {
	writes1h := u.CacheCreation1hInputTokens
	writes5m := u.CacheCreationInputTokens - writes1h
	return float64(u.InputTokens) + 1.25*float64(writes5m) + 2*float64(writes1h) + 0.1*float64(u.CacheReadInputTokens)
}

// breakpoint is a cache breakpoint of a request: the block it is on, and the
// TTL of the entry it writes.
type breakpoint struct {
	block int
	ttl   time.Duration
}

// breakpoints returns the breakpoints of pr, in prefix order: those that
// blocks set, and the automatic one of a top-level cache_control with TTL
// auto, if non-zero, on the last cacheable block. It fails as the API does
// on more than four, and on a 1-hour breakpoint after a 5-minute one.
func (pr *prompt) breakpoints(auto time.Duration) ([]breakpoint, error) {
	var bps []breakpoint
	n := 0
	for i, b := range pr.blocks {
		n += len(b.ttls)
		if len(b.ttls) > 0 {
			bps = append(bps, breakpoint{i, max(b.ttls[0], b.ttls[len(b.ttls)-1])})
		}
	}
	if auto > 0 {
		for i := len(pr.blocks) - 1; i >= 0; i-- {
			if !pr.blocks[i].cacheable {
				continue
			}
			// A block that is already a breakpoint takes no second one.
			if len(bps) == 0 || bps[len(bps)-1].block != i {
				bps = append(bps, breakpoint{i, auto})
				n++
			}
			break
		}
	}
	if n > maxBreakpoints {
		//lint:ignore ST1005 the API's own message, word for word, as a client sees it
		return nil, fmt.Errorf("A maximum of %d blocks with cache_control may be provided. Found %d.", maxBreakpoints, n)
	}
	for i := 1; i < len(bps); i++ {
		if bps[i].ttl > bps[i-1].ttl {
			return nil, invalid(pr.blocks[bps[i].block].path+".cache_control.ttl",
				"a cache_control with a ttl of 1h cannot come after one with a ttl of 5m: longer TTLs must come first")
		}
	}
	return bps, nil
}

// cacheEntry is a cached prompt prefix.
type cacheEntry struct {
	expires time.Time
	ttl     time.Duration
}

// promptCache holds the cached prompt prefixes of a server, by the hash of
// the prefix and model.
type promptCache map[[sha256.Size]byte]*cacheEntry

// cacheUsage is what a request reads from and writes to the cache, in
// tokens.
type cacheUsage struct {
	read, created, created1h int64
	// covered is the number of tokens read or written: the rest of the
	// prompt is uncached input.
	covered int64
}

// use looks the breakpoints bps of pr up in c at now and writes them, as the
// API does: the longest prefix cached at any of the lookback boundaries of a
// breakpoint is read, and the part of the prompt from there up to the last
// breakpoint is written, each stretch with the TTL of the breakpoint that
// ends it. A breakpoint whose prefix is shorter than min tokens neither
// reads nor writes. A read refreshes the entry's TTL.
func (c promptCache) use(pr *prompt, hashes [][sha256.Size]byte, bps []breakpoint, min int64, now time.Time) cacheUsage {
	alive := func(i int) *cacheEntry {
		e := c[hashes[i]]
		if e == nil || !now.Before(e.expires) {
			return nil
		}
		return e
	}
	var eligible []breakpoint
	for _, bp := range bps {
		if pr.blocks[bp.block].tokens() >= min {
			eligible = append(eligible, bp)
		}
	}
	hit := -1
	for _, bp := range eligible {
		for j := bp.block; j >= 0 && j > bp.block-lookback; j-- {
			if alive(j) != nil {
				hit = max(hit, j)
				break
			}
		}
	}
	var u cacheUsage
	if hit >= 0 {
		e := alive(hit)
		e.expires = now.Add(e.ttl)
		u.read = pr.blocks[hit].tokens()
	}
	u.covered = u.read
	for _, bp := range eligible {
		if t := pr.blocks[bp.block].tokens(); t > u.covered {
			u.created += t - u.covered
			if bp.ttl == time.Hour {
				u.created1h += t - u.covered
			}
			u.covered = t
		}
		if e := alive(bp.block); e != nil {
			e.ttl = max(e.ttl, bp.ttl)
			if exp := now.Add(bp.ttl); exp.After(e.expires) {
				e.expires = exp
			}
		} else {
			c[hashes[bp.block]] = &cacheEntry{expires: now.Add(bp.ttl), ttl: bp.ttl}
		}
	}
	return u
}

// prune drops the entries of c that have expired at now.
func (c promptCache) prune(now time.Time) {
	for k, e := range c {
		if !now.Before(e.expires) {
			delete(c, k)
		}
	}
}
