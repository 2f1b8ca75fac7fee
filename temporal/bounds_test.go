package temporal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// TestDecisionFloodOnServer: what a client can send does not get the run
// terminated by the server. A flood of signals for calls that do not
// exist (300 of 10 KB, 3 MB in all, carried into a continue-as-new input
// unless bounded), a 1 MB decision by signal and one by update from a
// client of its own, each refused by the workflow, and 1 MB decisions
// (an edited input and its reason) that Decide and DecideBySignal refuse
// before they send them, each with ErrDecisionTooLarge, and the run ends in an Outcome with the call decided by
// the small decision sent last.
func TestDecisionFloodOnServer(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-flood")
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		toolruntest.Message(toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/b"})),
		toolruntest.Message(toolruntest.Text("Done."))))
	calls := &counter{}
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{writeTool(calls, policy.RequireApproval("writes change files"))}, &toolrun.Options{
		Logger: discard(),
		Store:  &filestore.Store{Dir: t.TempDir()},
	}))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// A continue-as-new after every turn carries the decisions kept for
	// calls not seen yet.
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &temporal.RunOptions{ContinueAsNewAfter: 1})
	if err != nil {
		t.Fatal(err)
	}
	reason := strings.Repeat("r", 10<<10)
	for i := range 300 {
		if err := temporal.DecideBySignal(ctx, c, queue, fmt.Sprintf("bogus-%d", i), policy.Deny(reason), nil); err != nil {
			t.Fatal(err)
		}
	}
	awaiting := func(id string) func() bool {
		return func() bool {
			p, err := temporal.Pending(ctx, c, queue, nil)
			return err == nil && len(p) == 1 && p[0].Call.ID == id
		}
	}
	huge := strings.Repeat("x", 1<<20)
	for _, id := range []string{"t1", "t2"} {
		waitFor(t, time.Minute, id+" awaiting approval", awaiting(id))
		// A client other than Decide and DecideBySignal, which refuse a
		// decision this large before they send it, reaches the workflow's
		// own bound.
		big := temporal.Approval{ToolUseID: id, Decision: policy.Deny(huge)}
		if err := c.SignalWorkflow(ctx, queue, "", temporal.DecideSignal, big); err != nil {
			t.Fatal(err)
		}
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: queue, UpdateName: temporal.DecideUpdate, Args: []any{big}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		if err := temporal.FromFailure(err); !errors.Is(err, temporal.ErrDecisionTooLarge) {
			t.Errorf("a 1 MB update for %s: %v, want it refused with ErrDecisionTooLarge", id, err)
		}
		edit := toolrun.Decision{}
		edit.Input = json.RawMessage(`{"path":"` + huge[:512<<10] + `"}`)
		edit.Reason = huge[:512<<10]
		if err := temporal.Decide(ctx, c, queue, id, edit, nil); !errors.Is(err, temporal.ErrDecisionTooLarge) {
			t.Errorf("Decide with a 1 MB edited input and reason for %s: %v, want it refused with ErrDecisionTooLarge", id, err)
		}
		if err := temporal.DecideBySignal(ctx, c, queue, id, edit, nil); !errors.Is(err, temporal.ErrDecisionTooLarge) {
			t.Errorf("DecideBySignal with a 1 MB edited input and reason for %s: %v, want it refused with ErrDecisionTooLarge", id, err)
		}
		if err := temporal.Decide(ctx, c, queue, id, toolrun.Decision{}, nil); err != nil {
			t.Fatalf("the Allow after them for %s: %v (the 1 MB signal was applied?)", id, err)
		}
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("the run has no Outcome: %v", err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
		t.Errorf("got outcome %q (%s) %q, want end_turn %q", out.StopReason, out.Detail, out.Text, "Done.")
	}
	if diff := cmp.Diff(map[string]int{"write /a": 1, "write /b": 1}, calls.n); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

// countingHandler counts the log records with a message.
type countingHandler struct {
	mu    sync.Mutex // guards count
	count map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count == nil {
		h.count = map[string]int{}
	}
	h.count[r.Message]++
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) n(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count[msg]
}

// TestEarlyDecisionBounds checks both bounds on the decisions kept for
// calls that do not exist: a flood of small ones stops at
// MaxEarlyDecisions, and one of 10 KB ones at MaxEarlyDecisionBytes; each
// decision beyond is dropped with a log record, and what the execution
// carries into its continue-as-new input stays within the bounds.
func TestEarlyDecisionBounds(t *testing.T) {
	// At most 900 signals: the test environment queues the signals a
	// callback sends in a channel of 1000, and blocks beyond.
	tests := []struct {
		name   string
		n      int
		reason string
	}{
		{name: "900 small", n: 900, reason: "no"},
		{name: "300 of 10 KB", n: 300, reason: strings.Repeat("r", 10<<10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("w1", "get_weather", cityIn{City: "Paris"})),
				toolruntest.Message(toolruntest.Text("Done."))))
			logs := &countingHandler{}
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(log.NewStructuredLogger(slog.New(logs)))
			env := suite.NewTestWorkflowEnvironment()
			env.SetTestTimeout(time.Minute)
			var calls counter
			temporal.Register(env, temporal.NewActivities(s.Client(), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard()}))
			env.RegisterDelayedCallback(func() {
				for i := range tt.n {
					env.SignalWorkflow(temporal.DecideSignal, temporal.Approval{ToolUseID: fmt.Sprintf("bogus-%d", i), Decision: policy.Deny(tt.reason)})
				}
			}, 0)
			ro := fastRetries
			ro.ContinueAsNewAfter = 1
			env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &ro))
			var can *workflow.ContinueAsNewError
			if err := env.GetWorkflowError(); !errors.As(err, &can) {
				t.Fatalf("got %v, want the run continued as new after its first turn", err)
			}
			var in temporal.Input
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(in.Decisions)
			if len(in.Decisions) > temporal.MaxEarlyDecisions || len(b) > temporal.MaxEarlyDecisionBytes || len(in.Decisions) == 0 {
				t.Errorf("carried %d decisions, %d bytes; want 1 to %d, at most %d bytes", len(in.Decisions), len(b), temporal.MaxEarlyDecisions, temporal.MaxEarlyDecisionBytes)
			}
			if got, want := logs.n("toolrun: decision dropped"), tt.n-len(in.Decisions); got != want {
				t.Errorf("got %d records of a dropped decision, want %d", got, want)
			}
		})
	}
}
