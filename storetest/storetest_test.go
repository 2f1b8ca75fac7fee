package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/storetest"
)

func openFileStore(dir string) (toolrun.Store, error) { return &toolrun.FileStore{Dir: dir}, nil }

func TestMain(m *testing.M) {
	storetest.Child(openFileStore)
	os.Exit(m.Run())
}

func TestFileStore(t *testing.T) {
	if err := storetest.Run(t.Context(), &toolrun.FileStore{Dir: t.TempDir()}); err != nil {
		t.Error(err)
	}
}

func TestFileStoreAcrossProcesses(t *testing.T) {
	if err := storetest.RunProcesses(t.Context(), t.TempDir(), openFileStore); err != nil {
		t.Error(err)
	}
}

// forgetful loses every save: the kit must notice.
type forgetful struct{}

func (forgetful) Save(ctx context.Context, id string, s *toolrun.State, prev uint64) error {
	return nil
}
func (forgetful) Load(ctx context.Context, id string) (*toolrun.State, error) {
	return nil, toolrun.ErrNoState
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
// FileStore and sqlitestore did before Save compared versions.
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
	return nil, fmt.Errorf("%w: %s", toolrun.ErrNoState, id)
}

func (l *lastWins) Delete(ctx context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, id)
	return nil
}

func TestKitFindsBrokenStores(t *testing.T) {
	for _, tt := range []struct {
		name  string
		store toolrun.Store
	}{
		{"forgetful", forgetful{}},
		{"one state for all ids", &mixed{}},
		{"last save wins", &lastWins{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := storetest.Run(t.Context(), tt.store); err == nil {
				t.Error("Run found nothing wrong with a broken store")
			}
		})
	}
}
