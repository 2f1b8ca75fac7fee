package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/sqlitestore"
	"github.com/toolrun/toolrun/storetest"
)

func TestConformance(t *testing.T) {
	s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := storetest.Run(t.Context(), s); err != nil {
		t.Error(err)
	}
}

// TestSurvivesReopen: a state saved by one process is there for the next.
func TestSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.db")
	s, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st := &toolrun.State{Version: toolrun.StateVersion, Turns: 7}
	if err := s.Save(t.Context(), "run-1", st); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Load(t.Context(), "run-1")
	if err != nil || got.Turns != 7 {
		t.Fatalf("Load after reopening = %+v, %v; want the saved state", got, err)
	}
}
