package driver

import (
	"context"

	"github.com/toolrun/toolrun"
)

// StateAppender is a [toolrun.Store] that can also save a version of a run as what
// changed since the version it holds, rather than as the whole [toolrun.State].
// A runner saves after every step of every call; a turn of n calls saves
// about 2n times, and a Store that writes the whole state each time
// writes the turn's calls and results over and over: time and bytes that
// grow with n². With a StateAppender, a runner saves with Append whenever
// the step changed only what a [toolrun.StateChange] can carry (the calls of the
// turn in progress, and the small rest of the state), so that each save
// writes what the step added, and uses Save otherwise (the first save of
// a runner, a new turn, a changed history).
//
// A Store without Append works as before, only slower on long turns. A
// type that embeds a [github.com/toolrun/toolrun/filestore.Store] has its Append too: one that overrides
// Save to change or watch what is saved overrides Append as well, or hides
// it (a field or method named Append that is not this one).
// [github.com/toolrun/toolrun/filestore.Store] and the sqlitestore module are StateAppenders. A signed run
// (Options.StateKey) is appended too: each change carries the signature
// of the whole state it makes, which [toolrun.State.Apply] sets, so that
// a Load returns a state signed as a whole Save would be; the runner
// computes it from the digests of the parts the change did not touch and
// of those it carries, so a signed save costs what the step added too.
type StateAppender interface {
	toolrun.Store
	// Append saves version c.Version of run id, the saved state with c
	// applied to it ([toolrun.State.Apply]), if the saved state's Version equals
	// prev; otherwise it saves nothing and returns an error wrapping
	// [toolrun.ErrRunBusy]. c.Version is greater than prev, and prev is not 0: a
	// change applies to a saved state. Like Save, Append is a
	// compare-and-swap, atomic (a crash in the middle leaves version prev
	// readable) and safe for concurrent use by several goroutines and
	// processes; Save and Append of one run are one sequence of versions.
	// Load returns the state as the last Save wrote it with every later
	// Append applied in order, at the Version of the last; a Save replaces
	// it all, and Delete removes it all.
	Append(ctx context.Context, id string, c *toolrun.StateChange, prev uint64) error
}
