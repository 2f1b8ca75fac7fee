//go:build unix

package toolrun

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on the file at path, creating it if need
// be, and returns the function that releases it. The OS releases it too if
// the process dies.
func lockFile(path string) (unlock func(), err error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		// Delete may have removed the file between the open and the lock:
		// a lock on a removed file guards nothing, so take the new one.
		held, err1 := f.Stat()
		now, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			return func() { f.Close() }, nil
		}
		f.Close()
		if err1 != nil {
			return nil, err1
		}
		if err2 != nil && !errors.Is(err2, fs.ErrNotExist) {
			return nil, err2
		}
	}
}
