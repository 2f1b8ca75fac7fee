package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/sqlitestore"
)

// The stores workload: one turn of n calls (storeCalls, 100 and 400), run
// by toolrun with no Store, with a filestore.Store and with sqlitestore, each
// in a fresh temporary directory on the disk of os.TempDir, beside the
// floor: one durable write per call (the call's input and result,
// appended to a file and synced), on the same disk. Each is timed whole,
// the store's close included (see run), and the bytes it writes are its write syscalls (wchar in /proc/self/io)
// less those of the run with no Store (its requests). The target: 4 times
// the calls cost at most 4.5 times the time and the bytes, with either
// store, as a save that writes what a call added (and not the whole turn
// again) costs.

// storeCalls are the turn sizes of the stores workload.
var storeCalls = []int{100, 400}

// storeKinds are the ways the stores workload saves a run, in the order
// of its rows.
var storeKinds = []string{"none", "file", "sqlite", "floor"}

// storesResult is, for each turn size, the wall time and bytes written of
// each way of saving, by kind.
type storesResult struct {
	Rounds int
	Time   map[int]samples
	Bytes  map[int]samples
}

// storeResultText is a call's result: 200 bytes, as a small tool's.
var storeResultText = strings.Repeat("r", 200)

// runStores runs the stores workload, rounds times each.
func runStores(ctx context.Context, rounds int, progress io.Writer) (*storesResult, error) {
	srv, err := startServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	c := newClient(srv.URL)
	tool := toolSpec{name: "sleep", description: "Answers at once.", fn: func(_ context.Context, in toolInput) (string, error) {
		return in.S + storeResultText, nil
	}}
	tpl := driver.NewTemplate(c, toolrunTools([]toolSpec{tool}), toolrunOptions())
	out := &storesResult{Rounds: rounds, Time: map[int]samples{}, Bytes: map[int]samples{}}
	// run runs one turn of n calls saving as kind says, in a directory of
	// its own, and returns its wall time and the bytes it wrote.
	run := func(n int, kind string) (time.Duration, float64, error) {
		dir, err := os.MkdirTemp("", "toolrun-bench-store-")
		if err != nil {
			return 0, 0, err
		}
		defer os.RemoveAll(dir)
		opts := toolrunOptions()
		var db *sqlitestore.Store
		switch kind {
		case "file":
			opts.Store, opts.RunID = &filestore.Store{Dir: dir}, "run"
		case "sqlite":
			if db, err = sqlitestore.Open(filepath.Join(dir, "runs.db")); err != nil {
				return 0, 0, err
			}
			defer db.Close()
			opts.Store, opts.RunID = db, "run"
		}
		w0 := wchar()
		start := time.Now()
		if kind == "floor" {
			err = floorWrites(filepath.Join(dir, "floor"), n)
		} else {
			var res *toolrun.Result
			res, err = driver.NewTemplate(c, toolrunTools([]toolSpec{tool}), opts).New(newParams(prompt("parallel", n))).Run(ctx)
			if err == nil && (res.StopReason != toolrun.StopEndTurn || res.ToolCalls != n) {
				err = fmt.Errorf("stopped with %s after %d calls, want end_turn after %d", res.StopReason, res.ToolCalls, n)
			}
		}
		// SQLite's writes go to its write-ahead log, which a checkpoint
		// copies into the database every 1,000 pages and at the last
		// close: a turn of 100 calls crosses no such mark and one of 400
		// crosses one, so the close is measured too, and each turn pays
		// for its own checkpoint, as a store that goes on running would.
		if db != nil {
			if cerr := db.Close(); err == nil {
				err = cerr
			}
		}
		return time.Since(start), float64(wchar() - w0), err
	}
	// A warm-up run, so that the first measured one does not pay for the
	// connection and the code's first use.
	if _, err := tpl.New(newParams(prompt("parallel", 10))).Run(ctx); err != nil {
		return nil, fmt.Errorf("stores: warm-up: %w", err)
	}
	for _, n := range storeCalls {
		out.Time[n], out.Bytes[n] = samples{}, samples{}
		for round := range rounds {
			// Rotate the kinds, so that none always runs after the same one.
			for i := range storeKinds {
				kind := storeKinds[(i+round)%len(storeKinds)]
				took, wrote, err := run(n, kind)
				if err != nil {
					return nil, fmt.Errorf("stores, %d calls, %s: %w", n, kind, err)
				}
				out.Time[n].add(kind, float64(took))
				out.Bytes[n].add(kind, wrote)
			}
		}
		// The bytes a store writes are its writes less the requests'.
		base := median(out.Bytes[n]["none"])
		for _, kind := range []string{"file", "sqlite"} {
			for i := range out.Bytes[n][kind] {
				out.Bytes[n][kind][i] = max(out.Bytes[n][kind][i]-base, 0)
			}
		}
		for _, kind := range storeKinds {
			fmt.Fprintf(progress, "stores %d calls %-6s %.1f ms, %.1f KiB written (median of %d)\n",
				n, kind, median(out.Time[n][kind])/1e6, median(out.Bytes[n][kind])/1024, rounds)
		}
	}
	return out, srv.Close()
}

// floorWrites makes n durable writes to the file at path, one per call:
// the call's input and result as a store would keep them, appended and
// synced. It is the least a run that saves every call's result can write.
func floorWrites(path string, n int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	for i := range n {
		rec, _ := json.Marshal(map[string]string{"id": fmt.Sprintf("toolu_%d", i), "input": fmt.Sprintf(`{"s":"%d"}`, i), "result": strconv.Itoa(i) + storeResultText})
		if _, err := f.Write(append(rec, '\n')); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return f.Close()
}

// wchar returns the bytes the process has passed to write syscalls so
// far (/proc/self/io), or 0 where that is not known.
func wchar() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// rows returns the workload's rows: for each store, the time and bytes of
// a turn of each size beside no Store and the floor, and how they grow
// from 100 calls to 400.
func (s *storesResult) rows() []row {
	var rows []row
	label := map[string]string{"none": "no Store", "file": "filestore.Store", "sqlite": "sqlitestore", "floor": "floor: one synced append per call"}
	for _, n := range storeCalls {
		w := fmt.Sprintf("one turn of %d calls, saved", n)
		for _, kind := range storeKinds {
			t, b := median(s.Time[n][kind]), median(s.Bytes[n][kind])
			cell := millis(t)
			if kind != "none" {
				cell += ", " + kib(b)
			}
			r := row{workload: w, measure: label[kind] + ": wall time" + map[bool]string{true: "", false: ", bytes written"}[kind == "none"],
				official: na, hand: na, toolrun: cell, vsHand: "—", vsOfficial: "—", met: "—"}
			if kind == "file" || kind == "sqlite" {
				floor := median(s.Time[n]["floor"])
				r.vsHand = fmt.Sprintf("%s the floor's time", ratio(t, floor))
			}
			rows = append(rows, r)
		}
	}
	if len(storeCalls) == 2 {
		a, z := storeCalls[0], storeCalls[1]
		grow := float64(z) / float64(a)
		for _, kind := range []string{"file", "sqlite", "floor", "none"} {
			gt := median(s.Time[z][kind]) / median(s.Time[a][kind])
			r := row{workload: fmt.Sprintf("growth %d → %d calls in one turn (×%.0f)", a, z, grow), measure: label[kind] + ": time, bytes written grow",
				official: na, hand: na, vsHand: "—", vsOfficial: "—", met: "—"}
			if kind == "none" {
				r.toolrun = fmt.Sprintf("×%.1f", gt)
			} else {
				gb := median(s.Bytes[z][kind]) / max(median(s.Bytes[a][kind]), 1)
				r.toolrun = fmt.Sprintf("×%.1f, ×%.1f", gt, gb)
				if kind == "file" || kind == "sqlite" {
					r.target = fmt.Sprintf("≤ ×%.1f both", grow*1.125)
					r.met = check(gt <= grow*1.125 && gb <= grow*1.125)
				}
			}
			rows = append(rows, r)
		}
	}
	return rows
}
