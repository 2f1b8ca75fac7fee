package temporal

import (
	"errors"
	"slices"
	"time"

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
	{"toolrun.ErrToolExists", toolrun.ErrToolExists},
	{"toolrun.temporal.ErrDecisionTooLarge", ErrDecisionTooLarge},
	{"toolrun.temporal.ErrClaimMissing", ErrClaimMissing},
	{"toolrun.temporal.ErrMessagesTooLarge", ErrMessagesTooLarge},
	{"toolrun.temporal.ErrNotAwaiting", ErrNotAwaiting},
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

// activityError returns err, an activity's failure, as a
// *temporal.ApplicationError of type typ whose details name every root
// sentinel err wraps, so that [FromFailure] puts them all back on the
// other side of the activity boundary (in the workflow, or in a client
// that reads the activity's failure). next, if positive, is the interval
// before the next attempt.
func activityError(err error, typ string, nonRetryable bool, next time.Duration) error {
	var names []string
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			names = append(names, s.typ)
		}
	}
	opts := sdktemporal.ApplicationErrorOptions{NonRetryable: nonRetryable, NextRetryDelay: next}
	if len(names) > 0 {
		opts.Details = []any{sentinelDetails{Sentinels: names}}
	}
	return sdktemporal.NewApplicationErrorWithOptions(err.Error(), typ, opts)
}

// sentinelDetails are the details of an activity's failure that name the
// root sentinels its error wraps.
type sentinelDetails struct {
	Sentinels []string `json:"toolrun_sentinels"`
}

// FromFailure returns err with the toolrun sentinel errors its Temporal
// failure names (its type, or the details of an activity's failure), so that errors.Is(err, toolrun.ErrNotAwaitingApproval)
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
	names := []string{ae.Type()}
	if ae.HasDetails() {
		var d sentinelDetails
		if ae.Details(&d) == nil {
			names = append(names, d.Sentinels...)
		}
	}
	var found []error
	for _, s := range sentinels {
		if slices.Contains(names, s.typ) && !errors.Is(err, s.err) {
			found = append(found, s.err)
		}
	}
	if len(found) == 0 {
		return err
	}
	return &sentinelError{sentinels: found, err: err}
}

// sentinelError is an error from Temporal with the sentinels it names.
type sentinelError struct {
	sentinels []error
	err       error
}

func (e *sentinelError) Error() string   { return e.err.Error() }
func (e *sentinelError) Unwrap() []error { return append(slices.Clone(e.sentinels), e.err) }
