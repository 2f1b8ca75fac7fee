package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"
)

// allWorkloads are the workloads in the order they run.
var allWorkloads = []string{"history", "wire", "pause", "parallel", "wide", "stores", "suspended", "concurrent", "serve", "stalled", "inbox"}

func main() {
	if code, ok := childMain(); ok {
		os.Exit(code)
	}
	// The benchmarks measure the default configuration: no debug logging.
	os.Unsetenv("ANTHROPIC_LOG")

	run := flag.String("run", strings.Join(allWorkloads, ","), "comma-separated workloads to run: "+strings.Join(allWorkloads, ", "))
	quick := flag.Bool("quick", false, "fewer rounds and runs: a check that the harness works, not figures to quote")
	out := flag.String("o", "", "also write the table into this markdown `file` (between its bench markers), such as BENCHMARKS.md")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of this process to `file`; it covers the history and parallel workloads (the fake server and the other workloads run in child processes)")
	profiles := flag.String("profiles", "unmet", "after the measured rounds, profile where toolrun's cost sits for the targets not met (unmet), for every target (all), or for none (none), into the report")
	heapprofile := flag.String("heapprofile", "", "write a heap profile of toolrun's suspended runs, taken while they are held, to `file`")
	flag.Parse()

	var err error
	cfg := fullConfig()
	if *quick {
		cfg = quickConfig()
	}
	if *heapprofile != "" {
		if cfg.heapProfile, err = filepath.Abs(*heapprofile); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	switch *profiles {
	case "unmet", "all":
		cfg.profiles = *profiles
	case "none":
		cfg.profiles = ""
	default:
		fmt.Fprintf(os.Stderr, "bench: -profiles %q; want unmet, all or none\n", *profiles)
		os.Exit(2)
	}
	cfg.workloads = map[string]bool{}
	for _, w := range strings.Split(*run, ",") {
		w = strings.TrimSpace(w)
		if !contains(allWorkloads, w) {
			fmt.Fprintf(os.Stderr, "bench: unknown workload %q; want some of %s\n", w, strings.Join(allWorkloads, ", "))
			os.Exit(2)
		}
		cfg.workloads[w] = true
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer f.Close()
		defer pprof.StopCPUProfile()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err = harness(ctx, cfg, strings.Join(os.Args[1:], " "), *out, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// harness runs the workloads cfg names, prints the report to stdout and, if
// outFile is set, writes it into that file too. Progress goes to progress.
func harness(ctx context.Context, cfg config, args, outFile string, stdout, progress io.Writer) error {
	start := time.Now()
	loadBefore := loadAverage()
	var res results
	var err error
	if cfg.workloads["history"] {
		if res.History, err = runHistory(ctx, cfg, progress); err != nil {
			return err
		}
	}
	if cfg.workloads["wire"] {
		if res.Wire, err = runWire(ctx, cfg, progress); err != nil {
			return err
		}
	}
	if cfg.workloads["pause"] {
		if res.Pause, err = runPause(ctx, cfg, progress); err != nil {
			return err
		}
	}
	if cfg.workloads["parallel"] {
		if res.Parallel, err = runParallel(ctx, cfg, progress); err != nil {
			return err
		}
	}
	if cfg.workloads["wide"] {
		if res.Wide, err = runWide(ctx, cfg, progress); err != nil {
			return err
		}
	}
	if cfg.workloads["stores"] {
		if res.Stores, err = runStores(ctx, cfg.storeRounds, progress); err != nil {
			return err
		}
	}
	if cfg.workloads["suspended"] {
		if res.Suspended, err = runSuspended(ctx, cfg, progress); err != nil {
			return err
		}
	}
	if cfg.workloads["concurrent"] {
		if res.Concurrent, err = runConcurrent(ctx, cfg, progress); err != nil {
			return err
		}
	}
	if cfg.workloads["serve"] {
		if res.Serve, err = runServe(ctx, cfg, progress); err != nil {
			return err
		}
	}
	if cfg.workloads["stalled"] {
		if res.Stalled, err = runStalled(ctx, cfg, progress); err != nil {
			return err
		}
	}
	if cfg.workloads["inbox"] {
		if res.Inbox, err = runInbox(ctx, cfg, progress); err != nil {
			return err
		}
	}

	var b bytes.Buffer
	command := "go run ./bench"
	if args != "" {
		command += " " + args
	}
	fmt.Fprintf(&b, "Command: `%s` (from the repository root)  \n", command)
	fmt.Fprintf(&b, "Date: %s, took %v  \n", start.UTC().Format("2006-01-02 15:04 MST"), time.Since(start).Round(time.Second))
	fmt.Fprintf(&b, "Machine: %s  \n", machine())
	fmt.Fprintf(&b, "Load average (1 min) before and after: %s, %s  \n", loadBefore, loadAverage())
	var hr []string
	for i, n := range cfg.historySizes {
		hr = append(hr, fmt.Sprintf("%d at %d turns", cfg.historyRounds[i], n))
	}
	fmt.Fprintf(&b, "Rounds (medians of): history %s; conversation %d; parallel %d; concurrent %d; serve %d; suspended runs measured once\n\n",
		strings.Join(hr, ", "), cfg.wireRounds, cfg.parallelRounds, cfg.concurrentRounds, cfg.serveRounds)
	writeTable(&b, res.rows(cfg))
	reports, err := res.profile(ctx, cfg, progress)
	if err != nil {
		return err
	}
	for _, pr := range reports {
		pr.write(&b)
	}
	if _, err := stdout.Write(b.Bytes()); err != nil {
		return err
	}
	if outFile != "" {
		return writeInto(outFile, b.Bytes())
	}
	return nil
}

// The harness writes its report between these markers of the output file,
// leaving the rest of the file (the method, the analysis) as it was.
const (
	beginMarker = "<!-- bench: begin generated report; `go run ./bench -o BENCHMARKS.md` rewrites it -->"
	endMarker   = "<!-- bench: end generated report -->"
)

func writeInto(path string, report []byte) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	section := beginMarker + "\n\n" + string(report) + "\n" + endMarker
	s := string(old)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i >= 0 && j > i {
		s = s[:i] + section + s[j+len(endMarker):]
	} else {
		s = "# Benchmarks\n\n" + section + "\n" + s
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// profile takes, after the measured rounds, a profile of each workload
// whose target the results did not meet (every one with cfg.profiles
// "all"), for the report to show where toolrun's remaining cost sits.
func (res *results) profile(ctx context.Context, cfg config, progress io.Writer) ([]*profileReport, error) {
	all := cfg.profiles == "all"
	if cfg.profiles == "" {
		return nil, nil
	}
	var out []*profileReport
	for _, h := range res.History {
		vsHand, _, _ := paired(h.CPU, "hand")
		if !all && vsHand <= historyLimit(h.Size) {
			continue
		}
		fmt.Fprintf(progress, "profiling history %d turns\n", h.Size)
		pr, err := profileHistory(ctx, h.Size, max(1, cfg.profileConversations*10/h.Size))
		if err != nil {
			return nil, err
		}
		out = append(out, pr)
		if all {
			break
		}
	}
	if s := res.Suspended; s != nil {
		hd, t := s["hand"], s["toolrun"]
		if all || float64(t.Heap)/float64(max(t.Runs, 1)) > 1.2*float64(hd.Heap)/float64(max(hd.Runs, 1)) {
			fmt.Fprintln(progress, "profiling suspended runs")
			pr, err := profileSuspended(ctx, cfg)
			if err != nil {
				return nil, err
			}
			out = append(out, pr)
		}
	}
	if c := res.Concurrent; c != nil {
		if vsHand, _, _ := paired(c.Throughput, "hand"); all || vsHand < 1 {
			fmt.Fprintln(progress, "profiling concurrent runs")
			server, _, _ := paired(c.ServerCPU, "hand")
			pr, err := profileConcurrent(ctx, cfg, server)
			if err != nil {
				return nil, err
			}
			out = append(out, pr)
		}
	}
	return out, nil
}
