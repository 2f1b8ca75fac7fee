package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// This file profiles, for each target the run did not meet, where toolrun's
// cost sits against the hand loop's, and writes that into the report: a
// profile of the same workload taken by the harness after the measured
// rounds (profiling slows what it profiles, so the figures of the table
// come from the rounds without it), with each sample put into an area of
// the client's work by the functions on its stack.

// area is a part of the client's work. A sample goes into the first area,
// in list order, one of whose patterns is in the name of a function on
// its stack (so the more specific areas come first); why says why
// toolrun's share of that area is what it is. A pattern names a function
// without its package where the harness's own are meant: they are
// main.f under go run and …/bench.f in the test binary. A pattern that
// starts with "leaf:" is looked for in the sample's own function alone
// (for a heap profile, the one that allocated), not in its callers.
type area struct {
	name     string
	patterns []string
	why      string
}

// cpuAreas are the areas of a CPU profile of conversations.
var cpuAreas = []area{
	{"garbage collection (background and assists)", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.markrootSpans"},
		"follows the bytes allocated per turn (fewer for toolrun: the table's rows) and how long what is allocated stays live"},
	{"encoding the request", []string{"toolrun.(*wireCache)", "toolrun.(*Runner).threadRequest", "BetaMessageNewParams.MarshalJSON"},
		"toolrun encodes only what a turn adds (encode.go) and, on its thread, sends only that; the hand loop marshals the whole params every turn"},
	{"decoding the response", []string{"(*RequestConfig).decode", "(*BetaMessage).UnmarshalJSON", "ssestream."},
		"the same responses (the fake server's replies are the same size for both), decoded by the same SDK code"},
	{"the response made params (ToParam)", []string{"BetaMessage.ToParam"},
		"the SDK's conversion of each response, the same for both"},
	{"the tool call: input decoded, validated, run, answered", []string{"toolrun.(*Runner).runCall", "toolrun.(*Runner).runTool", "toolrun.(*FuncTool).Run", "toolrun.(*Runner).decideTurn", "toolrun.(*Runner).execute", "errgroup.", ".handCall"},
		"what toolrun adds by design: the input checked against the tool's JSON Schema, a decision in the policy order, the call run panic-safe in a goroutine that the turn's call queue starts, its result made safe to send; the hand loop decodes the input and calls the function inline. Running a turn's single call without the queue's goroutine is what would be next; the tool's own goroutine stays, since it is what lets a run abandon a tool that ignores its context"},
	{"net/http and the socket", []string{"net/http.", "net.", "internal/poll.", "syscall."},
		"the same transport and as many requests; toolrun's are smaller on its thread, and each has a timeout of its own (Timeouts.Request)"},
	{"the SDK's request setup (options, headers, tracing)", []string{"anthropic-sdk-go"},
		"the client's per-request work (options, headers, the tracing hook), with toolrun's request options on top (a timeout, the encoded body, the thread beta header)"},
	{"the rest of toolrun's engine (events, state, budgets, commit)", []string{"github.com/toolrun/toolrun."},
		"the engine's per-turn bookkeeping: the pending turn's state and phases, events, the budget and stop checks, the commit"},
	{"the runtime: scheduler, allocator, the rest", nil,
		"goroutines parked and woken around each request and call, and the allocator outside the areas above"},
}

// heapAreas are the areas of a heap profile of held runs.
var heapAreas = []area{
	{"the Runner and its State", []string{"toolrun.(*Template).newRunner", "toolrun.(*Template).New", "toolrun.New"},
		"the State holds the params, as the hand loop's params box does (below), with the run's counters; the Runner's own fields are one object, its client, tools and options the Template's"},
	{"the history's messages made from responses (ToParam, the response's JSON)", []string{"BetaMessage.ToParam", "gjson.", "(*RequestConfig).decode", "(*BetaMessage).UnmarshalJSON"},
		"the SDK's params of each response, which both hold; their strings share the response's JSON"},
	{"the pending turn (its calls and their phases)", []string{"toolrun.newTurnState"},
		"what resuming needs beyond the history: each call of the held turn with its phase; the hand loop keeps only the call's block"},
	{"the decision and the stop (awaiting approval)", []string{"toolrun.(*Runner).decide", "toolrun.(*Runner).rules", "toolrun.(*Runner).setStopped", "toolrun.(*Runner).stop", "(*State).AwaitingApproval"},
		"the call's decision (why it waits for approval) and the stop record a held run's Result is made of; the hand loop holds neither"},
	{"tool results and the history's growth", []string{"toolrun.(*Runner).appendTurn", "toolrun.(*Runner).resultBlock", "toolrun.Text", ".handCall", ".handLoop"},
		"both append the first turn's result and the reply"},
	{"the first params", []string{".newParams", "leaf:.suspender.func"},
		"the first user message, for both, and the hand loop's params box (toolrun's params are in its State, above)"},
	{"the rest", nil, "the client's caches and what the runs share, per run"},
}

// side is what the profiles of one runner add up to: each area's total
// (the sampleIndex'th value of its samples), and the turns or runs they
// cover.
type side struct {
	totals []float64
	per    float64
}

// add adds p's samples, by area, over per turns or runs.
func (sd *side) add(p *profile.Profile, areas []area, per float64) {
	if sd.totals == nil {
		sd.totals = make([]float64, len(areas))
	}
	i := len(p.SampleType) - 1 // cpu nanoseconds; inuse_space
	for _, s := range p.Sample {
		sd.totals[areaOf(s, areas)] += float64(s.Value[i])
	}
	sd.per += per
}

// share is area i's total per turn or run.
func (sd *side) share(i int) float64 { return sd.totals[i] / max(sd.per, 1) }

func areaOf(s *profile.Sample, areas []area) int {
	for i, a := range areas {
		for j, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				for _, pat := range a.patterns {
					p, leafOnly := strings.CutPrefix(pat, "leaf:")
					if (j == 0 || !leafOnly) && strings.Contains(line.Function.Name, p) {
						return i
					}
				}
			}
		}
		if a.patterns == nil {
			return i
		}
	}
	return len(areas) - 1
}

// profileReport is the profile of one unmet target: each area's share for
// the hand loop and for toolrun, in unit per turn or per run.
type profileReport struct {
	title, how string
	// note says why what remains cannot go lower on the client side, or
	// what would be next.
	note     string
	areas    []area
	hand, tr side
	format   func(float64) string
	// period is a CPU profile's sampling period in nanoseconds, for the
	// sampling error of each area's difference; 0 for a heap profile.
	period float64
}

// noise returns twice the standard deviation of the difference between
// toolrun's and the hand loop's share of area i that sampling alone
// gives: a CPU profile's samples are a Poisson count, so an area's total
// T of period P has the variance T·P.
func (pr *profileReport) noise(i int) float64 {
	h, t := &pr.hand, &pr.tr
	v := h.totals[i]*pr.period/(max(h.per, 1)*max(h.per, 1)) + t.totals[i]*pr.period/(max(t.per, 1)*max(t.per, 1))
	return 2 * math.Sqrt(v)
}

// write writes the report as a table of the areas, the largest difference
// first, with why each stands where it does.
func (pr *profileReport) write(w io.Writer) {
	fmt.Fprintf(w, "\n**Where the cost sits: %s** (%s)\n\n", pr.title, pr.how)
	noise := pr.period > 0
	if noise {
		fmt.Fprintln(w, "| area | hand (floor) | toolrun | toolrun − hand | ± sampling (2σ) | why, and what would be next |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | --- |")
	} else {
		fmt.Fprintln(w, "| area | hand (floor) | toolrun | toolrun − hand | why, and what would be next |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | --- |")
	}
	diff := func(i int) float64 { return pr.tr.share(i) - pr.hand.share(i) }
	idx := make([]int, len(pr.areas))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch da, db := diff(a), diff(b); {
		case da > db:
			return -1
		case da < db:
			return 1
		}
		return 0
	})
	var th, tt, nv float64
	for _, i := range idx {
		h, t := pr.hand.share(i), pr.tr.share(i)
		th, tt = th+h, tt+t
		if h == 0 && t == 0 {
			continue
		}
		cells := []string{pr.areas[i].name, pr.format(h), pr.format(t), signed(pr.format, t-h)}
		if noise {
			cells = append(cells, "±"+pr.format(pr.noise(i)))
			nv += pr.noise(i) * pr.noise(i)
		}
		fmt.Fprintf(w, "| %s | %s |\n", strings.Join(cells, " | "), pr.areas[i].why)
	}
	cells := []string{"all", pr.format(th), pr.format(tt), signed(pr.format, tt-th)}
	if noise {
		cells = append(cells, "±"+pr.format(math.Sqrt(nv)))
	}
	fmt.Fprintf(w, "| %s |  |\n", strings.Join(cells, " | "))
	if pr.note != "" {
		fmt.Fprintf(w, "\n%s\n", pr.note)
	}
}

func signed(format func(float64) string, v float64) string {
	if v < 0 {
		return "−" + format(-v)
	}
	return "+" + format(v)
}

// cpuProfileOf runs f under the CPU profiler of this process and returns
// the profile; an error if the process is being profiled already (-cpuprofile).
func cpuProfileOf(f func() error) (*profile.Profile, error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return nil, err
	}
	err := f()
	pprof.StopCPUProfile()
	if err != nil {
		return nil, err
	}
	return profile.Parse(&buf)
}

// profileHistory profiles conversations of n turns, the hand loop's and
// toolrun's, in this process, and returns their CPU per turn by area.
func profileHistory(ctx context.Context, n, conversations int) (*profileReport, error) {
	srv, err := startServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	c := newClient(srv.URL)
	pr := &profileReport{title: fmt.Sprintf("client CPU per turn, history of %d turns", n),
		how:   fmt.Sprintf("a CPU profile of %d conversations per runner, in the harness's process, taken after the measured rounds, its samples put into areas by the functions on their stacks; profiling's own cost is in the figures, so they are larger than the table's, and a difference within the ± column is sampling noise", conversations),
		areas: cpuAreas, format: micros,
		note: "A short history leaves little for the incremental encoding to save, against what toolrun adds by design per turn (the schema check, the policy, panic-safe calls in goroutines, events, the state kept for resuming). The areas toolrun shares with the hand loop (the SDK's decoding and its conversion of the response, net/http) cannot go lower from the client side; toolrun's own can, by the step named in the table."}
	for _, name := range []string{"hand", "toolrun"} {
		ct, err := contenderNamed(name)
		if err != nil {
			return nil, err
		}
		run := ct.setup(c, []toolSpec{echoTool()})
		if _, err := run(ctx, prompt("echo", 2)); err != nil {
			return nil, err
		}
		p, err := cpuProfileOf(func() error {
			for range conversations {
				if _, err := run(ctx, prompt("echo", n)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("profiling %s: %w", name, err)
		}
		pr.period = float64(p.Period)
		if name == "hand" {
			pr.hand.add(p, cpuAreas, float64(conversations*n))
		} else {
			pr.tr.add(p, cpuAreas, float64(conversations*n))
		}
	}
	return pr, srv.Close()
}

// profileConcurrent profiles cfg's concurrent runs, each runner in a child
// process of its own as the measured rounds are, and returns their CPU per
// turn by area; server is the median ratio of the fake server's CPU per
// turn for toolrun's requests to that for the hand loop's.
func profileConcurrent(ctx context.Context, cfg config, server float64) (*profileReport, error) {
	srv, dir, cleanup, err := childProfiling(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	pr := &profileReport{title: fmt.Sprintf("%s concurrent runs of %d turns, client CPU per turn", thousands(cfg.concurrentRuns), cfg.concurrentTurns),
		how:   fmt.Sprintf("CPU profiles of %d more rounds per runner, each in its child process, the runners in turn, taken after the measured rounds, their samples put into areas by the functions on their stacks; a difference within the ± column is sampling noise", profileRounds),
		areas: cpuAreas, format: micros,
		note: concurrentNote(server)}
	for i := range 2 * profileRounds {
		name := []string{"hand", "toolrun"}[i%2]
		var res concurrentResult
		path := filepath.Join(dir, fmt.Sprintf("%s-%d.cpu", name, i))
		spec := childSpec{Role: "concurrent", URL: srv.URL, Runner: name, Runs: cfg.concurrentRuns, Turns: cfg.concurrentTurns, CPUProfile: path}
		if err := runChild(ctx, spec, &res); err != nil {
			return nil, err
		}
		p, err := readProfile(path)
		if err != nil {
			return nil, err
		}
		pr.period = float64(p.Period)
		if name == "hand" {
			pr.hand.add(p, cpuAreas, float64(res.Turns))
		} else {
			pr.tr.add(p, cpuAreas, float64(res.Turns))
		}
	}
	return pr, srv.Close()
}

// profileSuspended profiles the live heap of held runs, each runner in a
// child process as the measured run is, and returns it per run by area.
func profileSuspended(ctx context.Context, cfg config) (*profileReport, error) {
	srv, dir, cleanup, err := childProfiling(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	pr := &profileReport{title: "live heap per held run",
		how:   fmt.Sprintf("a heap profile (in-use bytes, every %d bytes allocated sampled) of %s held runs per runner, in its child process, its allocations put into areas by the functions on their stacks", heapProfileRate, thousands(cfg.suspendedRuns)),
		areas: heapAreas, format: func(b float64) string { return fmt.Sprintf("%.2f KiB", b/1024) },
		note: "A held toolrun run keeps, beyond the history the hand loop keeps, what resuming it needs: the pending turn with each call's phase, the call's decision and the stop record, and the Runner's own fields. What would be next: the decision and the stop record folded into the State, and fewer per-run fields in the Runner (a held run needs neither the compaction nor the store's)."}
	for _, name := range []string{"hand", "toolrun"} {
		var res suspendedResult
		path := filepath.Join(dir, name+".heap")
		spec := childSpec{Role: "suspended", URL: srv.URL, Runner: name, Runs: cfg.suspendedRuns, HeapProfile: path, HeapProfileRate: heapProfileRate}
		if err := runChild(ctx, spec, &res); err != nil {
			return nil, err
		}
		p, err := readProfile(path)
		if err != nil {
			return nil, err
		}
		if name == "hand" {
			pr.hand.add(p, heapAreas, float64(res.Runs))
		} else {
			pr.tr.add(p, heapAreas, float64(res.Runs))
		}
	}
	return pr, srv.Close()
}

// childProfiling starts what profiling in child processes needs: a fake
// server and a directory for the profiles. cleanup closes the one and
// removes the other.
func childProfiling(ctx context.Context) (srv *fakeServer, dir string, cleanup func(), err error) {
	if srv, err = startServer(ctx); err != nil {
		return nil, "", nil, err
	}
	if dir, err = os.MkdirTemp("", "toolrun-bench"); err != nil {
		srv.Close()
		return nil, "", nil, err
	}
	return srv, dir, func() { srv.Close(); os.RemoveAll(dir) }, nil
}

// profileRounds is the rounds of the concurrent runs profiled per runner:
// one round's profile has too few samples to tell the areas apart.
const profileRounds = 3

// heapProfileRate is runtime.MemProfileRate for the report's heap profile:
// fine enough for objects of a few hundred bytes, coarse enough to be quick.
const heapProfileRate = 64

func readProfile(path string) (*profile.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return profile.Parse(f)
}

// concurrentNote says why the concurrent runs' throughput stands where it
// does, given server, the median ratio of the fake server's CPU per turn
// for toolrun's requests to that for the hand loop's.
func concurrentNote(server float64) string {
	var srv string
	switch {
	case server > 1.05:
		srv = fmt.Sprintf("toolrun's requests, which by default ask for prompt caching and go on a thread, cost the fake server more to answer than the hand loop's plain ones (%.2f× its CPU per turn, the table's row), and on this machine that comes out of the same two CPUs, as an API server elsewhere would not", server)
	case server < 0.95:
		srv = fmt.Sprintf("toolrun's requests cost the fake server less to answer than the hand loop's (%.2f× its CPU per turn, the table's row)", server)
	default:
		srv = fmt.Sprintf("toolrun's requests cost the fake server about what the hand loop's do (%.2f× its CPU per turn, the table's row)", server)
	}
	return "Throughput here is bound by the two CPUs that the client's process, the fake server's process and the machine's other work share: " + srv +
		". The row of toolrun with Options.NoThread and NoCache sends the hand loop's plain requests, so its throughput compares like for like. The client's own CPU per turn is above by area, as at 10 turns: the areas it shares with the hand loop (the SDK's decoding and conversion, net/http) cannot go lower from the client side, and toolrun's own cost is what it adds by design, less what it saves in encoding."
}
