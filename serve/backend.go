package serve

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolrun/toolrun"
)

// backend is where the server's runs are kept: their events, the calls
// awaiting a person and the decisions on them. The HTTP layer (the AG-UI
// event stream, the JSON API) speaks only to it, so that a backend other
// than the server's own database (runs as Temporal workflows, listed from
// their search attributes and decided by signal while no worker runs) can
// stand behind the same routes. sqlBackend, the server's database and its
// runs in process, is one; execBackend, the server's database and an
// [Executor] (runs as Temporal workflows, say), is the other.
//
// It is unexported: what a user implements is the smaller [Executor],
// which knows nothing of HTTP, AG-UI or the server's tables.
type backend interface {
	// start checks and records the request in to run as id, and starts
	// the run, whose first event (RUN_STARTED) is recorded when it
	// returns; it reports whether the run's forwardedProps ask for it to
	// be cancelled when its client goes away. ctx bounds the checks, not
	// the run.
	start(ctx context.Context, in *runInput, id identity) (cancelOnEOF bool, err error)
	// runOwner returns the name of the token that started run, or an
	// error wrapping errNoRun if there is no such run.
	runOwner(ctx context.Context, run string) (string, error)
	// eventsAfter calls yield with each recorded event of run numbered
	// above after, in order, until yield returns false; an event larger
	// than eventChunk comes with its first chunk only, and the rest is
	// read with eventPart as it is written. live, if not nil, is run as
	// follow last returned it, in flight or ended since, whose last
	// events are taken from memory.
	eventsAfter(ctx context.Context, run string, live *liveRun, after int64, yield func(storedEvent) bool) error
	// eventPart returns at most n bytes of run's event seq from byte off.
	eventPart(ctx context.Context, run string, seq int64, off, n int) ([]byte, error)
	// follow returns run if it is in flight here (its wait is closed at
	// its next event), or nil, so its recorded events are all it has.
	follow(run string) *liveRun
	// pending lists the calls awaiting a person's decision, oldest first;
	// a non-empty thread keeps that thread's.
	pending(ctx context.Context, thread string) ([]*interrupt, error)
	// interrupt returns the interrupt id, or nil if there is none.
	interrupt(ctx context.Context, id string) (*interrupt, error)
	// decide records d on it, taken by by at now, if it is still pending;
	// otherwise it returns a requestError with the code already_decided.
	decide(ctx context.Context, it *interrupt, d toolrun.Decision, by string, now time.Time) error
	// goOn continues thread once no call of it waits, and returns the new
	// run's id, or "" if it started none.
	goOn(thread string) string
	// cancel cancels run, if it is in flight and owner started it, and
	// reports whether it did.
	cancel(run, owner string) bool
	// fingerprint returns a value that changes whenever a pending call
	// is made or decided, for the inbox's change detector.
	fingerprint(ctx context.Context) (string, error)
}

// errNoRun is the error of a run the backend does not have.
var errNoRun = errors.New("no such run")

// sqlBackend keeps everything in the server's database and runs the runs
// in this process.
type sqlBackend struct{ h *Handler }

func (b sqlBackend) start(ctx context.Context, in *runInput, id identity) (bool, error) {
	_, p, err := b.h.startRun(ctx, in, id)
	if err != nil {
		return false, err
	}
	return p.cancelOnEOF, nil
}

func (b sqlBackend) runOwner(ctx context.Context, run string) (string, error) {
	var owner string
	err := b.h.cfg.DB.QueryRowContext(ctx, `SELECT owner FROM serve_runs WHERE id = ?`, run).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("run %q: %w", run, errNoRun)
	}
	return owner, err
}

func (b sqlBackend) follow(run string) *liveRun {
	b.h.mu.Lock()
	defer b.h.mu.Unlock()
	return b.h.runs[run]
}

func (b sqlBackend) pending(ctx context.Context, thread string) ([]*interrupt, error) {
	where, args := `status = ? AND kind = ?`, []any{statusPending, kindApproval}
	if thread != "" {
		where += ` AND thread_id = ?`
		args = append(args, thread)
	}
	return queryInterrupts(ctx, b.h.cfg.DB, where, args...)
}

func (b sqlBackend) interrupt(ctx context.Context, id string) (*interrupt, error) {
	its, err := queryInterrupts(ctx, b.h.cfg.DB, `id = ?`, id)
	if err != nil || len(its) == 0 {
		return nil, err
	}
	return its[0], nil
}

func (b sqlBackend) decide(ctx context.Context, it *interrupt, d toolrun.Decision, by string, now time.Time) error {
	return decide(ctx, b.h.cfg.DB, it, d, by, now)
}

func (b sqlBackend) goOn(thread string) string { return b.h.inbox.goOn(thread) }

func (b sqlBackend) cancel(run, owner string) bool {
	b.h.mu.Lock()
	lr := b.h.runs[run]
	b.h.mu.Unlock()
	if lr == nil || lr.owner != owner {
		return false
	}
	lr.cancel()
	return true
}

func (b sqlBackend) fingerprint(ctx context.Context) (string, error) {
	var n, decided int64
	var newest string
	err := b.h.cfg.DB.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(MAX(created_at), '') FROM serve_interrupts WHERE status = ? AND kind = ?`, statusPending, kindApproval).Scan(&n, &newest)
	if err != nil {
		return "", err
	}
	if err := b.h.cfg.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM serve_interrupts WHERE status <> ?`, statusPending).Scan(&decided); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d/%s/%d", n, newest, decided), nil
}
