package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"
)

// stalledResult is what the stalled workload measured: the server's
// memory and a plain run's latency with no client holding a stream, and
// with Readers clients that asked for the events of a run with an answer
// of Bytes bytes and never read them, each round's two sides one after
// the other on the same server. Samples are by side: "hand" none, and
// "toolrun" stalled, so the table's ratio is stalled ÷ none.
type stalledResult struct {
	Readers, Bytes, Rounds int
	// LiveHeap is the heap's live objects after a collection (bytes);
	// RSS the harness process's resident set, the server's included;
	// Latency the median wall time of Plain plain runs (nanoseconds).
	LiveHeap, RSS, Latency samples
	Plain                  int
	// HeapAfter is the live heap once the stalled readers have gone and
	// the server has dropped their streams, in each round.
	HeapAfter []float64
}

// runStalled measures the server's memory with cfg.stalledReaders clients
// of one run's stream that never read it, beside the same server with
// none. The server is serve.Config's defaults (StreamWriteTimeout 1
// minute), as serve workload's, in the harness's process: the heap
// measured is the server's (the stalled clients hold their unread bytes
// in the kernel's socket buffers, not the heap) and the harness's few
// idle ones.
func runStalled(ctx context.Context, cfg config, progress io.Writer) (*stalledResult, error) {
	model, err := startServer(ctx)
	if err != nil {
		return nil, err
	}
	defer model.Close()
	sb, err := newServeBench(ctx, model.URL, 64)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	res := &stalledResult{Readers: cfg.stalledReaders, Bytes: cfg.stalledBytes, Rounds: cfg.stalledRounds, Plain: cfg.stalledPlainRuns,
		LiveHeap: samples{}, RSS: samples{}, Latency: samples{}}

	plain := func() (time.Duration, error) {
		t0 := time.Now()
		ev, err := sb.run(ctx, sb.newThread(), prompt("echo", 1), nil, nil)
		if err == nil && outcome(ev) != "success" {
			err = fmt.Errorf("a plain run ended with %s, want success", outcome(ev))
		}
		return time.Since(t0), err
	}
	if _, err := plain(); err != nil { // unmeasured: dial, fill the caches
		return nil, fmt.Errorf("stalled: warm-up: %w", err)
	}
	// The large run, read to its end once by a client that reads.
	bigRun := "big-run"
	resp, err := sb.request(ctx, http.MethodPost, "/", map[string]any{"threadId": "big", "runId": bigRun,
		"messages": []any{map[string]any{"id": "u-big", "role": "user", "content": prompt("big", cfg.stalledBytes)}}})
	if err != nil {
		return nil, fmt.Errorf("stalled: the large run: %w", err)
	}
	if ev, err := lastEvent(resp); err != nil || outcome(ev) != "success" {
		return nil, fmt.Errorf("stalled: the large run: %v %v", outcome(ev), err)
	}
	httpClient.CloseIdleConnections()

	measure := func(side string) error {
		// The plain runs first, then the memory, so a collection the
		// measure forces does not help the runs.
		var lat []float64
		for range cfg.stalledPlainRuns {
			d, err := plain()
			if err != nil {
				return fmt.Errorf("stalled, %s: %w", side, err)
			}
			lat = append(lat, float64(d))
		}
		res.Latency.add(side, median(lat))
		res.LiveHeap.add(side, float64(liveHeap()))
		// What the process holds, once the runtime has given back what
		// it freed (it does so lazily otherwise, and the RSS would carry
		// what an earlier side freed).
		debug.FreeOSMemory()
		res.RSS.add(side, float64(procStatus("VmRSS")))
		return nil
	}
	for round := range cfg.stalledRounds {
		order := []string{"hand", "toolrun"}
		if round%2 == 1 {
			order = []string{"toolrun", "hand"}
		}
		for _, side := range order {
			if side == "hand" {
				if err := measure(side); err != nil {
					return nil, err
				}
				continue
			}
			stop, err := stallReaders(ctx, sb, bigRun, cfg.stalledReaders)
			if err != nil {
				return nil, err
			}
			err = measure(side)
			stop()
			if err != nil {
				return nil, err
			}
			// The server drops a stream once its client has gone; its
			// memory is measured once the streams have all ended.
			after, err := streamsGone(ctx)
			if err != nil {
				return nil, err
			}
			res.HeapAfter = append(res.HeapAfter, after)
		}
		fmt.Fprintf(progress, "stalled round %d/%d: live heap %.1f MiB with none, %.1f MiB with %d stalled readers, %.1f MiB once they went\n",
			round+1, cfg.stalledRounds, res.LiveHeap["hand"][round]/(1<<20), res.LiveHeap["toolrun"][round]/(1<<20), cfg.stalledReaders, res.HeapAfter[round]/(1<<20))
	}
	return res, sb.Close()
}

// stallReaders opens n streams of run's events, each on a connection of
// its own, reads none of them, and waits until the server has written
// what their sockets take (its live heap stops growing); stop closes
// them.
func stallReaders(ctx context.Context, sb *serveBench, run string, n int) (stop func(), err error) {
	tr := &http.Transport{DisableKeepAlives: true, MaxConnsPerHost: 0}
	client := &http.Client{Transport: tr}
	var bodies []io.Closer
	stop = func() {
		for _, b := range bodies {
			b.Close()
		}
		tr.CloseIdleConnections()
	}
	for range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, sb.url+"/runs/"+run+"/events", nil)
		if err != nil {
			stop()
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+serveToken)
		resp, err := client.Do(req)
		if err != nil {
			stop()
			return nil, fmt.Errorf("stalled: a reader: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			stop()
			return nil, fmt.Errorf("stalled: a reader: %s", resp.Status)
		}
		bodies = append(bodies, resp.Body)
	}
	// The streams fill their sockets within moments; the heap is
	// watched until it has not grown by 1% for a second.
	last, still := liveHeap(), 0
	for still < 10 {
		select {
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		h := liveHeap()
		if float64(h) > 1.01*float64(last) {
			last, still = h, 0
			continue
		}
		still++
	}
	return stop, nil
}

// streamsGone waits until the server has ended the streams of readers
// that have gone (its writes to their closed connections fail at once),
// as its live heap says by not changing by 1% for a second, and returns
// that heap.
func streamsGone(ctx context.Context) (float64, error) {
	last, still := liveHeap(), 0
	for deadline := time.Now().Add(2 * time.Minute); still < 10; {
		if time.Now().After(deadline) {
			return 0, errors.New("stalled: the server's heap did not settle in 2 minutes once the readers had gone")
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		h := liveHeap()
		if d := float64(h) - float64(last); d > 0.01*float64(last) || -d > 0.01*float64(last) {
			last, still = h, 0
			continue
		}
		still++
	}
	return float64(last), nil
}

// rows are the stalled workload's rows of the table.
func (s *stalledResult) rows() []row {
	w := fmt.Sprintf("serve: memory with stalled readers (hand: no stalled reader; toolrun: %d clients that GET /runs/{run}/events of a run with a %s answer and never read; serve.Config defaults, StreamWriteTimeout 1 minute; the server in the harness's process; %d rounds)",
		s.Readers, mib(float64(s.Bytes)), s.Rounds)
	heap := measureRow(w, "server live heap after a collection", s.LiveHeap, mib)
	rss := measureRow(w, "process RSS, freed memory returned to the OS (the harness's, the server's included)", s.RSS, mib)
	lat := measureRow(w, "plain run's latency (median of "+strconv.Itoa(s.Plain)+" one after another)", s.Latency, millis)
	var per []float64
	for i := range min(len(s.LiveHeap["hand"]), len(s.LiveHeap["toolrun"])) {
		per = append(per, (s.LiveHeap["toolrun"][i]-s.LiveHeap["hand"][i])/float64(max(s.Readers, 1)))
	}
	each := row{w, "server live heap per stalled reader (toolrun − hand, ÷ readers)", na, na, mib(median(per)), "—", "—", "", "—"}
	after := row{w, "server live heap once the stalled readers have gone", na, na, mib(median(s.HeapAfter)), "—", "—", "", "—"}
	for _, r := range []*row{&heap, &rss, &lat} {
		r.vsOfficial = "—"
	}
	return []row{heap, each, rss, lat, after}
}
