package toolrun

import (
	"fmt"
	"slices"
	"time"

	"github.com/toolrun/toolrun/internal/defaults"
	"github.com/toolrun/toolrun/internal/retry"
)

// This file is the API a driver outside this module needs to step a run
// held as data: one that keeps a [State] in a durable workflow, schedules
// the calls of a turn elsewhere and decides them from messages, as the
// temporal module does. Everything here reads or copies a State as plain
// data, with no runner, no client and no I/O, so a deterministic workflow
// may call it.

// DefaultMaxParallelTools is how many calls of one turn run at once when
// [Options.MaxParallelTools] is zero. A driver that schedules calls itself
// uses it to apply the same bound.
const DefaultMaxParallelTools = defaults.MaxParallelTools

// DefaultMaxTurns is the turn limit of a run whose [Options.MaxTurns] is
// zero. A program that shows or applies the limit itself (the toolrun
// command's --max-turns, a driver) uses it to agree with the runner.
const DefaultMaxTurns = defaults.MaxTurns

// Retryable reports whether a failed model request may succeed if it is
// sent again, and how long the API asked to wait first (zero if it did not
// say). It is the rule the runner's own stream retries use: what the
// anthropic client retries is retryable (408, 409, 429, 5xx, a dropped
// connection, a timeout, a stream cut short or idle), and so is an error
// event in a stream that began whose type is overloaded_error, api_error,
// rate_limit_error or timeout_error; a bad request, a bad key or a refused
// permission is not. An error that is no *anthropic.Error is a transport
// fault and retryable: the caller checks its own context first. A driver that retries a turn itself asks it, so that
// it retries the same faults the runner does.
func Retryable(err error) (ok bool, wait time.Duration) { return retry.Retryable(err) }

// HasCall reports whether the turn in progress of s has a call with the
// tool_use id toolUseID. A driver that receives a decision before the turn
// holding its call keeps it until HasCall says the call is there.
func (s *State) HasCall(toolUseID string) bool { return s != nil && s.call(toolUseID) != nil }

// CanDecide returns nil if [State.Decide] would record d for toolUseID,
// and the error Decide would return otherwise (wrapping
// [ErrNotAwaitingApproval] for a call that does not await a person); it
// changes nothing. A driver validates a decision with it before accepting
// the message that carries it.
func (s *State) CanDecide(toolUseID string, d Decision) error {
	_, err := s.decidable(toolUseID, d)
	return err
}

// Skeleton returns a copy of s without what grows with the run and only a
// model request needs: the history (Params.Messages) and the turn in
// progress's response as a message. The turn's calls are kept, with their
// inputs, decisions and results, so decisions and results can be recorded
// in the skeleton. A driver keeps the skeleton where size matters (a
// workflow's history) and the whole State in a [Store]; [State.Merge] puts
// the two together again. s is not changed.
func (s *State) Skeleton() *State { return ownCalls(skeleton(s)) }

// Merge returns the whole state from the skeleton s (see [State.Skeleton])
// and whole, the State it was cut from or a later one of the same turn:
// s's progress (its decisions, results and counters) with whole's history
// and, if whole is of the same turn, its response. Neither is changed.
func (s *State) Merge(whole *State) *State { return ownCalls(merge(s, whole)) }

// ForCall returns the skeleton of s (see [State.Skeleton]) with the call
// toolUseID alone in its turn in progress: what a driver hands the worker
// that runs that call, which needs neither the history nor the other
// calls. s is not changed.
func (s *State) ForCall(toolUseID string) *State { return ownCalls(forCall(s, toolUseID)) }

// ownCalls gives t's turn in progress, a copy already, a slice of calls
// of its own, so that a decision or result recorded in t is not recorded
// in the State it was cut from.
func ownCalls(t *State) *State {
	if t.pending != nil {
		t.pending.Calls = slices.Clone(t.pending.Calls)
	}
	return t
}

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
