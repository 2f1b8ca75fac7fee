package toolrun

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// Store keeps the [State] of runs so that a run outlives its process. With
// [Options.Store] set, a runner saves its state after every step: when it
// first steps in this process, when a response arrives, before each tool
// call starts (the call is journaled as started), when it finishes (with its
// result), when a turn is committed and when the run stops. [Open] resumes a
// run from its saved state.
//
// Every save is a compare-and-swap on [State.Version], so that one runner at
// a time owns a run: the runner saves version n+1 only if the store still
// holds version n, the one it last loaded or saved. Two processes that
// resume the same run (two [Open]s, or two [Resume]s of one State) race for
// the first save, which each runner makes before it decides or runs
// anything; the loser gets [ErrRunBusy] and runs nothing. Together with the
// journal of started calls this makes a call of a tool that is not
// [ToolConfig.Idempotent] run at most once, across crashes and across
// processes. Without a Store nothing coordinates two copies of one State:
// resuming the same State twice runs its pending calls twice.
//
// Each method given a context already done returns at once with an error
// wrapping the context's error, and one whose context is cancelled while it
// waits stops waiting. A runner waits for a Store past its run's end only
// for Timeouts.CancelGrace, then stops with an error wrapping
// [ErrStoreMisbehaved] and leaves the store's call to end on its own.
// A Store that can save a step as what it changed is a
// [github.com/toolrun/toolrun/driver.StateAppender].
// The storetest package checks all of this.
type Store interface {
	// Save replaces the saved state of run id with s if the saved state's
	// Version equals prev (prev 0: nothing is saved yet); otherwise it saves
	// nothing and returns an error wrapping [ErrRunBusy]. s.Version is
	// greater than prev. Save is atomic (a crash in the middle of a Save
	// leaves the previous state readable), and safe for concurrent use by
	// several goroutines and processes.
	Save(ctx context.Context, id string, s *State, prev uint64) error
	// Load returns the saved state of run id, with the Version it was saved
	// with, or an error wrapping [fs.ErrNotExist] if there is none, as Go's
	// own stores do (os.Open, fs.FS).
	Load(ctx context.Context, id string) (*State, error)
	// Delete removes the saved state of run id; it is not an error if there
	// is none. A run saved again after Delete starts from version 0.
	Delete(ctx context.Context, id string) error
}

// boundedStoreCall runs call (a Store method, named op) and returns its
// error, or, if call is still running when ctx has been done for grace,
// an error wrapping [ErrStoreMisbehaved]; call is then left to return on
// its own, with its context cancelled. The context call gets is not
// cancelled with ctx: a save made as a run stops (its context done) is
// the one that must land, and it has the grace to do so.
func boundedStoreCall(ctx context.Context, grace time.Duration, op string, call func(context.Context) error) error {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- call(sctx) }()
	select {
	case err := <-done:
		cancel()
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-done:
		cancel()
		return err
	case <-t.C:
		cancel()
		return fmt.Errorf("%w: its %s did not return within %v of the run's end (%v)", ErrStoreMisbehaved, op, grace, context.Cause(ctx))
	}
}

// Open returns the runner of run opts.RunID: resumed from its state in
// opts.Store if one is saved, otherwise new with params. Either way the
// runner saves its state to the store as it goes. Calls that started before
// a crash and never finished are run again only if their tool is
// [ToolConfig.Idempotent]; otherwise the model is told they were
// interrupted ([ErrInterrupted]).
//
// A state the store returns is data, checked as [Resume] checks it
// ([State.Check]); a Load that returns neither a state nor an error is
// refused with an error wrapping [ErrStoreMisbehaved].
//
// Two processes may Open the same run at once: the first step of each saves
// the state before deciding or running anything, and only one of those saves
// succeeds (see [Store]). The other runner stops with an error wrapping
// [ErrRunBusy] and runs nothing.
func Open(ctx context.Context, client anthropic.Client, params anthropic.BetaMessageNewParams, tools []Tool, opts *Options) (*Runner, error) {
	if opts == nil || opts.Store == nil || opts.RunID == "" {
		return nil, errors.New("toolrun: open: Options.Store and Options.RunID are required")
	}
	var s *State
	err := boundedStoreCall(ctx, opts.cancelGrace(), "Load", func(ctx context.Context) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("the store's Load: %w", &PanicError{Value: v, Stack: stack()})
			}
		}()
		s, err = opts.Store.Load(ctx, opts.RunID)
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return New(client, params, tools, opts), nil
	}
	if err != nil {
		return nil, err
	}
	if s == nil {
		// The contract says a state or an error: nothing is neither a
		// run to resume nor a run to begin.
		return nil, fmt.Errorf("toolrun: open: %w: Load of run %q returned no state and no error", ErrStoreMisbehaved, opts.RunID)
	}
	if s.RunID != "" && s.RunID != opts.RunID {
		// A store writer (or a mix-up) put another run's state here.
		err := fmt.Errorf("toolrun: open: the store holds a state of run %q under %q", s.RunID, opts.RunID)
		if len(opts.StateKey) > 0 && s.verify(opts.StateKey) == nil {
			err = fmt.Errorf("%w: %w", ErrStateSignature, err)
		}
		return nil, err
	}
	return Resume(client, s, tools, opts)
}

// claim makes the first save of this runner, before it decides or runs
// anything, so that of two runners resuming one run the second is refused
// before it does any work. It is a no-op once a save has succeeded.
func (r *Runner) claim(ctx context.Context) error {
	if r.opts.Store == nil {
		return nil
	}
	r.saveMu.Lock()
	claimed := r.claimed
	r.saveMu.Unlock()
	if claimed {
		return nil
	}
	return r.save(ctx)
}

// save writes the run's state to Options.Store, if set, as the version after
// the one last loaded or saved, signed with Options.StateKey. A failure is
// kept and stops the run at its next step, since a run whose journal cannot
// be written could run a call twice after a crash; a refusal ([ErrRunBusy])
// stops it for good.
func (r *Runner) save(ctx context.Context) error {
	if r.opts.Store == nil {
		return nil
	}
	// The snapshot is taken under saveMu, so that saves land in the order
	// their snapshots were taken: a call's save made on one goroutine
	// never overwrites, with an older snapshot, the journal of a call
	// another goroutine started. (saveMu is never taken under r.mu.)
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	if r.saveErr != nil {
		return r.saveErr
	}
	s := r.snapshot()
	prev := r.version
	s.Version, s.RunID = prev+1, r.opts.RunID
	// A save that changed only what a StateChange carries is appended, if
	// the store can: it then costs what the step added, not the whole
	// state again. A signed run's change carries the signature of the
	// state it makes, computed from the digests of the parts it did not
	// change and of those it carries (see stateDigests).
	key := r.opts.StateKey
	var change *StateChange
	var shape *savedShape
	ap, canAppend := r.opts.Store.(appender)
	var err error
	if canAppend && r.claimed {
		change, shape, err = r.shape.change(s)
	}
	switch {
	case err != nil:
	case change != nil:
		if len(key) > 0 {
			if shape.digests, err = r.shape.nextDigests(shape, s, change); err == nil {
				change.signature = shape.digests.mac(key, s.Version)
			}
		}
		if err == nil {
			err = boundedStoreCall(ctx, r.opts.cancelGrace(), "Append", func(ctx context.Context) error {
				return r.storeCall(ctx, "Append", func(ctx context.Context) error {
					return ap.Append(ctx, r.opts.RunID, change, prev)
				})
			})
		}
	default:
		var d *stateDigests
		if len(key) > 0 {
			if d, err = s.digests(); err == nil {
				s.Signature = d.mac(key, s.Version)
			}
		}
		if err == nil {
			err = boundedStoreCall(ctx, r.opts.cancelGrace(), "Save", func(ctx context.Context) error {
				return r.storeSave(ctx, s, prev)
			})
		}
		if err == nil && canAppend {
			// What the next save compares with. A state that does not
			// encode failed in Save already.
			if shape, _ = shapeOf(s); shape != nil {
				shape.digests = d
			}
		}
	}
	if err == nil {
		r.version, r.claimed, r.shape = s.Version, true, shape
		return nil
	}
	err = fmt.Errorf("toolrun: saving the state of run %q: %w", r.opts.RunID, err)
	if errors.Is(err, ErrRunBusy) || errors.Is(err, ErrStoreMisbehaved) {
		// A save the store never answered may yet land: what the store
		// holds is unknown, so the run is not this runner's any more.
		r.saveErr, r.busy = err, true
		r.log.ErrorContext(ctx, "toolrun: run taken by another runner; stopping", "run_id", r.opts.RunID, "version", prev, "error", err.Error())
		return err
	}
	r.saveErr = err
	r.log.ErrorContext(ctx, "toolrun: checkpoint failed", "run_id", r.opts.RunID, "error", err.Error())
	return err
}

// hasSaveErr reports whether a save failed or was refused.
func (r *Runner) hasSaveErr() bool {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	return r.saveErr != nil
}

// takeSaveErr returns the first failed save, and forgets it unless it was a
// refusal: a run another runner saved stays stopped.
func (r *Runner) takeSaveErr() error {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	if r.busy {
		return r.saveErr
	}
	err := r.saveErr
	r.saveErr = nil
	return err
}
