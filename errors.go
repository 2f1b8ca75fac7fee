package toolrun

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. Each tool failure reaches the model as an is_error
// result whose text is the error's message; callers (a [Options.AfterTool]
// hook, an event observer) can classify it with errors.Is and errors.As.
var (
	// ErrUnknownTool is the failure of a call to a tool the runner does not
	// have. The result lists the tools that are available.
	ErrUnknownTool = errors.New("unknown tool")

	// ErrDenied is the failure of a call that a decision denied.
	ErrDenied = errors.New("tool call denied")

	// ErrNotRun is the failure of a call the runner answered without running
	// it: the response was cut off (max_tokens), refused, or the run was
	// stopped before the call could run.
	ErrNotRun = errors.New("tool call not run")

	// ErrInterrupted is the failure of a call that started before a crash
	// and never finished, and whose tool is not idempotent, so it was not
	// run again.
	ErrInterrupted = errors.New("tool call interrupted")

	// ErrNotAwaitingApproval is wrapped by the error of [Runner.Decide] and
	// [State.Decide] when no such call awaits a person's decision: the
	// pending turn has no such call (or there is none), or the call was
	// decided by a person already, answered, started, or never deferred. A decision,
	// once given, stands, whoever sends another one and however.
	ErrNotAwaitingApproval = errors.New("toolrun: not awaiting approval")
	// ErrMaxTurns is wrapped by the error of a run that stopped at
	// Options.MaxTurns ([StopMaxTurns]).
	ErrMaxTurns = errors.New("toolrun: turn limit reached")
	// ErrBudget is wrapped by the error of a run that stopped at a bound of
	// Options.Budget ([StopBudget]).
	ErrBudget = errors.New("toolrun: budget reached")

	// ErrIncomplete is wrapped by the error of a run the model's answer
	// did not finish: cut off at max_tokens ([ErrMaxTokens]), by the
	// context window ([ErrContextWindow]), or stopped for a reason the
	// runner does not know ([StopIncomplete]). The run's Result is returned
	// with it, the history whole up to the cut: a caller who checks only
	// the error cannot take a cut answer for a finished one.
	ErrIncomplete = errors.New("toolrun: the model's answer is incomplete")
	// ErrMaxTokens is wrapped by the error of a run stopped with
	// [StopMaxTokens]; it wraps [ErrIncomplete] too.
	ErrMaxTokens = errors.New("toolrun: the response was cut off at max_tokens")
	// ErrContextWindow is wrapped by the error of a run stopped with
	// [StopContextWindow]; it wraps [ErrIncomplete] too.
	ErrContextWindow = errors.New("toolrun: the model's context window was exceeded")
	// ErrMalformedResponse is wrapped by the error of a run that received,
	// twice in a row, a response it cannot answer validly; the run stops
	// with [StopError].
	ErrMalformedResponse = errors.New("toolrun: malformed response")
	// ErrRequestTooLarge is wrapped by the error of a run whose next request
	// would pass the Messages API's 32 MB limit even with this turn's tool
	// results cut to fit (the history before them is too large); the run
	// stops with [StopError] before sending it, rather than with the API's
	// 413.
	ErrRequestTooLarge = errors.New("toolrun: request too large")
	// ErrStateSignature is wrapped by the error of [Resume] and [Open] for a
	// state whose signature does not match Options.StateKey.
	ErrStateSignature = errors.New("toolrun: state signature does not match")

	// ErrToolExists is wrapped by the error of [Runner.AddTools] and
	// [Runner.AddToolParams] for a tool whose name the run has already: the
	// API refuses two tools of one name, and a call could not tell them apart.
	ErrToolExists = errors.New("toolrun: the run has a tool of that name")

	// ErrAddedToolMissing is wrapped by the error of [Resume] (and
	// [github.com/toolrun/toolrun/driver.Template.Resume], [Open]) for a run that was given a tool with
	// [Runner.AddTools] when that tool is not among the tools given to Resume:
	// the State keeps the tool's definition, which the model has seen, but not
	// its function, so the tool must be given again, as every tool is.
	ErrAddedToolMissing = errors.New("toolrun: a tool added to the run is missing")

	// ErrRunBusy is wrapped by the error of [Store.Save] when the saved state is
	// not the one the runner last saw: another runner (in this process or
	// another) has saved the run since. The runner that gets it stops without
	// running anything more, and every later step returns the same error: the
	// run belongs to the other runner.
	ErrRunBusy = errors.New("toolrun: run saved by another runner")

	// ErrInvalidSchema is wrapped by the error of [NewRawTool], and of
	// [Resume] and [Open] for a tool of any kind ([New] panics with it), for
	// an input schema a tool cannot use: not an object schema, an unknown $schema, a reference outside the
	// schema, a pattern no engine compiles, a number too large for the
	// definition sent to the API or past the limits on numbers (see
	// [ValidationError]), or a schema that is valid JSON Schema but
	// could not be validated safely (the message then says "cannot be
	// validated safely"): a cycle of references that never reaches into the
	// input (which would recurse forever), or a schema larger than 1 MiB,
	// nested deeper than 128 levels, or with more than 20000 subschemas.
	//
	// true and {} accept any object; false is refused. A schema's $schema may
	// name draft 2020-12 (the default), 2019-09, draft-07, draft-06 or
	// draft-04, with http or https and with or without the trailing "#"; each
	// is validated as that draft.
	ErrInvalidSchema = errors.New("toolrun: invalid input schema")

	// ErrStoreMisbehaved is wrapped by the error that stops a run, or fails
	// [Open], when its [Store] breaks the Store contract in a way the runner
	// sees: a Save or Load still running when the run's context has been done
	// for Options.Timeouts.CancelGrace (a store that ignores its context), or
	// a Load that returns neither a state nor an error. The run stops for
	// good, as for [ErrRunBusy]: a Save left running may still land, so what
	// the store holds is unknown.
	ErrStoreMisbehaved = errors.New("toolrun: the store broke its contract")

	// ErrInvalidState is wrapped by the error of [State.Check], and so of
	// [Resume], [github.com/toolrun/toolrun/driver.Template.Resume] and [Open], for a State no run of this
	// package could have saved: a negative counter, a turn limit below -1, a
	// call whose phase and data disagree, a turn whose calls are not its
	// response's. Such a State was edited or forged, and run it would send
	// requests without bound or requests the API refuses.
	ErrInvalidState = errors.New("toolrun: invalid state")
)

// PanicError is the failure of a tool that panicked. The runner recovers the
// panic so the process keeps running; the model gets an is_error result with
// the panic value and the operator gets a log record with Stack.
type PanicError struct {
	Tool  string
	Value any    // the value passed to panic
	Stack []byte // the goroutine's stack at the panic
}

// Error returns a text without the stack, fit to send to the model.
func (e *PanicError) Error() string {
	if e.Tool == "" {
		return fmt.Sprintf("panic: %v", e.Value)
	}
	return fmt.Sprintf("tool %q panicked: %v", e.Tool, e.Value)
}

// TimeoutError is the failure of a call that ran past its timeout, of
// a streamed response that sent nothing, not even a ping, for
// [Timeouts.StreamIdle], or of a response that was not streamed and had not
// arrived whole within [Timeouts.Request] (Tool is then empty, and the
// error is the Err of a [*TurnError]).
type TimeoutError struct {
	Tool  string
	After time.Duration
	// Request says that a response that was not streamed timed out.
	Request bool
	// Total, for a stream, is [Timeouts.StreamIdleTotal] when the turn's
	// attempts used it up and the stream was not retried; 0 otherwise.
	Total time.Duration
}

// Error says which tool, or the stream, timed out and after how long.
func (e *TimeoutError) Error() string {
	if e.Request {
		return fmt.Sprintf("the response had not arrived after %s (the request was not sent again)", e.After)
	}
	if e.Tool == "" && e.Total > 0 {
		return fmt.Sprintf("the stream sent nothing for %s, and the turn's attempts have been idle for %s in all (Timeouts.StreamIdleTotal)", e.After, e.Total)
	}
	if e.Tool == "" {
		return fmt.Sprintf("the stream sent nothing for %s", e.After)
	}
	return fmt.Sprintf("tool %q timed out after %s and was cancelled", e.Tool, e.After)
}

// TurnError is the failure of a turn's model request: an API error after
// the client's own retries, a dropped connection, a cancelled context, or
// a streamed response that failed after it began. A stream fails after it
// began on an error event (Err is then an *anthropic.Error), a connection
// dropped mid-body, a body that ended before message_stop (Err wraps
// io.ErrUnexpectedEOF), or an idle stream (Err is a *[TimeoutError]).
// Nothing of a failed response enters the history, and no call of it is
// answered.
//
// The runner asks again for a streamed response that failed after it
// began, per [Options.StreamRetry], announcing each new attempt with a
// [RequestSent] whose Err is the TurnError of the attempt before. When the
// attempts are spent, or the failure is not one to retry, the run stops
// with [StopError] and the TurnError of the last attempt. The run keeps its
// state: calling Run or Next again sends the same turn again.
type TurnError struct {
	Turn int // the turn whose request failed, counting from 1
	// Attempt counts the attempts of the turn's response, from 1; only a
	// streamed response asked for again raises it (the anthropic client's
	// own retries of a request that did not begin are not counted).
	Attempt int
	// Events counts the stream events received before the failure, pings
	// aside: zero for a response that failed before it began or was not
	// streamed.
	Events int
	// Usage is what the failed attempt reported it used, which the run
	// counted in [Result.Usage] (see [Budget]): for a stream that failed
	// after its message_start, its input, the output reported so far, and
	// in UnreportedOutputTokens the bound on the output it did not report.
	// It is zero for an attempt that reported nothing. This error is the
	// one event that announces a failed attempt (RequestSent.Err of the
	// retry, or the run's error when none follows), so an observer that
	// adds up usage from events adds this too.
	Usage Usage
	Err   error
}

// Error names the failed turn and, for a stream that began, the attempt and
// how far it got.
func (e *TurnError) Error() string {
	if e.Events > 0 {
		return fmt.Sprintf("toolrun: turn %d: streamed response failed (attempt %d, after %d events): %v", e.Turn, e.Attempt, e.Events, e.Err)
	}
	if e.Attempt > 1 {
		return fmt.Sprintf("toolrun: turn %d: model request failed (attempt %d): %v", e.Turn, e.Attempt, e.Err)
	}
	return fmt.Sprintf("toolrun: turn %d: model request failed: %v", e.Turn, e.Err)
}

// Unwrap returns the request's error.
func (e *TurnError) Unwrap() error { return e.Err }

// HookError is returned when a hook ends the run with an error of its own,
// or panics (Err is then a *[PanicError] whose Tool is empty).
type HookError struct {
	Hook string // the field: "AfterTool", "BeforeRequest", "AfterResponse", "Policy", "ToolConfig.Policy", "OnEvent"
	Err  error
}

// Error names the hook.
func (e *HookError) Error() string { return fmt.Sprintf("toolrun: %s hook: %v", e.Hook, e.Err) }

// Unwrap returns the hook's error.
func (e *HookError) Unwrap() error { return e.Err }

// StopRun returns an error that a hook returns to end the run without
// failing it: the run stops with [StopHook] and reason in [Result.Detail].
func StopRun(reason string) error { return &stopRunError{reason: reason} }

type stopRunError struct{ reason string }

func (e *stopRunError) Error() string { return "toolrun: run stopped by hook: " + e.reason }

func unknownToolError(name string, available []string) error {
	list := "none"
	if len(available) > 0 {
		list = strings.Join(available, ", ")
	}
	return fmt.Errorf("%w %q; available tools: %s", ErrUnknownTool, name, list)
}
