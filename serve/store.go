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
	"github.com/toolrun/toolrun/driver"
)

// schema creates the tables the server keeps. Every statement is
// idempotent, so a server opens a database it made before, and any SQL
// database with SQLite's dialect works.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS serve_states (id TEXT PRIMARY KEY, version INTEGER NOT NULL, data BLOB NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS serve_state_skeletons (id TEXT PRIMARY KEY, data BLOB NOT NULL)`,
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
	// The calls waiting, in the order the pending lists read them, with
	// every column the inbox's list reads of each (listColumns): its
	// reading of 10,000 calls walks this index alone, not the table's
	// rows and their inputs. It replaces an index of the first four.
	`CREATE INDEX IF NOT EXISTS serve_interrupts_listed ON serve_interrupts (status, kind, created_at, id, thread_id, run_id, tool_call_id, tool_name)`,
	`DROP INDEX IF EXISTS serve_interrupts_waiting`,
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
// everything a restart needs. A save is a write of the server's
// writeQueue: the saves and events of every run in flight that arrive
// together are one transaction, one sync. The State is encoded by its
// caller, before it joins the queue, so that the write that commits a
// batch encodes none of the others'.
//
// serve_states holds the State whole as it was last saved with a history
// or a response the row did not have; serve_state_skeletons, if it has a
// row of the thread, the State saved since, without those (see
// [driver.Skeleton]), which Load merges with the whole one. A run's
// store (carriedStore) saves a skeleton when the whole State's history
// and response are the row's: the saves of a turn's calls (each started,
// each answered) do not encode the conversation again.
type sqlStore struct {
	w  *writeQueue
	db querier // reads: the database, its statements prepared
}

// The statements of a State's save and load.
const (
	sqlStateInsert  = `INSERT INTO serve_states (id, version, data) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`
	sqlStateUpdate  = `UPDATE serve_states SET version = ?, data = ? WHERE id = ? AND version = ?`
	sqlStateVersion = `UPDATE serve_states SET version = ? WHERE id = ? AND version = ?`
	sqlSkeletonPut  = `INSERT INTO serve_state_skeletons (id, data) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET data = excluded.data`
	sqlSkeletonDrop = `DELETE FROM serve_state_skeletons WHERE id = ?`
	sqlStateLoad    = `SELECT s.data, k.data FROM serve_states s LEFT JOIN serve_state_skeletons k ON k.id = s.id WHERE s.id = ?`
	sqlStateDelete  = `DELETE FROM serve_states WHERE id = ?`
)

func (s sqlStore) Save(ctx context.Context, id string, st *toolrun.State, prev uint64) error {
	if err := ctx.Err(); err != nil {
		return err // a Store's contract: a done ctx saves nothing
	}
	b, err := s.w.enc.marshal(st)
	if err != nil {
		return err
	}
	return s.w.do(ctx, func(ctx context.Context, q querier) error {
		return saveState(ctx, q, id, int64(st.Version), b, false, false, prev)
	})
}

// saveState writes the encoded State b of id as version, whole or as a
// skeleton of the whole State the row has, if the version saved is prev
// (none, for 0), or fails with ErrRunBusy. noSkeleton is set by a caller
// that knows version prev has no skeleton row (it saved prev whole
// itself): a whole save then skips the statement that drops the row. The
// row changes only with the version, so the compare-and-swap on prev
// keeps that knowledge true.
func saveState(ctx context.Context, q querier, id string, version int64, b []byte, skeleton, noSkeleton bool, prev uint64) error {
	var res sql.Result
	var err error
	switch {
	case prev == 0:
		res, err = q.ExecContext(ctx, sqlStateInsert, id, version, b)
	case skeleton:
		res, err = q.ExecContext(ctx, sqlStateVersion, version, id, int64(prev))
	default:
		res, err = q.ExecContext(ctx, sqlStateUpdate, version, b, id, int64(prev))
	}
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return fmt.Errorf("run %q: %w", id, toolrun.ErrRunBusy)
	}
	switch {
	case skeleton && prev != 0:
		_, err = q.ExecContext(ctx, sqlSkeletonPut, id, b)
	case !noSkeleton || prev == 0:
		_, err = q.ExecContext(ctx, sqlSkeletonDrop, id)
	}
	return err
}

func (s sqlStore) Load(ctx context.Context, id string) (*toolrun.State, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var whole, skel []byte
	err := s.db.QueryRowContext(ctx, sqlStateLoad, id).Scan(&whole, &skel)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %q: %w", id, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	st := new(toolrun.State)
	if err := json.Unmarshal(whole, st); err != nil {
		return nil, fmt.Errorf("run %q: %w", id, err)
	}
	if skel == nil {
		return st, nil
	}
	sk := new(toolrun.State)
	if err := json.Unmarshal(skel, sk); err != nil {
		return nil, fmt.Errorf("run %q: %w", id, err)
	}
	return driver.Merge(sk, st), nil
}

func (s sqlStore) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.w.do(ctx, func(ctx context.Context, q querier) error {
		if _, err := q.ExecContext(ctx, sqlSkeletonDrop, id); err != nil {
			return err
		}
		_, err := q.ExecContext(ctx, sqlStateDelete, id)
		return err
	})
}

// sqlMessageInsert records a message id as its thread's.
const sqlMessageInsert = `INSERT INTO serve_messages (thread_id, id) VALUES (?, ?) ON CONFLICT DO NOTHING`

// eventRowsPrepared is the most rows an insert of events prepared at New
// has: a write of more is cut into inserts of that many.
const eventRowsPrepared = 16

// sqlEventInsert returns the insert of n events' rows.
func sqlEventInsert(n int) string {
	var q strings.Builder
	q.WriteString(`INSERT INTO serve_events (run_id, seq, data) VALUES `)
	for i := range n {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?)")
	}
	return q.String()
}

// sqlEventInserts are the inserts of 1 to eventRowsPrepared events' rows,
// by their number of rows less one.
var sqlEventInserts = func() []string {
	qs := make([]string, eventRowsPrepared)
	for i := range qs {
		qs[i] = sqlEventInsert(i + 1)
	}
	return qs
}()

// insertEvents records data as the events of run numbered from first on,
// and known as message ids thread has, in q.
func insertEvents(ctx context.Context, q querier, run string, first int64, data [][]byte, thread string, known []string) error {
	for len(data) > 0 {
		n := min(len(data), eventRowsPrepared)
		args := make([]any, 0, 3*n)
		for i, b := range data[:n] {
			args = append(args, run, first+int64(i), b)
		}
		if _, err := q.ExecContext(ctx, sqlEventInserts[n-1], args...); err != nil {
			return err
		}
		data, first = data[n:], first+int64(n)
	}
	for _, id := range known {
		if _, err := q.ExecContext(ctx, sqlMessageInsert, thread, id); err != nil {
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
	var err error
	if it.CreatedAt, err = time.Parse(time.RFC3339Nano, created); err != nil {
		return nil, fmt.Errorf("interrupt %q: created_at: %w", it.ID, err)
	}
	if it.ExpiresAt, err = time.Parse(time.RFC3339Nano, expires); err != nil {
		return nil, fmt.Errorf("interrupt %q: expires_at: %w", it.ID, err)
	}
	return &it, nil
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// interruptQuery is the query of the interrupts where says, oldest first.
func interruptQuery(where string) string {
	return `SELECT ` + interruptColumns + ` FROM serve_interrupts WHERE ` + where + ` ORDER BY created_at, id`
}

func queryInterrupts(ctx context.Context, q querier, where string, args ...any) ([]*interrupt, error) {
	rows, err := q.QueryContext(ctx, interruptQuery(where), args...)
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
