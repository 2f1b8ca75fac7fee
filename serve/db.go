package serve

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/toolrun/toolrun"
)

// statements holds the server's SQL statements prepared on its one
// connection, so that SQLite parses each once rather than at every call:
// parsing was a tenth of a busy server's CPU. Statements used inside a
// transaction must be prepared before it (prepare, at New): the
// transaction holds the one connection, on which database/sql would wait
// for ever to prepare another. Others are prepared at their first use.
// They live as long as the database the caller gave serve.New: closing
// it releases them.
type statements struct {
	db *sql.DB

	mu sync.Mutex // guards m
	m  map[string]*sql.Stmt
}

// maxStatements bounds the statements kept prepared; past it a query runs
// unprepared, as database/sql runs any. The server's queries are a fixed
// set well below it.
const maxStatements = 256

// prepare prepares qs now.
func (s *statements) prepare(ctx context.Context, qs ...string) error {
	for _, q := range qs {
		if _, err := s.get(ctx, q, true); err != nil {
			return err
		}
	}
	return nil
}

// get returns q prepared, preparing it if create is set; nil if it is not
// and create is not set.
func (s *statements) get(ctx context.Context, q string, create bool) (*sql.Stmt, error) {
	s.mu.Lock()
	st := s.m[q]
	full := len(s.m) >= maxStatements
	s.mu.Unlock()
	if st != nil || !create || full {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if had := s.m[q]; had != nil {
		st.Close()
		return had, nil
	}
	if s.m == nil {
		s.m = map[string]*sql.Stmt{}
	}
	s.m[q] = st
	return st, nil
}

// preparedDB is the database as a querier whose statements are prepared
// once (see statements).
type preparedDB struct{ s *statements }

func (p preparedDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := p.s.get(ctx, q, true)
	if err != nil || st == nil {
		return p.s.db.ExecContext(ctx, q, args...)
	}
	return st.ExecContext(ctx, args...)
}

func (p preparedDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := p.s.get(ctx, q, true)
	if err != nil || st == nil {
		return p.s.db.QueryContext(ctx, q, args...)
	}
	return st.QueryContext(ctx, args...)
}

func (p preparedDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := p.s.get(ctx, q, true)
	if err != nil || st == nil {
		// The query unprepared gives the error, if any, as a Row does.
		return p.s.db.QueryRowContext(ctx, q, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// preparedTx is a transaction as a querier that runs the statements
// prepared already as such, and others unprepared (see statements). It
// is used by one goroutine at a time, as a transaction is.
type preparedTx struct {
	tx *sql.Tx
	s  *statements
	// inTx are the statements bound to tx, by query: a batch of the
	// write queue runs a few statements hundreds of times, and binding
	// one to the transaction (Tx.StmtContext) at every run was an
	// allocation and a lock each.
	inTx map[string]*sql.Stmt
}

func newPreparedTx(tx *sql.Tx, s *statements) preparedTx {
	return preparedTx{tx: tx, s: s, inTx: map[string]*sql.Stmt{}}
}

func (p preparedTx) stmt(ctx context.Context, q string) *sql.Stmt {
	if st := p.inTx[q]; st != nil {
		return st
	}
	st, _ := p.s.get(ctx, q, false) // never prepares: no error
	if st == nil {
		return nil
	}
	st = p.tx.StmtContext(ctx, st)
	p.inTx[q] = st
	return st
}

func (p preparedTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := p.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return p.tx.ExecContext(ctx, q, args...)
}

func (p preparedTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := p.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.tx.QueryContext(ctx, q, args...)
}

func (p preparedTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := p.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.tx.QueryRowContext(ctx, q, args...)
}

// writeQueue makes every write of the server (a run's events, a thread's
// State, a run's end) on the database's one connection, committing those
// that arrive together in one transaction: with SQLite's one writer and a
// sync at each commit, a transaction per write bounded a busy server by
// the syncs and the commits' CPU, not by its models. A write waits for
// the commit of its batch, so a State is saved, and an event recorded,
// before its caller goes on. There is no goroutine to stop: the first
// writer to find no batch being committed commits the queue, and hands
// the next batch to the first write queued meanwhile. A write that fails
// takes none of its rows and leaves the others' (see commit).
type writeQueue struct {
	db    *sql.DB
	stmts *statements
	enc   encoders // the States' encoding, before they join the queue

	mu      sync.Mutex // guards queue, leading
	queue   []*queuedWrite
	leading bool // a write is committing a batch
}

// queuedWrite is one write waiting for its batch's commit.
type queuedWrite struct {
	fn   func(ctx context.Context, q querier) error
	err  error
	lead bool          // set before wake is closed: this write commits the next batch
	wake chan struct{} // closed when the write is committed, or must lead
}

// The savepoint statements of every write, prepared at New.
const (
	sqlSavepoint  = `SAVEPOINT serve_write`
	sqlRollbackTo = `ROLLBACK TO serve_write`
	sqlRelease    = `RELEASE serve_write`
)

// do runs fn in the transaction of the next batch and returns once that
// is committed: fn's error, or the commit's. fn's writes are committed
// whatever ctx does once queued, as other writes share the transaction.
func (w *writeQueue) do(ctx context.Context, fn func(ctx context.Context, q querier) error) error {
	e := &queuedWrite{fn: fn, wake: make(chan struct{})}
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
		w.commitQueue(context.WithoutCancel(ctx), e)
	}
	return e.err
}

// commitQueue commits the writes queued, leader's among them, in one
// transaction, wakes them, and hands the lead to the first write queued
// since, if any.
func (w *writeQueue) commitQueue(ctx context.Context, leader *queuedWrite) {
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

// commit runs batch in one transaction. The writes run one after the
// other with nothing between them, as almost every batch succeeds whole;
// if one fails, the transaction is rolled back and the batch run again
// with each write under a savepoint of its own, so that the one that
// failed takes none of its rows and leaves the others'. (Savepoints
// around every write were two more statements a write, a twentieth of a
// busy server's CPU.)
func (w *writeQueue) commit(ctx context.Context, batch []*queuedWrite) {
	if w.run(ctx, batch, false) {
		return
	}
	for _, e := range batch {
		e.err = nil
	}
	w.run(ctx, batch, true)
}

// run runs batch in one transaction, each write under a savepoint if
// guarded, and reports whether it is done: false if a write failed
// unguarded, and the transaction was rolled back.
func (w *writeQueue) run(ctx context.Context, batch []*queuedWrite, guarded bool) bool {
	fail := func(err error) bool {
		for _, e := range batch {
			if e.err == nil {
				e.err = err
			}
		}
		return true
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	q := newPreparedTx(tx, w.stmts)
	for _, e := range batch {
		if !guarded || len(batch) == 1 {
			// A write alone in its batch needs no savepoint: its
			// failure rolls the transaction back.
			if e.err = e.fn(ctx, q); e.err != nil {
				return len(batch) == 1
			}
			continue
		}
		if _, err := q.ExecContext(ctx, sqlSavepoint); err != nil {
			return fail(err)
		}
		if e.err = e.fn(ctx, q); e.err != nil {
			if _, err := q.ExecContext(ctx, sqlRollbackTo); err != nil {
				return fail(err)
			}
		}
		if _, err := q.ExecContext(ctx, sqlRelease); err != nil {
			return fail(err)
		}
	}
	if err := tx.Commit(); err != nil {
		for _, e := range batch {
			e.err = err
		}
	}
	return true
}

// inWrites are the statements run inside a transaction (the writes of
// writeQueue and the checks of a request to run), prepared at New.
var inWrites = append([]string{
	sqlSavepoint, sqlRollbackTo, sqlRelease,
	sqlStateInsert, sqlStateUpdate, sqlStateVersion, sqlSkeletonPut, sqlSkeletonDrop, sqlStateDelete,
	sqlMessageInsert, sqlRunStatus,
}, append(sqlEventInserts, inRequest...)...)

// sqlRunStatus sets a run's status.
const sqlRunStatus = `UPDATE serve_runs SET status = ? WHERE id = ?`

// encoders encode the States the server saves on goroutines that outlive
// one save, while saves keep them busy. The runner calls a Store's Save
// on a goroutine of its own, whose stack starts small, and the SDK's
// encoding of a conversation runs deep: growing a fresh stack for every
// save cost more CPU than the encoding's own work. A worker ends after
// encoderIdle without a State to encode, so nothing needs stopping.
type encoders struct {
	jobs chan *encodeJob
}

// encoderIdle is how long an encoding goroutine waits for the next State.
const encoderIdle = time.Second

// encodeJob is one encoding to run, and its result once done is closed.
type encodeJob struct {
	encode func() ([]byte, error)
	b      []byte
	err    error
	done   chan struct{}
}

// marshal returns json.Marshal(st), run by an idle worker or a new one.
func (e *encoders) marshal(st *toolrun.State) ([]byte, error) {
	return e.run(func() ([]byte, error) { return marshalState(st) })
}

// run returns encode(), run by an idle worker or a new one.
func (e *encoders) run(encode func() ([]byte, error)) ([]byte, error) {
	j := &encodeJob{encode: encode, done: make(chan struct{})}
	select {
	case e.jobs <- j:
	default:
		go e.work(j)
	}
	<-j.done
	return j.b, j.err
}

// work encodes j, then the jobs that come while it waits, until it has
// waited encoderIdle for one.
func (e *encoders) work(j *encodeJob) {
	t := time.NewTimer(encoderIdle)
	defer t.Stop()
	for {
		j.b, j.err = j.encode()
		close(j.done)
		t.Reset(encoderIdle)
		select {
		case j = <-e.jobs:
		case <-t.C:
			return
		}
	}
}
