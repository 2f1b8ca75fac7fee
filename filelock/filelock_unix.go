//go:build unix

package filelock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Acquire takes an exclusive lock on the file at path, creating it with
// perm if need be, and waits for a holder to release it.
func Acquire(path string, perm fs.FileMode) (*Lock, error) {
	return acquire(path, perm, syscall.LOCK_EX)
}

// TryAcquire takes an exclusive lock on the file at path, creating it with
// perm if need be, without waiting: it fails with an error wrapping ErrBusy
// if another holds it.
func TryAcquire(path string, perm fs.FileMode) (*Lock, error) {
	return acquire(path, perm, syscall.LOCK_EX|syscall.LOCK_NB)
}

func acquire(path string, perm fs.FileMode, how int) (*Lock, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, perm)
		if err != nil {
			return nil, err
		}
		for {
			err = syscall.Flock(int(f.Fd()), how)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		if errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, ErrBusy)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		// The holder before us may have removed the file as it let go: a
		// lock on a removed file guards nothing, so take the new one.
		held, err1 := f.Stat()
		now, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			return &Lock{path: path, close: f.Close}, nil
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

func removeFile(path string) error { return os.Remove(path) }
