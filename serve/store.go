package serve

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/toolrun/toolrun"
)

// schema creates the tables the server keeps. Every statement is
// idempotent, so a server opens a database it made before, and any SQL
// database with SQLite's dialect works.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS serve_states (id TEXT PRIMARY KEY, version INTEGER NOT NULL, data BLOB NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_threads (id TEXT PRIMARY KEY, owner TEXT NOT NULL, client_tools TEXT NOT NULL DEFAULT '[]', created_at TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_messages (thread_id TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (thread_id, id))`,
	`CREATE TABLE IF NOT EXISTS serve_runs (id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, owner TEXT NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (run_id, seq))`,
	`CREATE TABLE IF NOT EXISTS serve_interrupts (
		id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, run_id TEXT NOT NULL,
		tool_call_id TEXT NOT NULL, tool_name TEXT NOT NULL, input BLOB NOT NULL,
		reason TEXT NOT NULL, kind TEXT NOT NULL, status TEXT NOT NULL,
		decision BLOB, decided_by TEXT, decided_at TEXT,
		created_at TEXT NOT NULL, expires_at TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_thread_context (thread_id TEXT PRIMARY KEY, digest TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_inbox_logins (id TEXT PRIMARY KEY, token TEXT NOT NULL, expires_at INTEGER NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_exec_cursors (thread_id TEXT PRIMARY KEY, cursor TEXT NOT NULL, usage BLOB)`,
	`CREATE INDEX IF NOT EXISTS serve_interrupts_thread ON serve_interrupts (thread_id, status)`,
}

// Run and interrupt statuses, as the tables keep them.
const (
	runRunning     = "running"
	runFinished    = "finished"
	runInterrupted = "interrupted"

	kindApproval = "approval"
	kindClient   = "client"

	statusPending  = "pending"
	statusDecided  = "decided"
	statusAnswered = "answered"
)

// sqlStore is a [toolrun.Store] over the server's database: the State of
// each thread, saved with a compare-and-swap on its Version in the same
// database as the thread's runs, interrupts and events, so one file holds
// everything a restart needs.
type sqlStore struct{ db querier } // a *sql.DB, or a *sql.Tx (carriedStore)

func (s sqlStore) Save(ctx context.Context, id string, st *toolrun.State, prev uint64) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	var res sql.Result
	if prev == 0 {
		res, err = s.db.ExecContext(ctx, `INSERT INTO serve_states (id, version, data) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`, id, int64(st.Version), b)
	} else {
		res, err = s.db.ExecContext(ctx, `UPDATE serve_states SET version = ?, data = ? WHERE id = ? AND version = ?`, int64(st.Version), b, id, int64(prev))
	}
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return fmt.Errorf("run %q: %w", id, toolrun.ErrRunBusy)
	}
	return nil
}

func (s sqlStore) Load(ctx context.Context, id string) (*toolrun.State, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, `SELECT data FROM serve_states WHERE id = ?`, id).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %q: %w", id, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	st := new(toolrun.State)
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("run %q: %w", id, err)
	}
	return st, nil
}

func (s sqlStore) Delete(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM serve_states WHERE id = ?`, id)
	return err
}

// insertEvents records data as the events of run numbered from first on,
// and known as message ids thread has, in one transaction: all of them or
// none. One event and no id is one statement, SQLite's own transaction.
func insertEvents(ctx context.Context, db *sql.DB, run string, first int64, data [][]byte, thread string, known []string) error {
	if len(data) == 1 && len(known) == 0 {
		_, err := db.ExecContext(ctx, `INSERT INTO serve_events (run_id, seq, data) VALUES (?, ?, ?)`, run, first, data[0])
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// A statement takes at most 32766 parameters (SQLite's default
	// limit); rowsPerInsert rows of three stay well below it.
	const rowsPerInsert = 500
	for len(data) > 0 {
		n := min(len(data), rowsPerInsert)
		q := strings.Builder{}
		q.WriteString(`INSERT INTO serve_events (run_id, seq, data) VALUES `)
		args := make([]any, 0, 3*n)
		for i, b := range data[:n] {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?)")
			args = append(args, run, first+int64(i), b)
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
		data, first = data[n:], first+int64(n)
	}
	for _, id := range known {
		if _, err := tx.ExecContext(ctx, `INSERT INTO serve_messages (thread_id, id) VALUES (?, ?) ON CONFLICT DO NOTHING`, thread, id); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// interrupt is a row of serve_interrupts: a call of a thread that awaits a
// person (kind approval) or the client (kind client).
type interrupt struct {
	ID, Thread, Run, ToolCallID, ToolName string
	Input                                 json.RawMessage
	Reason, Kind, Status                  string
	Decision                              json.RawMessage
	DecidedBy                             string
	DecidedAt                             string
	CreatedAt, ExpiresAt                  time.Time
}

const interruptColumns = `id, thread_id, run_id, tool_call_id, tool_name, input, reason, kind, status, decision, decided_by, decided_at, created_at, expires_at`

type scanner interface{ Scan(dest ...any) error }

func scanInterrupt(sc scanner) (*interrupt, error) {
	var it interrupt
	var input, decision []byte
	var decidedBy, decidedAt sql.NullString
	var created, expires string
	if err := sc.Scan(&it.ID, &it.Thread, &it.Run, &it.ToolCallID, &it.ToolName, &input, &it.Reason, &it.Kind, &it.Status, &decision, &decidedBy, &decidedAt, &created, &expires); err != nil {
		return nil, err
	}
	it.Input, it.Decision = input, decision
	it.DecidedBy, it.DecidedAt = decidedBy.String, decidedAt.String
	it.CreatedAt, _ = time.Parse(time.RFC3339Nano, created)
	it.ExpiresAt, _ = time.Parse(time.RFC3339Nano, expires)
	return &it, nil
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func queryInterrupts(ctx context.Context, q querier, where string, args ...any) ([]*interrupt, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+interruptColumns+` FROM serve_interrupts WHERE `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*interrupt
	for rows.Next() {
		it, err := scanInterrupt(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
