// Package sqlitestore is a [toolrun.Store] that keeps the state of runs in a
// SQLite database, through the pure-Go driver modernc.org/sqlite (no cgo).
// It lives in a module of its own so that toolrun's users who don't use it
// never download or build SQLite.
//
//	store, err := sqlitestore.Open("runs.db")
//	if err != nil { ... }
//	defer store.Close()
//	r, err := toolrun.Open(ctx, client, params, tools, &toolrun.Options{Store: store, RunID: "order-42"})
//
// Each Save replaces a run's row in one transaction, so a crash leaves the
// previous state or the new one. The database runs in WAL mode with full
// synchronous writes; several processes may share it.
package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolrun/toolrun"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Store is a [toolrun.Store] backed by a SQLite database. It is safe for
// concurrent use.
type Store struct {
	db *sql.DB
}

// Open opens (creating if need be) the database at path and its table.
func Open(path string) (*Store, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS toolrun_state (
		run_id     TEXT PRIMARY KEY,
		version    INTEGER NOT NULL,
		state      BLOB NOT NULL,
		updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
	)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: creating the table: %w", err)
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Save replaces the state of run id, in one transaction.
func (s *Store) Save(ctx context.Context, id string, st *toolrun.State) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("sqlitestore: encoding the state of %q: %w", id, err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO toolrun_state (run_id, version, state) VALUES (?, ?, ?)
		ON CONFLICT(run_id) DO UPDATE SET version = excluded.version, state = excluded.state,
		updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`, id, st.Version, data)
	if err != nil {
		return fmt.Errorf("sqlitestore: saving the state of %q: %w", id, err)
	}
	return nil
}

// Load returns the state of run id, or an error wrapping
// [toolrun.ErrNoState].
func (s *Store) Load(ctx context.Context, id string) (*toolrun.State, error) {
	var data []byte
	err := s.db.QueryRowContext(ctx, `SELECT state FROM toolrun_state WHERE run_id = ?`, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w for run %q", toolrun.ErrNoState, id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: loading the state of %q: %w", id, err)
	}
	var st toolrun.State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("sqlitestore: decoding the state of %q: %w", id, err)
	}
	return &st, nil
}

// Delete removes the state of run id.
func (s *Store) Delete(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM toolrun_state WHERE run_id = ?`, id); err != nil {
		return fmt.Errorf("sqlitestore: deleting the state of %q: %w", id, err)
	}
	return nil
}
