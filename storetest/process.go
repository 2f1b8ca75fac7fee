package storetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/toolrun/toolrun"
)

// The environment of a child of RunProcesses.
const (
	envDir   = "TOOLRUN_STORETEST_DIR"   // the dir given to open
	envChild = "TOOLRUN_STORETEST_CHILD" // the child's number
)

const (
	processes = 4  // children that race
	rounds    = 25 // the saves each child tries after the first
	raceID    = "storetest-processes"
)

// Child runs this process as a child of [RunProcesses] or [RunResumers] and
// exits, if it was started as one; otherwise it returns at once. Call it
// first thing in the test binary's TestMain, with the same open function
// given to RunProcesses and RunResumers.
//
// A child of RunProcesses opens the store with open(dir), waits for the
// parent's signal, and races the other children to save one run: first over
// nothing, then, again and again, over the version it has just loaded. It
// prints what it won. A child of RunResumers continues a suspended run in
// the store, as RunResumers describes.
func Child(open func(dir string) (toolrun.Store, error)) {
	if mode := os.Getenv(envResume); mode != "" {
		if err := resumerChild(mode, open); err != nil {
			fmt.Printf("error %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	n, err := strconv.Atoi(os.Getenv(envChild))
	if err != nil {
		return
	}
	if err := child(n, open); err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func child(n int, open func(dir string) (toolrun.Store, error)) error {
	s, err := open(os.Getenv(envDir))
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if c, ok := s.(io.Closer); ok {
		defer c.Close()
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin) // the parent closes it to start the race
	ctx := context.Background()
	var prev uint64
	for round := range rounds + 1 {
		if round > 0 {
			st, err := s.Load(ctx, raceID)
			if err != nil {
				return fmt.Errorf("load: %w", err)
			}
			prev = st.Version
		}
		turns := n*1000 + round
		err := s.Save(ctx, raceID, sample(turns, prev+1), prev)
		switch {
		case err == nil:
			fmt.Printf("won %d %d\n", prev+1, turns)
		case errors.Is(err, toolrun.ErrRunBusy):
			fmt.Printf("busy %d\n", prev)
		default:
			return fmt.Errorf("save over version %d: %w", prev, err)
		}
	}
	fmt.Println("done")
	return nil
}

// RunProcesses checks that Save's compare-and-swap holds between processes,
// and returns every violation found, joined with errors.Join, or nil. It
// starts several copies of the running test binary, whose TestMain must call
// [Child] with the same open function, and has them race to save one run
// (its id starts with "storetest-") in the store that open(dir) opens: each
// version of the run must be won by exactly one of them, and the saved state
// must be the last winner's. Cancelling ctx kills the children.
func RunProcesses(ctx context.Context, dir string, open func(dir string) (toolrun.Store, error)) error {
	s, err := open(dir)
	if err != nil {
		return fmt.Errorf("storetest: open: %w", err)
	}
	if c, ok := s.(io.Closer); ok {
		defer c.Close()
	}
	if err := s.Delete(ctx, raceID); err != nil {
		return fmt.Errorf("storetest: Delete: %w", err)
	}
	defer s.Delete(ctx, raceID)

	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   bytes.Buffer
	}
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.stdin.Close()
			p.cmd.Wait()
		}
	}()
	for i := range processes {
		p := &proc{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^$")}
		p.cmd.Env = append(os.Environ(), envDir+"="+dir, envChild+"="+strconv.Itoa(i))
		p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			return fmt.Errorf("storetest: %w", err)
		}
		if err := p.cmd.Start(); err != nil {
			return fmt.Errorf("storetest: starting a child: %w", err)
		}
		procs = append(procs, p)
	}
	// Start them together, so that they race from the first save.
	for _, p := range procs {
		p.stdin.Close()
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	winners := map[uint64][]string{} // version → "child n, turns t"
	var last uint64
	lastTurns := -1
	for i, p := range procs {
		err := p.cmd.Wait()
		out := p.out.String()
		if !strings.HasPrefix(out, "ready\n") {
			fail("child %d did not race (does TestMain call storetest.Child first?): %v\n%s", i, err, out)
			continue
		}
		if err != nil || !strings.HasSuffix(out, "done\n") {
			fail("child %d: %v\n%s", i, err, out)
			continue
		}
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			var v uint64
			var turns int
			if n, _ := fmt.Sscanf(sc.Text(), "won %d %d", &v, &turns); n == 2 {
				winners[v] = append(winners[v], fmt.Sprintf("child %d with turns %d", i, turns))
				if v > last {
					last, lastTurns = v, turns
				}
			}
		}
	}
	procs = nil
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for v := uint64(1); v <= last; v++ {
		if w := winners[v]; len(w) != 1 {
			fail("version %d was won by %d saves (%s), want exactly 1", v, len(w), strings.Join(w, ", "))
		}
	}
	if len(winners) != int(last) {
		fail("got %d versions won, want %d (every version from 1 to the last)", len(winners), last)
	}
	if last <= rounds {
		fail("got %d versions won, want more than %d: each round after a child's first save has a winner", last, rounds)
	}
	got, err := s.Load(ctx, raceID)
	switch {
	case err != nil:
		fail("Load after the race: %v", err)
	case got.Version != last || got.Turns != lastTurns:
		fail("Load after the race: got version %d with turns %d, want version %d with turns %d (the last winner's)", got.Version, got.Turns, last, lastTurns)
	}
	return errors.Join(errs...)
}
