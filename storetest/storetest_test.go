package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/storetest"
)

// openFileStore opens a filestore.Store in dir; under a directory named
// brokenDir it opens an ignoresPrev instead. The children of RunResumers open
// their store through TestMain's Child, so the dir is how
// TestRunResumersFindsABrokenStore reaches them.
func openFileStore(dir string) (toolrun.Store, error) {
	fs := &filestore.Store{Dir: dir}
	if slices.Contains(strings.Split(filepath.ToSlash(dir), "/"), brokenDir) {
		return ignoresPrev{fs}, nil
	}
	return fs, nil
}

const brokenDir = "ignores-prev"

// ignoresPrev is a filestore.Store whose Save saves over whatever is saved, as
// if it had been given the saved version as prev: a store without a
// compare-and-swap.
type ignoresPrev struct{ *filestore.Store }

func (s ignoresPrev) Save(ctx context.Context, id string, st *toolrun.State, prev uint64) error {
	for {
		var cur uint64
		if saved, err := s.Store.Load(ctx, id); err == nil {
			cur = saved.Version
		}
		c := *st
		c.Version = cur + 1
		err := s.Store.Save(ctx, id, &c, cur)
		if !errors.Is(err, toolrun.ErrRunBusy) {
			return err
		}
	}
}

func TestMain(m *testing.M) {
	storetest.Child(openFileStore)
	os.Exit(m.Run())
}

func TestFileStore(t *testing.T) {
	if err := storetest.Run(t.Context(), &filestore.Store{Dir: t.TempDir()}); err != nil {
		t.Error(err)
	}
}

func TestFileStoreAcrossProcesses(t *testing.T) {
	if err := storetest.RunProcesses(t.Context(), t.TempDir(), openFileStore); err != nil {
		t.Error(err)
	}
}

func TestTwoResumersRunACallOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	if err := storetest.RunResumers(t.Context(), t.TempDir(), openFileStore); err != nil {
		t.Error(err)
	}
}

// TestRunResumersFindsABrokenStore: with a store that saves over whatever
// is saved, both resumers go on and the call runs twice, and RunResumers
// says so.
func TestRunResumersFindsABrokenStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	err := storetest.RunResumers(t.Context(), filepath.Join(t.TempDir(), brokenDir), openFileStore)
	if err == nil || !strings.Contains(err.Error(), "want one") {
		t.Errorf("RunResumers with a store that ignores prev: got %v, want an error about how the resumers stopped", err)
	}
}

// forgetful loses every save: the kit must notice.
type forgetful struct{}

func (forgetful) Save(ctx context.Context, id string, s *toolrun.State, prev uint64) error {
	return nil
}
func (forgetful) Load(ctx context.Context, id string) (*toolrun.State, error) {
	return nil, fs.ErrNotExist
}
func (forgetful) Delete(ctx context.Context, id string) error { return nil }

// mixed keeps one state for every id.
type mixed struct {
	mu sync.Mutex // guards s
	s  *toolrun.State
}

func (m *mixed) Save(ctx context.Context, id string, s *toolrun.State, prev uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.s = s
	return nil
}

func (m *mixed) Load(ctx context.Context, id string) (*toolrun.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.s == nil {
		return nil, errors.New("nothing")
	}
	return m.s, nil
}
func (m *mixed) Delete(ctx context.Context, id string) error { return nil }

// lastWins keeps each run's state but ignores prev: the last Save wins, as
// filestore.Store and sqlitestore did before Save compared versions.
type lastWins struct {
	mu sync.Mutex // guards m
	m  map[string]*toolrun.State
}

func (l *lastWins) Save(ctx context.Context, id string, s *toolrun.State, prev uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*toolrun.State{}
	}
	l.m[id] = s
	return nil
}

func (l *lastWins) Load(ctx context.Context, id string) (*toolrun.State, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.m[id]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("no state for %s: %w", id, fs.ErrNotExist)
}

func (l *lastWins) Delete(ctx context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, id)
	return nil
}

// loadsNothing keeps nothing and Loads nil, nil, which the contract
// rules out: the kit must say so, and not panic.
type loadsNothing struct{ forgetful }

func (loadsNothing) Load(ctx context.Context, id string) (*toolrun.State, error) { return nil, nil }

func TestKitFindsBrokenStores(t *testing.T) {
	for _, tt := range []struct {
		name  string
		store toolrun.Store
	}{
		{"forgetful", forgetful{}},
		{"one state for all ids", &mixed{}},
		{"last save wins", &lastWins{}},
		{"Load returns nothing", loadsNothing{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := storetest.Run(t.Context(), tt.store); err == nil {
				t.Error("Run found nothing wrong with a broken store")
			}
		})
	}
}
