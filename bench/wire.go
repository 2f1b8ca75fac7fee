package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
)

// wireResult holds, per runner and round, the request body's size and the
// client-side gap (a response's headers in → the next request out) at an
// early and a late turn of a long conversation.
type wireResult struct {
	Turns                        int
	Early, Late                  int // the turns compared
	BytesEarly, BytesLate        samples
	GapFirst, GapLate            samples // nanoseconds; GapFirst is after turn 1
	NoThreadBytes, NoThreadEarly samples // toolrun with Options.NoThread: bytes at Late and Early
	// CPU is the client CPU per turn of the whole conversation: "toolrun"
	// with the defaults (on a message thread), "nothread" with
	// Options.NoThread (the whole history in every request).
	CPU samples
}

// wireMeter is a client middleware that records each request's body size
// and when it left and when its response's headers arrived.
type wireMeter struct {
	mu       sync.Mutex // guards sizes, sent, answered
	sizes    []int64
	sent     []time.Time
	answered []time.Time
}

func (m *wireMeter) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	now := time.Now()
	size := req.ContentLength
	if size <= 0 && req.GetBody != nil {
		if b, err := req.GetBody(); err == nil {
			size, _ = io.Copy(io.Discard, b)
		}
	}
	m.mu.Lock()
	m.sizes = append(m.sizes, size)
	m.sent = append(m.sent, now)
	m.mu.Unlock()
	resp, err := next(req)
	m.mu.Lock()
	m.answered = append(m.answered, time.Now())
	m.mu.Unlock()
	return resp, err
}

// gap is the time from the response of request i (0-based) to request i+1.
func (m *wireMeter) gap(i int) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return float64(m.sent[i+1].Sub(m.answered[i]))
}

func (m *wireMeter) size(i int) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return float64(m.sizes[i])
}

// runWire runs a conversation of cfg.wireTurns turns per runner and round,
// with each runner's defaults, and records its requests.
func runWire(ctx context.Context, cfg config, progress io.Writer) (*wireResult, error) {
	n := cfg.wireTurns
	res := &wireResult{Turns: n, Early: 10, Late: n, BytesEarly: samples{}, BytesLate: samples{},
		GapFirst: samples{}, GapLate: samples{}, NoThreadBytes: samples{}, NoThreadEarly: samples{}, CPU: samples{}}
	specs := []toolSpec{echoTool()}
	srv, err := startServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	for round := range cfg.wireRounds {
		for _, ct := range rotate(round) {
			m := &wireMeter{}
			run := ct.setup(newClient(srv.URL, option.WithMiddleware(m.middleware)), specs)
			meter := startMeter()
			turns, err := run(ctx, prompt("echo", n))
			res.CPU.add(ct.name, float64(meter.stop().CPU)/float64(n))
			if err == nil && turns != n {
				err = fmt.Errorf("%w: %d, want %d", errWrongTurns, turns, n)
			}
			if err != nil {
				return nil, fmt.Errorf("wire, %s: %w", ct.name, err)
			}
			res.BytesEarly.add(ct.name, m.size(res.Early-1))
			res.BytesLate.add(ct.name, m.size(res.Late-1))
			res.GapFirst.add(ct.name, m.gap(0))
			res.GapLate.add(ct.name, m.gap(res.Late-2))
			fmt.Fprintf(progress, "wire %d turns, round %d/%d, %-8s request %d: %d bytes, %d: %d bytes\n",
				n, round+1, cfg.wireRounds, ct.name, res.Early, int(m.size(res.Early-1)), res.Late, int(m.size(res.Late-1)))
		}
		// toolrun without a message thread: the whole history each turn.
		m := &wireMeter{}
		opts := toolrunOptions()
		opts.NoThread = true
		c := newClient(srv.URL, option.WithMiddleware(m.middleware))
		r := toolrun.New(c, newParams(prompt("echo", n)), toolrunTools(specs), opts)
		meter := startMeter()
		if _, err := r.Run(ctx); err != nil {
			return nil, fmt.Errorf("wire, toolrun without a thread: %w", err)
		}
		res.CPU.add("nothread", float64(meter.stop().CPU)/float64(n))
		res.NoThreadEarly.add("toolrun", m.size(res.Early-1))
		res.NoThreadBytes.add("toolrun", m.size(res.Late-1))
	}
	return res, nil
}

// pauseResult is, per runner and round, the bytes of the requests of a run
// whose model pauses (pause_turn) Pauses times in a row.
type pauseResult struct {
	Pauses         int
	Total, Largest samples
}

// runPause runs cfg.pauses pause_turns in a row per runner (toolrun at
// its defaults, the official runner on its thread and with DisableThread;
// the hand loop does not go on after a pause) and round, and records the
// request bytes.
func runPause(ctx context.Context, cfg config, progress io.Writer) (*pauseResult, error) {
	n := cfg.pauses
	res := &pauseResult{Pauses: n, Total: samples{}, Largest: samples{}}
	srv, err := startServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	for round := range cfg.pauseRounds {
		for _, ct := range append(rotate(round), officialThreadContender) {
			if ct.name == "hand" {
				continue
			}
			m := &wireMeter{}
			run := ct.setup(newClient(srv.URL, option.WithMiddleware(m.middleware)), nil)
			turns, err := run(ctx, prompt("pause", n))
			if err == nil && turns != n+1 {
				err = fmt.Errorf("%w: %d, want %d", errWrongTurns, turns, n+1)
			}
			if err != nil {
				return nil, fmt.Errorf("pause, %s: %w", ct.name, err)
			}
			var total, largest int64
			for _, s := range m.sizes {
				total += s
				largest = max(largest, s)
			}
			res.Total.add(ct.name, float64(total))
			res.Largest.add(ct.name, float64(largest))
			fmt.Fprintf(progress, "pause %d, round %d/%d, %-8s %d requests, %d bytes, the largest %d\n",
				n, round+1, cfg.pauseRounds, ct.name, len(m.sizes), total, largest)
		}
	}
	return res, nil
}

// rows are the rows of the pause workload. Its first two compare like
// with like: toolrun at its defaults and the official runner on its
// thread both continue a thread at each pause. The last two show the
// official runner with DisableThread, as it runs in every other row,
// re-sending the whole history at each pause.
func (p *pauseResult) rows() []row {
	name := fmt.Sprintf("%d pause_turns in a row, both on a thread (toolrun: defaults; official: DisableThread false)", p.Pauses)
	threaded := func(s samples) samples { return samples{"official": s["official-thread"], "toolrun": s["toolrun"]} }
	total := measureRow(name, "request bytes in all", threaded(p.Total), kib)
	largest := measureRow(name, "largest request body", threaded(p.Largest), kib)
	perPause := median(p.Total["toolrun"]) / float64(p.Pauses+1)
	largest.target = "toolrun flat: largest ≤ 2× the mean"
	largest.met = check(median(p.Largest["toolrun"]) <= 2*perPause)
	unthreaded := func(s samples) samples { return samples{"official": s["official"], "toolrun": s["toolrun"]} }
	totalOff := measureRow(name, "official with DisableThread: request bytes in all", unthreaded(p.Total), kib)
	largestOff := measureRow(name, "official with DisableThread: largest request body", unthreaded(p.Largest), kib)
	return []row{total, largest, totalOff, largestOff}
}

// wireRows are the rows of the wire workload.
func (w *wireResult) rows() []row {
	name := fmt.Sprintf("conversation of %d turns, default options", w.Turns)
	bytesAt := func(s samples, turn int) row {
		return measureRow(name, fmt.Sprintf("request bytes at turn %d", turn), s, kib)
	}
	early, late := bytesAt(w.BytesEarly, w.Early), bytesAt(w.BytesLate, w.Late)
	grow := median(w.BytesLate["toolrun"]) / median(w.BytesEarly["toolrun"])
	late.target = fmt.Sprintf("toolrun turn %d ≤ 1.5× turn %d", w.Late, w.Early)
	late.met = fmt.Sprintf("%s (×%.1f)", check(grow <= 1.5), grow)
	gapFirst := measureRow(name, "gap: response in → next request out, turn 1", w.GapFirst, millis)
	gapLate := measureRow(name, fmt.Sprintf("gap: response in → next request out, turn %d", w.Late-1), w.GapLate, millis)
	tl, tf := median(w.GapLate["toolrun"]), median(w.GapFirst["toolrun"])
	gapLate.target = "toolrun ≤ 1 ms and ≤ 1.5× turn 1"
	gapLate.met = check(tl <= 1e6) + " " + check(tl <= 1.5*tf)
	noThread := row{workload: name, measure: fmt.Sprintf("toolrun with Options.NoThread: request bytes at turn %d, %d", w.Early, w.Late),
		official: na, hand: na, toolrun: kib(median(w.NoThreadEarly["toolrun"])) + ", " + kib(median(w.NoThreadBytes["toolrun"])),
		vsHand: "—", vsOfficial: "—", met: "—"}
	cpu := measureRow(name, "client CPU per turn, whole conversation", w.CPU, micros)
	cpuNoThread := row{workload: name, measure: "toolrun with Options.NoThread: client CPU per turn, whole conversation",
		official: na, hand: na, toolrun: micros(median(w.CPU["nothread"])),
		vsHand: ratio(median(w.CPU["nothread"]), median(w.CPU["hand"])), vsOfficial: ratio(median(w.CPU["nothread"]), median(w.CPU["official"])), met: "—"}
	return []row{early, late, noThread, cpu, cpuNoThread, gapFirst, gapLate}
}
