package toolruntest

import (
	"slices"
	"sync"
	"time"
)

// Options configure a server made by [New]. The zero value is a server with
// an empty script, the time.Now clock, the API's minimum cacheable lengths
// and message threads for every request; [Script] fills in Replies.
type Options struct {
	// Replies is the script of the server: it answers the n-th valid
	// POST /v1/messages with Replies[n]. A request that fails validation is
	// answered with HTTP 400 and does not use up a reply. A request past the
	// end of the script is answered with HTTP 500 and an api_error saying
	// that the script ran out, and is recorded in [Server.Errors] as
	// [ErrScriptEnded]. That answer carries "x-should-retry: false", so the
	// SDK fails at once instead of retrying. Replies must be empty when Func
	// is set.
	Replies []Reply
	// Func, if non-nil, computes the reply to each request that passed
	// validation, in place of a script. The server may call it from many
	// goroutines at once, which suits concurrent runs whose requests arrive
	// in no fixed order. Func must not modify the Request. If it panics, the
	// server records the panic in [Server.Errors] and answers with HTTP 500
	// and "x-should-retry: false".
	Func func(*Request) Reply
	// Now, if non-nil, is the server's clock, which the prompt cache and
	// message threads expire by. If nil, it is time.Now. A [Clock] lets a
	// test move time on by hand, to see a 5-minute cache entry expire
	// without waiting for it.
	Now func() time.Time
	// MinCacheableTokens, if positive, is the minimum cacheable prompt
	// length for every model, in place of the table of
	// [MinCacheableTokens].
	MinCacheableTokens int64
	// ThreadUnsupported, if non-empty, makes the server reject every request
	// that has a thread field with HTTP 400 and the error code
	// thread_unsupported_request, naming these features as the ones the
	// thread cannot hold (such as "inference_hooks"), so that a test can
	// check that a client falls back to sending the whole history without
	// a thread.
	ThreadUnsupported []string
	// BindThinking makes the server bind thinking blocks to their
	// conversation, as the API does for accounts created on or after
	// 2026-08-31: for each thinking block it sends, it records a hash of
	// everything before it (the system prompt, the tools, the earlier
	// messages and the blocks of its message before it, as canonical
	// JSON, leaving out cache_control), and a later request that sends
	// the block back behind anything else, or sends a thinking block the
	// server never sent, fails the check. The request's
	// thinking.block_binding.prefix_mismatch_behavior says what follows:
	// "error" (the default) answers HTTP 400; "drop_block" leaves the
	// block, and the rest of its run of thinking blocks, out of what the
	// model sees, and records it in [Request].DroppedThinking. Off, the
	// server checks no thinking block, as for older accounts.
	BindThinking bool
}

// Clock is a clock for [Options].Now that stands still until Advance moves
// it. The zero Clock reads the zero time. Its methods are safe for
// concurrent use.
type Clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

// Now returns the time of the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// withDefaults returns a copy of opts with its defaults filled in, and
// without Replies and Func, which the server keeps in fields of its own.
func withDefaults(opts Options) Options {
	o := opts
	o.Replies, o.Func = nil, nil
	o.ThreadUnsupported = slices.Clone(opts.ThreadUnsupported)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// minCacheableTokens returns the minimum cacheable prompt length of model on
// a server with these options.
func (o *Options) minCacheableTokens(model string) int64 {
	if o.MinCacheableTokens > 0 {
		return o.MinCacheableTokens
	}
	return MinCacheableTokens(model)
}
