package storetest_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/storetest"
)

func TestFileStore(t *testing.T) {
	if err := storetest.Run(t.Context(), &toolrun.FileStore{Dir: t.TempDir()}); err != nil {
		t.Error(err)
	}
}

// forgetful loses every save: the kit must notice.
type forgetful struct{}

func (forgetful) Save(ctx context.Context, id string, s *toolrun.State) error { return nil }
func (forgetful) Load(ctx context.Context, id string) (*toolrun.State, error) {
	return nil, toolrun.ErrNoState
}
func (forgetful) Delete(ctx context.Context, id string) error { return nil }

// mixed keeps one state for every id.
type mixed struct {
	mu sync.Mutex // guards s
	s  *toolrun.State
}

func (m *mixed) Save(ctx context.Context, id string, s *toolrun.State) error {
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

func TestKitFindsBrokenStores(t *testing.T) {
	for _, tt := range []struct {
		name  string
		store toolrun.Store
	}{
		{"forgetful", forgetful{}},
		{"one state for all ids", &mixed{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := storetest.Run(t.Context(), tt.store); err == nil {
				t.Error("Run found nothing wrong with a broken store")
			}
		})
	}
}
