package toolrun

import (
	"encoding/json"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// Event is one thing that happened in a run. The runner's logging, the
// [Options.OnEvent] hook and [Runner.Events] all receive the same events, so
// custom logging, metrics or a live display is one function over these
// types:
//
//   - [TurnStarted], [RequestSent], [ResponseReceived], [TurnFinished] for each turn;
//   - [TextDelta], [ThinkingDelta], [ToolInputDelta], [ToolCallReady] while a streamed turn arrives;
//   - [ToolDecided], [ToolStarted], [ToolFinished] for each tool call;
//   - [StreamRetried] when a streamed response failed midway and is asked for again;
//   - [Compacted] when the history was compacted;
//   - [RunStopped] once, when the run stops.
//
// A run that does not stream sends no deltas, but sends [ToolCallReady] for
// each call once the response has arrived, so code written for one works for
// the other.
type Event interface {
	// EventTurn returns the turn the event belongs to, counting from 1.
	EventTurn() int
}

// TurnStarted is sent before a turn's request is built.
type TurnStarted struct {
	Turn int
}

// RequestSent is sent when a turn's request goes out. Params is the request
// as sent (after [Options.BeforeRequest]); observers must not change it.
type RequestSent struct {
	Turn     int
	Params   *anthropic.BetaMessageNewParams
	Streamed bool
}

// ResponseReceived is sent when a turn's response has arrived in full.
type ResponseReceived struct {
	Turn     int
	Message  *anthropic.BetaMessage
	Duration time.Duration // from RequestSent, including the client's retries
}

// TextDelta is a piece of text of a streamed response.
type TextDelta struct {
	Turn  int
	Index int // the content block's index
	Text  string
}

// ThinkingDelta is a piece of the model's thinking of a streamed response.
type ThinkingDelta struct {
	Turn     int
	Index    int
	Thinking string
}

// ToolInputDelta is a piece of a tool call's input JSON of a streamed
// response.
type ToolInputDelta struct {
	Turn        int
	Index       int
	ID, Name    string
	PartialJSON string
}

// ToolCallReady is sent when a tool call has arrived whole: for a streamed
// response at its content_block_stop, otherwise when the response arrives.
type ToolCallReady struct {
	Turn int
	Call ToolCall
}

// ToolDecided is sent for each call once it is decided: allowed, denied,
// skipped or deferred, and by whom.
type ToolDecided struct {
	Turn     int
	Call     ToolCall
	Decision Decision
	By       string // "options" (Allow/Deny lists or Decide), "policy", "approval", "always"
}

// ToolStarted is sent when a call starts to run.
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
func (e TurnStarted) EventTurn() int { return e.Turn }

// EventTurn returns the turn.
func (e RequestSent) EventTurn() int { return e.Turn }

// EventTurn returns the turn.
func (e ResponseReceived) EventTurn() int { return e.Turn }

// EventTurn returns the turn.
func (e TextDelta) EventTurn() int { return e.Turn }

// EventTurn returns the turn.
func (e ThinkingDelta) EventTurn() int { return e.Turn }

// EventTurn returns the turn.
func (e ToolInputDelta) EventTurn() int { return e.Turn }

// EventTurn returns the turn.
func (e ToolCallReady) EventTurn() int { return e.Turn }

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

// ToolCall is one tool_use block of a response.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ToolResult is the outcome of one call: what is sent to the model and how
// it came about. [Options.AfterTool] may change Content and IsError.
type ToolResult struct {
	Call ToolCall
	// Content is sent to the model as the tool_result's content.
	Content []Content
	// IsError marks the result as a failure for the model.
	IsError bool
	// Err is why the call failed, if it did: the tool's error, a
	// *[PanicError], a *[ValidationError], a *[TimeoutError], or an error
	// wrapping [ErrUnknownTool], [ErrDenied] or [ErrNotRun]. A hook that turns
	// a failure into a normal result sets IsError to false and may leave Err
	// for the logs.
	Err error
	// Decision is how the call was decided.
	Decision Decision
	// Duration is how long the tool ran; zero if it did not run.
	Duration time.Duration
	// Ran reports whether the tool's Run was called.
	Ran bool
	// Truncated reports that Content is longer than the tool's
	// MaxResultBytes, so the model receives it cut short, with a note.
	// Content itself stays whole, for hooks, events and transcripts.
	Truncated bool
}
