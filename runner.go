package toolrun

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/jsonschema-go/jsonschema"
)

// DefaultMaxTurns is the turn limit when [Options.MaxTurns] is zero.
const DefaultMaxTurns = 25

// Unlimited, as [Options.MaxTurns], lets a run take any number of turns.
const Unlimited = -1

// DefaultMaxParallelTools bounds the calls of one turn that run at once when
// [Options.MaxParallelTools] is zero.
const DefaultMaxParallelTools = 8

// Options configures a [Runner]. The zero value is ready to use: it logs to
// slog.Default(), stops after [DefaultMaxTurns] turns, runs up to
// [DefaultMaxParallelTools] calls of a turn at once, with no tool timeout,
// and allows every call. The runner copies Options when it is built.
//
// # Hooks
//
// Hooks are function fields called, when non-nil, at fixed points of a turn,
// in this order:
//
//  1. BeforeRequest, before each request is sent;
//  2. AfterResponse, when the response has arrived;
//  3. for each tool call: the Allow and Deny lists, Decide, the tool's
//     [ToolConfig.Policy], input validation, the tool's Run, then AfterTool;
//  4. OnEvent, for every event of the above as it happens.
//
// Decide and the tools' policies are called for the calls of a turn one at a
// time, in the order of the calls, so a hook that asks a person asks about one
// call at a time. AfterTool is called as each call finishes, so it may be
// called concurrently for the calls of one turn. OnEvent is never called
// concurrently with itself.
type Options struct {
	// Logger receives the run's records: each tool failure at Error with its
	// tool, tool_use id, turn, duration, error and, for a panic, the stack;
	// denials, skips and limit stops at Warn; routine records (request
	// sent, response received, tool call finished, run stopped) at Debug.
	// Nil means slog.Default().
	//
	// The environment variable ANTHROPIC_LOG ([LogEnv]), read by [New],
	// turns the routine records up: with "info" they are logged at Info,
	// and with "debug" at Info too, with each request and response body
	// logged at Debug. If Logger is nil, ANTHROPIC_LOG also makes the
	// runner log to a text handler on stderr at that level instead of
	// slog.Default(). A Logger given here is always the one used, with its
	// own level. Every record is passed through [Redact] first, so API
	// keys, auth tokens and Authorization and X-Api-Key headers never
	// reach it, at any level.
	Logger *slog.Logger

	// MaxTurns bounds the model requests of a run. Zero means
	// [DefaultMaxTurns]; [Unlimited] means no bound. A run that reaches it
	// stops with [StopMaxTurns] and logs a warning; the calls of the last
	// turn are left pending, not run, so raising the limit with
	// [Runner.SetMaxTurns] and running again picks up where it stopped.
	MaxTurns int

	// MaxParallelTools bounds the calls of one turn that run at once. Zero
	// means [DefaultMaxParallelTools]; 1 runs them one after another.
	MaxParallelTools int

	// ToolTimeout bounds each call of a tool that sets no
	// [ToolConfig.Timeout]. Zero means no timeout.
	ToolTimeout time.Duration

	// Allow, if non-nil, lists the only tool names that may run; calls of
	// other tools are denied.
	Allow []string

	// Deny lists tool names whose calls are denied.
	Deny []string

	// Decide, if non-nil, decides each call before the tool's own policy.
	// Its input is the model's, validated against the tool's schema. A call
	// it allows is then decided by the tool's policy, if any.
	Decide func(ctx context.Context, call ToolCall) Decision

	// AfterTool, if non-nil, is called with each call's result before it is
	// sent: for calls that ran, failed, were denied, skipped or not run. It
	// may change r.Content and r.IsError (redact, truncate, turn an error
	// into a result or a result into an error). Returning an error ends the
	// run with that error, wrapped in a *[HookError]; returning [StopRun]
	// ends it with [StopHook].
	AfterTool func(ctx context.Context, r *ToolResult) error

	// BeforeRequest, if non-nil, is called before each request with the
	// params about to be sent, including the messages. Its changes apply to
	// that request only; the runner's own history is not changed. The tool
	// definitions in params.Tools are shared with other runners: replace an
	// element rather than change what it points to. Returning
	// an error ends the run as for AfterTool.
	BeforeRequest func(ctx context.Context, turn int, params *anthropic.BetaMessageNewParams) error

	// AfterResponse, if non-nil, is called with each response before the
	// turn is handed to the caller. Returning [StopRun] ends the run with
	// [StopHook]; another error ends it with that error.
	AfterResponse func(ctx context.Context, turn int, message *anthropic.BetaMessage) error

	// OnEvent, if non-nil, receives every [Event] of the run.
	OnEvent func(ctx context.Context, e Event)

	// Store, if non-nil, keeps the run's [State] as it goes, under RunID:
	// after each response, before each tool call starts (journaled as
	// started), after it finishes, after each turn is committed and when the
	// run stops. A run whose state cannot be saved stops with [StopError]
	// rather than risk running a call twice after a crash. [Open] resumes a
	// run from its store.
	Store Store

	// RunID names the run in Store. It is required with Store.
	RunID string

	// Budget bounds the tokens, cost, time and tool calls of the run; see
	// [Budget]. The zero value bounds nothing.
	Budget Budget

	// Prices prices models for Budget.CostUSD and [Result.CostUSD], by
	// model name prefix; models it lacks are priced by [DefaultPrices].
	Prices map[string]Price

	// MaxResultBytes bounds the text of each tool result sent to the model,
	// for tools that set no [ToolConfig.MaxResultBytes]: a longer result is
	// truncated with a note telling the model so, while hooks, events and
	// transcripts see it whole. Zero means [DefaultMaxResultBytes]; a
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

	// Thread runs the conversation on a message thread (beta): the API keeps
	// the history and each request sends only the messages added since the
	// last one. Everything else works the same: the runner still holds the
	// whole history (for State, hooks, edits and compaction), and a request
	// the thread cannot take — a changed system prompt or tool list, say —
	// is sent again with the whole history, without a thread, as the API
	// advises. A resumed run starts a new thread.
	Thread bool

	// Stream, if true, streams every response: while it arrives, OnEvent
	// and [Runner.Events] receive its text, thinking and tool input as
	// [TextDelta], [ThinkingDelta] and [ToolInputDelta], and each tool call
	// as [ToolCallReady] when its block is whole. A stream that fails after
	// it began is requested again per StreamRetry. The default, false,
	// waits for each response in one piece; [Runner.RunStream] streams
	// whatever Stream says.
	Stream bool

	// EarlyToolStart, with Stream, starts each call as soon as its tool_use
	// block has arrived whole, while the rest of the response streams in;
	// the results are still sent in block order. Early start takes the
	// calls up to the first call of an [ToolConfig.Exclusive] tool; calls
	// from there on, calls deferred to a person, the calls of the last turn
	// [Options.MaxTurns] allows, all calls when Budget.ToolCalls is set, and,
	// with Store, calls of tools not [ToolConfig.Idempotent] (they cannot be
	// journaled before the response is whole) wait for the end of the
	// response as usual. Calls denied or skipped are decided early and
	// answered when the response is whole.
	//
	// If the response then fails mid-stream, the calls it started are
	// cancelled and waited for; each cancelled call is reported by a
	// [ToolFinished] whose error wraps [ErrInterrupted], none is answered,
	// and the retried response starts its calls afresh (see
	// [StreamRetried]). The tools have therefore run before the turn is
	// handed out by [Runner.Next] and before AfterResponse: a caller who
	// then discards the turn discards their results. The default is false.
	EarlyToolStart bool

	// StreamRetry says how a streamed response that fails after it began
	// (an error event, a dropped connection) is requested again. The zero
	// value means [RetryPolicy]'s defaults.
	StreamRetry RetryPolicy
}

// StopReason says why a run stopped. Every way out of a run has one.
type StopReason string

// The reasons a run stops.
const (
	// StopEndTurn: the model answered without calling tools (end_turn or a
	// stop sequence).
	StopEndTurn StopReason = "end_turn"
	// StopMaxTurns: the run reached Options.MaxTurns.
	StopMaxTurns StopReason = "max_turns"
	// StopMaxTokens: a response was cut off at max_tokens. Tool calls in it
	// are answered as not run, since their input may be incomplete.
	StopMaxTokens StopReason = "max_tokens"
	// StopRefusal: the model refused.
	StopRefusal StopReason = "refusal"
	// StopContextWindow: the model's context window was exceeded.
	StopContextWindow StopReason = "model_context_window_exceeded"
	// StopAwaitingApproval: a call was deferred; see Result.Pending.
	StopAwaitingApproval StopReason = "awaiting_approval"
	// StopHook: a hook returned [StopRun]; see Result.Detail.
	StopHook StopReason = "hook"
	// StopBudget: the next step could pass a bound of Options.Budget; see
	// Result.Budget and Result.Detail.
	StopBudget StopReason = "budget"
	// StopCanceled: the context was cancelled.
	StopCanceled StopReason = "canceled"
	// StopError: a request or a hook failed; see Result.Err.
	StopError StopReason = "error"
)

// Usage adds up the tokens of a run's responses.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

func (u *Usage) add(v Usage) {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.CacheCreationInputTokens += v.CacheCreationInputTokens
	u.CacheReadInputTokens += v.CacheReadInputTokens
}

func usageOf(m *anthropic.BetaMessage) Usage {
	return Usage{
		InputTokens:              m.Usage.InputTokens,
		OutputTokens:             m.Usage.OutputTokens,
		CacheCreationInputTokens: m.Usage.CacheCreationInputTokens,
		CacheReadInputTokens:     m.Usage.CacheReadInputTokens,
	}
}

// Result is how a run ended and what it cost.
type Result struct {
	StopReason StopReason
	// Detail says more about the stop in words: the limit reached, the
	// hook's reason, the failed turn.
	Detail string
	// Err is the error that stopped the run, for StopError and StopCanceled.
	Err error
	// Message is the last response received, or nil if none was.
	Message *anthropic.BetaMessage
	// Messages is the history as it stands: valid to send again, with every
	// tool_use answered by its tool_result.
	Messages []anthropic.BetaMessageParam
	// Pending lists the calls awaiting a decision, for StopAwaitingApproval.
	Pending []PendingCall
	// Usage adds up every response of the run.
	Usage Usage
	// CostUSD is what the responses cost, priced by Options.Prices or
	// DefaultPrices.
	CostUSD float64
	// Budget names the bound of Options.Budget that stopped the run, for
	// StopBudget: "input_tokens", "output_tokens", "cost_usd", "wall_time"
	// or "tool_calls".
	Budget string
	// Turns counts the model requests that got a response.
	Turns int
	// ToolCalls counts the calls answered, run or not; ToolFailures those
	// answered with is_error.
	ToolCalls, ToolFailures int
}

// Text returns the text blocks of the last response, joined.
func (r *Result) Text() string {
	if r == nil || r.Message == nil {
		return ""
	}
	return messageText(r.Message)
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

// PendingCall is a call awaiting a person's decision.
type PendingCall struct {
	Call ToolCall `json:"call"`
	// Reason is why it needs approval, from the decision that deferred it.
	Reason string `json:"reason"`
}

// Turn is one model response handed to the caller by [Runner.Next] and
// [Runner.Turns], before the runner acts on it.
//
// After the caller is done with a turn, the next call of Next appends the
// response to the history and answers its tool calls (running the tools),
// unless the caller changed the history in between with
// [Runner.SetMessages], [Runner.AppendMessages] or [Runner.RetryTurn]: then
// the runner leaves the turn out and sends the history as the caller left
// it, as the official tool runners do. The caller who wants the turn in the
// history then appends it (Message.ToParam()) and its tool results.
type Turn struct {
	// Number counts the run's turns from 1.
	Number int
	// Message is the model's response.
	Message *anthropic.BetaMessage
	// ToolCalls are the client tool calls of Message, in order.
	ToolCalls []ToolCall
}

// Runner runs the tool loop of one conversation. Build it with [New] or
// [Resume]. A Runner is not safe for concurrent use: call its methods from
// one goroutine at a time (the loop body of [Runner.Turns] included).
type Runner struct {
	// messages is the client's Messages service: all the runner needs of
	// the client, a fraction of its size, which matters for runs held by
	// the thousand while they await approval.
	messages anthropic.BetaMessageService
	opts     Options
	log      runLogger // Options.Logger as ANTHROPIC_LOG sets it, redacting
	tools    map[string]*toolEntry
	order    []string // tool names in the order given to New
	names    []string // sorted names of the tools in the run, for messages to the model

	baseTools []anthropic.BetaToolUnionParam // the tool params the caller passed in params
	removed   []string                       // the names given to RemoveTools, kept in State

	params   anthropic.BetaMessageNewParams // Messages is the history
	maxTurns int

	pending *pendingTurn // the response handed out and not yet committed
	edited  bool         // the caller changed the history since pending was handed out
	always  map[string]bool

	turns        int
	toolCalls    int
	toolFailures int
	usage        Usage
	last         *anthropic.BetaMessage

	stopped *Result // set while the run is stopped

	started       time.Time // the first step in this process, for Budget.WallTime
	cost          float64   // in US dollars
	lastInput     int64     // the input tokens of the last request, all kinds
	lastInputMsgs int       // the messages the last request sent
	compactAsked  bool      // CompactBeforeNextTurn was called
	compactFloor  int64     // the input of the first response after the last compaction
	measureFloor  bool      // the next response's input is compactFloor

	thread    *anthropic.BetaMessageThread // with Options.Thread, from the first request
	threadKey string                       // the system prompt and tools the thread was created with

	stateMu sync.Mutex // guards the started and result fields of the pending turn's calls

	saveMu  sync.Mutex // serialises saves to Options.Store; guards saveErr
	saveErr error      // the first failed save, which stops the run
	ckpt    checkpoint // the run's hold on Options.Store; see checkpoint.go

	eventMu sync.Mutex // serialises OnEvent and logging; guards sink
	sink    *eventSink // the consumer of Events, while it runs

	early *earlyStart // the calls of the response just streamed that started early, until setPending
}

type toolEntry struct {
	tool     Tool
	config   ToolConfig
	resolved *jsonschema.Resolved
	param    anthropic.BetaToolUnionParam
}

// New returns a runner for the conversation in params (model, max_tokens,
// system, messages and any other request fields) with tools. Tools already
// in params.Tools are sent as they are (server tools, say); tools given here
// are added to them and run by the runner. opts may be nil.
//
// New panics if two tools share a name or a tool's schema does not resolve:
// those are mistakes in the program.
func New(client anthropic.Client, params anthropic.BetaMessageNewParams, tools []Tool, opts *Options) *Runner {
	r := &Runner{messages: client.Beta.Messages, always: map[string]bool{}, tools: map[string]*toolEntry{}}
	if opts != nil {
		r.opts = *opts
	}
	if r.opts.Store != nil && r.opts.RunID == "" {
		panic("toolrun: Options.Store needs Options.RunID")
	}
	r.log = newRunLogger(r.opts.Logger)
	r.maxTurns = r.opts.MaxTurns
	if r.maxTurns == 0 {
		r.maxTurns = DefaultMaxTurns
	}
	r.params = params
	r.params.Messages = slices.Clone(params.Messages)
	r.baseTools = slices.Clone(params.Tools)
	for _, t := range tools {
		name := t.Name()
		if _, dup := r.tools[name]; dup {
			panic(fmt.Sprintf("toolrun: two tools are named %q", name))
		}
		e := &toolEntry{tool: t}
		if c, ok := t.(Configurable); ok {
			e.config = c.Config()
		}
		var err error
		if ft, ok := t.(*FuncTool); ok {
			e.resolved, e.param, err = ft.prepare()
		} else {
			e.resolved, e.param, err = prepareTool(t)
		}
		if err != nil {
			panic(err.Error())
		}
		r.tools[name] = e
		r.names = append(r.names, name)
		r.order = append(r.order, name)
	}
	r.syncTools()
	return r
}

// syncTools rebuilds the tool list sent with each request and the sorted
// names told to the model: the caller's own tool params, then the runner's
// tools in the order they were given.
func (r *Runner) syncTools() {
	r.params.Tools = slices.Clone(r.baseTools)
	r.names = r.names[:0]
	for _, name := range r.order {
		if e, ok := r.tools[name]; ok {
			r.params.Tools = append(r.params.Tools, e.param)
			r.names = append(r.names, name)
		}
	}
	sort.Strings(r.names)
}

// RemoveTools takes tools out of the run: they are no longer sent to the
// model, and a later call of one of them is answered as an unknown tool, so
// a model cannot use a tool that was taken away. Names not in the run are
// ignored.
func (r *Runner) RemoveTools(names ...string) {
	for _, name := range names {
		delete(r.tools, name)
		if !slices.Contains(r.removed, name) {
			r.removed = append(r.removed, name)
		}
	}
	r.syncTools()
}

// Messages returns a copy of the history. The response of a turn handed out
// by Next is not in it until the next call of Next commits it.
func (r *Runner) Messages() []anthropic.BetaMessageParam {
	return slices.Clone(r.params.Messages)
}

// SetMessages replaces the history. Called while a turn is handed out, it
// takes over that turn: the runner will not append the turn's response or
// run its tools. If the run had stopped, it may go on.
func (r *Runner) SetMessages(messages []anthropic.BetaMessageParam) {
	r.params.Messages = slices.Clone(messages)
	r.markEdited()
}

// AppendMessages appends messages to the history, with the same effect on a
// handed-out turn as [Runner.SetMessages].
func (r *Runner) AppendMessages(messages ...anthropic.BetaMessageParam) {
	r.params.Messages = append(r.params.Messages, messages...)
	r.markEdited()
}

// RetryTurn discards the turn handed out by Next: its response is not
// appended and its tools do not run, and the next call of Next sends the
// same history again.
func (r *Runner) RetryTurn() { r.markEdited() }

func (r *Runner) markEdited() {
	if r.pending != nil {
		r.edited = true
	}
	if r.stopped != nil && r.stopped.StopReason != StopAwaitingApproval {
		r.stopped = nil
	}
}

// SetMaxTurns changes the turn limit; see [Options.MaxTurns]. A run stopped
// at its limit may go on after it is raised.
func (r *Runner) SetMaxTurns(n int) {
	if n == 0 {
		n = DefaultMaxTurns
	}
	r.maxTurns = n
	if r.stopped != nil && r.stopped.StopReason == StopMaxTurns {
		r.stopped = nil
	}
}

// Params returns the request params the runner sends, with the history as
// Messages.
func (r *Runner) Params() anthropic.BetaMessageNewParams {
	p := r.params
	p.Messages = slices.Clone(p.Messages)
	return p
}

// Run runs the loop until it stops and returns how it ended. The result is
// never nil. The error is non-nil exactly when the run stopped with
// [StopError] or [StopCanceled]; a run that reached a limit, was refused or
// awaits approval is not an error, but its StopReason says so.
func (r *Runner) Run(ctx context.Context) (*Result, error) {
	for {
		turn, err := r.Next(ctx)
		if err != nil {
			return r.stopped, err
		}
		if turn == nil {
			return r.stopped, nil
		}
	}
}

// Turns returns an iterator over the run's turns: each response, before the
// runner acts on it (see [Turn]). It ends when the run stops, after yielding
// the error if it stopped with one. Leaving the loop with break keeps the run
// as it is; ranging over Turns again picks it up where it was.
func (r *Runner) Turns(ctx context.Context) iter.Seq2[*Turn, error] {
	return func(yield func(*Turn, error) bool) {
		for {
			turn, err := r.Next(ctx)
			if err != nil {
				yield(nil, err)
				return
			}
			if turn == nil || !yield(turn, nil) {
				return
			}
		}
	}
}

// Result returns how the run stopped, or nil while it has not.
func (r *Runner) Result() *Result { return r.stopped }

// Next takes one step: it answers the turn handed out before, if any (see
// [Turn]), then sends the next request and returns the response as a turn.
// It returns (nil, nil) once the run has stopped without error; [Runner.Result]
// says why. On an error the run stops with StopError or StopCanceled and
// keeps its state: calling Next again tries again.
func (r *Runner) Next(ctx context.Context) (*Turn, error) {
	if r.halted() {
		return nil, nil
	}
	r.stopped = nil
	if r.started.IsZero() {
		r.started = time.Now()
	}
	if err := ctx.Err(); err != nil {
		return nil, r.fail(ctx, err, "")
	}
	if err := r.claim(ctx); err != nil { // before anything is decided or run
		return nil, r.fail(ctx, err, "")
	}
	if r.pending != nil {
		if r.edited {
			r.log.DebugContext(ctx, "toolrun: history changed by the caller; turn left out", "turn", r.pending.turn)
			r.pending = nil
		} else if done, err := r.finishTurn(ctx); err != nil || done {
			return nil, err
		}
	}
	r.edited = false
	if err := r.takeSaveErr(); err != nil {
		return nil, r.fail(ctx, err, "")
	}
	if r.maxTurns != Unlimited && r.turns >= r.maxTurns {
		r.stop(ctx, &Result{StopReason: StopMaxTurns, Detail: fmt.Sprintf("turn limit of %d reached", r.maxTurns)})
		return nil, nil
	}
	if due, tokens := r.compactDue(); due {
		if err := r.compact(ctx, tokens); err != nil {
			return nil, r.fail(ctx, err, "")
		}
	}
	return r.request(ctx)
}

// request sends the next turn's request and hands out its response.
func (r *Runner) request(ctx context.Context) (*Turn, error) {
	n := r.turns + 1
	r.emit(ctx, TurnStarted{Turn: n})
	params := r.params
	if r.opts.BeforeRequest != nil {
		// The hook may change the messages of this request only.
		params.Messages = slices.Clone(r.params.Messages)
	}
	if !r.opts.NoCache && params.CacheControl == (anthropic.BetaCacheControlEphemeralParam{}) {
		params.CacheControl = anthropic.NewBetaCacheControlEphemeralParam()
		params.CacheControl.TTL = r.opts.CacheTTL
	}
	if h := r.opts.BeforeRequest; h != nil {
		if err := h(ctx, n, &params); err != nil {
			return nil, r.hookFailed(ctx, "BeforeRequest", err)
		}
	}
	if res := r.checkBudget(&params); res != nil {
		r.stop(ctx, res)
		return nil, nil
	}
	start := time.Now()
	r.emit(ctx, RequestSent{Turn: n, Params: &params, Streamed: r.opts.Stream})
	msg, err := r.send(ctx, n, &params)
	if err != nil {
		return nil, r.fail(ctx, &TurnError{Turn: n, Err: err}, fmt.Sprintf("turn %d failed", n))
	}
	r.turns = n
	r.last = msg
	r.usage.add(usageOf(msg))
	price, _ := priceOf(r.opts.Prices, string(msg.Model))
	r.cost += costOf(price, msg)
	r.lastInput = msg.Usage.InputTokens + msg.Usage.CacheCreationInputTokens + msg.Usage.CacheReadInputTokens
	if r.measureFloor {
		r.compactFloor, r.measureFloor = r.lastInput, false
	}
	r.lastInputMsgs = len(params.Messages)
	r.emit(ctx, ResponseReceived{Turn: n, Message: msg, Duration: time.Since(start)})
	hookErr := r.setPending(ctx, newPendingTurn(n, msg))
	if err := r.save(ctx); err != nil {
		return nil, r.fail(ctx, err, "")
	}
	if !r.opts.Stream { // a streamed response sent them as its blocks arrived
		for _, c := range r.pending.calls {
			r.emit(ctx, ToolCallReady{Turn: n, Call: c.call})
		}
	}
	if hookErr != nil { // of a call started early
		return nil, r.hookFailed(ctx, "AfterTool", hookErr)
	}
	if h := r.opts.AfterResponse; h != nil {
		if err := h(ctx, n, msg); err != nil {
			return nil, r.hookFailed(ctx, "AfterResponse", err)
		}
	}
	return &Turn{Number: n, Message: msg, ToolCalls: r.pending.toolCalls()}, nil
}

// hookFailed stops the run for a hook's error: with StopHook for StopRun,
// with StopError otherwise.
func (r *Runner) hookFailed(ctx context.Context, hook string, err error) error {
	var sr *stopRunError
	if errors.As(err, &sr) {
		r.stop(ctx, &Result{StopReason: StopHook, Detail: sr.reason})
		return nil
	}
	return r.fail(ctx, &HookError{Hook: hook, Err: err}, hook+" hook failed")
}

// fail stops the run with err: StopCanceled if the context is done,
// StopError otherwise. It returns err.
func (r *Runner) fail(ctx context.Context, err error, detail string) error {
	reason := StopError
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		reason = StopCanceled
	}
	if detail == "" {
		detail = err.Error()
	}
	r.stop(ctx, &Result{StopReason: reason, Detail: detail, Err: err})
	return err
}

// stop fills in res and marks the run stopped.
func (r *Runner) stop(ctx context.Context, res *Result) {
	res.Message = r.last
	res.Messages = slices.Clone(r.params.Messages)
	res.Usage = r.usage
	res.CostUSD = r.cost
	res.Turns = r.turns
	res.ToolCalls = r.toolCalls
	res.ToolFailures = r.toolFailures
	if res.StopReason == StopAwaitingApproval {
		res.Pending = r.pendingCalls()
	}
	r.stopped = res
	// The event is sent with a detached context so observers record it even
	// when the run stopped because ctx was cancelled.
	r.emit(context.WithoutCancel(ctx), RunStopped{Turn: r.turns, Result: res})
	r.save(ctx)
}

// emit hands e to the logger and OnEvent, one event at a time.
func (r *Runner) emit(ctx context.Context, e Event) {
	r.eventMu.Lock()
	defer r.eventMu.Unlock()
	logEvent(ctx, r.log, e)
	if r.opts.OnEvent != nil {
		r.opts.OnEvent(ctx, e)
	}
	if r.sink != nil {
		r.sink.deliver(e)
	}
}

// send sends one turn's request and returns the whole response.
func (r *Runner) send(ctx context.Context, turn int, params *anthropic.BetaMessageNewParams) (*anthropic.BetaMessage, error) {
	if r.opts.Stream {
		return r.sendStream(ctx, turn, params)
	}
	if r.opts.Thread {
		return r.threadFor(params).Send(ctx, anthropic.BetaMessageThreadSendParams{})
	}
	return r.messages.New(ctx, *params)
}
