//go:build !unix

package filelock

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
)

// Acquire fails: this system has no flock.
func Acquire(path string, perm fs.FileMode) (*Lock, error) {
	return nil, fmt.Errorf("locking %s on %s: %w", path, runtime.GOOS, errors.ErrUnsupported)
}

// TryAcquire fails: this system has no flock.
func TryAcquire(path string, perm fs.FileMode) (*Lock, error) {
	return Acquire(path, perm)
}

func removeFile(path string) error { return nil }
