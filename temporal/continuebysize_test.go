package temporal_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// readTool is a tool whose every result is size bytes of text, as a file
// reader's is.
func readTool(size int) toolrun.Tool {
	t := toolrun.NewTool("read_file", "Reads a file", func(ctx context.Context, in costIn) (string, error) {
		return in.Path + ": " + strings.Repeat("x", size), nil
	})
	t.Idempotent = true
	return t
}

// readReplies is a model's script of turns turns, each one call of
// read_file, and a last turn that answers.
func readReplies(turns int) []toolruntest.Reply {
	var replies []toolruntest.Reply
	for i := range turns {
		replies = append(replies, toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("r%d", i), "read_file", costIn{Path: fmt.Sprintf("/%d", i)})))
	}
	return append(replies, toolruntest.Message(toolruntest.Text("Done.")))
}

// runReads runs a conversation of turns turns of read_file calls of size
// bytes each, on a worker with store as its Store (none if nil), with ro,
// and returns its
// workflow id, its first execution's run id, and the bytes of its event
// history over every execution.
func runReads(t *testing.T, c client.Client, turns, size int, store toolrun.Store, ro temporal.RunOptions) (id, firstRun string, bytes, executions int) {
	t.Helper()
	model := toolruntest.New(t, toolruntest.Script(readReplies(turns)...))
	queue := newQueue("toolrun-bysize")
	w := temporal.NewWorker(c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{readTool(size)}, &toolrun.Options{Logger: discard(), Store: store}), worker.Options{WorkerStopTimeout: 5 * time.Second})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	ro.MaxTurns = turns + 2
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &ro)
	if err != nil {
		t.Fatal(err)
	}
	first := run.GetRunID() // Get moves it to the last execution's
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.State.Turns != turns+1 {
		t.Fatalf("got stop %q after %d turns, want end_turn after %d", out.StopReason, out.State.Turns, turns+1)
	}
	bytes, executions = historyOf(ctx, t, c, queue, first)
	return queue, first, bytes, executions
}

// TestContinueAsNewKeepsHistoryPerTurnFlat runs conversations of a short
// and a long run on workers without a Store, and compares the history
// bytes per turn over all of a run's executions, which must stay within
// 1.5 times:
//   - turns that each add 16 KB to the state, of 10 and of 60 turns, with
//     the default RunOptions: a continue-as-new writes the whole state
//     twice, so continuing every so many turns made a long run's bytes per
//     turn grow with its length (at 60 turns, over 1.5 times those at 10);
//   - small turns (100-byte results) of 10 and of 80 turns with
//     RunOptions.ContinueAsNewBytes of 16 KiB, so that an execution's
//     history is soon five times the state and the long run continues as
//     new many times: the continue-as-new events stay within the bound.
func TestContinueAsNewKeepsHistoryPerTurnFlat(t *testing.T) {
	c := dialTemporal(t)
	small := fastRetries
	small.ContinueAsNewBytes = 16 << 10
	tests := []struct {
		name              string
		size              int // bytes of a call's result
		short, long       int // turns of the two runs
		ro                temporal.RunOptions
		minLongExecutions int
	}{
		{name: "large turns, default options", size: 16 << 10, short: 10, long: 60, ro: fastRetries, minLongExecutions: 1},
		{name: "small turns, continued by size", size: 100, short: 10, long: 80, ro: small, minLongExecutions: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, short, _ := runReads(t, c, tt.short, tt.size, nil, tt.ro)
			_, _, long, executions := runReads(t, c, tt.long, tt.size, nil, tt.ro)
			perShort, perLong := float64(short)/float64(tt.short), float64(long)/float64(tt.long)
			t.Logf("history bytes per turn: %.0f at %d turns, %.0f at %d turns (%d executions): %.2fx", perShort, tt.short, perLong, tt.long, executions, perLong/perShort)
			if executions < tt.minLongExecutions {
				t.Errorf("%d executions of the %d-turn run, want %d or more", executions, tt.long, tt.minLongExecutions)
			}
			if perLong > 1.5*perShort {
				t.Errorf("history bytes per turn at %d turns are %.2f times those at %d (%d executions), want at most 1.5", tt.long, perLong/perShort, tt.short, executions)
			}
		})
	}
}

// TestContinueAsNewBySize runs a conversation of small turns with
// RunOptions.ContinueAsNewBytes of 4 KiB, on workers with a Store, so
// that the state the workflow holds is small: the workflow continues as
// new once an execution's history is past 4 KiB, and only then (every
// execution but the last has at least that much history), and the run
// ends as it would in one execution.
func TestContinueAsNewBySize(t *testing.T) {
	c := dialTemporal(t)
	ro := fastRetries
	ro.ContinueAsNewBytes = 4 << 10
	id, first, n, executions := runReads(t, c, 30, 100, &filestore.Store{Dir: t.TempDir()}, ro)
	if executions < 2 {
		t.Fatalf("%d executions (%d bytes of history), want the run continued as new at least once", executions, n)
	}
	ctx := t.Context()
	runID := first
	for i := 1; i < executions; i++ {
		n, next := executionHistory(ctx, t, c, id, runID)
		if n < ro.ContinueAsNewBytes*9/10 {
			t.Errorf("execution %d continued as new with %d bytes of history, want about %d or more", i, n, ro.ContinueAsNewBytes)
		}
		runID = next
	}
	recordRunHistory(t, c, id, first, "continue-by-size")
}

// historyOf returns the bytes of the event history of workflow id from
// its execution runID on, following its continue-as-new, and the number
// of executions.
func historyOf(ctx context.Context, t testing.TB, c client.Client, id, runID string) (bytes, executions int) {
	for runID != "" {
		n, next := executionHistory(ctx, t, c, id, runID)
		bytes += n
		executions++
		runID = next
	}
	return bytes, executions
}
