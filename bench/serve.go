package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the serve workload's store, as "toolrun serve" opens it

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
)

// serveResult is what the serve workload measured: the same concurrent
// runs through the server and through a Runner in process, the time from
// a decision to its tool's start, and what pending runs cost the server.
type serveResult struct {
	// Runs concurrent runs of Turns turns, per round: Wall is the wall
	// time of all of them and CPU the harness process's CPU time, in
	// nanoseconds, by side ("inprocess", "serve").
	Runs, Turns int
	Wall, CPU   samples
	// Many concurrent runs of one turn each, over ManyRounds rounds: the
	// server's throughput with a model that answers at once. ManyWall
	// and ManyCPU are as Wall and CPU.
	Many, ManyRounds  int
	ManyWall, ManyCPU samples
	// Pending runs awaiting approval: the live heap they add to the
	// server's process, and the database's bytes, each per run.
	Pending        int
	HeapPerPending float64
	DBPerPending   float64
	// ListTime is the time of each GET /api/pending of every pending
	// run (nanoseconds), ListBytes the bytes of its answer.
	ListTime  []float64
	ListBytes int
	// APILatency is, for each call decided over the JSON API, the time
	// from the decision's response to the tool's start (in the run the
	// server continues the thread with, or else the thread's next run
	// posted at once); ResumeLatency, for each call decided by an
	// AG-UI resume, from the request going out to the tool's start.
	APILatency, ResumeLatency []float64
}

// serveSides names the two sides of the serve workload's ratios.
var serveSides = []string{"inprocess", "serve"}

// serveToken is the bearer token of the serve workload: one token whose
// run cap lets every concurrent run in.
const serveToken = "bench-serve-token-0123456789"

// serveBench is a serve.Handler on loopback, in the harness's process, on
// a SQLite database in a temporary directory, whose model is the fake
// server at modelURL.
type serveBench struct {
	url     string
	h       *serve.Handler
	srv     *httptest.Server
	db      *sql.DB
	dir     string
	starts  chan time.Time // the deploy tool's start times
	seq     atomic.Int64   // for run and message ids
	threads atomic.Int64   // for thread ids: t1, t2, ...
}

// newServeBench starts the server, its tools the workloads' echo and a
// deploy that needs approval and records when it starts.
func newServeBench(ctx context.Context, modelURL string, maxRuns int) (*serveBench, error) {
	dir, err := os.MkdirTemp("", "toolrun-bench-serve")
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "serve.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	db.SetMaxOpenConns(1)
	sb := &serveBench{db: db, dir: dir, starts: make(chan time.Time, 1)}
	deploy := toolrun.NewTool("deploy", "Deploys s.", func(_ context.Context, in toolInput) (string, error) {
		select {
		case sb.starts <- time.Now():
		default: // nobody is timing this call
		}
		return "deployed " + in.S, nil
	})
	deploy.Policy = policy.RequireApproval("a person approves each deploy")
	opts := *toolrunOptions()
	discard := slog.New(slog.DiscardHandler)
	h, err := serve.New(ctx, serve.Config{
		Client:  newClient(modelURL),
		Params:  newParams(""),
		Tools:   append(toolrunTools([]toolSpec{echoTool()}), deploy),
		Options: opts,
		DB:      db,
		Tokens:  []serve.Token{{Name: "bench", Secret: serveToken, Scopes: []string{serve.ScopeRun, serve.ScopeApprove, serve.ScopeRead}, MaxRuns: maxRuns}},
		Logger:  discard,
	})
	if err != nil {
		db.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	sb.h = h
	sb.srv = httptest.NewServer(h)
	sb.url = sb.srv.URL
	return sb, nil
}

// Close drains the server and removes its database.
func (sb *serveBench) Close() error {
	err := sb.h.Shutdown(context.Background())
	sb.srv.Close()
	httpClient.CloseIdleConnections()
	if cerr := sb.db.Close(); err == nil {
		err = cerr
	}
	os.RemoveAll(sb.dir)
	return err
}

// dbBytes returns the bytes of the server's database files.
func (sb *serveBench) dbBytes() int64 {
	var n int64
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if fi, err := os.Stat(filepath.Join(sb.dir, "serve.db"+suffix)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// newThread returns a fresh thread id.
func (sb *serveBench) newThread() string { return "t" + strconv.FormatInt(sb.threads.Add(1), 10) }

// request sends a request to the server with the workload's token.
func (sb *serveBench) request(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, sb.url+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+serveToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	return resp, nil
}

// run posts a RunAgentInput on thread, with a user message of text (if
// any) and resume entries, reads its events to the end, and returns the
// terminal one. sent, if not nil, is called as the request goes out.
func (sb *serveBench) run(ctx context.Context, thread, text string, resume []map[string]any, sent func()) (map[string]any, error) {
	in := map[string]any{"threadId": thread, "runId": "r" + strconv.FormatInt(sb.seq.Add(1), 10), "messages": []any{}}
	if text != "" {
		in["messages"] = []any{map[string]any{"id": "u" + strconv.FormatInt(sb.seq.Add(1), 10), "role": "user", "content": text}}
	}
	if resume != nil {
		in["resume"] = resume
	}
	if sent != nil {
		sent()
	}
	resp, err := sb.request(ctx, http.MethodPost, "/", in)
	if err != nil {
		return nil, err
	}
	return lastEvent(resp)
}

// events reads the events of run to its end, as a client that reconnects
// does, and returns the terminal one.
func (sb *serveBench) events(ctx context.Context, run string) (map[string]any, error) {
	resp, err := sb.request(ctx, http.MethodGet, "/runs/"+run+"/events", nil)
	if err != nil {
		return nil, err
	}
	return lastEvent(resp)
}

// lastEvent reads a stream of server-sent events to its end and returns
// the last. Every event is checked to be JSON, and only the last decoded:
// decoding each into a map was the harness's own cost, a twentieth of
// the serve side's CPU, which the in-process side has no part of.
func lastEvent(resp *http.Response) (map[string]any, error) {
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	// The buffer starts at bufio's 4 KiB and grows only for a longer
	// line: one of 64 KiB made for every run was a twelfth of the bytes
	// the serve side allocated, the harness's own cost again.
	sc.Buffer(nil, 16<<20)
	var data []byte
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
			if !json.Valid(d) {
				return nil, fmt.Errorf("an event that is not JSON: %.200s", d)
			}
			data = append(data[:0], d...)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if data == nil {
		return nil, errors.New("the run sent no event")
	}
	var last map[string]any
	if err := json.Unmarshal(data, &last); err != nil {
		return nil, fmt.Errorf("an event that is not JSON: %v", err)
	}
	return last, nil
}

// outcome returns the type of a RUN_FINISHED event's outcome, or the
// event's type and code for any other.
func outcome(ev map[string]any) string {
	if ev["type"] != "RUN_FINISHED" {
		return fmt.Sprintf("%v %v: %v", ev["type"], ev["code"], ev["message"])
	}
	o, _ := ev["outcome"].(map[string]any)
	return fmt.Sprint(o["type"])
}

// interruptID returns the id of the one interrupt of a RUN_FINISHED event.
func interruptID(ev map[string]any) (string, error) {
	o, _ := ev["outcome"].(map[string]any)
	its, _ := o["interrupts"].([]any)
	if o["type"] != "interrupt" || len(its) != 1 {
		return "", fmt.Errorf("the run ended with %s, want one interrupt", outcome(ev))
	}
	it, _ := its[0].(map[string]any)
	id, _ := it["id"].(string)
	if id == "" {
		return "", errors.New("an interrupt without an id")
	}
	return id, nil
}

// pendRun runs a thread to the deploy call that awaits approval and
// returns the thread and the interrupt's id.
func (sb *serveBench) pendRun(ctx context.Context) (thread, interrupt string, err error) {
	thread = sb.newThread()
	ev, err := sb.run(ctx, thread, prompt("approve", 0), nil, nil)
	if err != nil {
		return "", "", err
	}
	interrupt, err = interruptID(ev)
	return thread, interrupt, err
}

// pendingRun is a thread stopped at a call awaiting approval.
type pendingRun struct{ thread, interrupt string }

// pendMany brings n threads to a call awaiting approval, 16 at a time.
func (sb *serveBench) pendMany(ctx context.Context, n int) ([]pendingRun, error) {
	runs := make([]pendingRun, n)
	var next atomic.Int64
	errs := make([]error, 16)
	var wg sync.WaitGroup
	for w := range errs {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(runs); i = int(next.Add(1)) - 1 {
				t, it, err := sb.pendRun(ctx)
				if err != nil {
					errs[w] = err
					return
				}
				runs[i] = pendingRun{t, it}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("pending runs: %w", err)
	}
	return runs, nil
}

// runServe measures the serve workload against one fake server.
func runServe(ctx context.Context, cfg config, progress io.Writer) (*serveResult, error) {
	model, err := startServer(ctx)
	if err != nil {
		return nil, err
	}
	defer model.Close()
	res := &serveResult{Runs: cfg.serveRuns, Turns: cfg.serveTurns, Wall: samples{}, CPU: samples{}, Pending: cfg.servePending,
		Many: cfg.serveMany, ManyRounds: cfg.serveManyRounds, ManyWall: samples{}, ManyCPU: samples{}}
	if err := serveConcurrent(ctx, cfg.serveRuns, cfg.serveTurns, cfg.serveRounds, model.URL, res.Wall, res.CPU, progress); err != nil {
		return nil, err
	}
	if cfg.serveMany > 0 {
		if err := serveConcurrent(ctx, cfg.serveMany, 1, cfg.serveManyRounds, model.URL, res.ManyWall, res.ManyCPU, progress); err != nil {
			return nil, err
		}
	}
	if err := servePending(ctx, cfg, model.URL, res, progress); err != nil {
		return nil, err
	}
	return res, model.Close()
}

// serveConcurrent runs runs conversations of turns turns at once through
// a Runner in process and through the server, for rounds rounds, in an
// order that rotates each round, each side's tools and options the same,
// and adds each round's wall time and CPU per run to wall and cpu.
func serveConcurrent(ctx context.Context, runs, turns, rounds int, modelURL string, wall, cpu samples, progress io.Writer) error {
	sb, err := newServeBench(ctx, modelURL, runs)
	if err != nil {
		return err
	}
	defer sb.Close()
	inProcess := toolrunSetup(newClient(modelURL), []toolSpec{echoTool()})
	p := prompt("echo", turns)
	one := map[string]func() error{
		"inprocess": func() error {
			got, err := inProcess(ctx, p)
			if err == nil && got != turns {
				err = fmt.Errorf("%w: %d, want %d", errWrongTurns, got, turns)
			}
			return err
		},
		"serve": func() error {
			ev, err := sb.run(ctx, sb.newThread(), p, nil, nil)
			if err == nil && outcome(ev) != "success" {
				err = fmt.Errorf("the run ended with %s, want success", outcome(ev))
			}
			return err
		},
	}
	for _, side := range serveSides { // unmeasured: dial, fill the caches
		if err := one[side](); err != nil {
			return fmt.Errorf("serve, %s: warm-up: %w", side, err)
		}
	}
	for round := range rounds {
		order := slices.Clone(serveSides)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, side := range order {
			m := startMeter()
			var wg sync.WaitGroup
			errs := make([]error, runs)
			for i := range runs {
				wg.Go(func() { errs[i] = one[side]() })
			}
			wg.Wait()
			u := m.stop()
			if err := errors.Join(errs...); err != nil {
				return fmt.Errorf("serve, %s: %w", side, err)
			}
			wall.add(side, float64(u.Wall))
			cpu.add(side, float64(u.CPU)/float64(runs))
			fmt.Fprintf(progress, "serve %d concurrent runs of %d turns, round %d/%d, %-9s in %v, %v CPU\n",
				runs, turns, round+1, rounds, side, u.Wall.Round(time.Millisecond), u.CPU.Round(time.Millisecond))
		}
	}
	return sb.Close()
}

// servePending brings cfg.servePending runs to a call awaiting approval
// on a fresh server, and measures the heap and database bytes they add,
// listing them, and the time from a decision to its tool's start for
// cfg.serveDecisions of them over the JSON API and as many by AG-UI
// resumes, one at a time.
func servePending(ctx context.Context, cfg config, modelURL string, res *serveResult, progress io.Writer) error {
	sb, err := newServeBench(ctx, modelURL, 64)
	if err != nil {
		return err
	}
	defer sb.Close()
	if _, _, err := sb.pendRun(ctx); err != nil { // unmeasured: dial, fill the caches
		return fmt.Errorf("serve: warm-up: %w", err)
	}
	httpClient.CloseIdleConnections()
	base, baseDB := liveHeap(), sb.dbBytes()
	start := time.Now()

	runs, err := sb.pendMany(ctx, cfg.servePending)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	httpClient.CloseIdleConnections()
	// The runs' index entries are all that stays in memory; the warm-up's
	// pending run is measured in base.
	res.HeapPerPending = (float64(liveHeap()) - float64(base)) / float64(len(runs))
	res.DBPerPending = float64(sb.dbBytes()-baseDB) / float64(len(runs))
	fmt.Fprintf(progress, "serve %d pending runs in %v: %.1f KiB heap and %.1f KiB of database per run\n",
		len(runs), time.Since(start).Round(time.Millisecond), res.HeapPerPending/1024, res.DBPerPending/1024)

	for range cfg.serveListRounds {
		t0 := time.Now()
		resp, err := sb.request(ctx, http.MethodGet, "/api/pending", nil)
		if err != nil {
			return err
		}
		var list struct {
			Pending []json.RawMessage `json:"pending"`
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if err == nil {
			err = json.Unmarshal(b, &list)
		}
		if err == nil && len(list.Pending) != len(runs)+1 {
			err = fmt.Errorf("the list has %d pending calls, want %d", len(list.Pending), len(runs)+1)
		}
		if err != nil {
			return fmt.Errorf("serve: listing: %w", err)
		}
		res.ListTime = append(res.ListTime, float64(d))
		res.ListBytes = len(b)
	}
	fmt.Fprintf(progress, "serve listing %d pending: %.1f ms, %.1f KiB\n", len(runs)+1, median(res.ListTime)/1e6, float64(res.ListBytes)/1024)

	decisions := min(cfg.serveDecisions, len(runs)/2)
	approve := map[string]any{"decision": "approve"}
	for i := range decisions {
		// Over the JSON API. A server that continues the thread itself
		// names the run (nextRun); otherwise the thread's next run is
		// posted at once.
		p := runs[i]
		resp, err := sb.request(ctx, http.MethodPost, "/api/interrupts/"+p.interrupt+"/decision", approve)
		if err != nil {
			return fmt.Errorf("serve: decision: %w", err)
		}
		var decided struct {
			NextRun string `json:"nextRun"`
		}
		err = json.NewDecoder(resp.Body).Decode(&decided)
		resp.Body.Close()
		answered := time.Now()
		if err != nil {
			return fmt.Errorf("serve: the decision's answer: %w", err)
		}
		var ev map[string]any
		if decided.NextRun != "" {
			ev, err = sb.events(ctx, decided.NextRun)
		} else {
			ev, err = sb.run(ctx, p.thread, "", nil, nil)
		}
		if err != nil {
			return fmt.Errorf("serve: the run after a decision: %w", err)
		}
		if err := toolStarted(sb, ev); err != nil {
			return err
		}
		res.APILatency = append(res.APILatency, float64((<-sb.starts).Sub(answered)))

		// In an AG-UI resume.
		p = runs[decisions+i]
		var sent time.Time
		ev, err = sb.run(ctx, p.thread, "", []map[string]any{{"interruptId": p.interrupt, "status": "resolved", "payload": approve}}, func() { sent = time.Now() })
		if err != nil {
			return fmt.Errorf("serve: resume: %w", err)
		}
		if err := toolStarted(sb, ev); err != nil {
			return err
		}
		res.ResumeLatency = append(res.ResumeLatency, float64((<-sb.starts).Sub(sent)))
	}
	fmt.Fprintf(progress, "serve decision → tool start, %d of each: JSON API p50 %.2f ms, p99 %.2f ms; AG-UI resume p50 %.2f ms, p99 %.2f ms\n", decisions,
		percentile(res.APILatency, 50)/1e6, percentile(res.APILatency, 99)/1e6, percentile(res.ResumeLatency, 50)/1e6, percentile(res.ResumeLatency, 99)/1e6)
	return sb.Close()
}

// toolStarted checks that the run after a decision succeeded and its
// deploy started.
func toolStarted(sb *serveBench, ev map[string]any) error {
	if o := outcome(ev); o != "success" {
		return fmt.Errorf("serve: the run after a decision ended with %s, want success", o)
	}
	if len(sb.starts) != 1 {
		return errors.New("serve: the approved deploy did not start")
	}
	return nil
}

// percentile returns the p-th percentile of xs (nearest rank), or 0.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// serveRows are the serve workload's rows of the table.
func (s *serveResult) rows() []row {
	// The in-process Runner is the floor column; serve the toolrun column.
	pair := func(x samples) samples { return samples{"hand": x["inprocess"], "toolrun": x["serve"]} }
	w := fmt.Sprintf("serve: %s concurrent runs of %d turns (hand: a Runner in process; toolrun: the same runs through serve over loopback, AG-UI read to the end)", thousands(s.Runs), s.Turns)
	wall := measureRow(w, "wall time of all the runs", pair(s.Wall), millis)
	cpu := measureRow(w, "harness CPU per run (the server's included)", pair(s.CPU), micros)
	wall.official, cpu.official, wall.vsOfficial, cpu.vsOfficial = na, na, "—", "—"
	rows := []row{wall, cpu}
	if s.Many > 0 {
		w := fmt.Sprintf("serve: %s concurrent runs of 1 turn, %d rounds, a model that answers at once (hand: the same runs through a Runner in process, default options, no Store; toolrun: through serve over loopback, its State and events in SQLite (WAL, synchronous FULL, one connection), one token whose run cap lets all in, AG-UI read to the end)", thousands(s.Many), s.ManyRounds)
		wall := measureRow(w, "wall time of all the runs", pair(s.ManyWall), millis)
		cpu := measureRow(w, "harness CPU per run (the server's included)", pair(s.ManyCPU), micros)
		wall.official, cpu.official, wall.vsOfficial, cpu.vsOfficial = na, na, "—", "—"
		// Throughput: runs per second of each side, from the median wall time.
		rate := func(x []float64) string {
			if m := median(x); m > 0 {
				return fmt.Sprintf("%.0f runs/s", float64(s.Many)/(m/1e9))
			}
			return na
		}
		tput := row{w, "throughput (runs/s, from the median wall time)", na, rate(s.ManyWall["inprocess"]), rate(s.ManyWall["serve"]), "—", "—", "", "—"}
		rows = append(rows, wall, cpu, tput)
	}
	w = fmt.Sprintf("serve: %s runs awaiting approval (SQLite store)", thousands(s.Pending))
	one := func(measure, v string) row { return row{w, measure, na, na, v, "—", "—", "", "—"} }
	rows = append(rows,
		one("server live heap per pending run", kib(s.HeapPerPending)),
		one("database bytes per pending run", kib(s.DBPerPending)),
		one(fmt.Sprintf("GET /api/pending of all %s: time (median of %d)", thousands(s.Pending+1), len(s.ListTime)), millis(median(s.ListTime))),
		one(fmt.Sprintf("GET /api/pending of all %s: bytes", thousands(s.Pending+1)), kib(float64(s.ListBytes))),
		one(fmt.Sprintf("JSON API decision's response → tool start, p50 / p99 of %d", len(s.APILatency)), millis(percentile(s.APILatency, 50))+" / "+millis(percentile(s.APILatency, 99))),
		one(fmt.Sprintf("AG-UI resume request sent → tool start, p50 / p99 of %d", len(s.ResumeLatency)), millis(percentile(s.ResumeLatency, 50))+" / "+millis(percentile(s.ResumeLatency, 99))),
	)
	return rows
}
