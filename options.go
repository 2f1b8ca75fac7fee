package toolrun

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun/internal/defaults"
)

// defaultRetryAfterCap is the longest wait a failed request's retry-after
// may ask for, when [Timeouts.RetryAfter] is zero.
const defaultRetryAfterCap = time.Minute

// defaultStreamIdleTimeout is how long a streamed response may send nothing
// before the attempt counts as failed, when [Timeouts.StreamIdle] is
// zero. The API sends a ping at least every few seconds while it works.
const defaultStreamIdleTimeout = 90 * time.Second

// defaultCancelGrace is how long a cancelled run waits for its running tool
// calls to return, when [Options.Timeouts.CancelGrace] is zero.
const defaultCancelGrace = 5 * time.Second

// Options configures a [Runner]. The zero value is ready to use: it logs to
// slog.Default(), stops after 25 turns, runs up to 8 calls of a turn at
// once, with no tool timeout,
// and allows every call. The runner copies Options when it is built.
//
// # Hooks
//
// Hooks are function fields called, when non-nil, at fixed points of a turn.
// Each that may change the run has one job:
//
//   - BeforeRequest may change the params of one request;
//   - AfterResponse may end the run when a response arrives;
//   - Policy and each tool's [ToolConfig.Policy] decide the calls (see
//     [Policy] for the order);
//   - AfterTool may change a call's result before it is sent.
//
// OnEvent only observes. The policies are called for the calls of
// a turn one at a time, in order; AfterTool is called as each call
// finishes, so it may be called concurrently for the calls of one turn;
// OnEvent is never called concurrently with itself. A panic in any hook is
// recovered: the run stops with a *[HookError] and the stack is logged.
type Options struct {
	// Logger receives the run's records: each tool failure at Error with its
	// tool, tool_use id, turn, duration, error and, for a panic, the stack;
	// denials, skips and limit stops at Warn; routine records (request
	// sent, response received, tool call finished, run stopped) at Debug.
	// Nil means slog.Default().
	//
	// The environment variable ANTHROPIC_LOG, read by [New],
	// turns the routine records up: with "info" they are logged at Info,
	// and with "debug" at Info too, with each request and response body
	// logged at Debug. If Logger is nil, ANTHROPIC_LOG also makes the
	// runner log to a text handler on stderr at that level instead of
	// slog.Default().
	//
	// Every record is redacted first, each credential in it replaced by
	// "[REDACTED]": the values of Authorization, Proxy-Authorization
	// (whose scheme is kept), Cookie and Set-Cookie headers; of fields
	// whose names end in api_key, access_key, secret_key, private_key,
	// secret, password, passwd, passphrase, token, credential(s) or auth,
	// in text, HTTP dumps, JSON and query strings; keys and tokens known
	// by their shape (sk-ant-…, other vendors' keys, JSON Web Tokens,
	// bearer and basic credentials); a URL's password; a PEM private
	// key's body; and the values (8 bytes or more) of environment
	// variables whose names say they hold secrets (ANTHROPIC_API_KEY, any
	// name with SECRET, PASSWORD, TOKEN, APIKEY, CREDENTIAL, AUTH, COOKIE,
	// SESSION, PRIVATE or PAT as a '_'-separated word, or KEY as its
	// last). These are found in JSON strings too, however often escaped,
	// and valid JSON stays valid. Redaction is a safety net: it cannot
	// know a secret of the application's own. Package transcript and
	// package mcptool redact the same way.
	Logger *slog.Logger

	// MaxTurns bounds the model requests of a run. Zero means
	// 25; a negative value (-1, say) means no bound. A run that reaches it
	// stops with [StopMaxTurns] and an error wrapping [ErrMaxTurns]; the
	// calls of the last turn are left pending, not run, so raising the
	// limit with [Runner.SetMaxTurns] and running again picks up where it
	// stopped.
	MaxTurns int

	// MaxParallelTools bounds the calls of one turn that run at once. Zero
	// means 128: more than a response holds in practice, so that the calls
	// of a turn, which mostly wait on I/O, all run at once, as the official
	// runner runs them, and the bound only stops a runaway response from
	// starting thousands. A tool that shares a scarce resource (a rate
	// limit, a connection pool) bounds its own calls with
	// [ToolConfig].MaxParallel instead. 1 runs them one after another.
	MaxParallelTools int

	// Timeouts bound tool calls, requests, idle streams and the wait for
	// cancelled calls; see [Timeouts]. The zero value has the defaults.
	Timeouts Timeouts

	// Policy, if non-nil, decides each call, before the tool's own
	// [ToolConfig].Policy: [DenyTools] and [AllowOnly] deny by name, and
	// [Chain] combines several, as in
	//
	//	Policy: toolrun.Chain(toolrun.DenyTools("delete_file"), auditPolicy)
	//
	// See [Policy] for how Policy, the tool's policy, a person and a
	// remembered Always approval combine. Nil allows every call the tool's
	// policy allows.
	Policy Policy

	// AfterTool, if non-nil, is called with each call's result before it is
	// sent: for calls that ran, failed, were denied, skipped or not run. It
	// may change the result's Content, IsError and CacheControl (redact,
	// truncate, turn an error into a result, set a cache breakpoint).
	// Returning an error ends the run with that error, wrapped in a
	// *[HookError]; returning [StopRun] ends it with [StopHook].
	AfterTool func(ctx context.Context, r *ToolResult) error

	// BeforeRequest, if non-nil, is called before each request with the
	// params about to be sent, including the messages: a turn's, and a
	// compaction's (whose params carry the compaction field, or, client-side,
	// end with the request for a summary), with the number of the turn it
	// comes before. Its changes apply to
	// that request only; the runner's own history is not changed. The tool
	// definitions in params.Tools, and the history's messages, are shared
	// with the runner and other runners: replace an element rather than
	// change what it points to. Returning an error ends the run as for
	// AfterTool.
	BeforeRequest func(ctx context.Context, turn int, params *anthropic.BetaMessageNewParams) error

	// AfterResponse, if non-nil, is called with each response before the
	// turn is handed to the caller. Returning [StopRun] ends the run with
	// [StopHook]; another error ends it with that error.
	AfterResponse func(ctx context.Context, turn int, message *anthropic.BetaMessage) error

	// OnEvent, if non-nil, receives every [Event] of the run. It observes
	// only: it cannot change the run. A panic in it stops the run with a
	// *[HookError] at the next step.
	OnEvent func(ctx context.Context, e Event)

	// Store, if non-nil, keeps the run's [State] as it goes, under RunID:
	// after each response, before each tool call starts (journaled as
	// started), after it finishes, after each turn is committed and when the
	// run stops. A run whose state cannot be saved stops with [StopError]
	// rather than risk running a call twice after a crash, and a run that
	// another runner saved since this one loaded it stops with an error
	// wrapping [ErrRunBusy] before it runs anything more. [Open] resumes a
	// run from its store.
	Store Store

	// RunID names the run in Store. It is required with Store.
	RunID string

	// StateKey, if set, signs every [State] the runner exports or saves
	// (HMAC-SHA256 over its canonical JSON, in State.Signature, the RunID
	// included), and [Resume] and [Open] refuse a state whose signature
	// does not match with an error wrapping [ErrStateSignature], as [Open]
	// does a signed state of another run. Without it, states are not
	// signed and are trusted as they are: whoever can write a saved state
	// can change what a resumed run does.
	//
	// A signature shows that the runner wrote a state and that it is
	// whole, not that it is the latest: whoever can write the store can
	// put back an earlier state of the same run that the runner signed (a
	// restored backup does the same), and the resumed run goes on from
	// there, which can run again a call that ran after that save. Nothing
	// in the state can tell, since the store is where it would be kept;
	// guard write access to the store, and restore a backup only of a run
	// that is over.
	StateKey []byte

	// Budget bounds the tokens, cost, time and tool calls of the run; see
	// [Budget]. The zero value bounds nothing.
	Budget Budget

	// MaxResultBytes bounds the text of each tool result sent to the model,
	// for tools that set no [ToolConfig.MaxResultBytes]: a longer result is
	// truncated with a note telling the model so, while hooks, events and
	// transcripts see it whole. Zero means 100,000; a
	// negative value means no bound.
	MaxResultBytes int

	// NoCache turns off prompt caching. By default every request carries a
	// top-level cache_control (automatic caching), so each turn reads the
	// prefix the previous turn wrote instead of paying for the whole history
	// again; params that set CacheControl themselves are sent as they are.
	NoCache bool

	// CacheTTL is the cache's time to live: "5m" (the default) or "1h",
	// worth it when turns are more than five minutes apart (approvals).
	CacheTTL anthropic.BetaCacheControlEphemeralTTL

	// Compaction compacts a long run's history; see [Compaction]. The zero
	// value never compacts on its own.
	Compaction Compaction

	// NoThread turns off message threads. By default the conversation runs
	// on a message thread (beta): the API keeps the history and each
	// request sends only the messages added since the last one, so a
	// request's size stays flat instead of growing with the history
	// (BENCHMARKS.md: 0.3 KiB at turn 300 against 85.9 KiB), for no more
	// client CPU per turn and, with prompt caching (on unless NoCache), the
	// same billed tokens. The runner still holds the whole history (for
	// State, hooks, edits and compaction) and encodes only what is new
	// (thread.go). What it costs: a history the caller, a hook or
	// compaction changed, a changed system prompt or tool list, a refusal
	// or a failed request starts a new thread, whose first request carries
	// the whole history, as does a resumed run's, or one that stopped and
	// goes on; and the API stores the thread.
	//
	// How it falls back: a run whose model names Bedrock ("anthropic.…",
	// an ARN) or Vertex ("…@version") starts without a thread; a request
	// the API cannot take on a thread (thread_unsupported_request) is sent
	// again with the whole history, and so is every later one; and when
	// the run's first thread request fails with a 400 while the same
	// request without the thread succeeds, the rest of the run goes
	// without one, with one Warn record naming the error. Set NoThread for
	// a platform known to have no threads, or to keep the API from
	// storing the conversation.
	NoThread bool

	// Stream, if true, streams every response: while it arrives, OnEvent
	// and [Runner.Events] receive its text, thinking and tool input as
	// [Delta] events. A stream that fails
	// after it began (an error event, a dropped connection, no bytes for
	// Timeouts.StreamIdle) is requested again per StreamRetry. No call starts
	// before its response is whole, so a response that ends in max_tokens
	// or refusal, or fails and is retried, never runs a call.
	Stream bool

	// StreamRetry says how a streamed response that fails after it began
	// is requested again. The zero value means [RetryPolicy]'s defaults.
	StreamRetry RetryPolicy
}

// Timeouts bound the parts of a run that wait on someone else: a tool, the
// model, a stream. Each field's zero value means its default; a negative
// value means no bound.
type Timeouts struct {
	// Tool bounds each call of a tool that sets no [ToolConfig.Timeout]. A
	// call that times out sends the model an is_error result that says so,
	// and its ctx is cancelled. Zero means no timeout.
	Tool time.Duration

	// Request bounds each attempt of a request that is not streamed, from
	// sending it to the end of the response body. A response that is not
	// streamed sends nothing until it is whole, so a stalled one cannot be
	// told from a slow one by its bytes: it is given the idle bound of a
	// stream. An attempt that passes it is not sent again (by toolrun or by
	// the anthropic client): the turn fails with a *[TimeoutError], so that
	// a stalled request ends within this bound, not after the client's
	// every attempt. Zero means StreamIdle's bound (90 seconds by default);
	// set Stream, or a longer Request, for turns that write long answers.
	Request time.Duration

	// StreamIdle is how long a streamed response may send no bytes (not
	// even a ping) before the attempt fails and is retried like any other
	// stream fault. Zero means 90 seconds.
	StreamIdle time.Duration

	// RetryAfter caps the wait a failed request's "retry-after" or
	// "retry-after-ms" header may ask for before it is sent again, by the
	// anthropic client or by StreamRetry. A longer wait, or one that would
	// end after the run's context or Budget.WallTime, is not waited: the
	// turn fails at once with a *[RetryAfterError] naming it, so that a
	// server asking for a day's pause cannot hold the run for a day. Zero
	// means 1 minute.
	RetryAfter time.Duration

	// CancelGrace bounds how long a cancelled run (its context done, or
	// Budget.WallTime passed) waits for its running calls to return. A call
	// still running after it is abandoned: it stays journaled as started, so
	// it is answered as interrupted ([ErrInterrupted]) and never run again
	// unless its tool is idempotent, and it is logged at Error. Zero means
	// 5 seconds.
	CancelGrace time.Duration
}

// maxParallel returns the bound on the calls of a turn that run at once.
func (o *Options) maxParallel() int {
	if o.MaxParallelTools <= 0 {
		return defaults.MaxParallelTools
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
// client's Messages service, its Options and the logger made of them (and
// of logEnv and slog's default logger, which it was made with).
type runConfig struct {
	messages anthropic.BetaMessageService
	opts     Options
	log      runLogger
	env      string
	def      *slog.Logger
}

// lastConfig is the runConfig that New made last, for the next New with an
// equal one.
var lastConfig atomic.Pointer[runConfig]

// sharedConfig returns the runConfig of a runner of messages with opts
// (nil for none): the one the last New made, if it is equal, or a new one.
// A runner is held by the thousand while runs await approval, and its own
// copy of these would be a fifth of it.
//
// Equal means equal as memory: every field the same value, every func,
// map, slice, pointer and string the same one (which is what copying opts
// gives: a copy shares those with the caller's value). Options holds
// funcs, which Go cannot compare, so it is compared as bytes; padding
// that differs between two copies makes them unequal, which costs only the
// sharing. A logEnv value that is not understood is not shared, so that
// each New warns of it as before.
func sharedConfig(messages anthropic.BetaMessageService, opts *Options) *runConfig {
	c := runConfig{messages: messages, env: os.Getenv(logEnv), def: slog.Default()}
	if opts != nil {
		c.opts = *opts
	}
	if last := lastConfig.Load(); last != nil && last.env == c.env && last.def == c.def &&
		sameMemory(&last.messages, &c.messages) && sameMemory(&last.opts, &c.opts) {
		return last
	}
	n := c
	n.log = newRunLogger(n.opts.Logger, c.env)
	if strings.TrimSpace(c.env) == "" || logEnvKnown(c.env) {
		lastConfig.Store(&n)
	}
	return &n
}

// sameMemory reports whether *a and *b hold the same bytes.
func sameMemory[T any](a, b *T) bool {
	size := unsafe.Sizeof(*a)
	return string(unsafe.Slice((*byte)(unsafe.Pointer(a)), size)) == string(unsafe.Slice((*byte)(unsafe.Pointer(b)), size))
}
