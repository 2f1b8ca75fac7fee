package toolrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// The defaults of [RetryPolicy].
const (
	// DefaultStreamAttempts is the number of attempts of a streamed
	// response, the first included, when [RetryPolicy.MaxAttempts] is zero.
	DefaultStreamAttempts = 3
	// DefaultInitialBackoff is the wait before the first retry when
	// [RetryPolicy.InitialBackoff] is zero.
	DefaultInitialBackoff = 500 * time.Millisecond
	// DefaultMaxBackoff caps the waits between retries when
	// [RetryPolicy.MaxBackoff] is zero.
	DefaultMaxBackoff = 8 * time.Second
)

// RetryPolicy says how a streamed response that fails after it began is
// requested again: an error event in the stream, a connection dropped
// mid-body, or a body that ends before message_stop. Failures before the
// stream begins (an HTTP error status, a refused connection) are retried by
// the anthropic client itself, per its own option.WithMaxRetries, and not
// again here.
//
// The zero value means [DefaultStreamAttempts] attempts, waiting
// [DefaultInitialBackoff] before the first retry and twice as long before
// each next one, up to [DefaultMaxBackoff]. Each wait is shortened by a
// random part of up to a quarter, so that many runs failing at once do not
// retry in step. A "retry-after-ms" or "retry-after" header on the failed
// response replaces the computed wait. Every wait ends early when the run's
// context is cancelled.
type RetryPolicy struct {
	// MaxAttempts bounds the attempts of one turn's streamed response, the
	// first included. Zero means [DefaultStreamAttempts]; 1 or less means a
	// failed stream is not retried.
	MaxAttempts int
	// InitialBackoff is the wait before the first retry. Zero means
	// [DefaultInitialBackoff].
	InitialBackoff time.Duration
	// MaxBackoff caps the computed waits. Zero means [DefaultMaxBackoff].
	MaxBackoff time.Duration
}

func (p RetryPolicy) attempts() int {
	if p.MaxAttempts == 0 {
		return DefaultStreamAttempts
	}
	return max(1, p.MaxAttempts)
}

// delay is the wait after the failed attempt n (from 1), unless the
// response asked for another one.
func (p RetryPolicy) delay(n int, resp *http.Response, err error) time.Duration {
	if d, ok := retryAfter(resp, err); ok {
		return d
	}
	initial, ceiling := p.InitialBackoff, p.MaxBackoff
	if initial <= 0 {
		initial = DefaultInitialBackoff
	}
	if ceiling <= 0 {
		ceiling = DefaultMaxBackoff
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

// retryAfter reads the wait the server asked for, from the error event's
// response or the streamed response's headers.
func retryAfter(resp *http.Response, err error) (time.Duration, bool) {
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) && apiErr.Response != nil {
		resp = apiErr.Response
	}
	if resp == nil {
		return 0, false
	}
	if v := resp.Header.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return time.Duration(s * float64(time.Second)), true
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(0, time.Until(t)), true
		}
	}
	return 0, false
}

// StreamError is the failure of one attempt of a streamed response after it
// began: an error event (Err is then an *anthropic.Error), a connection
// dropped mid-body, or a body that ended before message_stop (Err wraps
// io.ErrUnexpectedEOF). Nothing of the failed response enters the history,
// and no call of it is answered. The runner retries the turn per
// [Options.StreamRetry]; when the attempts are spent, the run stops with
// [StopError] and a [*TurnError] that wraps the StreamError of the last
// attempt, and calling Run again requests the turn again.
type StreamError struct {
	// Attempt counts the attempts of the turn's response, from 1.
	Attempt int
	// Events counts the events of the response received before the
	// failure, pings aside.
	Events int
	Err    error
}

// Error says which attempt failed, how far it got, and why.
func (e *StreamError) Error() string {
	return fmt.Sprintf("streamed response failed mid-stream (attempt %d, after %d events): %v", e.Attempt, e.Events, e.Err)
}

// Unwrap returns the attempt's failure.
func (e *StreamError) Unwrap() error { return e.Err }

// errStreamEnded is the failure of a stream whose body ended cleanly
// before message_stop.
var errStreamEnded = fmt.Errorf("the stream ended before message_stop: %w", io.ErrUnexpectedEOF)

// StreamRetried is sent when a streamed response failed after it began and
// its turn is requested again. A display that showed the deltas of the
// failed attempt should drop them: the next attempt streams the response
// from its start.
type StreamRetried struct {
	Turn int
	// Attempt is the attempt about to be made, from 2.
	Attempt int
	// Err is the failure of the previous attempt, a *[StreamError].
	Err error
	// Delay is the wait before the attempt.
	Delay time.Duration
	// Discarded holds the results of the calls of the failed response that
	// had started early ([Options.EarlyToolStart]): calls that ran to the
	// end, and calls that were cancelled, whose error wraps
	// [ErrInterrupted]. None of them is sent to the model; their tools may
	// have had effects.
	Discarded []*ToolResult
}

// EventTurn returns the turn.
func (e StreamRetried) EventTurn() int { return e.Turn }

// sendStream streams one turn's response, sending its deltas as they
// arrive and retrying faults mid-stream per Options.StreamRetry, and
// returns the whole response.
func (r *Runner) sendStream(ctx context.Context, turn int, params *anthropic.BetaMessageNewParams) (*anthropic.BetaMessage, error) {
	for attempt := 1; ; attempt++ {
		st := &streamAttempt{r: r, turn: turn}
		// The calls of the last turn a run may take are left pending (see
		// Options.MaxTurns), and a tool-call budget is checked against all
		// the calls of a turn before any runs: then none starts early.
		if r.opts.EarlyToolStart && (r.maxTurns == Unlimited || turn < r.maxTurns) && r.opts.Budget.ToolCalls <= 0 {
			st.early = r.newEarlyStart(ctx, turn)
			// The calls' events name their turn through the pending turn,
			// which stays out of the State until the response is whole.
			r.pending = &pendingTurn{turn: turn, streaming: true}
		}
		msg, err := st.receive(ctx, params)
		if err == nil {
			r.early = st.early // taken over by setPending
			return msg, nil
		}
		var cause error
		switch {
		case ctx.Err() != nil:
			cause = context.Cause(ctx)
		case st.began:
			cause = &StreamError{Attempt: attempt, Events: st.events, Err: err}
		default:
			cause = err
		}
		var discarded []*ToolResult
		if st.early != nil {
			discarded = st.early.abort(ctx, cause)
			r.pending = nil
		}
		if ctx.Err() != nil || !st.began || attempt >= r.opts.StreamRetry.attempts() {
			return nil, cause
		}
		delay := r.opts.StreamRetry.delay(attempt, st.resp, err)
		r.emit(ctx, StreamRetried{Turn: turn, Attempt: attempt + 1, Err: cause, Delay: delay, Discarded: discarded})
		if err := sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}

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
	r      *Runner
	turn   int
	early  *earlyStart    // nil without early start
	resp   *http.Response // the response, once its headers have arrived
	began  bool           // the server answered 200 and the stream began
	events int            // the events received
}

// receive streams the response, sending its deltas as they arrive, and
// returns it once message_stop has arrived.
func (st *streamAttempt) receive(ctx context.Context, params *anthropic.BetaMessageNewParams) (*anthropic.BetaMessage, error) {
	r := st.r
	stream := r.openStream(ctx, params, option.WithResponseInto(&st.resp))
	defer stream.Close()
	// An error before the stream began (an error status after the client's
	// retries, a refused connection) leaves no response or one with an
	// error status.
	st.began = st.resp != nil && st.resp.StatusCode < 300
	var msg anthropic.BetaMessage
	for stream.Next() {
		ev := stream.Current()
		st.events++
		cutOff := false
		if ev.Type == "content_block_stop" && ev.Index >= 0 && ev.Index < int64(len(msg.Content)) {
			// Accumulate empties a tool call's input that is not JSON: it was
			// cut off (max_tokens), and so must not start early.
			b := msg.Content[ev.Index]
			cutOff = b.Type == "tool_use" && len(b.Input) > 0 && !json.Valid(b.Input)
		}
		if err := msg.Accumulate(ev); err != nil {
			return nil, err
		}
		switch ev.Type {
		case "content_block_delta":
			st.delta(ctx, &msg, ev)
		case "content_block_stop":
			b := msg.Content[ev.Index]
			if b.Type != "tool_use" {
				continue
			}
			input := bytes.Clone(b.Input)
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
			call := ToolCall{ID: b.ID, Name: b.Name, Input: input}
			r.emit(ctx, ToolCallReady{Turn: st.turn, Call: call})
			if st.early != nil {
				if cutOff {
					st.early.closed = true
				}
				st.early.add(ctx, call)
			}
		case "message_stop":
			// The response is whole; whatever happens to the connection
			// after it does not matter.
			return &msg, nil
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return nil, errStreamEnded
}

// delta sends the event of a content_block_delta.
func (st *streamAttempt) delta(ctx context.Context, msg *anthropic.BetaMessage, ev anthropic.BetaRawMessageStreamEventUnion) {
	i := int(ev.Index)
	switch ev.Delta.Type {
	case "text_delta":
		st.r.emit(ctx, TextDelta{Turn: st.turn, Index: i, Text: ev.Delta.Text})
	case "thinking_delta":
		st.r.emit(ctx, ThinkingDelta{Turn: st.turn, Index: i, Thinking: ev.Delta.Thinking})
	case "input_json_delta":
		b := msg.Content[i]
		st.r.emit(ctx, ToolInputDelta{Turn: st.turn, Index: i, ID: b.ID, Name: b.Name, PartialJSON: ev.Delta.PartialJSON})
	}
}

// earlyStart decides and starts the calls of a streamed response as their
// blocks arrive whole (Options.EarlyToolStart).
//
// Only a prefix of the calls is taken: the first call of an exclusive tool
// (which must run after the calls before it and before those after it)
// and the first call cut off ends it, and the calls from there on are left
// to the end of the message like any other. With Options.Store, calls of
// tools that are not idempotent are left too. Of the calls taken, those
// allowed run at once, bounded by Options.MaxParallelTools; those denied,
// skipped or answered with an error are answered once the response is
// whole; those deferred await a person as usual.
type earlyStart struct {
	r      *Runner
	turn   int
	ctx    context.Context // the calls' context, cancelled with the cause when the response fails
	cancel context.CancelCauseFunc
	sem    chan struct{} // holds a token for each call running
	wg     sync.WaitGroup
	closed bool         // no more calls are taken
	calls  []*earlyCall // in block order
}

// earlyCall is one call taken by an earlyStart.
type earlyCall struct {
	c       *callState
	outcome *ToolResult // the result decided without running it, answered once the response is whole

	// Set by the call's goroutine, and read after earlyStart.wg.Wait; so is
	// c.started.
	duration time.Duration
	hookErr  error // of AfterTool
}

func (r *Runner) newEarlyStart(ctx context.Context, turn int) *earlyStart {
	limit := r.opts.MaxParallelTools
	if limit <= 0 {
		limit = DefaultMaxParallelTools
	}
	ctx, cancel := context.WithCancelCause(ctx)
	return &earlyStart{r: r, turn: turn, ctx: ctx, cancel: cancel, sem: make(chan struct{}, limit)}
}

// add takes call, whose block has just arrived whole.
func (es *earlyStart) add(ctx context.Context, call ToolCall) {
	r := es.r
	if es.closed {
		return
	}
	e, ok := r.tools[call.Name]
	if ok && e.config.Exclusive {
		es.closed = true
		return
	}
	if ok && r.opts.Store != nil && !e.config.Idempotent {
		// A call is journaled in the pending turn before it starts, and the
		// turn is not pending until the response is whole; only an
		// idempotent tool may run unjournaled.
		return
	}
	ec := &earlyCall{c: &callState{call: call}}
	es.calls = append(es.calls, ec)
	e, input, res := r.decide(ctx, ec.c)
	switch {
	case res != nil:
		ec.outcome = res
	case e == nil: // deferred
	default:
		es.start(ctx, ec, e, input)
	}
}

// start runs ec as soon as fewer than Options.MaxParallelTools calls are
// running.
func (es *earlyStart) start(ctx context.Context, ec *earlyCall, e *toolEntry, input json.RawMessage) {
	es.wg.Add(1)
	go func() {
		defer es.wg.Done()
		select {
		case es.sem <- struct{}{}:
		case <-es.ctx.Done():
			return // never started
		}
		defer func() { <-es.sem }()
		if es.ctx.Err() != nil {
			return
		}
		es.r.stateMu.Lock()
		ec.c.started = true
		es.r.stateMu.Unlock()
		start := time.Now()
		res := es.r.runTool(es.ctx, e, ec.c.call, input)
		ec.duration = time.Since(start)
		if res != nil {
			ec.hookErr = es.r.answer(ctx, ec.c, res)
		}
	}()
}

// wait waits for the calls running.
func (es *earlyStart) wait() {
	es.wg.Wait()
	es.cancel(nil)
}

// abort cancels the calls of a response that failed with cause, waits for
// them, and reports each call cancelled with a ToolFinished. It returns
// the results of the calls that had started.
func (es *earlyStart) abort(ctx context.Context, cause error) []*ToolResult {
	es.cancel(cause)
	es.wg.Wait()
	var discarded []*ToolResult
	for _, ec := range es.calls {
		switch {
		case !ec.c.started:
		case ec.c.result != nil:
			discarded = append(discarded, ec.c.result)
		default:
			err := fmt.Errorf("%w: its response did not arrive whole, so the call was cancelled: %w", ErrInterrupted, cause)
			res := &ToolResult{Call: ec.c.call, Content: []Content{Text(err.Error())}, IsError: true, Err: err,
				Decision: ec.c.decision, Duration: ec.duration, Ran: true}
			es.r.emit(ctx, ToolFinished{Turn: es.turn, Result: res})
			discarded = append(discarded, res)
		}
	}
	return discarded
}

// setPending makes p the pending turn. After a streamed response with early
// start, it first waits for the calls that started early, then takes them
// over in p, in block order, and answers the calls decided without running
// them. It returns the first error of an AfterTool hook.
func (r *Runner) setPending(ctx context.Context, p *pendingTurn) error {
	es := r.early
	r.early = nil
	if es == nil {
		r.pending = p
		return nil
	}
	es.wait()
	r.pending = p
	taken := make(map[string]*earlyCall, len(es.calls))
	for _, ec := range es.calls {
		taken[ec.c.call.ID] = ec
	}
	// As in finishTurn: only a tool turn answers its calls; for the others,
	// finishTurn answers the calls that have no result as not run.
	answers := isToolTurn(p.stopReason)
	var errs []error
	for i, c := range p.calls {
		ec := taken[c.call.ID]
		if ec == nil {
			continue
		}
		p.calls[i] = ec.c
		errs = append(errs, ec.hookErr)
		if ec.outcome != nil && answers {
			errs = append(errs, r.answer(ctx, ec.c, ec.outcome))
		}
	}
	return firstErr(errs)
}

// errEventsStopped is the cause of the cancellation of a run whose
// consumer stopped ranging over Runner.Events.
var errEventsStopped = fmt.Errorf("toolrun: the consumer of Runner.Events stopped reading: %w", context.Canceled)

// Events runs the loop as [Runner.Run] does and returns an iterator over
// its events, each yielded as it happens: the events [Options.OnEvent]
// receives, in the same order, and, when [Options.Stream] is set, the
// deltas of each response as it arrives. The iterator ends after
// [RunStopped]; if the run stopped with an error (as Run returns one), it
// then yields that error.
//
// The run goes on in a goroutine of its own, and the tools in theirs, but
// every event is yielded on the caller's goroutine, one at a time, and the
// run waits while the loop body handles it: a slow consumer slows the run
// rather than letting events pile up. The loop body must not call the
// runner's methods; after the loop they may be called again.
//
// Leaving the loop early cancels the run, which stops with [StopCanceled]
// and stays resumable, as after a cancelled Run: a response cut off is
// requested again by the next Events, Run or Next; the calls that finished
// keep their results and do not run again; those cut off run again. No
// goroutine of the run is left when the loop has ended. A panic in the run
// (a hook's, say) is raised again on the caller's goroutine.
func (r *Runner) Events(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		sink := &eventSink{events: make(chan Event), next: make(chan struct{}), done: make(chan struct{})}
		r.eventMu.Lock()
		r.sink = sink
		r.eventMu.Unlock()

		finished := make(chan runOutcome, 1)
		go func() {
			var o runOutcome
			defer func() {
				if v := recover(); v != nil {
					o.panicked, o.value = true, v
				}
				finished <- o
			}()
			o.err = r.loop(ctx)
		}()

		var end runOutcome
		ended := false
		defer func() {
			if !ended { // the consumer left the loop, or panicked
				cancel(errEventsStopped)
			}
			close(sink.done)
			if !ended {
				end = <-finished
			}
			r.eventMu.Lock()
			r.sink = nil
			r.eventMu.Unlock()
			if end.panicked {
				panic(end.value)
			}
		}()
		for {
			select {
			case e := <-sink.events:
				if !yield(e, nil) {
					return
				}
				sink.next <- struct{}{}
			case end = <-finished:
				ended = true
				if !end.panicked && end.err != nil {
					yield(nil, end.err)
				}
				return
			}
		}
	}
}

// runOutcome is how the goroutine of Events ended.
type runOutcome struct {
	err      error
	panicked bool
	value    any // the panic's value
}

// loop runs the loop as Run does.
func (r *Runner) loop(ctx context.Context) error {
	for {
		turn, err := r.Next(ctx)
		if err != nil || turn == nil {
			return err
		}
	}
}

// eventSink hands the events of a run to the consumer of Runner.Events.
type eventSink struct {
	events chan Event    // to the consumer
	next   chan struct{} // from the consumer: done with the event
	done   chan struct{} // closed when the consumer has left
}

// deliver hands e to the consumer and waits until it is done with it or
// has left. The caller holds Runner.eventMu, so events go one at a time.
func (s *eventSink) deliver(e Event) {
	select {
	case s.events <- e:
	case <-s.done:
		return
	}
	select {
	case <-s.next:
	case <-s.done:
	}
}

// RunStream runs the loop as [Runner.Run] does, streaming every response
// whatever [Options.Stream] says, and returns the same result: for callers
// who want streaming's behaviour (long responses, retried faults
// mid-stream, [Options.EarlyToolStart]) without handling the events. It
// ranges over [Runner.Events], so OnEvent and the logger see the deltas.
func (r *Runner) RunStream(ctx context.Context) (*Result, error) {
	stream := r.opts.Stream
	r.opts.Stream = true
	defer func() { r.opts.Stream = stream }()
	for _, err := range r.Events(ctx) {
		if err != nil {
			return r.stopped, err
		}
	}
	return r.stopped, nil
}
