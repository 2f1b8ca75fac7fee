//go:build unix

package filelock_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolrun/toolrun/filelock"
)

// TestTryAcquire takes a lock and tries it again through another open file,
// as another process would: busy while held, free once released.
func TestTryAcquire(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := filelock.TryAcquire(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := filelock.TryAcquire(path, 0o600); !errors.Is(err, filelock.ErrBusy) {
		t.Fatalf("TryAcquire of a held lock: got %v, want ErrBusy", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := filelock.TryAcquire(path, 0o600)
	if err != nil {
		t.Fatalf("TryAcquire after Unlock: %v", err)
	}
	l2.Unlock()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Unlock removed the lock file: %v", err)
	}
}

// TestAcquireAfterRemove waits on a lock whose holder removes the lock file
// as it lets go: the waiter must end up holding the lock of a file that
// exists, so that a third taker is refused.
func TestAcquireAfterRemove(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := filelock.Acquire(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *filelock.Lock)
	go func() {
		l2, err := filelock.Acquire(path, 0o600)
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		return
	}
	defer l2.Remove()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the waiter holds a lock on a removed file: %v", err)
	}
	if _, err := filelock.TryAcquire(path, 0o600); !errors.Is(err, filelock.ErrBusy) {
		t.Errorf("TryAcquire while the waiter holds it: got %v, want ErrBusy", err)
	}
}
