package toolrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolrun/toolrun/internal/retry"
)

// The defaults of [RetryPolicy].
const (
	// defaultStreamAttempts is the number of attempts of a streamed
	// response, the first included, when [RetryPolicy.MaxAttempts] is zero.
	defaultStreamAttempts = 3
	// defaultInitialBackoff is the wait before the first retry when
	// [RetryPolicy.InitialBackoff] is zero.
	defaultInitialBackoff = 500 * time.Millisecond
	// defaultMaxBackoff caps the waits between retries when
	// [RetryPolicy.MaxBackoff] is zero.
	defaultMaxBackoff = 8 * time.Second
)

// RetryPolicy says how a streamed response that fails after it began is
// requested again: an error event in the stream, a connection dropped
// mid-body, a body that ends before message_stop, or a stream that sends
// nothing for Options.Timeouts.StreamIdle. Failures before the
// stream begins (an HTTP error status, a refused connection) are retried by
// the anthropic client itself, per its own option.WithMaxRetries, and not
// again here.
//
// The zero value means 3 attempts, waiting
// 500 ms before the first retry and twice as long before
// each next one, up to 8 seconds. Each wait is shortened by a
// random part of up to a quarter, so that many runs failing at once do not
// retry in step. A "retry-after-ms" or "retry-after" header on the failed
// response replaces the computed wait. Every wait ends early when the run's
// context is cancelled. A turn's attempts share one bound on their idle
// time, [Timeouts].StreamIdleTotal: a retry whose wait would use up what
// is left of it is not made.
//
// A retry is a request like the first: it is checked against
// Options.Budget before its wait, and the run stops with [StopBudget]
// rather than send one that could pass a bound; what a failed attempt
// reported it used is counted in [Result.Usage] and [Result.CostUSD], and
// the output it may have written without reporting it counts against the
// budget (see [Budget] and [Usage].UnreportedOutputTokens).
type RetryPolicy struct {
	// MaxAttempts bounds the attempts of one turn's streamed response, the
	// first included. Zero means 3; 1 or less means a
	// failed stream is not retried.
	MaxAttempts int
	// InitialBackoff is the wait before the first retry. Zero means
	// 500 ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the computed waits. Zero means 8 seconds.
	MaxBackoff time.Duration
}

func (p RetryPolicy) attempts() int {
	if p.MaxAttempts == 0 {
		return defaultStreamAttempts
	}
	return max(1, p.MaxAttempts)
}

// delay is the wait after the failed attempt n (from 1), unless the
// response asked for another one.
func (p RetryPolicy) delay(n int, resp *http.Response, err error) time.Duration {
	if d, ok := retry.After(resp, err); ok {
		return d
	}
	initial, ceiling := p.InitialBackoff, p.MaxBackoff
	if initial <= 0 {
		initial = defaultInitialBackoff
	}
	if ceiling <= 0 {
		ceiling = defaultMaxBackoff
	}
	d := initial
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	if q := int64(d / 4); q > 0 {
		d -= time.Duration(rand.Int64N(q))
	}
	return d
}

// streamIdle is the bound on a turn's streamed attempts' idle time: see
// sendStream.
type streamIdle struct {
	each  time.Duration // Timeouts.StreamIdle; 0 for none
	total time.Duration // Timeouts.StreamIdleTotal; 0 for none
	spent time.Duration // the idle time of the turn's attempts so far, and the waits between them
}

// streamIdle returns the idle bounds of a turn's stream. The total's
// default is never shorter than StreamIdle, so that the first attempt has
// the whole of it; with no StreamIdle it is none.
func (t Timeouts) streamIdle() *streamIdle {
	b := &streamIdle{each: orDefault(t.StreamIdle, defaultStreamIdleTimeout)}
	switch {
	case t.StreamIdleTotal == 0 && b.each > 0:
		b.total = max(defaultStreamIdleTotal, b.each)
	case t.StreamIdleTotal > 0:
		b.total = t.StreamIdleTotal
	}
	return b
}

// watchdog is the idle bound of the next attempt; 0 for none.
func (b *streamIdle) watchdog() time.Duration {
	if b.total == 0 {
		return b.each
	}
	left := b.total - b.spent
	if b.each > 0 {
		left = min(left, b.each)
	}
	return max(left, time.Nanosecond)
}

// allows reports whether a retry after a wait of delay leaves the retry
// some of the total.
func (b *streamIdle) allows(delay time.Duration) bool {
	return b.total == 0 || b.spent+delay < b.total
}

// errStreamIdle is the cause a stream's watchdog cancels it with; the
// attempt then fails with a *TimeoutError whose Tool is empty.
var errStreamIdle = errors.New("the stream sent nothing for too long")

// errStreamEnded is the failure of a stream whose body ended cleanly
// before message_stop.
var errStreamEnded = fmt.Errorf("the stream ended before message_stop: %w", io.ErrUnexpectedEOF)

// sendStream streams the response to the request sent announced, sending
// its deltas as they arrive and retrying faults mid-stream per
// Options.StreamRetry (each retry announced by a RequestSent of its own),
// and returns the whole response.
//
// A failed attempt was billed for what it reported before it failed, and
// perhaps for output it did not report, and request never sees it, so it
// is accounted here (accountFailed, see [Budget]); and each
// retry is a request like the first, checked against the budget before
// the wait that precedes it: a retry that could pass a bound ends the send
// with a *retryRefused, and the run stops with [StopBudget].
//
// The turn's attempts share one bound on their idle time, idle.total
// (Timeouts.StreamIdleTotal): the silence that ended each failed attempt
// and the waits before each retry count against it, each attempt's
// watchdog is the shorter of Timeouts.StreamIdle and what is left of it,
// and a retry whose wait would use up what is left is not made. A server
// that stalls every attempt thus holds the turn for idle.total, not for
// every attempt's StreamIdle.
func (r *Runner) sendStream(ctx context.Context, sent RequestSent) (*anthropic.BetaMessage, error) {
	idle := r.opts.Timeouts.streamIdle()
	for attempt := 1; ; attempt++ {
		st := &streamAttempt{r: r, turn: sent.Turn, guard: r.newGuard(ctx), watchdog: idle.watchdog()}
		msg, err := st.receive(ctx, sent.Params)
		if err == nil {
			return msg, nil
		}
		idle.spent += time.Since(st.quiet)
		err = st.guard.failure(ctx, err)
		used := r.accountFailed(ctx, sent.Params, st)
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		cause := &TurnError{Turn: sent.Turn, Attempt: attempt, Events: st.events, Usage: used, Err: err}
		var ra *RetryAfterError
		if ok, _ := retry.Retryable(err); !st.began || !ok || errors.As(err, &ra) || attempt >= r.opts.StreamRetry.attempts() {
			return nil, cause
		}
		if stop, cerr := r.checkRetry(sent.Params, st); cerr != nil {
			return nil, cerr
		} else if stop != nil {
			stop.Detail += fmt.Sprintf("; turn %d's stream was not retried after attempt %d failed: %v", sent.Turn, attempt, err)
			return nil, &retryRefused{stop: stop}
		}
		if asked, ok := retry.After(st.resp, err); ok && st.guard.tooLong(asked) {
			cause.Err = st.guard.refusal(asked, err)
			return nil, cause
		}
		delay := r.opts.StreamRetry.delay(attempt, st.resp, err)
		if !idle.allows(delay) {
			var te *TimeoutError
			if errors.As(err, &te) {
				te.Total = idle.total
			}
			return nil, cause
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, err
		}
		idle.spent += delay
		sent.Attempt, sent.Err, sent.Delay = attempt+1, cause, delay
		r.emit(ctx, sent)
	}
}

// accountFailed counts what the failed attempt st reported it used, and
// returns it (the zero Usage for an attempt that failed before its
// message_start).
//
// Its output is the output_tokens of its message_delta, if that arrived;
// before it, the API has reported only the output_tokens of message_start
// (1, or so), while the attempt may have written, and been billed for, up
// to the request's output bound (see outputBound). The rest of that bound
// is counted apart, in Usage.UnreportedOutputTokens, which the budget
// checks count as written and Result.CostUSD leaves out: the budget
// bounds what the API may have billed, and Usage says what it reported.
// One number for both would have made one of them false.
func (r *Runner) accountFailed(ctx context.Context, params *anthropic.BetaMessageNewParams, st *streamAttempt) Usage {
	if !st.reported {
		return Usage{}
	}
	r.account(ctx, st.msg, params.Model)
	used := usageOf(st.msg)
	if !st.outputReported {
		used.UnreportedOutputTokens = max(0, outputBound(params)-used.OutputTokens)
		r.st.Usage.UnreportedOutputTokens += used.UnreportedOutputTokens
	}
	return used
}

// checkRetry checks the retry of the failed attempt st against the
// budget, as checkBudget checks the first. The retry sends the same
// request, so the input the failed attempt reported is the retry's (the
// split between cache writes, reads and plain input aside); an attempt
// that reported none is bounded as the first was.
func (r *Runner) checkRetry(params *anthropic.BetaMessageNewParams, st *streamAttempt) (*Result, error) {
	if st.reported {
		if in := usageOf(st.msg).inputTotal(); in > 0 {
			return r.checkNext(params, func() int64 { return in })
		}
	}
	return r.checkBudget(params, r.lastInput, r.lastInputMsgs)
}

// retryRefused is the error of a streamed send whose retry the budget
// refused: request stops the run with stop rather than failing it.
type retryRefused struct{ stop *Result }

func (e *retryRefused) Error() string { return e.stop.Detail }

// sleep waits for d or until ctx is done, and then returns its cause.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// streamAttempt is one attempt of a streamed response.
type streamAttempt struct {
	r     *Runner
	turn  int
	guard *requestGuard // refuses a long retry-after of the client's retries before the stream begins
	// watchdog bounds the time the attempt may send nothing (0 for no
	// bound), and quiet is when it last sent something (or began).
	watchdog time.Duration
	quiet    time.Time
	resp     *http.Response // the response, once its headers have arrived
	began    bool           // the server answered 200 and the stream began
	events   int            // the events received
	// msg is the response as accumulated so far, and reported says that
	// its message_start arrived: its Usage is then what the attempt was
	// billed, even if it fails, but for its output, which outputReported
	// says the message_delta reported.
	msg            *anthropic.BetaMessage
	reported       bool
	outputReported bool
}

// receive streams the response, sending its deltas as they arrive, and
// returns it once message_stop has arrived. A stream that sends nothing
// (not even a ping) for st.watchdog, before or after its headers, fails
// with a *TimeoutError and counts as begun, so it is retried.
func (st *streamAttempt) receive(ctx context.Context, params *anthropic.BetaMessageNewParams) (*anthropic.BetaMessage, error) {
	r := st.r
	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := st.watchdog
	st.quiet = time.Now()
	var watchdog *time.Timer
	if idle > 0 {
		watchdog = time.AfterFunc(idle, func() { cancel(errStreamIdle) })
		defer watchdog.Stop()
	}
	stream := r.openStream(reqCtx, params, option.WithResponseInto(&st.resp), option.WithMiddleware(st.guard.middleware))
	defer stream.Close()
	// An error before the stream began (an error status after the client's
	// retries, a refused connection) leaves no response or one with an
	// error status.
	st.began = st.resp != nil && st.resp.StatusCode < 300
	// Allocated apart from st: the run keeps the message it returns, and
	// should not keep st's HTTP response alive with it.
	st.msg = &anthropic.BetaMessage{}
	msg := st.msg
	for stream.Next() {
		if watchdog != nil {
			watchdog.Reset(idle)
		}
		st.quiet = time.Now()
		ev := stream.Current()
		st.events++
		if err := msg.Accumulate(ev); err != nil {
			return nil, err
		}
		switch ev.Type {
		case "message_start":
			st.reported = true
		case "message_delta":
			st.outputReported = true
		case "content_block_delta":
			st.delta(ctx, msg, ev)
		case "message_stop":
			// The response is whole; whatever happens to the connection
			// after it does not matter.
			return msg, nil
		}
	}
	err := stream.Err()
	if errors.Is(context.Cause(reqCtx), errStreamIdle) && ctx.Err() == nil {
		st.began = true
		return nil, &TimeoutError{After: idle}
	}
	if err != nil {
		return nil, err
	}
	return nil, errStreamEnded
}

// delta sends the event of a content_block_delta.
func (st *streamAttempt) delta(ctx context.Context, msg *anthropic.BetaMessage, ev anthropic.BetaRawMessageStreamEventUnion) {
	i := int(ev.Index)
	switch ev.Delta.Type {
	case "text_delta":
		st.r.emit(ctx, Delta{Turn: st.turn, Index: i, Text: ev.Delta.Text})
	case "thinking_delta":
		st.r.emit(ctx, Delta{Turn: st.turn, Index: i, Thinking: ev.Delta.Thinking})
	case "input_json_delta":
		b := msg.Content[i]
		st.r.emit(ctx, Delta{Turn: st.turn, Index: i, ID: b.ID, Name: b.Name, ToolInput: ev.Delta.PartialJSON})
	}
}

// errRequestStalled is the cause a requestGuard cancels a stalled request
// that is not streamed with.
var errRequestStalled = errors.New("the response did not arrive in time")

// RetryAfterError is the failure of a turn whose request the API asked to
// send again only after a wait longer than [Timeouts.RetryAfter], or one
// that would end after the run's context or [Budget].WallTime: the run does
// not wait it out, and fails at once with this error as the Err of a
// [*TurnError]. The server's ask is in After; Err is the failed attempt's
// error (an *anthropic.Error, for a rate limit or an overload).
type RetryAfterError struct {
	After time.Duration // the wait the server asked for
	Cap   time.Duration // the cap it passed (Timeouts.RetryAfter); 0 when it passed the run's deadline only
	Err   error
}

// Error names the server's retry-after and the cap it passed.
func (e *RetryAfterError) Error() string {
	if e.Cap > 0 && e.After > e.Cap {
		return fmt.Sprintf("the API asked to retry after %s, longer than Timeouts.RetryAfter (%s): %v", e.After, e.Cap, e.Err)
	}
	return fmt.Sprintf("the API asked to retry after %s, past the run's deadline: %v", e.After, e.Err)
}

// Unwrap returns the failed attempt's error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// requestGuard watches the attempts the anthropic client makes of one
// request, its own retries included, through a middleware: the client
// sleeps for whatever a response's retry-after asks, and retries a
// timed-out attempt, so only a middleware sees each attempt in time. A
// response whose retry-after asks for too long (tooLong) is marked
// "x-should-retry: false", so that the client returns it at once instead
// of sleeping; and, for a request that is not streamed, each attempt is
// bounded by idle: the guard then cancels the request's context, which
// ends the client's retries too.
type requestGuard struct {
	cap      time.Duration // Timeouts.RetryAfter; 0 for none
	deadline time.Time     // the run's context's; zero for none
	idle     time.Duration // the bound on an attempt; 0 for none (a stream has its own watchdog)
	cancel   context.CancelCauseFunc
	timer    *time.Timer
	stalled  atomic.Bool   // the timer fired
	asked    time.Duration // the retry-after refused, if any
}

// newGuard returns the guard of a request sent in ctx.
func (r *Runner) newGuard(ctx context.Context) *requestGuard {
	g := &requestGuard{cap: orDefault(r.opts.Timeouts.RetryAfter, defaultRetryAfterCap)}
	g.deadline, _ = ctx.Deadline()
	return g
}

// tooLong reports whether a retry-after of d is not to be waited.
func (g *requestGuard) tooLong(d time.Duration) bool {
	return (g.cap > 0 && d > g.cap) || (!g.deadline.IsZero() && time.Until(g.deadline) < d)
}

// refusal is the error of a retry-after of d refused, err the attempt's.
func (g *requestGuard) refusal(d time.Duration, err error) *RetryAfterError {
	e := &RetryAfterError{After: d, Err: err}
	if g.cap > 0 && d > g.cap {
		e.Cap = g.cap
	}
	return e
}

// middleware is the option.Middleware of the guarded request.
func (g *requestGuard) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	if g.idle > 0 {
		if g.timer == nil {
			g.timer = time.AfterFunc(g.idle, func() {
				g.stalled.Store(true)
				g.cancel(errRequestStalled)
			})
		} else {
			g.timer.Reset(g.idle)
		}
	}
	res, err := next(req)
	if err != nil || res == nil || res.StatusCode < 300 {
		return res, err
	}
	// The attempt failed with its status; the client's wait before the
	// next one is not the model's to answer in.
	if g.timer != nil {
		g.timer.Stop()
	}
	if d, ok := retry.After(res, nil); ok && resent(res) && g.tooLong(d) {
		res.Header.Set("X-Should-Retry", "false")
		g.asked = d
	}
	return res, err
}

// resent reports whether the anthropic client would send a request again
// after the response res.
func resent(res *http.Response) bool {
	switch res.Header.Get("X-Should-Retry") {
	case "true":
		return true
	case "false":
		return false
	}
	s := res.StatusCode
	return s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
}

// stop releases the guard's timer and context.
func (g *requestGuard) stop() {
	if g.timer != nil {
		g.timer.Stop()
	}
	if g.cancel != nil {
		g.cancel(nil)
	}
}

// failure is the error the guarded request's err stands for: a
// *RetryAfterError for a refused retry-after, a *TimeoutError for a stalled
// attempt (unless ctx, the caller's, is done: the run was cancelled), and
// err otherwise.
func (g *requestGuard) failure(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case g.asked > 0:
		return g.refusal(g.asked, err)
	case g.stalled.Load() && ctx.Err() == nil:
		return &TimeoutError{After: g.idle, Request: true}
	}
	return err
}
