package serve

import (
	"context"
	"sync"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
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
	thread string

	mu sync.Mutex // guards ids, digest, users
	// ids, digest and users (from position from on) are what the next
	// save records with the State; empty once recorded, or before carry.
	ids    []string
	digest string
	users  []userRec
	from   int
	armed  bool
	// whole is the shape of the State last saved whole, if saved: a
	// State of the same shape with calls in its turn is of the same turn,
	// with the same history and response, and is saved as a skeleton.
	// Within a turn the runner adds to the history only by committing
	// the turn (more messages, no calls) and a new response counts a
	// turn; serve changes a run's history only before it runs.
	whole wholeShape
	saved bool
	// noSkeleton is set while the version this store saved last was
	// saved whole, so its row has no skeleton to drop (see saveState).
	noSkeleton bool
	// hist encodes the States saved whole, each message once.
	hist historyEncoder
	// events, if set, is the run's mapper, whose held events every save
	// records in its own transaction (see mapper.saves).
	events *mapper
}

// wholeShape is what tells a State's history and response from those of
// the State saved whole before it.
type wholeShape struct{ turns, messages, calls int }

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
	shape := wholeShape{turns: st.Turns, messages: len(st.Params.Messages), calls: len(st.Calls())}
	skeleton := s.saved && prev != 0 && shape.calls > 0 && shape == s.whole
	var b []byte
	var err error
	if skeleton {
		b, err = s.w.enc.marshal(driver.Skeleton(st))
	} else {
		b, err = s.w.enc.run(func() ([]byte, error) { return s.hist.marshal(st) })
	}
	if err != nil {
		return err
	}
	carry := len(s.ids) > 0 || s.digest != "" || s.armed
	noSkeleton := s.noSkeleton
	write := func(ctx context.Context, q querier) error {
		if err := saveState(ctx, q, id, int64(st.Version), b, skeleton, noSkeleton, prev); err != nil {
			return err
		}
		if !carry {
			return nil
		}
		if err := recordCarried(ctx, q, s.thread, s.ids, s.digest); err != nil {
			return err
		}
		if s.armed {
			return recordUsers(ctx, q, s.thread, s.from, s.users)
		}
		return nil
	}
	var evs *eventBatch
	if m := s.events; m != nil {
		// The run's events held for this save: numbered and recorded in
		// its transaction, with m.mu and the run's lr.mu held until they
		// are, so that no other write of the run's events comes between.
		m.mu.Lock()
		defer m.mu.Unlock()
		if all, known := m.take(); len(all) > 0 || len(known) > 0 {
			m.lr.mu.Lock()
			defer m.lr.mu.Unlock()
			evs, _ = m.lr.encode(known, all)
		}
	}
	if evs == nil {
		err = s.w.do(ctx, write)
	} else if err = s.w.do(ctx, func(ctx context.Context, q querier) error {
		if err := write(ctx, q); err != nil {
			return err
		}
		return evs.insert(ctx, q)
	}); err != nil {
		// The events and the State took none of their rows. Each is
		// written alone, as if never together: the events (recorded, or
		// logged and their numbers left unused), then the State, whose
		// error is the save's.
		evs.lr.recorded(evs, s.w.do(ctx, evs.insert))
		evs = nil
		err = s.w.do(ctx, write)
	}
	if evs != nil {
		evs.lr.recorded(evs, nil)
	}
	if err != nil {
		// What the row holds is unknown: the next save is whole, and
		// drops any skeleton.
		s.saved, s.noSkeleton = false, false
		return err
	}
	if !skeleton {
		s.whole, s.saved = shape, true
	}
	s.noSkeleton = !skeleton
	s.ids, s.digest, s.users, s.armed = nil, "", nil, false
	return nil
}

// recordCarried records ids as message ids thread has, and digest (if
// not "") as the context it was last given.
func recordCarried(ctx context.Context, q querier, thread string, ids []string, digest string) error {
	for _, mid := range ids {
		if _, err := q.ExecContext(ctx, sqlMessageInsert, thread, mid); err != nil {
			return err
		}
	}
	if digest != "" {
		if _, err := q.ExecContext(ctx, sqlContextPut, thread, digest); err != nil {
			return err
		}
	}
	return nil
}
