//go:build unix

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// lockBeside takes an exclusive flock on the lock file of name
// (".NAME.lock" in its directory), without waiting: it fails with an error
// wrapping errStateFileBusy if another process holds it. The returned
// function removes the lock file and releases the lock; the OS releases it
// too if the process dies.
func lockBeside(name string) (unlock func(), err error) {
	path := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".lock")
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("locking %s: %w", name, err)
		}
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		if errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("%s: %w", name, errStateFileBusy)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", name, err)
		}
		// The holder before us removes the file as it lets go: a lock on
		// a removed file guards nothing, so take the new one.
		held, err1 := f.Stat()
		now, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			return func() {
				os.Remove(path)
				f.Close()
			}, nil
		}
		f.Close()
		if err1 != nil {
			return nil, fmt.Errorf("locking %s: %w", name, err1)
		}
		if err2 != nil && !errors.Is(err2, fs.ErrNotExist) {
			return nil, fmt.Errorf("locking %s: %w", name, err2)
		}
	}
}
