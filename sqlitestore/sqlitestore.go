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
// Each Save is one transaction that writes a run's row only if the run is
// still at the version the runner last saw (an UPDATE … WHERE the version
// is prev, or an INSERT that finds no row): of several runners that
// resume one run, in one process or many, exactly one goes on and the
// others get [toolrun.ErrRunBusy]. A crash leaves the previous state or
// the new one. The Store is a [github.com/toolrun/toolrun/driver.StateAppender]: the saves of a
// turn's calls are rows of their changes in the table toolrun_change, each
// inserted on the same compare-and-swap, so that a turn of n calls writes
// what its calls add, not n copies of the turn; Load applies them to the
// state's row, and the next Save replaces both.
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
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS toolrun_change (
		run_id  TEXT NOT NULL,
		version INTEGER NOT NULL,
		change  BLOB NOT NULL,
		PRIMARY KEY (run_id, version)
	)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: creating the change table: %w", err)
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

// currentVersion is the SQL of the version run ?1 is at: its row's, or
// that of the last change appended to it, whichever is later (a change
// older than the row is one a later Save replaced).
const currentVersion = `MAX(COALESCE((SELECT version FROM toolrun_state WHERE run_id = ?1), 0),
	COALESCE((SELECT MAX(version) FROM toolrun_change WHERE run_id = ?1), 0))`

// Save replaces the state of run id with st if the saved version is prev,
// in one transaction; otherwise it returns an error wrapping
// [toolrun.ErrRunBusy]. It removes the changes appended to the state it
// replaces.
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
	// The transaction's first statement writes, so it holds the database's
	// write lock from its start: the version it compares is the latest.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: saving the state of %q: %w", id, err)
	}
	defer tx.Rollback()
	var res sql.Result
	if prev == 0 {
		res, err = tx.ExecContext(ctx, `INSERT INTO toolrun_state (run_id, version, state) SELECT ?1, ?2, ?3
			WHERE `+currentVersion+` = 0
			ON CONFLICT(run_id) DO NOTHING`, id, int64(st.Version), data)
	} else {
		res, err = tx.ExecContext(ctx, `UPDATE toolrun_state SET version = ?2, state = ?3,
			updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE run_id = ?1 AND `+currentVersion+` = ?4`,
			id, int64(st.Version), data, int64(prev))
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
	if _, err := tx.ExecContext(ctx, `DELETE FROM toolrun_change WHERE run_id = ?`, id); err != nil {
		return fmt.Errorf("sqlitestore: saving the state of %q: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: saving the state of %q: %w", id, err)
	}
	return nil
}

// Append saves version c.Version of run id as a change to the version it
// holds, if that is prev: one row inserted into toolrun_change, in one
// statement, so that a save costs what the change holds, not the whole
// state (an UPDATE of the state's row would write the row whole). Load
// applies the changes after the state's row; the next Save replaces the
// row and removes them.
func (s *Store) Append(ctx context.Context, id string, c *toolrun.StateChange, prev uint64) error {
	if c.Version <= prev || prev == 0 {
		return fmt.Errorf("sqlitestore: appending version %d of run %q to version %d", c.Version, id, prev)
	}
	if c.Version > math.MaxInt64 {
		return fmt.Errorf("sqlitestore: saving version %d of run %q: SQLite integers stop at %d", c.Version, id, int64(math.MaxInt64))
	}
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("sqlitestore: encoding a change of %q: %w", id, err)
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO toolrun_change (run_id, version, change) SELECT ?1, ?2, ?3
		WHERE EXISTS (SELECT 1 FROM toolrun_state WHERE run_id = ?1) AND `+currentVersion+` = ?4
		ON CONFLICT DO NOTHING`, id, int64(c.Version), data, int64(prev))
	if err != nil {
		return fmt.Errorf("sqlitestore: appending to the state of %q: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlitestore: appending to the state of %q: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("sqlitestore: run %q is not at version %d: %w", id, prev, toolrun.ErrRunBusy)
	}
	return nil
}

// Load returns the state of run id, or an error wrapping [fs.ErrNotExist]
// if none is saved.
func (s *Store) Load(ctx context.Context, id string) (*toolrun.State, error) {
	// One read transaction, so that the state's row and its changes are
	// of one moment.
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: loading the state of %q: %w", id, err)
	}
	defer tx.Rollback()
	var data []byte
	var version int64
	err = tx.QueryRowContext(ctx, `SELECT state, version FROM toolrun_state WHERE run_id = ?`, id).Scan(&data, &version)
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
	rows, err := tx.QueryContext(ctx, `SELECT version, change FROM toolrun_change WHERE run_id = ? AND version > ? ORDER BY version`, id, version)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: loading the state of %q: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int64
		var b []byte
		if err := rows.Scan(&v, &b); err != nil {
			return nil, fmt.Errorf("sqlitestore: loading the state of %q: %w", id, err)
		}
		var c toolrun.StateChange
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("sqlitestore: decoding a change of %q: %w", id, err)
		}
		if err := st.Apply(&c); err != nil {
			return nil, fmt.Errorf("sqlitestore: the change to version %d of %q: %w", v, id, err)
		}
		st.Version = uint64(v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: loading the state of %q: %w", id, err)
	}
	return &st, nil
}

// Delete removes the state of run id, with its changes.
func (s *Store) Delete(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: deleting the state of %q: %w", id, err)
	}
	defer tx.Rollback()
	for _, q := range []string{`DELETE FROM toolrun_change WHERE run_id = ?`, `DELETE FROM toolrun_state WHERE run_id = ?`} {
		if _, err := tx.ExecContext(ctx, q, id); err != nil {
			return fmt.Errorf("sqlitestore: deleting the state of %q: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
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
