package mcptool

import (
	"errors"
	"fmt"

	"github.com/toolrun/toolrun"
)

// Sentinel errors, the Kind of a [*ServerError]. Test for them with
// errors.Is.
var (
	// ErrServerExited is the failure of a call whose server exited, or
	// whose connection ended, while it handled the call.
	ErrServerExited = errors.New("MCP server exited")

	// ErrNoAnswer is the failure of a call that its server did not answer
	// within [Options.CallTimeout].
	ErrNoAnswer = errors.New("MCP server did not answer in time")

	// ErrServerDown is the failure of a call made while its server is not
	// running: it exited or hung before, and its [RestartPolicy] does not
	// allow another restart, or the restart failed.
	ErrServerDown = errors.New("MCP server is down")

	// ErrClosed is the failure of a call made after [Server.Close].
	ErrClosed = errors.New("MCP server is closed")
)

// ServerError is the failure of a call caused by its MCP server rather than
// by its tool: the server exited, hung, is down or was closed. Its message,
// which the model receives, says what happened and whether the server will
// be restarted.
type ServerError struct {
	// Server is the server's name, as given to [Connect].
	Server string
	// Tool is the MCP name of the tool called, or empty if the failure
	// happened while listing tools.
	Tool string
	// Kind is [ErrServerExited], [ErrNoAnswer], [ErrServerDown] or [ErrClosed].
	Kind error
	// Err is the underlying error, such as the transport's, or nil.
	Err error

	msg string
}

// Error returns the message for the model and the operator.
func (e *ServerError) Error() string { return e.msg }

// Is reports whether target is e.Kind.
func (e *ServerError) Is(target error) bool { return target == e.Kind }

// Unwrap returns the underlying error.
func (e *ServerError) Unwrap() error { return e.Err }

// ToolError is the failure that an MCP tool reported itself, with a result
// marked isError. The runner sends the model its text in an is_error
// tool_result, as for a Go tool that returns an error.
type ToolError struct {
	// Server is the server's name, as given to [Connect].
	Server string
	// Tool is the tool's MCP name.
	Tool string
	// Text is the text of the result: its text blocks, or its structured
	// content as JSON if it has none.
	Text string
	// Content is the whole result, converted as for a result that is not
	// an error, for a [toolrun.Options.AfterTool] hook
	// that wants to send more than the text.
	Content []toolrun.Content
}

// Error returns the tool's text as the server gave it, for the model.
func (e *ToolError) Error() string {
	if e.Text == "" {
		return fmt.Sprintf("MCP tool %q of server %q failed without a message", e.Tool, e.Server)
	}
	return e.Text
}
