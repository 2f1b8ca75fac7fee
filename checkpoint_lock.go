package toolrun

import "github.com/toolrun/toolrun/filelock"

// lockFile takes an exclusive lock on the file at path, creating it if need
// be, waiting for its holder, and returns the function that releases it.
// The OS releases it too if the process dies. On systems without flock it
// fails: FileStore's compare-and-swap needs the lock, and a FileStore
// without it could let two runners own a run.
func lockFile(path string) (unlock func(), err error) {
	l, err := filelock.Acquire(path, 0o644)
	if err != nil {
		return nil, err
	}
	return func() { l.Unlock() }, nil
}
