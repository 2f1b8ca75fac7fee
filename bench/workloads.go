package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
)

// config sizes the workloads.
type config struct {
	workloads map[string]bool // which of history, parallel, suspended, concurrent run

	historySizes []int // turns per run
	// historyTurns is the turns one history sample takes at least: a sample
	// runs as many conversations as it needs, so that short ones are not
	// lost in the clock's resolution.
	historyTurns int
	// historyRounds is the rounds of each size: more for the short sizes,
	// whose samples are short, so that every size gets a few seconds of
	// paired samples.
	historyRounds []int

	parallelTools  int
	toolSleep      time.Duration
	parallelRounds int

	// The wide workload: one turn of wideTools calls of a wideSleep tool,
	// the case where a low default bound on parallel calls cost most.
	wideTools  int
	wideSleep  time.Duration
	wideRounds int

	pauses      int // pause_turns in a row of the pause workload
	pauseRounds int

	suspendedRuns int
	heapProfile   string // if set, where the toolrun child writes a heap profile while it holds its runs

	concurrentRuns   int
	concurrentTurns  int
	concurrentRounds int

	// profiles says which profiles of where toolrun's cost sits to take
	// after the measured rounds: "unmet" for the targets not met (what
	// `go run ./bench` does), "all" for every one (TestHarness), "" for
	// none.
	profiles string
	// profileConversations is the conversations of the history profile.
	profileConversations int

	wireTurns  int // the turns of the wire workload's conversation
	wireRounds int

	storeRounds int // the rounds of the stores workload (stores.go)

	// The serve workload: serveRuns concurrent runs of serveTurns turns,
	// through the server and in process, over serveRounds rounds;
	// servePending runs awaiting approval, listed serveListRounds times;
	// serveDecisions calls decided over the JSON API and as many by an
	// AG-UI resume.
	serveRuns, serveTurns, serveRounds int
	servePending, serveListRounds      int
	serveDecisions                     int
	// serveMany concurrent runs of one turn, through the server and in
	// process, over serveManyRounds rounds: the server's throughput.
	serveMany, serveManyRounds int

	// The stalled workload: stalledReaders clients that never read the
	// stream of a run with an answer of stalledBytes bytes, beside none,
	// over stalledRounds rounds; stalledPlainRuns plain runs timed on
	// each side.
	stalledReaders, stalledBytes, stalledRounds, stalledPlainRuns int

	// The inbox workload: inboxPending calls awaiting approval, the page
	// loaded, a call decided and the list filtered inboxRounds times in
	// headless Chromium.
	inboxPending, inboxRounds int
}

// fullConfig is what `go run ./bench` measures.
func fullConfig() config {
	return config{
		historySizes: []int{10, 100, 500}, historyTurns: 200, historyRounds: []int{31, 15, 5},
		parallelTools: 8, toolSleep: 100 * time.Millisecond, parallelRounds: 30,
		wideTools: 100, wideSleep: 25 * time.Millisecond, wideRounds: 15,
		pauses: 300, pauseRounds: 3,
		suspendedRuns:  10000,
		concurrentRuns: 1000, concurrentTurns: 5, concurrentRounds: 9,
		wireTurns: 300, wireRounds: 7,
		storeRounds: 3,
		serveRuns:   200, serveTurns: 5, serveRounds: 5, servePending: 10000, serveListRounds: 5, serveDecisions: 100,
		serveMany: 1000, serveManyRounds: 3,
		stalledReaders: 40, stalledBytes: 12 << 20, stalledRounds: 3, stalledPlainRuns: 20,
		inboxPending: 10000, inboxRounds: 5,
		profiles: "unmet", profileConversations: 1000,
	}
}

// quickConfig is the -quick run: the same workloads, fewer rounds and runs.
func quickConfig() config {
	return config{
		historySizes: []int{10, 100, 500}, historyTurns: 100, historyRounds: []int{3, 2, 1},
		parallelTools: 8, toolSleep: 100 * time.Millisecond, parallelRounds: 3,
		wideTools: 100, wideSleep: 25 * time.Millisecond, wideRounds: 3,
		pauses: 300, pauseRounds: 1,
		suspendedRuns:  1000,
		concurrentRuns: 200, concurrentTurns: 5, concurrentRounds: 1,
		wireTurns: 300, wireRounds: 1,
		storeRounds: 1,
		serveRuns:   50, serveTurns: 5, serveRounds: 1, servePending: 1000, serveListRounds: 3, serveDecisions: 20,
		serveMany: 200, serveManyRounds: 1,
		stalledReaders: 10, stalledBytes: 4 << 20, stalledRounds: 1, stalledPlainRuns: 5,
		inboxPending: 1000, inboxRounds: 2,
		profiles: "unmet", profileConversations: 20,
	}
}

// rotate returns the contenders in the order of round r: each goes first,
// second and last in turn, so none is always measured after the same one.
func rotate(r int) []contender {
	n := len(contenders)
	out := make([]contender, n)
	for i := range out {
		out[i] = contenders[(i+r)%n]
	}
	return out
}

// samples holds a measure's value in each round, in round order, by runner,
// so that the runners of one round can be compared pairwise.
type samples map[string][]float64

func (s samples) add(name string, v float64) { s[name] = append(s[name], v) }

// historyResult is the client's cost per turn of conversations of Size
// turns: CPU time in nanoseconds, allocations and bytes allocated.
type historyResult struct {
	Size               int
	CPU, Allocs, Bytes samples
}

// runHistory measures conversations of each size: one trivial tool call per
// turn until the last, which answers. Every round starts a fresh fake
// server (it keeps every request it receives) and runs the three runners,
// in rotated order, against it.
func runHistory(ctx context.Context, cfg config, progress io.Writer) ([]historyResult, error) {
	specs := []toolSpec{echoTool()}
	out := make([]historyResult, len(cfg.historySizes))
	for i, n := range cfg.historySizes {
		out[i] = historyResult{Size: n, CPU: samples{}, Allocs: samples{}, Bytes: samples{}}
	}
	for round := range slices.Max(cfg.historyRounds) {
		for si, n := range cfg.historySizes {
			if round >= cfg.historyRounds[si] {
				continue
			}
			srv, err := startServer(ctx)
			if err != nil {
				return nil, err
			}
			c := newClient(srv.URL)
			p := prompt("echo", n)
			runs := max(1, (cfg.historyTurns+n-1)/n)
			order := rotate(round + si)
			fns := map[string]runFunc{}
			for _, ct := range order {
				fns[ct.name] = ct.setup(c, specs)
				// Unmeasured: dial the fresh server, fill the client's caches.
				if _, err := fns[ct.name](ctx, prompt("echo", 2)); err != nil {
					srv.Close()
					return nil, fmt.Errorf("%s: warm-up: %w", ct.name, err)
				}
			}
			for _, ct := range order {
				run := fns[ct.name]
				m := startMeter()
				for range runs {
					turns, err := run(ctx, p)
					if err == nil && turns != n {
						err = fmt.Errorf("%w: %d, want %d", errWrongTurns, turns, n)
					}
					if err != nil {
						srv.Close()
						return nil, fmt.Errorf("history %d, %s: %w", n, ct.name, err)
					}
				}
				u := m.stop()
				t := float64(runs * n)
				out[si].CPU.add(ct.name, float64(u.CPU)/t)
				out[si].Allocs.add(ct.name, float64(u.Mallocs)/t)
				out[si].Bytes.add(ct.name, float64(u.Bytes)/t)
				fmt.Fprintf(progress, "history %d turns, round %d/%d, %-8s %4d runs in %v, %v CPU\n",
					n, round+1, cfg.historyRounds[si], ct.name, runs, u.Wall.Round(time.Millisecond), u.CPU.Round(time.Millisecond))
			}
			if err := srv.Close(); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// requestClock records when the client sends each request and when each
// response's headers arrive.
type requestClock struct {
	mu       sync.Mutex // guards sent, answered
	sent     []time.Time
	answered []time.Time
}

func (rc *requestClock) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	rc.mu.Lock()
	rc.sent = append(rc.sent, time.Now())
	rc.mu.Unlock()
	resp, err := next(req)
	rc.mu.Lock()
	rc.answered = append(rc.answered, time.Now())
	rc.mu.Unlock()
	return resp, err
}

func (rc *requestClock) reset() {
	rc.mu.Lock()
	rc.sent, rc.answered = rc.sent[:0], rc.answered[:0]
	rc.mu.Unlock()
}

// parallelResult is the wall time, in nanoseconds, of the tool turn (from
// the response that makes the calls arriving to the request with their
// results going out) and of the whole two-request run.
type parallelResult struct {
	Turn, Run samples
}

// runParallel measures a turn that calls the sleep tool cfg.parallelTools
// times.
func runParallel(ctx context.Context, cfg config, progress io.Writer) (*parallelResult, error) {
	return runTurnOfCalls(ctx, "parallel", cfg.parallelTools, cfg.toolSleep, cfg.parallelRounds, progress)
}

// runWide measures the wide workload: a turn of cfg.wideTools calls of a
// cfg.wideSleep tool, at each runner's default options.
func runWide(ctx context.Context, cfg config, progress io.Writer) (*parallelResult, error) {
	return runTurnOfCalls(ctx, "wide", cfg.wideTools, cfg.wideSleep, cfg.wideRounds, progress)
}

// runTurnOfCalls measures, for each runner, a turn that calls a tool of
// sleep n times, over rounds rounds; name names the workload in errors and
// progress.
func runTurnOfCalls(ctx context.Context, name string, n int, sleep time.Duration, rounds int, progress io.Writer) (*parallelResult, error) {
	srv, err := startServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	clock := &requestClock{}
	c := newClient(srv.URL, option.WithMiddleware(clock.middleware))
	specs := []toolSpec{sleepTool(sleep)}
	p := prompt("parallel", n)
	runs := map[string]runFunc{}
	for _, ct := range contenders {
		runs[ct.name] = ct.setup(c, specs)
		if _, err := runs[ct.name](ctx, p); err != nil {
			return nil, fmt.Errorf("%s, %s: warm-up: %w", name, ct.name, err)
		}
	}
	out := &parallelResult{Turn: samples{}, Run: samples{}}
	for round := range rounds {
		for _, ct := range rotate(round) {
			clock.reset()
			start := time.Now()
			turns, err := runs[ct.name](ctx, p)
			total := time.Since(start)
			if err == nil && (turns != 2 || len(clock.sent) != 2) {
				err = fmt.Errorf("%w: %d turns and %d requests, want 2", errWrongTurns, turns, len(clock.sent))
			}
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", name, ct.name, err)
			}
			out.Turn.add(ct.name, float64(clock.sent[1].Sub(clock.answered[0])))
			out.Run.add(ct.name, float64(total))
		}
	}
	for _, ct := range contenders {
		fmt.Fprintf(progress, "%s %-8s turn %.2f ms, run %.2f ms (median of %d)\n",
			name, ct.name, median(out.Turn[ct.name])/1e6, median(out.Run[ct.name])/1e6, rounds)
	}
	return out, srv.Close()
}

// suspendedResult is the memory of runs held awaiting approval, measured in
// a process of their own.
type suspendedResult struct {
	Runner string `json:"runner"`
	Runs   int    `json:"runs"`
	// Heap is the live heap the held runs add (after GC); StateHeap the
	// live heap of their serialised state alone; StateBytes the length of
	// that JSON.
	Heap       uint64 `json:"heap"`
	StateHeap  uint64 `json:"state_heap"`
	StateBytes uint64 `json:"state_bytes"`
	RSS        int64  `json:"rss"`
}

// runSuspended measures toolrun and the hand loop holding runs awaiting
// approval, each in a child process. The official runner cannot suspend a
// run.
func runSuspended(ctx context.Context, cfg config, progress io.Writer) (map[string]suspendedResult, error) {
	srv, err := startServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	out := map[string]suspendedResult{}
	for _, name := range []string{"hand", "toolrun"} {
		var res suspendedResult
		start := time.Now()
		spec := childSpec{Role: "suspended", URL: srv.URL, Runner: name, Runs: cfg.suspendedRuns}
		if name == "toolrun" {
			spec.HeapProfile = cfg.heapProfile
		}
		if err := runChild(ctx, spec, &res); err != nil {
			return nil, err
		}
		out[name] = res
		fmt.Fprintf(progress, "suspended %-8s %d runs: %.1f KiB/run held, %.1f KiB/run as State JSON, in %v\n",
			name, res.Runs, float64(res.Heap)/float64(res.Runs)/1024, float64(res.StateHeap)/float64(res.Runs)/1024, time.Since(start).Round(time.Millisecond))
	}
	return out, srv.Close()
}

// suspendedChild runs spec.Runs conversations to the call that needs
// approval, holds them, and measures the live heap they hold: first as
// runners (toolrun's *Runner; the hand loop's params), then as their
// serialised state alone (toolrun's State as JSON; the hand loop's params as
// JSON).
func suspendedChild(spec childSpec) (*suspendedResult, error) {
	if spec.HeapProfile != "" {
		runtime.MemProfileRate = max(spec.HeapProfileRate, 1) // 1: every allocation, for a profile that adds up per run
	}
	suspend, err := suspender(spec.Runner, newClient(spec.URL))
	if err != nil {
		return nil, err
	}
	if _, err := suspend(); err != nil { // warm-up: the client's caches
		return nil, err
	}
	httpClient.CloseIdleConnections()
	base := liveHeap()

	held := make([]any, spec.Runs)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(held); i = int(next.Add(1)) - 1 {
				h, err := suspend()
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				held[i] = h
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	httpClient.CloseIdleConnections()
	res := &suspendedResult{Runner: spec.Runner, Runs: spec.Runs, Heap: liveHeap() - base, RSS: procStatus("VmRSS")}
	if spec.HeapProfile != "" {
		f, err := os.Create(spec.HeapProfile)
		if err != nil {
			return nil, err
		}
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
	}

	states := make([][]byte, len(held))
	for i, h := range held {
		var err error
		switch h := h.(type) {
		case *toolrun.Runner:
			states[i], err = json.Marshal(h.State())
		case *anthropic.BetaMessageNewParams:
			states[i], err = json.Marshal(h)
		}
		if err != nil {
			return nil, err
		}
		res.StateBytes += uint64(len(states[i]))
		held[i] = nil
	}
	res.StateHeap = liveHeap() - base
	runtime.KeepAlive(states)
	return res, nil
}

// suspender returns a function that runs a conversation through runner up
// to the call that needs approval and returns what holds the run: toolrun's
// *Runner, or the hand loop's params (its history, the call's turn
// appended). The official runner cannot suspend a run.
func suspender(runner string, c anthropic.Client) (func() (any, error), error) {
	ctx := context.Background()
	specs := []toolSpec{echoTool(), deployTool()}
	p := prompt("approve", 0)
	switch runner {
	case "toolrun":
		tpl := driver.NewTemplate(c, toolrunTools(specs), toolrunOptions())
		return func() (any, error) {
			r := tpl.New(newParams(p))
			res, err := r.Run(ctx)
			if err == nil && (res.StopReason != toolrun.StopAwaitingApproval || len(res.Pending) != 1) {
				err = fmt.Errorf("stopped with %s and %d pending calls, want %s and 1", res.StopReason, len(res.Pending), toolrun.StopAwaitingApproval)
			}
			return r, err
		}, nil
	case "hand":
		tools, toolParams := handTools(specs)
		return func() (any, error) {
			params := newParams(p)
			params.Tools = toolParams
			_, call, err := handLoop(ctx, c, &params, tools)
			if err == nil && call == nil {
				err = fmt.Errorf("the hand loop finished without the call that needs approval")
			}
			return &params, err
		}, nil
	}
	return nil, fmt.Errorf("runner %q cannot suspend a run", runner)
}

// concurrentResult is what spec.Runs concurrent conversations cost, in a
// process of their own.
type concurrentResult struct {
	Runner  string        `json:"runner"`
	Runs    int           `json:"runs"`
	Turns   int64         `json:"turns"`
	Wall    time.Duration `json:"wall"`
	CPU     time.Duration `json:"cpu"`
	Mallocs uint64        `json:"mallocs"`
	PeakRSS int64         `json:"peak_rss"`
}

// concurrentSamples are the throughput (turns/s), client CPU per turn (ns),
// peak RSS (bytes) and the fake server's CPU per turn (ns) of each round.
type concurrentSamples struct {
	Runs, TurnsPerRun                   int
	Throughput, CPU, PeakRSS, ServerCPU samples
}

// runConcurrent runs cfg.concurrentRuns conversations at once through each
// runner, each in a child process (peak RSS is a process's), in rotated
// order, against a fresh fake server per round.
func runConcurrent(ctx context.Context, cfg config, progress io.Writer) (*concurrentSamples, error) {
	out := &concurrentSamples{Runs: cfg.concurrentRuns, TurnsPerRun: cfg.concurrentTurns, Throughput: samples{}, CPU: samples{}, PeakRSS: samples{}, ServerCPU: samples{}}
	for round := range cfg.concurrentRounds {
		srv, err := startServer(ctx)
		if err != nil {
			return nil, err
		}
		all := append(slices.Clone(contenders), plainContender)
		for i := range all {
			ct := all[(i+round)%len(all)]
			var res concurrentResult
			spec := childSpec{Role: "concurrent", URL: srv.URL, Runner: ct.name, Runs: cfg.concurrentRuns, Turns: cfg.concurrentTurns}
			before := srv.cpu()
			if err := runChild(ctx, spec, &res); err != nil {
				srv.Close()
				return nil, err
			}
			out.ServerCPU.add(ct.name, float64(srv.cpu()-before)/float64(max(res.Turns, 1)))
			out.Throughput.add(ct.name, float64(res.Turns)/res.Wall.Seconds())
			out.CPU.add(ct.name, float64(res.CPU)/float64(max(res.Turns, 1)))
			out.PeakRSS.add(ct.name, float64(res.PeakRSS))
			fmt.Fprintf(progress, "concurrent round %d/%d %-8s %d turns in %v: %.0f turns/s, %v CPU, peak RSS %.1f MiB\n",
				round+1, cfg.concurrentRounds, ct.name, res.Turns, res.Wall.Round(time.Millisecond),
				float64(res.Turns)/res.Wall.Seconds(), res.CPU.Round(time.Millisecond), float64(res.PeakRSS)/(1<<20))
		}
		if err := srv.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func concurrentChild(spec childSpec) (*concurrentResult, error) {
	ctx := context.Background()
	ct, err := contenderNamed(spec.Runner)
	if err != nil {
		return nil, err
	}
	run := ct.setup(newClient(spec.URL), []toolSpec{echoTool()})
	p := prompt("echo", spec.Turns)
	if _, err := run(ctx, p); err != nil { // warm-up
		return nil, err
	}
	if spec.CPUProfile != "" {
		f, err := os.Create(spec.CPUProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	m := startMeter()
	var turns atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range spec.Runs {
		wg.Go(func() {
			<-start
			n, err := run(ctx, p)
			if err == nil && n != spec.Turns {
				err = fmt.Errorf("%w: %d, want %d", errWrongTurns, n, spec.Turns)
			}
			if err != nil {
				once.Do(func() { firstErr = err })
			}
			turns.Add(int64(n))
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	wall := time.Since(t0)
	u := m.stop()
	if firstErr != nil {
		return nil, firstErr
	}
	return &concurrentResult{Runner: spec.Runner, Runs: spec.Runs, Turns: turns.Load(), Wall: wall,
		CPU: u.CPU, Mallocs: u.Mallocs, PeakRSS: procStatus("VmHWM")}, nil
}

// median returns the median of v (the mean of the middle two for an even
// count), or 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Sorted(slices.Values(v))
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
