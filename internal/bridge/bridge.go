// Package bridge hands the temporal module the few operations on a
// toolrun.State that need the State's unexported turn in progress, without
// making them part of the root package's API. Package toolrun sets them
// with [Set] when it is initialised; the temporal module gets them with
// [Get], typed with its own view of the types (S is toolrun.State, D
// toolrun.Decision), so a mismatch panics at the temporal package's
// initialisation, not in a workflow.
package bridge

// StateOps are the operations.
type StateOps[S, D any] struct {
	// HasCall reports whether the turn in progress of s has call id.
	HasCall func(s *S, id string) bool
	// CanDecide returns nil if State.Decide(id, d) would record d, and the
	// error it would return otherwise; it changes nothing.
	CanDecide func(s *S, id string, d D) error
	// Skeleton returns s without what grows with the run and only a model
	// request needs: the history and the response of the turn in progress
	// (its calls are kept, with their inputs, decisions and results).
	Skeleton func(s *S) *S
	// Merge returns the whole state from a skeleton and the whole state it
	// was cut from, or a later one of the same turn: the skeleton's progress
	// with the other's history and response.
	Merge func(skel, whole *S) *S
	// ForCall returns the skeleton of s with the call id alone.
	ForCall func(s *S, id string) *S
}

var ops any

// Set records the operations; package toolrun calls it once, at init.
func Set[S, D any](o StateOps[S, D]) { ops = o }

// Get returns the operations recorded with [Set].
func Get[S, D any]() StateOps[S, D] { return ops.(StateOps[S, D]) }
