// Package filelock takes exclusive OS locks on lock files, for the two
// places that guard a saved run with one: package filestore's Store and
// the toolrun command's resume journal. A lock is an flock on an open file:
// the OS releases it when the process dies, so a killed process never
// leaves a file locked.
//
// A lock file may be removed by the holder as it lets go (see
// [Lock.Remove]); Acquire and TryAcquire notice a lock taken on a file
// removed meanwhile and take the lock of the new one, so that a removed
// file never guards anything.
//
// On systems without flock (Windows) Acquire and TryAcquire fail with an
// error wrapping [errors.ErrUnsupported]: each caller decides whether it can
// do without.
//
// It is a package of its own, not an internal one, because the toolrun
// command is a module of its own: a module's import of another module's
// internal packages is a contract that no version check covers, and this
// small API is one that can be kept.
package filelock

import "errors"

// ErrBusy is the error of TryAcquire for a lock another process (or another
// open file of this one) holds.
var ErrBusy = errors.New("the lock is held by another process")

// Lock is a held lock. It is not safe for concurrent use.
type Lock struct {
	path  string
	close func() error
}

// Unlock releases the lock and leaves the lock file in place, for a caller
// whose lock files live as long as what they guard. A second call does
// nothing.
func (l *Lock) Unlock() error {
	if l.close == nil {
		return nil
	}
	err := l.close()
	l.close = nil
	return err
}

// Remove removes the lock file and releases the lock, for a caller whose
// lock file is made for one holder at a time. The file is removed while the
// lock is held, so a process waiting on it notices and takes the lock of a
// new file. A second call does nothing.
func (l *Lock) Remove() error {
	if l.close == nil {
		return nil
	}
	err := removeFile(l.path)
	if cerr := l.Unlock(); err == nil {
		err = cerr
	}
	return err
}
