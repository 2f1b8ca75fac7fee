package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// results holds the samples of every workload that ran.
type results struct {
	History    []historyResult
	Wire       *wireResult
	Parallel   *parallelResult
	Wide       *parallelResult
	Stores     *storesResult
	Pause      *pauseResult
	Suspended  map[string]suspendedResult
	Concurrent *concurrentSamples
	Serve      *serveResult
	Stalled    *stalledResult
	Inbox      *inboxResult
}

// row is one line of the table: a measure of a workload for each runner,
// toolrun's ratio to the other two, and the target, if any.
type row struct {
	workload, measure       string
	official, hand, toolrun string
	vsHand, vsOfficial      string
	target, met             string
}

const na = "N/A"

func ratio(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// paired returns the median, over the rounds, of toolrun's value divided by
// other's in the same round, and the lowest and highest of those ratios: the
// runners of a round ran one after another, so they met the same load.
func paired(s samples, other string) (med, lo, hi float64) {
	t, o := s["toolrun"], s[other]
	var r []float64
	for i := range min(len(t), len(o)) {
		if o[i] != 0 {
			r = append(r, t[i]/o[i])
		}
	}
	if len(r) == 0 {
		return 0, 0, 0
	}
	return median(r), slices.Min(r), slices.Max(r)
}

// pairedCell formats paired: "1.04× (0.97–1.12)", the range left out for a
// single round.
func pairedCell(s samples, other string) string {
	med, lo, hi := paired(s, other)
	if med == 0 {
		return "—"
	}
	if len(s["toolrun"]) < 2 {
		return fmt.Sprintf("%.2f×", med)
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", med, lo, hi)
}

func check(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

func micros(ns float64) string { return fmt.Sprintf("%.1f µs", ns/1e3) }
func millis(ns float64) string { return fmt.Sprintf("%.1f ms", ns/1e6) }
func kib(b float64) string     { return fmt.Sprintf("%.1f KiB", b/1024) }
func mib(b float64) string     { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }
func count(n float64) string   { return fmt.Sprintf("%.0f", n) }

// thousands formats n with commas: 10,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// measureRow is a row of medians by runner and toolrun's paired ratios.
func measureRow(workload, measure string, s samples, format func(float64) string) row {
	cell := func(name string) string {
		if len(s[name]) == 0 {
			return na
		}
		return format(median(s[name]))
	}
	r := row{workload: workload, measure: measure, official: cell("official"), hand: cell("hand"), toolrun: cell("toolrun"),
		vsHand: pairedCell(s, "hand"), vsOfficial: pairedCell(s, "official"), met: "—"}
	return r
}

// plainRow is a row of the plain toolrun's samples of s (see
// plainContender), compared with the others' of the same rounds.
func plainRow(workload, measure string, s samples, format func(float64) string) row {
	p := samples{"toolrun": s["toolrun-plain"], "hand": s["hand"], "official": s["official"]}
	r := measureRow(workload, measure, p, format)
	r.official, r.hand = na, na
	return r
}

// rows builds the table's rows from res and the targets.
func (res *results) rows(cfg config) []row {
	var rows []row
	for _, h := range res.History {
		w := fmt.Sprintf("history of %d turns", h.Size)
		cpu := measureRow(w, "client CPU per turn", h.CPU, micros)
		vsHand, _, _ := paired(h.CPU, "hand")
		limit := historyLimit(h.Size)
		cpu.target = fmt.Sprintf("≤ %.2f× hand", limit)
		cpu.met = check(vsHand <= limit)
		rows = append(rows, cpu,
			measureRow(w, "allocations per turn", h.Allocs, count),
			measureRow(w, "bytes allocated per turn", h.Bytes, kib))
	}
	if len(res.History) > 1 {
		first := res.History[0]
		for _, last := range res.History[1:] {
			grow := float64(last.Size) / float64(first.Size)
			w := fmt.Sprintf("growth %d → %d turns (history ×%.0f)", first.Size, last.Size, grow)
			for _, m := range []struct {
				measure  string
				from, to samples
			}{{"CPU per turn grows", first.CPU, last.CPU}, {"allocations per turn grow", first.Allocs, last.Allocs}, {"bytes allocated per turn grow", first.Bytes, last.Bytes}} {
				g := func(name string) float64 { return median(m.to[name]) / median(m.from[name]) }
				rows = append(rows, row{w, m.measure,
					fmt.Sprintf("×%.1f", g("official")), fmt.Sprintf("×%.1f", g("hand")), fmt.Sprintf("×%.1f", g("toolrun")),
					ratio(g("toolrun"), g("hand")), ratio(g("toolrun"), g("official")),
					fmt.Sprintf("toolrun ≤ ×%.0f", growLimit(grow)), check(g("toolrun") <= growLimit(grow))})
			}
		}
	}
	if w := res.Wire; w != nil {
		rows = append(rows, w.rows()...)
	}
	if p := res.Pause; p != nil {
		rows = append(rows, p.rows()...)
	}
	if p := res.Parallel; p != nil {
		w := fmt.Sprintf("%d tools of %v in one turn", cfg.parallelTools, cfg.toolSleep)
		tool := float64(cfg.toolSleep)
		turn := measureRow(w, "turn wall time: response in → results out", p.Turn, func(d float64) string {
			return fmt.Sprintf("%s (%.3f× tool)", millis(d), d/tool)
		})
		turn.target = "toolrun ≤ " + millis(1.1*tool) + " (1.1× the tool)"
		turn.met = check(median(p.Turn["toolrun"]) <= 1.1*tool)
		rows = append(rows, turn, measureRow(w, "run wall time: both requests and the tools", p.Run, millis))
	}
	if p := res.Wide; p != nil {
		w := fmt.Sprintf("%d tools of %v in one turn, default options", cfg.wideTools, cfg.wideSleep)
		turn := measureRow(w, "turn wall time: response in → results out", p.Turn, millis)
		turn.target = "toolrun ≤ 1.20× official"
		if r, _, _ := paired(p.Turn, "official"); r > 0 {
			turn.met = check(r <= 1.2)
		}
		rows = append(rows, turn)
	}
	if s := res.Stores; s != nil {
		rows = append(rows, s.rows()...)
	}
	if s := res.Suspended; s != nil {
		hd, t := s["hand"], s["toolrun"]
		per := func(r suspendedResult, b uint64) float64 { return float64(b) / float64(max(r.Runs, 1)) }
		w := thousands(t.Runs) + " runs awaiting approval"
		total := per(t, t.Heap) * 10000
		one := func(measure string, h, tr float64, format func(float64) string) row {
			return row{w, measure, na, format(h), format(tr), ratio(tr, h), "—", "", "—"}
		}
		held := one("live heap per run, run held in memory", per(hd, hd.Heap), per(t, t.Heap), kib)
		held.target = "≤ 1.20× hand; 10,000 runs < 1 GiB"
		held.met = fmt.Sprintf("%s %s (%s for 10,000)", check(per(t, t.Heap) <= 1.2*per(hd, hd.Heap)), check(total < 1<<30), mib(total))
		rows = append(rows, held,
			one("live heap per run, only its state as JSON", per(hd, hd.StateHeap), per(t, t.StateHeap), kib),
			one("state JSON per run", per(hd, hd.StateBytes), per(t, t.StateBytes), kib),
			one("process RSS, runs held", float64(hd.RSS), float64(t.RSS), mib))
	}
	if c := res.Concurrent; c != nil {
		w := fmt.Sprintf("%s concurrent runs of %d turns", thousands(c.Runs), c.TurnsPerRun)
		tp := measureRow(w, "throughput (turns/s)", c.Throughput, count)
		vsHand, _, _ := paired(c.Throughput, "hand")
		tp.target, tp.met = "≥ 1.00× hand", check(vsHand >= 1.00)
		rows = append(rows, tp,
			plainRow(w, "toolrun with Options.NoThread and NoCache (the hand loop's plain requests): throughput (turns/s)", c.Throughput, count),
			measureRow(w, "peak RSS", c.PeakRSS, mib),
			measureRow(w, "client CPU per turn", c.CPU, micros),
			measureRow(w, "fake server CPU per turn (its process, not the client's)", c.ServerCPU, micros),
			plainRow(w, "toolrun with Options.NoThread and NoCache: fake server CPU per turn", c.ServerCPU, micros))
	}
	if s := res.Serve; s != nil {
		rows = append(rows, s.rows()...)
	}
	if s := res.Stalled; s != nil {
		rows = append(rows, s.rows()...)
	}
	if in := res.Inbox; in != nil {
		rows = append(rows, in.rows()...)
	}
	return rows
}

// writeTable writes rows as a markdown table.
func writeTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| workload | measure | official | hand (floor) | toolrun | toolrun ÷ hand | toolrun ÷ official | target | met |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | :---: |")
	prev := ""
	for _, r := range rows {
		wl := r.workload
		if wl == prev {
			wl = ""
		}
		prev = r.workload
		fmt.Fprintf(w, "| %s |\n", strings.Join([]string{wl, r.measure, r.official, r.hand, r.toolrun, r.vsHand, r.vsOfficial, r.target, r.met}, " | "))
	}
}

// growLimit is the target of CPU growth over a history grow times longer:
// ×3 (from 10 to 500 turns, as for any length), since a flat
// turn's cost does not depend on it.
func growLimit(grow float64) float64 { return min(grow, 3) }

// historyLimit is the target of CPU per turn over a history of size turns,
// as a ratio to the hand loop: a long history costs a fraction
// of the hand loop's re-encoding; a short one no more than it.
func historyLimit(size int) float64 {
	if size >= 500 {
		return 0.20
	}
	return 1.00
}
