package toolrun

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun/internal/deepcopy"
)

// Event is one thing that happened in a run. The runner's logging, the
// [Options.OnEvent] hook and [Runner.Events] all receive the same events, so
// custom logging, metrics or a live display is one function over these
// types:
//
//   - [RequestSent], [ResponseReceived], [TurnFinished] for each turn
//     (RequestSent again, with Attempt above 1, when a streamed response
//     failed midway and is asked for again);
//   - [Delta] while a streamed turn arrives;
//   - [ToolDecided], [ToolStarted], [ToolFinished] for each tool call, once
//     its response has arrived whole;
//   - [Compacted] when the history was compacted, after the RequestSent
//     and ResponseReceived of the compaction's own request, which have
//     Compaction set;
//   - [RunStopped] once, when the run stops.
//
// A run that does not stream sends no deltas; everything else is the same,
// so code written for one works for the other.
type Event interface {
	// EventTurn returns the turn the event belongs to, counting from 1.
	EventTurn() int
}

// RequestSent is sent when a turn's request goes out. Params is the request
// as sent (after [Options.BeforeRequest]); observers must not change it.
//
// A retry is a new request: a streamed response that failed after it began
// is requested again, per [Options].StreamRetry, with a RequestSent whose
// Attempt is 2, 3, … and whose Err says why. A display that showed the
// deltas of the failed attempt should drop them: the new attempt streams
// the response from its start. No call of the failed response has run.
// (The anthropic client's own retries, of requests that fail before a
// response begins, are not events.)
//
// Every request the runner sends is announced, a compaction's included: one
// RequestSent per request the API receives (but the client's own retries).
// A compaction's has Compaction set and the Turn of the turn it comes
// before, as [Options.BeforeRequest] is given; it is not a turn, and that
// turn's own request follows it with the same Turn. An observer that counts
// turns by RequestSent skips those with Compaction set.
type RequestSent struct {
	Turn     int
	Params   *anthropic.BetaMessageNewParams
	Streamed bool
	// Compaction marks the request of a compaction (see [Compaction]),
	// which is never streamed.
	Compaction bool
	// Attempt counts the sends of this request, from 1. Only a stream
	// asked for again raises it; a malformed response asked for again
	// (see [ErrMalformedResponse]) is a new request, at Attempt 1.
	Attempt int
	// Err, when Attempt is above 1, is the failure of the previous
	// attempt, a *[TurnError].
	Err error
	// Delay, when Attempt is above 1, is how long the runner waited
	// after that failure before this attempt.
	Delay time.Duration
}

// ResponseReceived is sent when a turn's response has arrived in full, or
// a compaction's: see [RequestSent].
type ResponseReceived struct {
	Turn int
	// Message is the response, as the client decoded it. Its tool_use
	// inputs are the observer's own copy: writing into them changes
	// neither the turn's calls nor the history.
	Message  *anthropic.BetaMessage
	Duration time.Duration // from RequestSent, including the client's retries
	// Usage is what the response is billed for, as [Result.Usage] counts
	// it: its top-level usage and the usage.iterations of each compaction
	// in it, which the top-level usage leaves out. Observers that add up
	// tokens read it rather than Message.Usage, so that they count as the
	// run does.
	Usage Usage
	// Compaction marks the response to a compaction's request, as
	// RequestSent.Compaction does; its Message is not a turn and does not
	// go in the history as it is.
	Compaction bool
}

// Delta is a piece of a streamed response as it arrives: of a text block,
// of a thinking block or of a tool call's input JSON. Exactly one of Text,
// Thinking and ToolInput is set, so a live display that prints Text prints
// the answer and nothing else. The response is whole only at
// [ResponseReceived]; the runner acts on no call before that.
type Delta struct {
	Turn  int
	Index int // the content block's index in the response
	// Text is a piece of a text block.
	Text string
	// Thinking is a piece of the model's thinking.
	Thinking string
	// ToolInput is a piece of the input JSON of the tool call ID, of the
	// tool Name.
	ToolInput string
	ID, Name  string
}

// ToolDecided is sent for each call once it is decided: allowed, denied,
// skipped or deferred, and by whom.
type ToolDecided struct {
	Turn     int
	Call     ToolCall
	Decision Decision
	By       DecidedBy
}

// ToolStarted is sent when a call starts to run. Call is the call as the
// tool gets it: its Input is the decision's edit (a policy's or a
// person's) if there is one, else the model's, in bytes of the observer's
// own.
type ToolStarted struct {
	Turn int
	Call ToolCall
}

// ToolFinished is sent when a call has its result, after [Options.AfterTool]:
// it ran, failed, was denied, skipped or not run.
type ToolFinished struct {
	Turn   int
	Result *ToolResult
}

// TurnFinished is sent when a turn is committed to the history: its
// assistant message and, for a tool turn, its results.
type TurnFinished struct {
	Turn    int
	Message *anthropic.BetaMessage
	Results []*ToolResult
	Usage   Usage // this turn's usage
}

// RunStopped is sent once when the run stops, for any reason.
type RunStopped struct {
	Turn   int
	Result *Result
}

// EventTurn returns the turn.
func (e RequestSent) EventTurn() int { return e.Turn }

// EventTurn returns the turn.
func (e ResponseReceived) EventTurn() int { return e.Turn }

// EventTurn returns the turn.
func (e Delta) EventTurn() int { return e.Turn }

// EventTurn returns the turn.
func (e ToolDecided) EventTurn() int { return e.Turn }

// EventTurn returns the turn.
func (e ToolStarted) EventTurn() int { return e.Turn }

// EventTurn returns the turn.
func (e ToolFinished) EventTurn() int { return e.Turn }

// EventTurn returns the turn.
func (e TurnFinished) EventTurn() int { return e.Turn }

// EventTurn returns the turn.
func (e RunStopped) EventTurn() int { return e.Turn }

// emit hands e to the logger, OnEvent and the consumer of Events, one event
// at a time. A panic in OnEvent is recovered, logged with its stack, and
// stops the run at its next step.
func (r *Runner) emit(ctx context.Context, e Event) {
	r.eventMu.Lock()
	defer r.eventMu.Unlock()
	logEvent(ctx, *r.log, e)
	if rs, ok := e.(RequestSent); ok && r.observed() && !r.opts.sharedEvents {
		rs.Params = observedParams(rs.Params)
		e = rs
	}
	if rr, ok := e.(ResponseReceived); ok && r.observed() {
		rr.Message = observedMessage(rr.Message)
		e = rr
	}
	if r.opts.OnEvent != nil {
		func() {
			defer func() {
				if v := recover(); v != nil {
					pe := &PanicError{Value: v, Stack: stack()}
					r.log.ErrorContext(ctx, "toolrun: hook panicked", "hook", "OnEvent", "panic", fmt.Sprint(v), "stack", string(pe.Stack))
					if r.observerErr == nil {
						r.observerErr = &HookError{Hook: "OnEvent", Err: pe}
					}
				}
			}()
			r.opts.OnEvent(ctx, e)
		}()
	}
	if r.sink != nil {
		r.sink.deliver(e)
	}
}

// observed reports whether anything but the log receives the run's events.
func (r *Runner) observed() bool { return r.opts.OnEvent != nil || r.sink != nil }

// observedMessage returns the copy of a response an observer of
// ResponseReceived gets: the run builds the turn's calls and history from
// the response after the event, so the tool_use input bytes the observer
// can write into are its own.
func observedMessage(m *anthropic.BetaMessage) *anthropic.BetaMessage {
	if m == nil {
		return nil
	}
	c := *m
	c.Content = slices.Clone(m.Content)
	for i := range c.Content {
		if in := c.Content[i].Input; in != nil {
			c.Content[i].Input = slices.Clone(in)
		}
	}
	return &c
}

// observedParams returns the copy of a request's params an observer of
// RequestSent gets: its history, system prompt and tool list share nothing
// with the run's State, nor with the tool definitions of other runners, so
// a write through them changes neither. Without a BeforeRequest hook the
// params of a request hold the State's own history.
func observedParams(p *anthropic.BetaMessageNewParams) *anthropic.BetaMessageNewParams {
	c := *p
	c.Messages = deepcopy.Copy(p.Messages)
	c.System = deepcopy.Copy(p.System)
	c.Tools = deepcopy.Copy(p.Tools)
	return &c
}

// takeObserverErr returns, and forgets, the panic of an OnEvent observer.
func (r *Runner) takeObserverErr() error {
	r.eventMu.Lock()
	defer r.eventMu.Unlock()
	err := r.observerErr
	r.observerErr = nil
	return err
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
// and stays resumable, as after a cancelled Run. No goroutine of the run
// is left when the loop has ended (a tool that ignores its context is
// abandoned after Options.Timeouts.CancelGrace). A panic in the loop body is the
// caller's own and is not recovered.
func (r *Runner) Events(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		sink := &eventSink{events: make(chan Event), next: make(chan struct{}), done: make(chan struct{})}
		r.eventMu.Lock()
		r.sink = sink
		r.eventMu.Unlock()

		finished := make(chan error, 1)
		go func() {
			_, err := r.Run(ctx)
			finished <- err
		}()

		ended := false
		defer func() {
			if !ended { // the consumer left the loop, or panicked
				cancel(errEventsStopped)
			}
			close(sink.done)
			if !ended {
				<-finished
			}
			r.eventMu.Lock()
			r.sink = nil
			r.eventMu.Unlock()
		}()
		for {
			select {
			case e := <-sink.events:
				if !yield(e, nil) {
					return
				}
				sink.next <- struct{}{}
			case err := <-finished:
				ended = true
				if err != nil {
					yield(nil, err)
				}
				return
			}
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
