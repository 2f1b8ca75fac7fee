package serve

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
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

// eventWriter records the events of every run of the server, committing
// those that arrive together in one transaction: with SQLite's one writer
// and a sync at each commit, a commit per event write bounded a busy
// server's throughput by the disk's syncs, not by its models (1,000
// concurrent runs went through at about 70 a second). A write waits for
// the commit of its batch, so an event is still recorded before it is
// sent. There is no goroutine to stop: the first writer to find no batch
// being committed commits the queue, and hands the next batch to the
// first write queued meanwhile.
type eventWriter struct {
	db *sql.DB

	mu      sync.Mutex // guards queue, leading
	queue   []*eventWrite
	leading bool // a write is committing a batch
}

// eventWrite is one run's events and the message ids they make known.
type eventWrite struct {
	run, thread string
	first       int64
	data        [][]byte
	known       []string

	err  error
	lead bool          // set before wake is closed: this write commits the next batch
	wake chan struct{} // closed when the write is committed, or must lead
}

// insert records data as the events of run numbered from first on, and
// known as message ids thread has: all of them or none.
func (w *eventWriter) insert(ctx context.Context, run string, first int64, data [][]byte, thread string, known []string) error {
	e := &eventWrite{run: run, thread: thread, first: first, data: data, known: known, wake: make(chan struct{})}
	w.mu.Lock()
	w.queue = append(w.queue, e)
	if !w.leading {
		w.leading, e.lead = true, true
		w.mu.Unlock()
	} else {
		w.mu.Unlock()
		<-e.wake
	}
	if e.lead {
		w.commitQueue(ctx, e)
	}
	return e.err
}

// commitQueue commits the writes queued, leader's among them, in one
// transaction, wakes them, and hands the lead to the first write queued
// since, if any.
func (w *eventWriter) commitQueue(ctx context.Context, leader *eventWrite) {
	w.mu.Lock()
	batch := w.queue
	w.queue = nil
	w.mu.Unlock()
	w.commit(ctx, batch)
	w.mu.Lock()
	if len(w.queue) > 0 {
		next := w.queue[0]
		next.lead = true
		close(next.wake)
	} else {
		w.leading = false
	}
	w.mu.Unlock()
	for _, e := range batch {
		if e != leader {
			close(e.wake)
		}
	}
}

// commit records batch in one transaction, each write under a savepoint
// of its own, so that one that fails takes none of its rows and leaves
// the others'.
func (w *eventWriter) commit(ctx context.Context, batch []*eventWrite) {
	fail := func(err error) {
		for _, e := range batch {
			if e.err == nil {
				e.err = err
			}
		}
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		fail(err)
		return
	}
	defer tx.Rollback()
	for _, e := range batch {
		if _, err := tx.ExecContext(ctx, `SAVEPOINT event_write`); err != nil {
			fail(err)
			return
		}
		if e.err = insertEvents(ctx, tx, e); e.err != nil {
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO event_write`); err != nil {
				fail(err)
				return
			}
		}
		if _, err := tx.ExecContext(ctx, `RELEASE event_write`); err != nil {
			fail(err)
			return
		}
	}
	if err := tx.Commit(); err != nil {
		for _, e := range batch {
			e.err = err
		}
	}
}

// insertEvents records e's rows in tx.
func insertEvents(ctx context.Context, tx *sql.Tx, e *eventWrite) error {
	// A statement takes at most 32766 parameters (SQLite's default
	// limit); rowsPerInsert rows of three stay well below it.
	const rowsPerInsert = 500
	data, first := e.data, e.first
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
			args = append(args, e.run, first+int64(i), b)
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
		data, first = data[n:], first+int64(n)
	}
	for _, id := range e.known {
		if _, err := tx.ExecContext(ctx, `INSERT INTO serve_messages (thread_id, id) VALUES (?, ?) ON CONFLICT DO NOTHING`, e.thread, id); err != nil {
			return err
		}
	}
	return nil
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
