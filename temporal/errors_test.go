package temporal

import (
	"errors"
	"fmt"
	"testing"

	"github.com/toolrun/toolrun"
	sdktemporal "go.temporal.io/sdk/temporal"
)

// TestSentinelsCrossFailures: every root sentinel a refusal wraps survives
// the trip an error makes through Temporal (to a failure proto and back,
// which keeps only text and type), and an error that wraps none is left as
// it is.
func TestSentinelsCrossFailures(t *testing.T) {
	fc := sdktemporal.GetDefaultFailureConverter()
	for _, s := range sentinels {
		t.Run(s.typ, func(t *testing.T) {
			sent := typedError(fmt.Errorf("%w: call %q", s.err, "t1"))
			got := FromFailure(fc.FailureToError(fc.ErrorToFailure(sent)))
			if !errors.Is(got, s.err) {
				t.Errorf("FromFailure(...) = %v, not %v", got, s.err)
			}
			var ae *sdktemporal.ApplicationError
			if !errors.As(got, &ae) || ae.Type() != s.typ || !ae.NonRetryable() {
				t.Errorf("the ApplicationError is lost or wrong: %v", got)
			}
			for _, o := range sentinels {
				if o.err != s.err && errors.Is(got, o.err) {
					t.Errorf("%v also matches %v", got, o.err)
				}
			}
		})
	}
	plain := errors.New("something else")
	if got := typedError(plain); got != plain {
		t.Errorf("typedError(plain) = %v, want it unchanged", got)
	}
	if FromFailure(nil) != nil || typedError(nil) != nil {
		t.Error("nil is not kept nil")
	}
}

// TestActivityErrorsCrossFailures: an activity's failure names every root
// sentinel its error wraps, and FromFailure puts them all back after the
// trip through Temporal, with the activity's own error type kept.
func TestActivityErrorsCrossFailures(t *testing.T) {
	fc := sdktemporal.GetDefaultFailureConverter()
	sent := activityError(fmt.Errorf("toolrun: execute call: %w: %w", toolrun.ErrNotRun, toolrun.ErrMaxTurns), callNotRun, true, 0)
	got := FromFailure(fc.FailureToError(fc.ErrorToFailure(sent)))
	for _, want := range []error{toolrun.ErrNotRun, toolrun.ErrMaxTurns} {
		if !errors.Is(got, want) {
			t.Errorf("FromFailure(...) = %v, not %v", got, want)
		}
	}
	if errors.Is(got, toolrun.ErrBudget) {
		t.Errorf("FromFailure(...) = %v, also %v", got, toolrun.ErrBudget)
	}
	var ae *sdktemporal.ApplicationError
	if !errors.As(got, &ae) || ae.Type() != callNotRun || !ae.NonRetryable() {
		t.Errorf("the ApplicationError is lost or wrong: %v", got)
	}
}
