// Package storetest checks that a [toolrun.Store] behaves as toolrun needs,
// in the manner of testing/slogtest: run [Run] against your implementation
// in a test, and fail on the error it returns.
//
//	func TestMyStore(t *testing.T) {
//		if err := storetest.Run(t.Context(), newMyStore(t)); err != nil {
//			t.Error(err)
//		}
//	}
//
// Run checks one process. [RunProcesses] checks that Save's
// compare-and-swap also holds between processes: it starts copies of the
// test binary, which race to save one run. [RunResumers] checks what the
// compare-and-swap is for: two copies that resume one suspended run at once
// run its non-idempotent call once, and the other is refused with
// [toolrun.ErrRunBusy]. Those copies find their work through [Child], which
// the test binary's TestMain calls first:
//
//	func openStore(dir string) (toolrun.Store, error) {
//		return mystore.Open(filepath.Join(dir, "runs.db"))
//	}
//
//	func TestMain(m *testing.M) {
//		storetest.Child(openStore) // returns at once in the test binary itself
//		os.Exit(m.Run())
//	}
//
//	func TestMyStoreAcrossProcesses(t *testing.T) {
//		if err := storetest.RunProcesses(t.Context(), t.TempDir(), openStore); err != nil {
//			t.Error(err)
//		}
//		if err := storetest.RunResumers(t.Context(), t.TempDir(), openStore); err != nil {
//			t.Error(err)
//		}
//	}
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
)

// Run checks s and returns every violation found, joined with errors.Join,
// or nil. It saves, loads and deletes runs whose ids start with
// "storetest-", so s may be shared with other data. It checks Save's
// compare-and-swap; that each method given a context already done returns
// its error, and returns within a minute (else it names the method that
// hung); and, if s is a [driver.StateAppender], that Append is a
// compare-and-swap on the versions Save keeps, whose changes Load applies
// in order and a Save or Delete clears.
func Run(ctx context.Context, s toolrun.Store) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if _, err := load(ctx, s, "storetest-missing"); !errors.Is(err, fs.ErrNotExist) {
		fail("Load of a run never saved: got %v, want an error wrapping fs.ErrNotExist", err)
	}
	if err := s.Delete(ctx, "storetest-missing"); err != nil {
		fail("Delete of a run never saved: got %v, want nil", err)
	}

	// Ids that a careless implementation would mix up or refuse.
	ids := []string{"storetest-a", "storetest-a/b", "storetest-a%2Fb", "storetest-../escape", "storetest-ä ö", "storetest-A", "storetest-a.b",
		"storetest-a.lock", "storetest-a.state.json", "storetest-a.state.json.tmp", "storetest-a#b?c"}
	for i, id := range ids {
		if err := s.Save(ctx, id, sample(i, 1), 0); err != nil {
			fail("Save(%q): %v", id, err)
		}
	}
	for i, id := range ids {
		got, err := load(ctx, s, id)
		if err != nil {
			fail("Load(%q): %v", id, err)
			continue
		}
		if !same(got, sample(i, 1)) {
			fail("Load(%q) gave another run's state or lost data: got turns %d, want %d", id, got.Turns, sample(i, 1).Turns)
		}
	}

	// A second Save replaces the first.
	if err := s.Save(ctx, "storetest-a", sample(42, 2), 1); err != nil {
		fail("second Save: %v", err)
	} else if got, err := load(ctx, s, "storetest-a"); err != nil || !same(got, sample(42, 2)) {
		fail("Load after a second Save: got %+v, %v; want the second state", got, err)
	}

	// Saves of different runs may happen at once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range 8 {
		wg.Go(func() {
			id := fmt.Sprintf("storetest-concurrent-%d", i)
			if err := s.Save(ctx, id, sample(100+i, 1), 0); err != nil {
				mu.Lock()
				fail("concurrent Save(%q): %v", id, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := range 8 {
		id := fmt.Sprintf("storetest-concurrent-%d", i)
		if got, err := load(ctx, s, id); err != nil || !same(got, sample(100+i, 1)) {
			fail("Load(%q) after concurrent saves: %v", id, err)
		}
		_ = s.Delete(ctx, id)
	}

	errs = append(errs, compareAndSwap(ctx, s)...)
	errs = append(errs, doneContext(ctx, s)...)
	if a, ok := s.(driver.StateAppender); ok {
		errs = append(errs, appends(ctx, a)...)
	}

	for _, id := range ids {
		if err := s.Delete(ctx, id); err != nil {
			fail("Delete(%q): %v", id, err)
		}
		if _, err := load(ctx, s, id); !errors.Is(err, fs.ErrNotExist) {
			fail("Load(%q) after Delete: got %v, want an error wrapping fs.ErrNotExist", id, err)
		}
	}
	return errors.Join(errs...)
}

// load calls s.Load and turns a Load that returns neither a state nor an
// error, which the contract rules out (and a runner refuses with
// [toolrun.ErrStoreMisbehaved]), into an error.
func load(ctx context.Context, s toolrun.Store, id string) (*toolrun.State, error) {
	st, err := s.Load(ctx, id)
	if st == nil && err == nil {
		return nil, fmt.Errorf("Load(%q) returned no state and no error; want a state, or an error wrapping fs.ErrNotExist", id)
	}
	return st, err
}

// compareAndSwap checks that Save saves only over the version it is given,
// so that of several runners resuming one run exactly one goes on.
func compareAndSwap(ctx context.Context, s toolrun.Store) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	const id = "storetest-cas"
	defer s.Delete(ctx, id)

	// want checks that the saved state is sample(n, version).
	want := func(step string, n int, version uint64) {
		got, err := load(ctx, s, id)
		switch {
		case err != nil:
			fail("%s: Load: %v", step, err)
		case got.Version != version:
			fail("%s: Load: got version %d, want %d", step, got.Version, version)
		case !same(got, sample(n, version)):
			fail("%s: Load: got the state of turn %d, want %d", step, got.Turns, n)
		}
	}
	refused := func(step string, err error) {
		if !errors.Is(err, toolrun.ErrRunBusy) {
			fail("%s: got %v, want an error wrapping toolrun.ErrRunBusy", step, err)
		}
	}

	if err := s.Save(ctx, id, sample(1, 1), 0); err != nil {
		fail("Save of version 1 over nothing: %v", err)
	}
	want("after saving version 1", 1, 1)
	refused("Save with prev 0 over version 1", s.Save(ctx, id, sample(2, 1), 0))
	want("after a refused Save with prev 0", 1, 1)
	refused("Save with prev 2 over version 1", s.Save(ctx, id, sample(3, 3), 2))
	want("after a refused Save with prev 2", 1, 1)
	if err := s.Save(ctx, id, sample(4, 2), 1); err != nil {
		fail("Save of version 2 over version 1: %v", err)
	}
	want("after saving version 2", 4, 2)
	refused("Save with the stale prev 1 over version 2", s.Save(ctx, id, sample(5, 2), 1))
	want("after a refused stale Save", 4, 2)

	// Runners that loaded the same version race: one wins.
	race := func(step string, prev uint64) {
		winner := oneWins(step, 8, func(i int) error {
			return s.Save(ctx, id, sample(10+i, prev+1), prev)
		}, fail, refused)
		if winner < 0 {
			return
		}
		want(step, 10+winner, prev+1)
	}
	// A Save given a context already done fails with its error (see
	// doneContext) and saves nothing: a store that answers an error and
	// saved lies about the version it holds.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Save(done, id, sample(6, 3), 2); err == nil {
		fail("Save with a done context: got nil, want an error wrapping context.Canceled")
		want("after a Save with a done context that returned nil", 6, 3)
		s.Delete(ctx, id)
		if err := s.Save(ctx, id, sample(4, 2), 0); err != nil {
			fail("Save after Delete: %v", err)
		}
	} else {
		want("after a Save with a done context that failed", 4, 2)
	}
	race("8 Saves over version 2 at once", 2)
	if err := s.Delete(ctx, id); err != nil {
		fail("Delete: %v", err)
	}
	race("8 Saves over nothing at once, after Delete", 0)
	return errs
}

// oneWins runs write(0) to write(n-1) at once, as runners that loaded the
// same version would, and returns the index of the one write that won, or
// -1. Two winners or none are failures (given to fail); each loser's error
// goes to refused, which checks that it is the contract's refusal.
func oneWins(step string, n int, write func(i int) error, fail func(format string, args ...any), refused func(step string, err error)) int {
	results := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i] = write(i)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range results {
		switch {
		case err == nil && winner >= 0:
			fail("%s: writes %d and %d both won, want exactly one", step, winner, i)
		case err == nil:
			winner = i
		default:
			refused(fmt.Sprintf("%s: write %d of %d", step, i, n), err)
		}
	}
	if winner < 0 {
		fail("%s: no write won, want exactly one", step)
	}
	return winner
}

// sample returns a distinct state for n at version, with a pending turn so
// that every part of the format is exercised. It is written as JSON: the
// turn in progress of a State is set only by a run or by decoding one.
func sample(n int, version uint64) *toolrun.State {
	var s toolrun.State
	j := fmt.Sprintf(`{"format": 2, "version": %[2]d,
		"params": {"model": "claude-test", "max_tokens": 1024,
			"messages": [{"role": "user", "content": [{"type": "text", "text": "run %[1]d"}]}]},
		"pending": {"turn": %[3]d, "stop_reason": "tool_use",
			"message": {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_%[1]d", "name": "write", "input": {"n": 1}}]},
			"calls": [{"call": {"id": "toolu_%[1]d", "name": "write", "input": {"n": 1}}, "phase": "decided",
				"decision": {"kind": "defer", "reason": "needs approval"}, "decided_by": "policy"}]},
		"turns": %[1]d, "usage": {"input_tokens": %[4]d}}`, n, version, n+1, n*10)
	if err := json.Unmarshal([]byte(j), &s); err != nil {
		panic("storetest: sample state: " + err.Error())
	}
	return &s
}

func same(a, b *toolrun.State) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// doneContext checks that each method given a context already done (one
// cancelled, one past its deadline) returns an error wrapping the
// context's, and promptly: a store that goes on with work its caller gave
// up holds the runner, which waits for a save only as long as its cancel
// grace ([toolrun.Timeouts]) and then stops with
// [toolrun.ErrStoreMisbehaved]. A method that has not returned after a
// minute is reported as hung, by name; the check goes on without it.
func doneContext(ctx context.Context, s toolrun.Store) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	const id = "storetest-done"
	defer s.Delete(ctx, id)
	if err := s.Save(ctx, id, sample(1, 1), 0); err != nil {
		fail("Save of version 1 over nothing: %v", err)
		return errs
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Unix(0, 0))
	defer cancel2()
	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"Load", func(ctx context.Context) error { _, err := s.Load(ctx, id); return err }},
		{"Save", func(ctx context.Context) error { return s.Save(ctx, id, sample(2, 2), 1) }},
		{"Delete", func(ctx context.Context) error { return s.Delete(ctx, id) }},
	}
	if a, ok := s.(driver.StateAppender); ok {
		calls = append(calls, struct {
			name string
			call func(context.Context) error
		}{"Append", func(ctx context.Context) error { return a.Append(ctx, id, answered(1, 2), 1) }})
	}
	for _, c := range calls {
		for _, done := range []context.Context{cancelled, expired} {
			errc := make(chan error, 1)
			go func() { errc <- c.call(done) }()
			t := time.NewTimer(time.Minute)
			select {
			case err := <-errc:
				t.Stop()
				if want := done.Err(); !errors.Is(err, want) {
					fail("%s with a done context: got %v, want an error wrapping %v", c.name, err, want)
				}
			case <-t.C:
				fail("%s with a done context (%v) has not returned after a minute: it ignores its context", c.name, done.Err())
			}
		}
	}
	if got, err := load(ctx, s, id); err != nil || got.Version != 1 || !same(got, sample(1, 1)) {
		fail("Load after calls with done contexts: got %v, want version 1 as saved; a call with a done context changed the run", err)
	}
	return errs
}

// answered returns the change that answers the call of sample(n, prev)
// and counts a turn more, as the version after prev: the change a runner
// appends when a call of its turn finishes. It is written as JSON: a
// StateChange is made only by a runner or by decoding one.
func answered(n int, prev uint64) *toolrun.StateChange {
	j := fmt.Sprintf(`{"version": %[2]d,
		"rest": {"format": 2, "params": {"model": "", "max_tokens": 0, "messages": null},
			"pending": {"turn": %[3]d, "stop_reason": "tool_use", "message": {"role": "assistant", "content": []}, "calls": null},
			"turns": %[4]d, "tool_calls": 1, "usage": {"input_tokens": %[5]d}},
		"calls": [{"i": 0, "id": "toolu_%[1]d", "call": {"call": {"id": "toolu_%[1]d", "name": "write", "input": {"n": 1}}, "phase": "answered",
			"decision": {"kind": "defer", "reason": "needs approval"}, "decided_by": "policy",
			"result": {"content": [{"type": "text", "text": "wrote %[1]d"}]}}}]}`, n, prev+1, n+1, n+int(prev), n*10)
	var c toolrun.StateChange
	if err := json.Unmarshal([]byte(j), &c); err != nil {
		panic("storetest: sample change: " + err.Error())
	}
	return &c
}

// applied returns sample(n, base) with the changes of answered for each
// version after base up to version, applied.
func applied(n int, base, version uint64) *toolrun.State {
	s := sample(n, base)
	for v := base; v < version; v++ {
		if err := s.Apply(answered(n, v)); err != nil {
			panic("storetest: sample change: " + err.Error())
		}
	}
	return s
}

// appends checks a [driver.StateAppender]'s Append: a compare-and-swap
// on the same versions as Save, whose changes Load applies in order, and
// which a Save replaces and a Delete removes.
func appends(ctx context.Context, s driver.StateAppender) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	const id = "storetest-append"
	defer s.Delete(ctx, id)
	want := func(step string, st *toolrun.State) {
		got, err := load(ctx, s, id)
		switch {
		case err != nil:
			fail("%s: Load: %v", step, err)
		case got.Version != st.Version:
			fail("%s: Load: got version %d, want %d", step, got.Version, st.Version)
		case !same(got, st):
			fail("%s: Load: got turns %d, tool calls %d; want turns %d, tool calls %d: the changes were not applied in order", step, got.Turns, got.ToolCalls, st.Turns, st.ToolCalls)
		}
	}
	refused := func(step string, err error) {
		if !errors.Is(err, toolrun.ErrRunBusy) {
			fail("%s: got %v, want an error wrapping toolrun.ErrRunBusy", step, err)
		}
	}

	if err := s.Append(ctx, id, answered(7, 1), 1); err == nil {
		fail("Append over nothing saved: got nil, want an error")
	}
	if _, err := load(ctx, s, id); !errors.Is(err, fs.ErrNotExist) {
		fail("Load after an Append over nothing: got %v, want an error wrapping fs.ErrNotExist", err)
	}
	if err := s.Save(ctx, id, sample(7, 1), 0); err != nil {
		fail("Save of version 1: %v", err)
		return errs
	}
	for v := uint64(1); v < 4; v++ {
		if err := s.Append(ctx, id, answered(7, v), v); err != nil {
			fail("Append of version %d over %d: %v", v+1, v, err)
		}
	}
	want("after 3 Appends", applied(7, 1, 4))
	refused("Append with the stale prev 3 over version 4", s.Append(ctx, id, answered(7, 3), 3))
	refused("Append with prev 5 over version 4", s.Append(ctx, id, answered(7, 5), 5))
	refused("Save with the stale prev 1 over version 4, the last Save's", s.Save(ctx, id, sample(8, 2), 1))
	refused("Save with prev 0 over version 4", s.Save(ctx, id, sample(8, 1), 0))
	want("after refused Appends and Saves", applied(7, 1, 4))

	// Runners that loaded the same version race, by Append and by Save:
	// one wins.
	winner := oneWins("8 Appends and Saves over version 4 at once", 8, func(i int) error {
		if i%2 == 0 {
			return s.Append(ctx, id, answered(7, 4), 4)
		}
		return s.Save(ctx, id, sample(20+i, 5), 4)
	}, fail, refused)
	switch {
	case winner < 0:
		return errs
	case winner%2 == 0:
		want("after an Append won the race", applied(7, 1, 5))
	default:
		want("after a Save won the race", sample(20+winner, 5))
	}

	// A Save replaces the state and its changes; changes appended after
	// it apply to it alone.
	if err := s.Save(ctx, id, sample(9, 6), 5); err != nil {
		fail("Save of version 6 over 5: %v", err)
	}
	want("after a Save over appended changes", sample(9, 6))
	if err := s.Append(ctx, id, answered(9, 6), 6); err != nil {
		fail("Append of version 7 over a Save: %v", err)
	}
	want("after an Append over a Save", applied(9, 6, 7))

	// Delete removes the changes too: a run saved again starts afresh.
	if err := s.Delete(ctx, id); err != nil {
		fail("Delete: %v", err)
	}
	if _, err := load(ctx, s, id); !errors.Is(err, fs.ErrNotExist) {
		fail("Load after Delete: got %v, want an error wrapping fs.ErrNotExist", err)
	}
	if err := s.Save(ctx, id, sample(10, 1), 0); err != nil {
		fail("Save of version 1 after Delete: %v", err)
	}
	want("after Delete and a Save (no change of the deleted run applies)", sample(10, 1))
	return errs
}
