package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filelock"
)

// errStateFileBusy is the error of openStateFile for a saved run another
// toolrun is resuming.
var errStateFileBusy = errors.New("another toolrun is resuming it")

// stateFile is the [toolrun.Store] of a run resumed from a file: the file
// itself, so that it holds the run as it goes, a journal. The runner saves
// the state to it before it decides or runs anything (with the decisions
// of --allow, --deny and the prompt), before each call starts (journaled as
// started), when a call finishes, when a turn is committed and when the run
// stops. The file so never again shows as pending a call that has started:
//
//   - a run that finishes leaves the file holding the finished run, and a
//     second resume of it says so and runs nothing;
//   - a run that stops awaiting approval again leaves the file suspended at
//     the new calls, to be resumed again;
//   - a resume killed after the decisions were saved leaves them in the
//     file: resumed again, the approved calls that never started run once,
//     and a call that started and did not finish is not run again (the
//     model is told it was interrupted, [toolrun.ErrInterrupted]), as a
//     [toolrun.Store] promises for tools that are not idempotent;
//   - a resume killed before its first save changed nothing, and ran
//     nothing.
//
// Each save is written whole to a temporary file, synced and renamed over
// the file (writeFileAtomic), so a crash leaves the old state or the new.
// The journal follows the file, not the name it is given: a symbolic link
// is resolved, and the saves go to the file it leads to (the link stays a
// link), so a later resume by either name finds the run as it went. One
// process at a time resumes a file: openStateFile takes an OS lock on a
// lock file beside the resolved file (".NAME.lock", removed when the
// resume ends) for the whole resume, so every name of the file (a link, a
// relative path) meets the same lock, and a second resume meanwhile is
// refused before it reads the file. A file with more than one hard link is
// refused: a save replaces the file (rename), which would leave the other
// names holding the run as it was, its approved calls to run again. Save is also a compare-and-swap on
// [toolrun.State.Version], as the Store contract asks, against a file
// written by something that does not take the lock ("toolrun run --state"
// with the same name, an editor): the runner then stops with
// [toolrun.ErrRunBusy] and runs nothing more. On systems without flock
// (Windows) only that check guards the file.
type stateFile struct {
	name   string         // as given, for messages and to compare with it
	path   string         // the file itself: absolute, symbolic links resolved
	lock   *filelock.Lock // nil where the system has no flock
	opened uint64         // the Version of the state the file held when opened

	mu      sync.Mutex // guards the fields below; the runner saves from its calls' goroutines
	setup   savedRun   // what is written with each state: the run's setup
	written os.FileInfo
	version uint64 // the Version of the state in the file written
}

// openStateFile locks the saved run in the file name for this process and
// reads it. It fails with an error wrapping errStateFileBusy if another
// process holds the lock. Close releases it.
func (c *cli) openStateFile(name string) (*stateFile, *savedRun, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, nil, err // a missing file, said plainly, before any lock file is made
	}
	if err := savedRunFile(name, fi); err != nil {
		return nil, nil, err // a device is not locked either: no lock file beside it
	}
	path, err := filepath.EvalSymlinks(name)
	if err == nil {
		path, err = filepath.Abs(path)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := singleLink(name, path); err != nil {
		return nil, nil, err
	}
	lock, err := filelock.TryAcquire(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".lock"), 0o600)
	switch {
	case errors.Is(err, filelock.ErrBusy):
		return nil, nil, fmt.Errorf("%s: %w", name, errStateFileBusy)
	case errors.Is(err, errors.ErrUnsupported):
		lock = nil // guarded by the compare of versions alone
	case err != nil:
		return nil, nil, fmt.Errorf("locking %s: %w", name, err)
	}
	sf := &stateFile{name: name, path: path, lock: lock}
	fail := func(err error) (*stateFile, *savedRun, error) {
		sf.close()
		return nil, nil, err
	}
	// A link made before the lock was taken is seen now.
	if err := singleLink(name, path); err != nil {
		return fail(err)
	}
	saved, err := c.readSavedRun(name)
	if err != nil {
		return fail(err)
	}
	fi, err = os.Stat(path)
	if err != nil {
		return fail(err)
	}
	sf.opened, sf.written, sf.version = saved.State.Version, fi, saved.State.Version
	return sf, saved, nil
}

// errHardLinks is the error of a saved run in a file with other names.
var errHardLinks = errors.New("has other names (hard links)")

// singleLink fails with an error wrapping errHardLinks if the file at path
// (named name) has more than one hard link. A resume saves by replacing
// the file, which would leave the other names holding the run as it was.
func singleLink(name, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if n := linkCount(fi); n > 1 {
		return fmt.Errorf("%s %w: %d names of one file; a resume replaces the file, so the other names would keep the run as it was, to run its approved calls again; resume a copy (cp), after removing the other names", name, errHardLinks, n)
	}
	return nil
}

// setSetup sets what is saved with each state: the run's setup, as resume
// runs it (--approve given to resume included).
func (f *stateFile) setSetup(s savedRun) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.State = nil
	f.setup = s
}

// Save writes s to the file with the run's setup, if the file still holds
// version prev of the state.
func (f *stateFile) Save(ctx context.Context, id string, s *toolrun.State, prev uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.version
	fi, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("saving the run to %s: %w", f.name, err)
	}
	if n := linkCount(fi); n > 1 {
		// Linked since it was opened: replacing it would leave the new
		// name holding the run as it was.
		return fmt.Errorf("saving the run to %s: %w: %w", f.name, singleLink(f.name, f.path), toolrun.ErrRunBusy)
	}
	if !os.SameFile(fi, f.written) {
		// Written since by something else: compare its version.
		b, err := os.ReadFile(f.path)
		if err != nil {
			return fmt.Errorf("saving the run to %s: %w", f.name, err)
		}
		var v struct {
			State struct {
				Version uint64 `json:"version"`
			} `json:"state"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return fmt.Errorf("%s was changed by another program (%v): %w", f.name, err, toolrun.ErrRunBusy)
		}
		cur = v.State.Version
	}
	if cur != prev {
		return fmt.Errorf("%s holds version %d of the run, not %d: %w", f.name, cur, prev, toolrun.ErrRunBusy)
	}
	saved := f.setup
	saved.State = s
	b, err := json.MarshalIndent(saved, "", "  ")
	if err != nil {
		return fmt.Errorf("saving the run: %w", err)
	}
	if err := writeFileAtomic(f.path, append(b, '\n')); err != nil {
		return fmt.Errorf("saving the run to %s: %w", f.name, err)
	}
	fi, err = os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("saving the run to %s: %w", f.name, err)
	}
	f.written, f.version = fi, s.Version
	return nil
}

// Load is not used: a resume reads the file itself, with openStateFile.
func (f *stateFile) Load(ctx context.Context, id string) (*toolrun.State, error) {
	return nil, fmt.Errorf("stateFile.Load: %w", errors.ErrUnsupported)
}

// Delete is not used: a finished run stays in its file, to say so.
func (f *stateFile) Delete(ctx context.Context, id string) error {
	return fmt.Errorf("stateFile.Delete: %w", errors.ErrUnsupported)
}

// close removes the lock file and releases the lock.
func (f *stateFile) close() {
	if f.lock != nil {
		f.lock.Remove()
		f.lock = nil
	}
}
