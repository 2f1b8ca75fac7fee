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
// Each Save is one statement, and so one transaction, that writes a run's
// row only if its version column still holds the version the runner last
// saw (an UPDATE … WHERE version = prev, or an INSERT that the primary key
// refuses when a row exists): of several runners that resume one run, in
// one process or many, exactly one goes on and the others get
// [toolrun.ErrRunBusy]. A crash leaves the previous state or the new one.
// The database runs in WAL mode with full synchronous writes; several
// processes may share it.
package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/toolrun/toolrun"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Store is a [toolrun.Store] backed by a SQLite database. It is safe for
// concurrent use.
type Store struct {
	db *sql.DB
}

// Open opens (creating if need be) the database at path and its table. Any
// path is taken as a file name, even one with '?', '#', '%' or spaces.
func Open(path string) (*Store, error) {
	dsn, err := dsnOf(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	db, err := sql.Open("sqlite", dsn)
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
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS toolrun_blob (
		key  TEXT PRIMARY KEY,
		data BLOB NOT NULL
	)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: creating the blob table: %w", err)
	}
	return &Store{db: db}, nil
}

// dsnOf returns the driver's name for the database file at path: a file: URI
// whose path is escaped, so that none of its characters is read as the
// start of the query or fragment or as an escape, with the driver's pragmas
// as the query.
func dsnOf(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	q := url.Values{"_pragma": {"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(5000)"}}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	if !strings.HasPrefix(u.Path, "/") { // a Windows path: file:///C:/…
		u.Path = "/" + u.Path
	}
	return u.String(), nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Save replaces the state of run id with st if the saved version is prev,
// in one statement; otherwise it returns an error wrapping
// [toolrun.ErrRunBusy].
func (s *Store) Save(ctx context.Context, id string, st *toolrun.State, prev uint64) error {
	if st.Version <= prev {
		return fmt.Errorf("sqlitestore: saving version %d of run %q over version %d", st.Version, id, prev)
	}
	if st.Version > math.MaxInt64 {
		return fmt.Errorf("sqlitestore: saving version %d of run %q: SQLite integers stop at %d", st.Version, id, int64(math.MaxInt64))
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("sqlitestore: encoding the state of %q: %w", id, err)
	}
	var res sql.Result
	if prev == 0 {
		res, err = s.db.ExecContext(ctx, `INSERT INTO toolrun_state (run_id, version, state) VALUES (?, ?, ?)
			ON CONFLICT(run_id) DO NOTHING`, id, int64(st.Version), data)
	} else {
		res, err = s.db.ExecContext(ctx, `UPDATE toolrun_state SET version = ?, state = ?,
			updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE run_id = ? AND version = ?`,
			int64(st.Version), data, id, int64(prev))
	}
	if err != nil {
		return fmt.Errorf("sqlitestore: saving the state of %q: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlitestore: saving the state of %q: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("sqlitestore: run %q is not at version %d: %w", id, prev, toolrun.ErrRunBusy)
	}
	return nil
}

// Load returns the state of run id, or an error wrapping [fs.ErrNotExist]
// if none is saved.
func (s *Store) Load(ctx context.Context, id string) (*toolrun.State, error) {
	var data []byte
	var version int64
	err := s.db.QueryRowContext(ctx, `SELECT state, version FROM toolrun_state WHERE run_id = ?`, id).Scan(&data, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlitestore: no saved state for run %q: %w", id, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: loading the state of %q: %w", id, err)
	}
	var st toolrun.State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("sqlitestore: decoding the state of %q: %w", id, err)
	}
	st.Version = uint64(version) // the column is what Save compares
	return &st, nil
}

// Delete removes the state of run id.
func (s *Store) Delete(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM toolrun_state WHERE run_id = ?`, id); err != nil {
		return fmt.Errorf("sqlitestore: deleting the state of %q: %w", id, err)
	}
	return nil
}

// PutBlob saves b under key, replacing what was there, in one statement.
// Blobs are bytes a driver keeps next to the states it saves, such as the
// large values the temporal module's claim check keeps out of a
// workflow's history; they are in a table of their own, toolrun_blob.
func (s *Store) PutBlob(ctx context.Context, key string, b []byte) error {
	if b == nil {
		b = []byte{} // the column is NOT NULL
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO toolrun_blob (key, data) VALUES (?, ?)
		ON CONFLICT(key) DO UPDATE SET data = excluded.data`, key, b); err != nil {
		return fmt.Errorf("sqlitestore: saving blob %q: %w", key, err)
	}
	return nil
}

// GetBlob returns the bytes [Store.PutBlob] saved under key, or an error
// wrapping [fs.ErrNotExist] if there are none.
func (s *Store) GetBlob(ctx context.Context, key string) ([]byte, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, `SELECT data FROM toolrun_blob WHERE key = ?`, key).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlitestore: no blob %q: %w", key, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: loading blob %q: %w", key, err)
	}
	return b, nil
}

// DeleteBlob removes the blob under key; it is not an error if there is
// none.
func (s *Store) DeleteBlob(ctx context.Context, key string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM toolrun_blob WHERE key = ?`, key); err != nil {
		return fmt.Errorf("sqlitestore: deleting blob %q: %w", key, err)
	}
	return nil
}
