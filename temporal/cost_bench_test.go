package temporal_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"
)

var (
	benchMarkdown = flag.String("bench-md", "", "with BenchmarkCostPerTurn: rewrite the section between the temporal-bench markers of this file (BENCHMARKS.md) with the table")
	costProfile   = flag.String("cost-cpuprofile", "", "with BenchmarkCostPerTurn: write a CPU profile of each case's worker process to this prefix + the case's name + .prof")
)

// costModelEnv, set to a number of turns, makes TestCostModelServer serve
// the fake Messages API of BenchmarkCostPerTurn in this process;
// costToolsEnv, set to a number of tools, makes it call that many.
const (
	costModelEnv = "TOOLRUN_COST_MODEL_TURNS"
	costToolsEnv = "TOOLRUN_COST_MODEL_TOOLS"
)

// costWorkload is a workload of BenchmarkCostPerTurn: how many tools the
// workers have, and how many workers poll the task queue. With one tool,
// each turn calls write_file once; with more, each turn calls two of
// them at once, in turn, with inputs and results of a few hundred bytes,
// as an agent's file and search tools do. With two workers, a turn's
// step and calls go to either, so that a step often finds its run in the
// other worker's state cache rather than its own.
type costWorkload struct {
	tools   int
	workers int
}

func (wl costWorkload) name() string { return fmt.Sprintf("%dtools-%dworkers", wl.tools, wl.workers) }

func (wl costWorkload) String() string {
	return fmt.Sprintf("%d tool%s, %d worker%s", wl.tools, plural(wl.tools), wl.workers, plural(wl.workers))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// costWorkloads are the workloads BenchmarkCostPerTurn measures: the
// smallest, and one as a team deploys it.
var costWorkloads = []costWorkload{{tools: 1, workers: 1}, {tools: 5, workers: 2}}

// costCase is one side of BenchmarkCostPerTurn: runs of turns turns
// each, with or without a Store on the workers.
type costCase struct {
	store bool
	turns int
	runs  int
}

func (cc costCase) name() string {
	if cc.store {
		return fmt.Sprintf("store-%d", cc.turns)
	}
	return fmt.Sprintf("nostore-%d", cc.turns)
}

// costResult is what a costCase measured, per turn.
type costResult struct {
	cpuPerTurn     time.Duration // the worker process's user+system CPU: the worker and its client
	modelPerTurn   time.Duration // the fake Messages API's, in its own process
	historyPerTurn int           // bytes of history events, every execution of each run
	executions     int           // executions of the last run (continue-as-new)
}

// BenchmarkCostPerTurn measures the cost of a turn (a step activity and
// its tool activities) against the dev server, at 10 and at 100 turns a
// run, with and without a Store, for each of costWorkloads, side by side
// in one run: the worker's CPU per turn and the history bytes per turn,
// and the ratio of the 100-turn figure to the 10-turn one, which should
// stay within 1.5. Both sides run the same number of turns (ten runs of
// 10, one of 100), with the default RunOptions (continue-as-new every 20
// turns) but a turn limit past the run.
//
// The worker's CPU is this process's: the workers and their Temporal
// client, which run the workflow's tasks and the activities. The fake
// Messages API runs in a child process, as the real API runs on another
// machine: it decodes the whole conversation of every request, which a
// worker does not pay for, so its CPU is a column of its own. The worker
// still pays for encoding each request, which carries the whole
// conversation. With -cost-cpuprofile, each case writes a CPU profile of
// this process. Name a workload to measure it alone:
// -bench 'CostPerTurn/5tools-2workers'.
//
//	TEMPORAL_ADDRESS=127.0.0.1:7233 go test -run '^$' -bench CostPerTurn -benchtime 1x -bench-md ../BENCHMARKS.md
func BenchmarkCostPerTurn(b *testing.B) {
	c := dialTemporalTB(b)
	cases := []costCase{{false, 10, 10}, {false, 100, 1}, {true, 10, 10}, {true, 100, 1}}
	const (
		head       = "| workload | workers' Store | turns a run | runs | executions a run | worker CPU per turn | history bytes per turn | fake API CPU per turn |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n"
		ratiosHead = "| workload | workers' Store | worker CPU per turn, 100 ÷ 10 turns | history bytes per turn, 100 ÷ 10 turns | both at most 1.5x |\n| --- | --- | --- | --- | --- |\n"
	)
	var t, ratios strings.Builder
	t.WriteString(head)
	ratios.WriteString(ratiosHead)
	measured := 0
	for _, wl := range costWorkloads {
		b.Run(wl.name(), func(b *testing.B) {
			results := make([]costResult, len(cases))
			for b.Loop() {
				for i, cc := range cases {
					results[i] = measureCost(b, c, wl, cc)
				}
			}
			rows, rowRatios := len(t.String()), len(ratios.String())
			defer func() {
				// Each workload's rows, as soon as they are measured.
				b.Logf("\n%s%s\n%s%s", head, t.String()[rows:], ratiosHead, ratios.String()[rowRatios:])
			}()
			for i, cc := range cases {
				r := results[i]
				fmt.Fprintf(&t, "| %s | %s | %d | %d | %d | %.2f ms | %d | %.2f ms |\n", wl, storeName(cc.store), cc.turns, cc.runs, r.executions, ms(r.cpuPerTurn), r.historyPerTurn, ms(r.modelPerTurn))
			}
			for i := 0; i < len(cases); i += 2 {
				short, long := results[i], results[i+1]
				cpu, hist := float64(long.cpuPerTurn)/float64(short.cpuPerTurn), float64(long.historyPerTurn)/float64(short.historyPerTurn)
				within := "✗"
				if cpu <= 1.5 && hist <= 1.5 {
					within = "✓"
				}
				fmt.Fprintf(&ratios, "| %s | %s | %.2fx | %.2fx | %s |\n", wl, storeName(cases[i].store), cpu, hist, within)
			}
			measured++
		})
	}
	if measured == 0 {
		return
	}
	table := t.String() + "\n" + ratios.String()
	b.Logf("\n%s", table)
	if *benchMarkdown != "" {
		if err := writeSection(*benchMarkdown, table); err != nil {
			b.Fatal(err)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func storeName(store bool) string {
	if store {
		return "with a Store (filestore.Store)"
	}
	return "no Store"
}

// measureCost runs cc's runs one after another on a worker of its own,
// against a fake Messages API in a child process, and returns the cost
// per turn.
func measureCost(b *testing.B, c client.Client, wl costWorkload, cc costCase) costResult {
	b.Helper()
	queue := newQueue("toolrun-cost")
	opts := &toolrun.Options{Logger: discard()}
	if cc.store {
		opts.Store = &filestore.Store{Dir: b.TempDir()}
	}
	model, modelCPU := startCostModel(b, cc.turns, wl.tools)
	if *costProfile != "" {
		f, err := os.Create(*costProfile + wl.name() + "-" + cc.name() + ".prof")
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	var calls counter
	tools := []toolrun.Tool{writeTool(&calls, nil)}
	if wl.tools > 1 {
		tools = costTools(wl.tools)
	}
	var total costResult
	for range cc.runs {
		// Each worker has activities of its own, so a state cache of its
		// own, as workers in processes of their own have.
		var workers []worker.Worker
		for range wl.workers {
			w := temporal.NewWorker(c, queue, temporal.NewActivities(model, tools, opts), worker.Options{WorkerStopTimeout: 5 * time.Second})
			if err := w.Start(); err != nil {
				b.Fatal(err)
			}
			workers = append(workers, w)
		}
		ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
		before := cpuTime(b)
		run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: newQueue(queue), TaskQueue: queue}, userParams("go"), &temporal.RunOptions{MaxTurns: cc.turns + 1})
		if err != nil {
			b.Fatal(err)
		}
		first := run.GetRunID() // Get moves it to the last execution's
		var out temporal.Outcome
		if err := run.Get(ctx, &out); err != nil {
			b.Fatal(err)
		}
		total.cpuPerTurn += cpuTime(b) - before
		if out.StopReason != toolrun.StopEndTurn || out.State.Turns != cc.turns {
			b.Fatalf("got stop %q after %d turns, want end_turn after %d", out.StopReason, out.State.Turns, cc.turns)
		}
		n, executions := historyOf(ctx, b, c, run.GetID(), first)
		total.historyPerTurn += n
		total.executions = executions
		cancel()
		for _, w := range workers {
			w.Stop()
		}
	}
	n := cc.turns * cc.runs
	return costResult{cpuPerTurn: total.cpuPerTurn / time.Duration(n), modelPerTurn: modelCPU() / time.Duration(n), historyPerTurn: total.historyPerTurn / n, executions: total.executions}
}

// startCostModel starts the fake Messages API of a costCase of turns
// turns a run in a child process (TestCostModelServer), and returns a
// client for it and a func that stops it and returns its CPU time. The
// child fails, and so does the benchmark, if it rejected a request.
func startCostModel(b *testing.B, turns, tools int) (anthropic.Client, func() time.Duration) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCostModelServer$", "-test.count=1")
	cmd.Env = append(os.Environ(), costModelEnv+"="+strconv.Itoa(turns), costToolsEnv+"="+strconv.Itoa(tools))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "url ")
	if err != nil || !ok {
		cmd.Process.Kill()
		cmd.Wait()
		b.Fatalf("the fake Messages API did not start: %q, %v", line, err)
	}
	stopped := false
	stop := func() time.Duration {
		if stopped {
			return 0
		}
		stopped = true
		stdin.Close()
		rest, _ := io.ReadAll(out)
		if err := cmd.Wait(); err != nil {
			b.Fatalf("the fake Messages API failed: %v\n%s", err, rest)
		}
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	b.Cleanup(func() { stop() })
	return anthropic.NewClient(option.WithBaseURL(url), option.WithAPIKey(toolruntest.TestAPIKey)), stop
}

// TestCostModelServer is not a test: with costModelEnv set, it is the
// child process of BenchmarkCostPerTurn that serves the fake Messages API,
// and it prints the server's URL and serves until its standard input
// closes. Each run's n-th request gets a call of write_file (with
// costToolsEnv over 1, calls of two of costTools), the last turn's the
// text "Done.": the turn is known by the length of the conversation, so
// that one server serves every run of a case.
func TestCostModelServer(t *testing.T) {
	turns, err := strconv.Atoi(os.Getenv(costModelEnv))
	if err != nil {
		t.Skip("the child process of BenchmarkCostPerTurn; runs only with " + costModelEnv + " set")
	}
	tools, _ := strconv.Atoi(os.Getenv(costToolsEnv))
	model := toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		turn := len(r.Conversation) / 2 // user, then assistant and tool results a turn
		if turn >= turns-1 {
			return toolruntest.Message(toolruntest.Text("Done."))
		}
		if tools > 1 {
			a, b := turn%tools, (turn+1)%tools
			return toolruntest.Message(
				toolruntest.Text(fmt.Sprintf("Turn %d: I will use %s and %s next, to look at the project's files.", turn, costToolName(a), costToolName(b))),
				toolruntest.ToolUse(fmt.Sprintf("t%da", turn), costToolName(a), costIn{Path: fmt.Sprintf("/src/pkg%d/file%d.go", turn, a), Query: strings.Repeat("q", 80)}),
				toolruntest.ToolUse(fmt.Sprintf("t%db", turn), costToolName(b), costIn{Path: fmt.Sprintf("/src/pkg%d/file%d.go", turn, b), Query: strings.Repeat("q", 80)}),
			)
		}
		return toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", turn), "write_file", writeIn{Path: fmt.Sprintf("/%d", turn)}))
	}})
	fmt.Printf("url %s\n", model.URL)
	io.Copy(io.Discard, os.Stdin)
}

// executionHistory returns the bytes of the event history of the
// execution runID of workflow id, and the run id of the execution it
// continued as new with, if any.
func executionHistory(ctx context.Context, t testing.TB, c client.Client, id, runID string) (n int, next string) {
	it := c.GetWorkflowHistory(ctx, id, runID, false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		n += proto.Size(e)
		if a := e.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			next = a.GetNewExecutionRunId()
		}
	}
	return n, next
}

// cpuTime returns this process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeSection replaces the text between the temporal-bench markers of
// the file at path with table.
func writeSection(path, table string) error {
	const begin, end = "<!-- temporal-bench:begin -->", "<!-- temporal-bench:end -->"
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s section", path, begin, end)
	}
	section := begin + "\n" + table + "\nGenerated by `TEMPORAL_ADDRESS=… go test -run '^$' -bench CostPerTurn -benchtime 1x -bench-md ../BENCHMARKS.md` in temporal/, against `temporal server start-dev` on the same machine; default RunOptions (continue-as-new by the history's size: past RunOptions.ContinueAsNewBytes, 1 MiB, and ContinueAsNewFactor times the state), the workers' state cache on (the default); the workload of 1 tool makes one call a turn on one worker, the one of 5 tools two calls a turn (inputs and results of a few hundred bytes) on two workers of the task queue, each with a state cache of its own, so that about half the steps miss. Worker CPU is the worker process's (the worker and its Temporal client, which runs the workflow's tasks too); the fake Messages API runs in a child process of its own, as the real API runs elsewhere, and its CPU, which reads each request's whole conversation, is the last column. Without a Store the workflow holds the whole state and each step's input and result carry only the state without its history and what the step added (the input of each continue-as-new carries the whole state; a step that misses asks the workflow for what its cache does not hold); with a Store the workflow holds a key, the worker writes the state each turn, and a step that misses reads it. The machine was shared with other work while it ran.\n"
	var out bytes.Buffer
	out.Write(old[:i])
	out.WriteString(section)
	out.Write(old[j:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// dialTemporalTB dials the dev server for a benchmark, as dialTemporal
// does for a test: it skips when none runs, and fails with CI set.
func dialTemporalTB(b *testing.B) client.Client {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: temporalAddress(), Logger: nopLogger})
	if err == nil {
		if _, err = c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			c.Close()
		}
	}
	if err != nil {
		msg := fmt.Sprintf("missing component: Temporal dev server; none at %s (%v); start one with `temporal server start-dev` or set TEMPORAL_ADDRESS", temporalAddress(), err)
		if os.Getenv("CI") != "" {
			b.Fatal(msg)
		}
		b.Skip(msg + "; skipped because CI is not set")
	}
	b.Cleanup(c.Close)
	return c
}

// costIn is the input of costTools.
type costIn struct {
	Path  string `json:"path"`
	Query string `json:"query"`
}

func costToolName(i int) string { return fmt.Sprintf("tool%d", i) }

// costTools returns n idempotent tools whose results are a few hundred
// bytes of text, as a file reader's or a search's are.
func costTools(n int) []toolrun.Tool {
	var tools []toolrun.Tool
	for i := range n {
		t := toolrun.NewTool(costToolName(i), fmt.Sprintf("Tool %d of the workload: reads a file and searches it", i), func(ctx context.Context, in costIn) (string, error) {
			return fmt.Sprintf("%s: %s", in.Path, strings.Repeat("line of the file that matched the query; ", 8)), nil
		})
		t.Idempotent = true
		tools = append(tools, t)
	}
	return tools
}
