package temporal

import (
	"errors"

	"github.com/toolrun/toolrun"
	sdktemporal "go.temporal.io/sdk/temporal"
)

// sentinels are the root package's errors that a refusal or a failure
// may wrap, with the error type each travels as through Temporal: an
// error that crosses a worker, the server and a client arrives as a
// *temporal.ApplicationError holding only its text and a type name, so
// the type names the sentinel and [FromFailure] puts it back.
var sentinels = []struct {
	typ string
	err error
}{
	{"toolrun.ErrNotAwaitingApproval", toolrun.ErrNotAwaitingApproval},
	{"toolrun.ErrUnknownTool", toolrun.ErrUnknownTool},
	{"toolrun.ErrDenied", toolrun.ErrDenied},
	{"toolrun.ErrNotRun", toolrun.ErrNotRun},
	{"toolrun.ErrInterrupted", toolrun.ErrInterrupted},
	{"toolrun.ErrMaxTurns", toolrun.ErrMaxTurns},
	{"toolrun.ErrBudget", toolrun.ErrBudget},
	{"toolrun.ErrIncomplete", toolrun.ErrIncomplete},
	{"toolrun.ErrMaxTokens", toolrun.ErrMaxTokens},
	{"toolrun.ErrContextWindow", toolrun.ErrContextWindow},
	{"toolrun.ErrMalformedResponse", toolrun.ErrMalformedResponse},
	{"toolrun.ErrStateSignature", toolrun.ErrStateSignature},
	{"toolrun.ErrRunBusy", toolrun.ErrRunBusy},
	{"toolrun.ErrInvalidSchema", toolrun.ErrInvalidSchema},
}

// typedError returns err as a non-retryable *temporal.ApplicationError
// whose type names the first root sentinel err wraps, or err unchanged if
// it wraps none (or is nil).
func typedError(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return sdktemporal.NewNonRetryableApplicationError(err.Error(), s.typ, nil)
		}
	}
	return err
}

// FromFailure returns err with the toolrun sentinel error its Temporal
// failure names, so that errors.Is(err, toolrun.ErrNotAwaitingApproval)
// (or any other sentinel of package toolrun) holds for an error that
// crossed a worker and the server, as it does in process; errors.As still
// finds the *temporal.ApplicationError and whatever else err wraps. An
// error that names no sentinel, and nil, are returned unchanged. [Decide]
// returns its errors through it already; use it on errors from a
// workflow's update handle, result or activity that you get from the
// Temporal client directly.
func FromFailure(err error) error {
	var ae *sdktemporal.ApplicationError
	if err == nil || !errors.As(err, &ae) {
		return err
	}
	for _, s := range sentinels {
		if ae.Type() == s.typ {
			if errors.Is(err, s.err) {
				return err
			}
			return &sentinelError{sentinel: s.err, err: err}
		}
	}
	return err
}

// sentinelError is an error from Temporal with the sentinel it names.
type sentinelError struct {
	sentinel error
	err      error
}

func (e *sentinelError) Error() string   { return e.err.Error() }
func (e *sentinelError) Unwrap() []error { return []error{e.sentinel, e.err} }
