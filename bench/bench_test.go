package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/toolrun/toolrun"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// TestMain lets the test binary serve as the harness's child processes: the
// fake server, and the phases measured in a process of their own.
func TestMain(m *testing.M) {
	if code, ok := childMain(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func benchServer(tb testing.TB) *fakeServer {
	tb.Helper()
	s, err := startServer(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// BenchmarkHistory runs conversations of 10, 100 and 500 turns (one
// trivial tool call a turn) through each runner. cpu-µs/turn is the
// process's CPU time per turn; the fake server runs in a child process, so
// it is the client's alone. Profile one runner with, say,
//
//	go test ./bench -run '^$' -bench 'History/turns=500/toolrun' -cpuprofile cpu.out
//
// The harness (go run ./bench) runs the same workloads interleaved and
// prints ratios; these benchmarks run one after another.
func BenchmarkHistory(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		for _, ct := range contenders {
			b.Run(fmt.Sprintf("turns=%d/%s", n, ct.name), func(b *testing.B) {
				srv := benchServer(b)
				run := ct.setup(newClient(srv.URL), []toolSpec{echoTool()})
				ctx := context.Background()
				p := prompt("echo", n)
				if _, err := run(ctx, p); err != nil {
					b.Fatal(err)
				}
				m := startMeter()
				runs := 0
				for b.Loop() {
					turns, err := run(ctx, p)
					if err != nil || turns != n {
						b.Fatalf("run = %d turns, %v; want %d turns", turns, err, n)
					}
					runs++
				}
				u := m.stop()
				t := float64(runs * n)
				b.ReportMetric(float64(u.CPU.Microseconds())/t, "cpu-µs/turn")
				b.ReportMetric(float64(u.Mallocs)/t, "allocs/turn")
				b.ReportMetric(float64(u.Bytes)/t, "B/turn")
			})
		}
	}
}

// BenchmarkThread runs a conversation of 300 turns through toolrun with
// its defaults, on a message thread, for the profile BENCHMARKS.md quotes of where a thread
// turn's CPU goes:
//
//	go test ./bench -run '^$' -bench 'Thread' -benchtime 2x -cpuprofile cpu.out
func BenchmarkThread(b *testing.B) {
	const n = 300
	srv := benchServer(b)
	opts := toolrunOptions()
	tools := toolrunTools([]toolSpec{echoTool()})
	c := newClient(srv.URL)
	ctx := context.Background()
	m := startMeter()
	runs := 0
	for b.Loop() {
		res, err := toolrun.New(c, newParams(prompt("echo", n)), tools, opts).Run(ctx)
		if err != nil || res.Turns != n {
			b.Fatalf("run = %d turns, %v; want %d turns", res.Turns, err, n)
		}
		runs++
	}
	u := m.stop()
	b.ReportMetric(float64(u.CPU.Microseconds())/float64(runs*n), "cpu-µs/turn")
}

// BenchmarkParallelTools runs a turn that calls a 100 ms tool 8 times.
// turn-ms is the time from the response with the calls arriving to the
// request with their results going out.
func BenchmarkParallelTools(b *testing.B) {
	for _, ct := range contenders {
		b.Run(ct.name, func(b *testing.B) {
			srv := benchServer(b)
			clock := &requestClock{}
			run := ct.setup(newClient(srv.URL, option.WithMiddleware(clock.middleware)), []toolSpec{sleepTool(100 * time.Millisecond)})
			ctx := context.Background()
			p := prompt("parallel", 8)
			var turn time.Duration
			runs := 0
			for b.Loop() {
				clock.reset()
				if turns, err := run(ctx, p); err != nil || turns != 2 {
					b.Fatalf("run = %d turns, %v; want 2 turns", turns, err)
				}
				turn += clock.sent[1].Sub(clock.answered[0])
				runs++
			}
			b.ReportMetric(float64(turn.Microseconds())/float64(runs)/1e3, "turn-ms")
		})
	}
}

// BenchmarkSuspended holds every run it makes awaiting approval and reports
// the live heap each adds. The official runner cannot suspend a run.
func BenchmarkSuspended(b *testing.B) {
	for _, name := range []string{"hand", "toolrun"} {
		b.Run(name, func(b *testing.B) {
			srv := benchServer(b)
			suspend, err := suspender(name, newClient(srv.URL))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := suspend(); err != nil {
				b.Fatal(err)
			}
			httpClient.CloseIdleConnections()
			base := liveHeap()
			var held []any
			for b.Loop() {
				h, err := suspend()
				if err != nil {
					b.Fatal(err)
				}
				held = append(held, h)
			}
			httpClient.CloseIdleConnections()
			b.ReportMetric(float64(liveHeap()-base)/float64(len(held)), "heap-B/run")
			runtime.KeepAlive(held)
		})
	}
}

// BenchmarkConcurrent runs 5-turn conversations from 1,000 goroutines and
// reports turns/s.
func BenchmarkConcurrent(b *testing.B) {
	for _, ct := range contenders {
		b.Run(ct.name, func(b *testing.B) {
			srv := benchServer(b)
			run := ct.setup(newClient(srv.URL), []toolSpec{echoTool()})
			p := prompt("echo", 5)
			b.SetParallelism(max(1, 1000/runtime.GOMAXPROCS(0)))
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if turns, err := run(context.Background(), p); err != nil || turns != 5 {
						b.Errorf("run = %d turns, %v; want 5 turns", turns, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*5)/time.Since(start).Seconds(), "turns/s")
		})
	}
}

// TestHarness runs the whole harness on tiny workloads, so that CI keeps it
// working. It checks that every row is there, never a figure: timings say
// nothing on a shared CI machine.
func TestHarness(t *testing.T) {
	cfg := config{
		workloads:    map[string]bool{"history": true, "pause": true, "parallel": true, "wide": true, "suspended": true, "concurrent": true, "serve": true, "inbox": true},
		historySizes: []int{2, 4}, historyTurns: 4, historyRounds: []int{1, 1},
		parallelTools: 4, toolSleep: 10 * time.Millisecond, parallelRounds: 1,
		wideTools: 100, wideSleep: 25 * time.Millisecond, wideRounds: 1,
		pauses: 20, pauseRounds: 1,
		suspendedRuns:  20,
		concurrentRuns: 10, concurrentTurns: 2, concurrentRounds: 1,
		serveRuns: 4, serveTurns: 2, serveRounds: 2, servePending: 20, serveListRounds: 1, serveDecisions: 3,
		inboxPending: 20, inboxRounds: 1,
		profiles: "all", profileConversations: 2,
	}
	out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := os.WriteFile(out, []byte("# Benchmarks\n\n"+beginMarker+"\nold\n"+endMarker+"\n\n## Analysis\n\nkept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, progress bytes.Buffer
	if err := harness(context.Background(), cfg, "-test", out, &stdout, &progress); err != nil {
		t.Fatalf("harness: %v\nprogress:\n%s", err, progress.String())
	}
	report := stdout.String()
	table, profiles, _ := strings.Cut(report, "\n**Where the cost sits")
	for _, w := range []string{"client CPU per turn, history of 2 turns", "live heap per held run", "10 concurrent runs of 2 turns, client CPU per turn"} {
		if !strings.Contains(profiles, w) {
			t.Errorf("the report has no profile %q:\n%s", w, report)
		}
	}
	for _, w := range []string{"| area | hand (floor) | toolrun | toolrun − hand |", "| all |"} {
		if !strings.Contains(profiles, w) {
			t.Errorf("the profiles have no row %q:\n%s", w, profiles)
		}
	}
	want := []string{
		"| history of 2 turns | client CPU per turn |", "| allocations per turn |", "| bytes allocated per turn |",
		"| history of 4 turns | client CPU per turn |",
		"| growth 2 → 4 turns (history ×2) | CPU per turn grows |", "| allocations per turn grow |", "| bytes allocated per turn grow |",
		"| 4 tools of 10ms in one turn | turn wall time: response in → results out |", "| run wall time: both requests and the tools |",
		"| 100 tools of 25ms in one turn, default options | turn wall time: response in → results out |",
		"| 20 pause_turns in a row, both on a thread (toolrun: defaults; official: DisableThread false) | request bytes in all |", "| largest request body |",
		"| official with DisableThread: request bytes in all |", "| official with DisableThread: largest request body |",
		"| 20 runs awaiting approval | live heap per run, run held in memory |", "| live heap per run, only its state as JSON |",
		"| state JSON per run |", "| process RSS, runs held |",
		"| 10 concurrent runs of 2 turns | throughput (turns/s) |", "| peak RSS |", "| client CPU per turn |",
		"| fake server CPU per turn (its process, not the client's) |",
		"| toolrun with Options.NoThread and NoCache (the hand loop's plain requests): throughput (turns/s) |",
		"| toolrun with Options.NoThread and NoCache: fake server CPU per turn |",
		"| serve: 4 concurrent runs of 2 turns (hand: a Runner in process; toolrun: the same runs through serve over loopback, AG-UI read to the end) | wall time of all the runs |",
		"| harness CPU per run (the server's included) |",
		"| serve: 20 runs awaiting approval (SQLite store) | server live heap per pending run |", "| database bytes per pending run |",
		"| GET /api/pending of all 21: time (median of 1) |", "| GET /api/pending of all 21: bytes |",
		"| JSON API decision's response → tool start, p50 / p99 of 3 |", "| AG-UI resume request sent → tool start, p50 / p99 of 3 |",
		"| inbox: 20 pending calls in headless Chromium | first rows: navigation start → the first page of calls listed (median of ",
		"| decision: Approve pressed → acknowledged on the page (median of ",
	}
	for _, w := range want {
		if !strings.Contains(table, w) {
			t.Errorf("the table has no row %q:\n%s", w, table)
		}
	}
	if got, want := strings.Count(table, "\n| "), 2+2*3+1*3+4+2+1+4+6+8+2; got != want {
		t.Errorf("the table has %d lines, want %d:\n%s", got, want, table)
	}
	// With Chromium there, the inbox is measured, not skipped (without
	// it, CI fails the harness instead).
	if chromiumBinary() != "" && strings.Contains(table, "skipped:") {
		t.Errorf("Chromium is installed, but the inbox rows say they were skipped:\n%s", table)
	}
	for _, bad := range []string{"NaN", "Inf"} {
		if strings.Contains(table, bad) {
			t.Errorf("the table has %s:\n%s", bad, table)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, report) || strings.Contains(s, "\nold\n") || !strings.HasSuffix(s, "## Analysis\n\nkept\n") {
		t.Errorf("the report was not written between the markers, the rest kept:\n%s", s)
	}
}

// BenchmarkServe runs the serve workload's concurrent runs (200 of 5
// turns, or 1,000 of 1 turn) through the server alone and reports the
// process's CPU per run, the server's side included. Profile the server
// with, say,
//
//	go test ./bench -run '^$' -bench 'Serve/runs=200' -benchtime 5x -cpuprofile cpu.out
func BenchmarkServe(b *testing.B) {
	for _, c := range []struct{ runs, turns int }{{200, 5}, {1000, 1}} {
		b.Run(fmt.Sprintf("runs=%d/turns=%d", c.runs, c.turns), func(b *testing.B) {
			srv := benchServer(b)
			ctx := context.Background()
			sb, err := newServeBench(ctx, srv.URL, c.runs)
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close()
			p := prompt("echo", c.turns)
			one := func() error {
				ev, err := sb.run(ctx, sb.newThread(), p, nil, nil)
				if err == nil && outcome(ev) != "success" {
					err = fmt.Errorf("the run ended with %s, want success", outcome(ev))
				}
				return err
			}
			if err := one(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			m := startMeter()
			for range b.N {
				var wg sync.WaitGroup
				errs := make([]error, c.runs)
				for i := range c.runs {
					wg.Go(func() { errs[i] = one() })
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					b.Fatal(err)
				}
			}
			u := m.stop()
			b.ReportMetric(float64(u.CPU.Microseconds())/float64(b.N*c.runs), "cpu-µs/run")
			b.ReportMetric(float64(b.N*c.runs)/u.Wall.Seconds(), "runs/s")
		})
	}
}

// TestStalledWorkload runs the stalled workload on a small run, so that
// CI keeps it working; it checks the rows, never a figure.
func TestStalledWorkload(t *testing.T) {
	cfg := config{stalledReaders: 3, stalledBytes: 256 << 10, stalledRounds: 2, stalledPlainRuns: 2}
	var progress bytes.Buffer
	res, err := runStalled(context.Background(), cfg, &progress)
	if err != nil {
		t.Fatalf("stalled: %v\nprogress:\n%s", err, progress.String())
	}
	var table bytes.Buffer
	writeTable(&table, res.rows())
	for _, w := range []string{
		"| serve: memory with stalled readers (hand: no stalled reader; toolrun: 3 clients that GET /runs/{run}/events of a run with a 0.2 MiB answer and never read;",
		"| server live heap after a collection |", "| server live heap per stalled reader (toolrun − hand, ÷ readers) |",
		"| process RSS, freed memory returned to the OS (the harness's, the server's included) |",
		"| plain run's latency (median of 2 one after another) |", "| server live heap once the stalled readers have gone |",
	} {
		if !strings.Contains(table.String(), w) {
			t.Errorf("the table has no row %q:\n%s", w, table.String())
		}
	}
	for _, bad := range []string{"NaN", "Inf"} {
		if strings.Contains(table.String(), bad) {
			t.Errorf("the table has %s:\n%s", bad, table.String())
		}
	}
}
