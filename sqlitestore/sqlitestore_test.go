package sqlitestore_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/sqlitestore"
	"github.com/toolrun/toolrun/storetest"
)

func openStore(dir string) (toolrun.Store, error) {
	return sqlitestore.Open(filepath.Join(dir, "runs.db"))
}

func TestMain(m *testing.M) {
	storetest.Child(openStore)
	os.Exit(m.Run())
}

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

func TestConformanceAcrossProcesses(t *testing.T) {
	if err := storetest.RunProcesses(t.Context(), t.TempDir(), openStore); err != nil {
		t.Error(err)
	}
}

// TestAnyPath: a path is a file name, whatever its characters; before, '?'
// cut the name short and '#' or '%' opened another file or failed.
func TestAnyPath(t *testing.T) {
	for _, tt := range []struct{ name, file string }{
		{"plain", "runs.db"},
		{"space", "my runs.db"},
		{"hash", "runs#1.db"},
		{"percent", "runs%20.db"},
		{"question mark", "runs?mode=ro.db"},
		{"all of them", "a b#c%41?d=e&f.db"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tt.file)
			s, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Save(t.Context(), "run-1", &toolrun.State{Format: 2, Version: 1, Turns: 7}, 0); err != nil {
				t.Fatal(err)
			}
			var files []string
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				files = append(files, e.Name())
			}
			// The database and its WAL files, all named as given.
			if diff := cmp.Diff([]string{tt.file, tt.file + "-shm", tt.file + "-wal"}, files); diff != "" {
				t.Errorf("files in the directory (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSurvivesReopen: a state saved by one process is there for the next,
// with its version.
func TestSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.db")
	s, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st := &toolrun.State{Format: 2, Version: 1, Turns: 7}
	if err := s.Save(t.Context(), "run-1", st, 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Load(t.Context(), "run-1")
	if err != nil || got.Turns != 7 || got.Version != 1 {
		t.Fatalf("Load after reopening = %+v, %v; want the saved state at version 1", got, err)
	}
}

// TestTwoResumersRunACallOnce: two processes that resume one suspended run
// at once run its non-idempotent call once between them; the other is
// refused with ErrRunBusy before running anything.
func TestTwoResumersRunACallOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	if err := storetest.RunResumers(t.Context(), t.TempDir(), openStore); err != nil {
		t.Error(err)
	}
}

// TestBlobs checks the blobs a Store keeps next to its states: saved and
// read back whole under any key, replaced by a later save, apart from a
// state of the same id, and gone once deleted.
func TestBlobs(t *testing.T) {
	ctx := context.Background()
	s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := toolrun.New(anthropic.Client{}, anthropic.BetaMessageNewParams{Model: "m", MaxTokens: 1}, nil, nil).State()
	st.Version = 1
	if err := s.Save(ctx, "run/1", st, 0); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 1<<20)
	for _, key := range []string{"run/1", "a b/ü", "k", ""} {
		if err := s.PutBlob(ctx, key, []byte("old")); err != nil {
			t.Fatalf("PutBlob(%q): %v", key, err)
		}
		if err := s.PutBlob(ctx, key, big); err != nil {
			t.Fatalf("PutBlob(%q): %v", key, err)
		}
		got, err := s.GetBlob(ctx, key)
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("GetBlob(%q): got %d bytes, %v; want the %d bytes saved", key, len(got), err, len(big))
		}
		if err := s.DeleteBlob(ctx, key); err != nil {
			t.Fatalf("DeleteBlob(%q): %v", key, err)
		}
		if _, err := s.GetBlob(ctx, key); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("GetBlob(%q) after DeleteBlob: got %v, want fs.ErrNotExist", key, err)
		}
		if err := s.DeleteBlob(ctx, key); err != nil {
			t.Fatalf("DeleteBlob(%q) of no blob: %v", key, err)
		}
	}
	if _, err := s.Load(ctx, "run/1"); err != nil {
		t.Fatalf("the state of a blob's key: %v", err)
	}
}
