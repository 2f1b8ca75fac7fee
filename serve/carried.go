package serve

import (
	"context"
	"database/sql"
	"sync"

	"github.com/toolrun/toolrun"
)

// carriedStore is the Store of an in-process run: the server's sqlStore,
// whose first save of a State that holds the run's new messages also
// records their ids as the thread's, and the context their preamble
// gives, in one transaction. Until that save the thread does not have
// them: a run that fails before (Open, a decision, the Store, a crash)
// leaves them unknown, and the client's retry with the same message ids
// brings them to the model, once.
type carriedStore struct {
	sqlStore
	db     *sql.DB
	thread string

	mu sync.Mutex // guards ids, digest, users
	// ids, digest and users (from position from on) are what the next
	// save records with the State; empty once recorded, or before carry.
	ids    []string
	digest string
	users  []userRec
	from   int
	armed  bool
}

// carry arms s with p's carried ids and context: call it once the
// runner's State holds p's messages, so that every save from then on has
// them.
func (s *carriedStore) carry(p *prepared) {
	s.mu.Lock()
	s.ids, s.digest = p.carried, p.digest
	s.users, s.from, s.armed = p.userRecs, p.usersFrom, len(p.userRecs) > 0 || p.branch >= 0
	s.mu.Unlock()
}

func (s *carriedStore) Save(ctx context.Context, id string, st *toolrun.State, prev uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 && s.digest == "" && !s.armed {
		return s.sqlStore.Save(ctx, id, st, prev)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := (sqlStore{tx}).Save(ctx, id, st, prev); err != nil {
		return err
	}
	if err := recordCarried(ctx, tx, s.thread, s.ids, s.digest); err != nil {
		return err
	}
	if s.armed {
		if err := recordUsers(ctx, tx, s.thread, s.from, s.users); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.ids, s.digest, s.users, s.armed = nil, "", nil, false
	return nil
}

// recordCarried records ids as message ids thread has, and digest (if
// not "") as the context it was last given.
func recordCarried(ctx context.Context, q querier, thread string, ids []string, digest string) error {
	for _, mid := range ids {
		if _, err := q.ExecContext(ctx, `INSERT INTO serve_messages (thread_id, id) VALUES (?, ?) ON CONFLICT DO NOTHING`, thread, mid); err != nil {
			return err
		}
	}
	if digest != "" {
		if _, err := q.ExecContext(ctx, `INSERT INTO serve_thread_context (thread_id, digest) VALUES (?, ?) ON CONFLICT (thread_id) DO UPDATE SET digest = excluded.digest`, thread, digest); err != nil {
			return err
		}
	}
	return nil
}
