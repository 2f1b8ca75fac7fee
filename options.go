package toolrun

import (
	"context"
	"log/slog"
	"os"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// defaultRetryAfterCap is the longest wait a failed request's retry-after
// may ask for, when [Timeouts.RetryAfter] is zero.
const defaultRetryAfterCap = time.Minute

// defaultStreamIdleTimeout is how long a streamed response may send nothing
// before the attempt counts as failed, when [Timeouts.StreamIdle] is
// zero. The API sends a ping at least every few seconds while it works.
const defaultStreamIdleTimeout = 90 * time.Second

// defaultStreamIdleTotal bounds a turn's streamed attempts' idle time
// summed, when [Timeouts.StreamIdleTotal] is zero: one whole StreamIdle
// and a shorter retry.
const defaultStreamIdleTotal = 2 * time.Minute

// defaultCancelGrace is how long a cancelled run waits for its running tool
// calls to return, when [Options.Timeouts.CancelGrace] is zero.
const defaultCancelGrace = 5 * time.Second

// Options configures a [Runner]. The zero value is ready to use: it logs to
// slog.Default(), stops after 25 turns, runs up to 128 calls of a turn at
// once, with no tool timeout, and allows every call. The runner copies
// Options when it is built. The hooks (function fields) are described in
// the package documentation's section Hooks.
type Options struct {
	// Logger receives the run's records: tool failures at Error, denials,
	// skips and limit stops at Warn, routine records at Debug (ANTHROPIC_LOG
	// turns them up). Every record is redacted first; see the package
	// documentation's section Logging. Nil means slog.Default().
	Logger *slog.Logger

	// MaxTurns bounds the model requests of a run. Zero means 25; a
	// negative value means no bound. A run that reaches it stops with
	// [StopMaxTurns], its last turn's calls pending: raise it with
	// [Runner.SetMaxTurns] and run again to go on.
	MaxTurns int

	// MaxParallelTools bounds the calls of one turn that run at once. Zero
	// means 128: a turn's calls, mostly waiting on I/O, all run at once, as
	// the official runner runs them; bound a scarce resource's tool with
	// [ToolConfig].MaxParallel. 1 runs them one after another.
	MaxParallelTools int

	// Timeouts bound tool calls, requests and streams; see [Timeouts].
	Timeouts Timeouts

	// Policy, if non-nil, decides each call before the tool's own
	// [ToolConfig].Policy; see [Policy]. Nil allows every call the tool's
	// policy allows.
	Policy Policy

	// AfterTool, if non-nil, is called with each call's result before it is
	// sent, and may change its Content, IsError and CacheControl. An error
	// ends the run (a *[HookError]; [StopRun] ends it with [StopHook]).
	AfterTool func(ctx context.Context, r *ToolResult) error

	// BeforeRequest, if non-nil, is called before each request (a turn's or
	// a compaction's) with its params and the number of the turn it comes
	// before. It gets a copy of the history; its changes apply to that
	// request only. An error ends the run as for AfterTool. With thinking
	// on, make an edit of what came before (the system prompt, the tools,
	// earlier messages) the same way in every later request: the API binds
	// a thinking block to everything before it (Params.Thinking's
	// block_binding), and refuses, or drops, one sent back behind a
	// changed prefix.
	BeforeRequest func(ctx context.Context, turn int, params *anthropic.BetaMessageNewParams) error

	// AfterResponse, if non-nil, is called with each response before the
	// turn is handed to the caller. [StopRun] ends the run with [StopHook];
	// another error ends it with that error.
	AfterResponse func(ctx context.Context, turn int, message *anthropic.BetaMessage) error

	// OnEvent, if non-nil, receives every [Event] of the run, to observe.
	OnEvent func(ctx context.Context, e Event)

	// Store, if non-nil, keeps the run's [State] under RunID as it goes (see
	// the package documentation's section Durable runs); [Open] resumes a
	// run from it. A run whose state cannot be saved stops with [StopError].
	Store Store

	// RunID names the run in Store. It is required with Store.
	RunID string

	// StateKey, if set, signs every [State] the runner exports or saves, and
	// [Resume] and [Open] refuse one whose signature does not match
	// ([ErrStateSignature]). See the section Durable runs for what a
	// signature does not show. The temporal module's workers do not use
	// it: the workflow changes the state between steps and holds no key.
	StateKey []byte

	// Budget bounds the tokens, cost, time and tool calls of the run; see
	// [Budget]. The zero value bounds nothing.
	Budget Budget

	// MaxResultBytes bounds the text of each tool result sent to the model,
	// for tools that set no [ToolConfig.MaxResultBytes]; a longer one is cut,
	// with a note saying so. Zero means 100,000; negative means no bound.
	MaxResultBytes int

	// NoCache turns off prompt caching: by default every request carries a
	// top-level cache_control, so each turn reads the prefix the last wrote.
	NoCache bool

	// CacheTTL is the cache's time to live: "5m" (the default) or "1h".
	CacheTTL anthropic.BetaCacheControlEphemeralTTL

	// Compaction compacts a long run's history; see [Compaction]. The zero
	// value never compacts on its own.
	Compaction Compaction

	// NoThread turns off message threads. By default a run goes on a
	// message thread (beta), so that each request sends only what is new;
	// see the package documentation's section Message threads for what it
	// costs and how it falls back.
	NoThread bool

	// Stream, if true, streams every response, with its text, thinking and
	// tool input as [Delta] events; a failed stream is requested again per
	// StreamRetry. No call starts before its response is whole.
	Stream bool

	// StreamRetry says how a failed stream is requested again. The zero
	// value means [RetryPolicy]'s defaults.
	StreamRetry RetryPolicy

	// sharedEvents is set by driver.ShareEvents: OnEvent gets the
	// request's own params in RequestSent, not a copy.
	sharedEvents bool
}

// Timeouts bound the parts of a run that wait on someone else: a tool, the
// model, a stream, a server's retry-after. With the zero value, a model
// that stalls every request or stream ends its turn with a typed error
// within about two minutes. Each field's zero value means its default; a
// negative value means no bound.
type Timeouts struct {
	// Tool bounds each call of a tool that sets no [ToolConfig.Timeout]: a
	// call past it is cancelled and the model gets an is_error result that
	// says so. Zero means no timeout, since only the tool knows how long its
	// work may take.
	Tool time.Duration

	// Request bounds each attempt of a request that is not streamed, from
	// sending it to the end of its body. Such a response sends nothing
	// until it is whole, so a stall looks like a slow answer; an attempt
	// past the bound fails the turn with a *[TimeoutError] and is not sent
	// again, by toolrun or the anthropic client. Zero means StreamIdle's
	// bound (90 seconds); set Stream, or a longer Request, for long answers.
	Request time.Duration

	// StreamIdle is how long a streamed attempt may send no bytes, not even
	// a ping, before it fails and is retried per [Options].StreamRetry. The
	// API pings every few seconds while it works, so silence this long
	// means the stream is dead. Zero means 90 seconds.
	StreamIdle time.Duration

	// StreamIdleTotal bounds a turn's streamed attempts' idle time summed:
	// the silence that ended each failed attempt and the waits before each
	// retry. A retry gets what is left (at most StreamIdle), and none is
	// sent once it is used up: the turn fails with a *[TimeoutError] whose
	// Total is set. A stream that keeps sending may run as long as it
	// needs. Zero means 2 minutes, or StreamIdle if longer (none if
	// StreamIdle is negative).
	StreamIdleTotal time.Duration

	// RetryAfter caps the wait a failed request's "retry-after" or
	// "retry-after-ms" header may ask for before it is sent again, by the
	// anthropic client or by StreamRetry. A longer wait, or one past the
	// run's context or Budget.WallTime, is not waited: the turn fails at
	// once with a *[RetryAfterError] naming it, so that a server asking
	// for a day's pause cannot hold the run for a day. Zero means 1 minute.
	RetryAfter time.Duration

	// CancelGrace bounds how long a cancelled run (its context done, or
	// Budget.WallTime passed) waits for its running calls to return. A call
	// still running then is abandoned and logged at Error; it stays
	// journaled as started, so it is answered as interrupted
	// ([ErrInterrupted]) and never run again unless its tool is idempotent.
	// Zero means 5 seconds.
	CancelGrace time.Duration
}

// maxParallel returns the bound on the calls of a turn that run at once.
func (o *Options) maxParallel() int {
	if o.MaxParallelTools <= 0 {
		return DefaultMaxParallelTools
	}
	return o.MaxParallelTools
}

// cancelGrace returns how long a cancelled run waits for its running calls.
func (o *Options) cancelGrace() time.Duration {
	if o.Timeouts.CancelGrace <= 0 {
		return defaultCancelGrace
	}
	return o.Timeouts.CancelGrace
}

// orDefault returns d for zero, no bound (0) for a negative value, and v
// otherwise.
func orDefault(v, d time.Duration) time.Duration {
	switch {
	case v == 0:
		return d
	case v < 0:
		return 0
	}
	return v
}

// runConfig is what a runner is given at New and never changes: the
// client's Messages service, its Options and the logger made of them. The
// runners of one [github.com/toolrun/toolrun/driver.Template] share theirs.
type runConfig struct {
	messages anthropic.BetaMessageService
	opts     Options
	log      runLogger
}

// newConfig returns the runConfig of a runner of messages with opts (nil
// for none), reading the environment's ANTHROPIC_LOG now.
func newConfig(messages anthropic.BetaMessageService, opts *Options) *runConfig {
	c := &runConfig{messages: messages}
	if opts != nil {
		c.opts = *opts
	}
	c.log = newRunLogger(c.opts.Logger, os.Getenv(logEnv))
	return c
}
