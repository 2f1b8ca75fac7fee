package toolrun

import (
	"encoding/json"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// This file holds the types of a tool call as the caller sees it: the
// call, its result, and a call awaiting a person. How a call is decided is
// in decision.go, how it runs in executor.go, and its record in the State
// (callState) in state.go.

// ToolCall is one tool_use block of a response.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// Toolset is the tool_use's toolset_name, such as "browser", for a
	// call of a member of a toolset; "" for a tool of its own. The runner
	// dispatches on Toolset and Name together, as the Python and
	// TypeScript runners do: the tool whose [ToolConfig].Toolset and Name
	// they are runs the call.
	Toolset string `json:"toolset,omitempty"`
	// Caller is how the model made the call: "" or "direct" for a call of
	// its own, or the type of the server tool that made it from code (such
	// as "code_execution_20260120"), whose server_tool_use id is
	// CallerToolID. Policies and logs see it: a call made by code the
	// model wrote may deserve another rule than one it made itself.
	Caller       string `json:"caller,omitempty"`
	CallerToolID string `json:"caller_tool_id,omitempty"`
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
	// CacheControl, if set, puts a cache breakpoint on the tool_result
	// block: an AfterTool hook sets it on a large result that later turns
	// should read from the cache.
	CacheControl anthropic.BetaCacheControlEphemeralParam
	// Truncated reports that Content is longer than the tool's
	// MaxResultBytes, so the model receives it cut short, with a note.
	// Content itself stays whole, for hooks, events and transcripts.
	Truncated bool
}

// PendingCall is a call awaiting a person's decision.
type PendingCall struct {
	Call ToolCall `json:"call"`
	// Reason is why it needs approval, from the decision that deferred it.
	Reason string `json:"reason"`
}
