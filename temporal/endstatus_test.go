package temporal_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// shown records what an execution's search attributes and memo showed,
// upsert by upsert, in the SDK's test environment.
type shown struct {
	attrs []string   // each upsert of the search attributes, as "status awaiting=bool"
	memos [][]string // each upsert of the memo, as memoIDs gives it
}

// record makes env record its upserts in sh.
func (sh *shown) record(env *testsuite.TestWorkflowEnvironment) {
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(sdktemporal.SearchAttributes)
		status, _ := sa.GetKeyword(temporal.StatusAttribute)
		awaiting, _ := sa.GetBool(temporal.AwaitingApprovalAttribute)
		sh.attrs = append(sh.attrs, fmt.Sprintf("%s awaiting=%v", status, awaiting))
	}).Return(nil)
	env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
		m := args.Get(0).(map[string]any)
		sh.memos = append(sh.memos, memoIDs(m[temporal.PendingMemo].(temporal.PendingApprovals)))
	}).Return(nil)
}

// TestEndStatus checks that, however an execution of the workflow ends,
// the last search attributes and memo it upserts say what the run is
// then, and never that a call awaits approval in an execution that can no
// longer take a decision: a run cancelled while it awaits approval shows
// "canceled" (and still ends with Temporal's CanceledError); a run that
// ends with an Outcome shows its stop reason, even with a call left
// deferred; an execution that continues as new shows "running", which its
// successor goes on from.
func TestEndStatus(t *testing.T) {
	stopAfterTool := toolrun.Options{AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
		return toolrun.StopRun("enough")
	}}
	writeFirst := toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"}))
	tests := []struct {
		name    string
		replies []toolruntest.Reply
		opts    *toolrun.Options
		run     temporal.RunOptions
		// cancelAt, if positive, cancels the workflow then (test time).
		cancelAt time.Duration
		// allowAt, if positive, allows t1 then (test time).
		allowAt  time.Duration
		wantErr  func(error) bool // nil: the run ends with an Outcome
		wantStop toolrun.StopReason
		// wantWaited says that the run showed t1 awaiting approval before
		// its end, so that the end's upserts are what changed it.
		wantWaited bool
		wantLast   string // the last search attributes upserted
	}{
		{
			name:       "canceled while awaiting approval",
			replies:    []toolruntest.Reply{writeFirst},
			cancelAt:   time.Hour,
			wantErr:    func(err error) bool { var ce *sdktemporal.CanceledError; return errors.As(err, &ce) },
			wantWaited: true,
			wantLast:   "canceled awaiting=false",
		},
		{
			name:       "completed after an approval",
			replies:    []toolruntest.Reply{writeFirst, toolruntest.Message(toolruntest.Text("Done."))},
			allowAt:    time.Hour,
			wantStop:   toolrun.StopEndTurn,
			wantWaited: true,
			wantLast:   "end_turn awaiting=false",
		},
		{
			name: "stopped by a hook with a call left awaiting approval",
			replies: []toolruntest.Reply{toolruntest.Message(
				toolruntest.ToolUse("t0", "get_weather", cityIn{City: "Paris"}),
				toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"}),
			)},
			opts:       &stopAfterTool,
			wantStop:   toolrun.StopHook,
			wantWaited: true,
			wantLast:   "hook awaiting=false",
		},
		{
			name: "failed with an error",
			// twice: the thread fallback sends a rejected first request once more
			replies:  []toolruntest.Reply{{Fault: toolruntest.Fault{Status: http.StatusBadRequest}}, {Fault: toolruntest.Fault{Status: http.StatusBadRequest}}},
			wantStop: toolrun.StopError,
			wantLast: "error awaiting=false",
		},
		{
			name: "continued as new",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("t0", "get_weather", cityIn{City: "Paris"})),
			},
			run:      temporal.RunOptions{ContinueAsNewAfter: 1},
			wantErr:  func(err error) bool { var can *workflow.ContinueAsNewError; return errors.As(err, &can) },
			wantLast: "running awaiting=false",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(tt.replies...))
			var calls counter
			tools := []toolrun.Tool{weatherTool(&calls), writeTool(&calls, policy.RequireApproval("writes change files"))}
			env := newEnv(t, s, tools, tt.opts)
			var sh shown
			sh.record(env)
			if tt.cancelAt > 0 {
				env.RegisterDelayedCallback(env.CancelWorkflow, tt.cancelAt)
			}
			if tt.allowAt > 0 {
				env.RegisterDelayedCallback(func() {
					env.SignalWorkflow(temporal.DecideSignal, temporal.Approval{ToolUseID: "t1", Decision: toolrun.Decision{}})
				}, tt.allowAt)
			}
			ro := fastRetries
			ro.ContinueAsNewAfter = tt.run.ContinueAsNewAfter
			env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &ro))

			if tt.wantErr != nil {
				if !env.IsWorkflowCompleted() {
					t.Fatal("workflow did not complete")
				}
				if err := env.GetWorkflowError(); !tt.wantErr(err) {
					t.Fatalf("got workflow error %v, want the kind this case ends with", err)
				}
			} else if out := outcome(t, env); out.StopReason != tt.wantStop {
				t.Errorf("got stop reason %q, want %q", out.StopReason, tt.wantStop)
			}

			if len(sh.attrs) == 0 || len(sh.memos) == 0 {
				t.Fatalf("got %d search attribute upserts and %d memo upserts, want some of each", len(sh.attrs), len(sh.memos))
			}
			if got := sh.attrs[len(sh.attrs)-1]; got != tt.wantLast {
				t.Errorf("got last search attributes %q, want %q (all: %q)", got, tt.wantLast, sh.attrs)
			}
			if got := sh.memos[len(sh.memos)-1]; len(got) != 0 {
				t.Errorf("got last memo %q, want no calls (all: %q)", got, sh.memos)
			}
			waited := false
			for _, a := range sh.attrs {
				waited = waited || a == "awaiting_approval awaiting=true"
			}
			if waited != tt.wantWaited {
				t.Errorf("showed awaiting approval before the end: got %v, want %v (all: %q)", waited, tt.wantWaited, sh.attrs)
			}
		})
	}
}

// TestEndStatusDisabled checks that RunOptions.NoSearchAttributes holds at
// the end too: a cancelled run upserts no search attribute, only the memo.
func TestEndStatusDisabled(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"}))))
	var calls counter
	env := newEnv(t, s, []toolrun.Tool{writeTool(&calls, policy.RequireApproval("writes change files"))}, nil)
	var sh shown
	sh.record(env)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Hour)
	ro := fastRetries
	ro.NoSearchAttributes = true
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &ro))
	var ce *sdktemporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &ce) {
		t.Fatalf("got workflow error %v, want a CanceledError", err)
	}
	if len(sh.attrs) != 0 {
		t.Errorf("got search attribute upserts %q, want none", sh.attrs)
	}
	want := [][]string{nil, {"t1 write_file writes change files {\"path\":\"/a\"}"}, nil}
	if diff := cmp.Diff(want, sh.memos); diff != "" {
		t.Errorf("memos upserted (-want +got):\n%s", diff)
	}
}
