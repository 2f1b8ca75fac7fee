package toolrun

import (
	"fmt"
	"time"

	"github.com/toolrun/toolrun/internal/defaults"
	"github.com/toolrun/toolrun/internal/retry"
)

// DefaultMaxParallelTools is the bound on the calls of a turn that run at
// once when Options.MaxParallelTools is zero, for a driver that schedules
// the calls itself.
const DefaultMaxParallelTools = defaults.MaxParallelTools

// Retryable reports whether a failed model request may succeed if it is
// sent again, and how long the API asked to wait first (zero if it did not
// say), by the rule the runner's own retries follow: what the anthropic
// client retries (408, 409, 429, 5xx, a dropped connection, a timeout, a
// stream cut short or idle), and an error event of a stream that began
// whose type is overloaded_error, api_error, rate_limit_error or
// timeout_error. A driver that retries a step elsewhere (a Temporal
// activity) asks it of the step's error.
func Retryable(err error) (bool, time.Duration) { return retry.Retryable(err) }

// This file holds what a driver that keeps the run's State itself, rather
// than a Runner (the Temporal module's workflow), needs of it: to ask
// whether a decision would be taken, to carry only the part of the State
// that does not grow with the run, and to record the one stop it can find
// on its own.

// HasCall reports whether the turn in progress has a call with toolUseID.
func (s *State) HasCall(toolUseID string) bool { return s.call(toolUseID) != nil }

// CanDecide returns nil if [State.Decide] would record d for toolUseID, and
// the error it would return otherwise. It changes nothing.
func (s *State) CanDecide(toolUseID string, d Decision) error {
	_, err := s.decidable(toolUseID, d)
	return err
}

// Skeleton returns a copy of s without what grows with the run and only a
// model request needs: the history and the response of the turn in
// progress. The calls of that turn are kept, with their inputs, decisions
// and results, so a skeleton can be decided and answered; [State.Merge]
// puts the rest back. It shares the slices s holds: treat both as read-only
// until merged.
func (s *State) Skeleton() *State { return skeleton(s) }

// ForCall returns the skeleton of s with only the call toolUseID in its
// turn in progress: what one tool call needs.
func (s *State) ForCall(toolUseID string) *State { return forCall(s, toolUseID) }

// Merge returns the whole State made of the skeleton s (its decisions and
// results) and whole, the State it was cut from or a later one of the same
// turn (its history and, for the same turn, its response).
func (s *State) Merge(whole *State) *State { return merge(s, whole) }

// Stop records in s a stop that a driver made without a Runner: only
// [StopPayloadTooLarge] and [StopError], the stops a driver finds on its
// own. A runner resumed from s stops as a Runner's own stop would: a
// StopPayloadTooLarge holds, a StopError is tried again. Any other reason
// is refused with an error, and s is left as it was.
func (s *State) Stop(reason StopReason, detail string) error {
	switch reason {
	case StopPayloadTooLarge, StopError:
	default:
		return fmt.Errorf("toolrun: stop: a driver cannot make a %q stop; only %q and %q", reason, StopPayloadTooLarge, StopError)
	}
	s.StopReason, s.Detail, s.Budget = reason, detail, ""
	return nil
}
