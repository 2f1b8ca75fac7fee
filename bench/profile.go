package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
		"the same responses (the fake server's replies are the same size for both), decoded by the same SDK code: a difference here is the profile's sampling noise"},
	{"the response made params (ToParam)", []string{"BetaMessage.ToParam"},
		"the SDK's conversion of each response, the same for both"},
	{"the tool call: input decoded, validated, run, answered", []string{"toolrun.(*Runner).runCall", "toolrun.(*Runner).runTool", "toolrun.(*FuncTool).Run", "toolrun.(*Runner).decideTurn", "toolrun.(*Runner).execute", "errgroup.", ".handCall"},
		"what toolrun adds by design: the input checked against the tool's JSON Schema, a decision in the policy order, the call run panic-safe in goroutines of a bounded errgroup, its result made safe to send; the hand loop decodes the input and calls the function inline. Running a turn's single call without the errgroup's goroutine is what would be next; the tool's own goroutine stays, since it is what lets a run abandon a tool that ignores its context"},
	{"net/http and the socket", []string{"net/http.", "net.", "internal/poll.", "syscall."},
		"the same transport; on its thread toolrun's requests are smaller, so what is left is the fixed cost of a request and its response"},
	{"the SDK's request setup (options, headers, tracing)", []string{"anthropic-sdk-go"},
		"the client's per-request work (options, headers, the tracing hook), with toolrun's request options on top (a timeout, the encoded body, the thread beta header)"},
	{"the rest of toolrun's engine (events, state, budgets, commit)", []string{"github.com/toolrun/toolrun."},
		"the engine's per-turn bookkeeping: the pending turn's state and phases, events, the budget and stop checks, the commit"},
	{"the runtime: scheduler, allocator, the rest", nil,
		"goroutines parked and woken around each request and call, and the allocator outside the areas above"},
}

// heapAreas are the areas of a heap profile of held runs.
var heapAreas = []area{
	{"the Runner and its State", []string{"toolrun.newRunner", "toolrun.New"},
		"the State holds the params, as the hand loop's params box does (below), with the run's counters; the Runner's own fields are one 320-byte object"},
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

// areaShares sums the samples of p (the sampleIndex'th value) by area, in
// areas' order, divided by per.
func areaShares(p *profile.Profile, sampleIndex int, areas []area, per float64) []float64 {
	out := make([]float64, len(areas))
	for _, s := range p.Sample {
		i := areaOf(s, areas)
		out[i] += float64(s.Value[sampleIndex]) / per
	}
	return out
}

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
	hand, tr []float64
	format   func(float64) string
}

// write writes the report as a table of the areas, the largest difference
// first, with why each stands where it does.
func (pr *profileReport) write(w io.Writer) {
	fmt.Fprintf(w, "\n**Where the cost sits: %s** (%s)\n\n", pr.title, pr.how)
	fmt.Fprintln(w, "| area | hand (floor) | toolrun | toolrun − hand | why, and what would be next |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | --- |")
	idx := make([]int, len(pr.areas))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		da, db := pr.tr[a]-pr.hand[a], pr.tr[b]-pr.hand[b]
		switch {
		case da > db:
			return -1
		case da < db:
			return 1
		}
		return 0
	})
	var th, tt float64
	for _, i := range idx {
		th, tt = th+pr.hand[i], tt+pr.tr[i]
		if pr.hand[i] == 0 && pr.tr[i] == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", pr.areas[i].name, pr.format(pr.hand[i]), pr.format(pr.tr[i]), signed(pr.format, pr.tr[i]-pr.hand[i]), pr.areas[i].why)
	}
	fmt.Fprintf(w, "| all | %s | %s | %s |  |\n", pr.format(th), pr.format(tt), signed(pr.format, tt-th))
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
		how:   fmt.Sprintf("a CPU profile of %d conversations per runner, taken after the measured rounds, its samples put into areas by the functions on their stacks; profiling's own cost is in the figures, so they are larger than the table's", conversations),
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
		shares := areaShares(p, len(p.SampleType)-1, cpuAreas, float64(conversations*n))
		if name == "hand" {
			pr.hand = shares
		} else {
			pr.tr = shares
		}
	}
	return pr, srv.Close()
}

// profileConcurrent profiles cfg's concurrent runs, each runner in a child
// process of its own as the measured rounds are, and returns their CPU per
// turn by area; server is the median ratio of the fake server's CPU per
// turn for toolrun's requests to that for the hand loop's.
func profileConcurrent(ctx context.Context, cfg config, server float64) (*profileReport, error) {
	srv, err := startServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	dir, err := os.MkdirTemp("", "toolrun-bench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	pr := &profileReport{title: fmt.Sprintf("%s concurrent runs of %d turns, client CPU per turn", thousands(cfg.concurrentRuns), cfg.concurrentTurns),
		how:   "a CPU profile of one more round per runner, in its child process, taken after the measured rounds, its samples put into areas by the functions on their stacks; the client's CPU per turn is where toolrun can gain",
		areas: cpuAreas, format: micros,
		note: concurrentNote(server)}
	for _, name := range []string{"hand", "toolrun"} {
		var res concurrentResult
		path := filepath.Join(dir, name+".cpu")
		spec := childSpec{Role: "concurrent", URL: srv.URL, Runner: name, Runs: cfg.concurrentRuns, Turns: cfg.concurrentTurns, CPUProfile: path}
		if err := runChild(ctx, spec, &res); err != nil {
			return nil, err
		}
		p, err := readProfile(path)
		if err != nil {
			return nil, err
		}
		shares := areaShares(p, len(p.SampleType)-1, cpuAreas, float64(max(res.Turns, 1)))
		if name == "hand" {
			pr.hand = shares
		} else {
			pr.tr = shares
		}
	}
	return pr, srv.Close()
}

// profileSuspended profiles the live heap of held runs, each runner in a
// child process as the measured run is, and returns it per run by area.
func profileSuspended(ctx context.Context, cfg config) (*profileReport, error) {
	srv, err := startServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	dir, err := os.MkdirTemp("", "toolrun-bench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
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
		// inuse_space is the last of alloc_objects, alloc_space,
		// inuse_objects, inuse_space.
		shares := areaShares(p, len(p.SampleType)-1, heapAreas, float64(max(res.Runs, 1)))
		if name == "hand" {
			pr.hand = shares
		} else {
			pr.tr = shares
		}
	}
	return pr, srv.Close()
}

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
		". The client's own CPU per turn is above by area, as at 10 turns: the areas it shares with the hand loop (the SDK's decoding and conversion, net/http) cannot go lower from the client side, and toolrun's own cost is what it adds by design, less what it saves in encoding."
}
