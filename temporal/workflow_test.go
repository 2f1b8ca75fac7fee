package temporal_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

func TestWorkflow(t *testing.T) {
	tests := []struct {
		name     string
		replies  []toolruntest.Reply
		opts     toolrun.Options
		policy   toolrun.Policy // of write_file
		wantStop toolrun.StopReason
		wantText string
		// wantDetail is a substring of the outcome's Detail.
		wantDetail   string
		wantRuns     map[string]int
		wantSeen     []string
		wantRequests int
	}{
		{
			name: "two turns",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.Text("Checking."),
					toolruntest.ToolUse("t1", "get_weather", cityIn{City: "Paris"}),
					toolruntest.ToolUse("t2", "get_weather", cityIn{City: "Oslo"})),
				toolruntest.Message(toolruntest.Text("Sunny in both.")),
			},
			wantStop:     toolrun.StopEndTurn,
			wantText:     "Sunny in both.",
			wantRuns:     map[string]int{"weather Paris": 1, "weather Oslo": 1},
			wantSeen:     []string{"t1 error=false sunny in Paris", "t2 error=false sunny in Oslo"},
			wantRequests: 2,
		},
		{
			name: "streamed",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", cityIn{City: "Paris"})),
				toolruntest.Message(toolruntest.Text("Sunny.")),
			},
			opts:         toolrun.Options{Stream: true},
			wantStop:     toolrun.StopEndTurn,
			wantText:     "Sunny.",
			wantRuns:     map[string]int{"weather Paris": 1},
			wantSeen:     []string{"t1 error=false sunny in Paris"},
			wantRequests: 2,
		},
		{
			name: "denied by the tool's policy",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/etc/passwd"})),
				toolruntest.Message(toolruntest.Text("I may not.")),
			},
			policy: func(context.Context, toolrun.PolicyCall) toolrun.Decision {
				return policy.Deny("no writes under /etc")
			},
			wantStop:     toolrun.StopEndTurn,
			wantText:     "I may not.",
			wantRuns:     map[string]int{},
			wantSeen:     []string{"t1 error=true tool call denied: no writes under /etc"},
			wantRequests: 2,
		},
		{
			name: "denied by DenyTools, the other call runs",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"}),
					toolruntest.ToolUse("t2", "get_weather", cityIn{City: "Rome"})),
				toolruntest.Message(toolruntest.Text("Done.")),
			},
			opts:     toolrun.Options{Policy: policy.DenyTools("write_file")},
			wantStop: toolrun.StopEndTurn,
			wantText: "Done.",
			wantRuns: map[string]int{"weather Rome": 1},
			wantSeen: []string{
				`t1 error=true tool call denied: tool "write_file" is not allowed in this run`,
				"t2 error=false sunny in Rome",
			},
			wantRequests: 2,
		},
		{
			name: "AfterTool ends the run",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", cityIn{City: "Paris"})),
			},
			opts: toolrun.Options{AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
				return toolrun.StopRun("enough weather")
			}},
			wantStop:     toolrun.StopHook,
			wantDetail:   "enough weather",
			wantRuns:     map[string]int{"weather Paris": 1},
			wantRequests: 1,
		},
		{
			name: "a server error is retried by Temporal, not by the client",
			replies: []toolruntest.Reply{
				toolruntest.ServerError(),
				toolruntest.Message(toolruntest.Text("Hello.")),
			},
			wantStop:     toolrun.StopEndTurn,
			wantText:     "Hello.",
			wantRuns:     map[string]int{},
			wantRequests: 2,
		},
		{
			name: "an invalid request is not retried",
			// The step sends it once more without the message thread (a
			// 400 to the first thread request may be the platform's), and
			// the activity is not retried.
			replies: []toolruntest.Reply{
				{Fault: toolruntest.Fault{Status: http.StatusBadRequest}},
				{Fault: toolruntest.Fault{Status: http.StatusBadRequest}},
			},
			wantStop:     toolrun.StopError,
			wantDetail:   "400 Bad Request",
			wantRuns:     map[string]int{},
			wantRequests: 2,
		},
		{
			name: "the turn limit",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", cityIn{City: "Paris"})),
				toolruntest.Message(toolruntest.ToolUse("t2", "get_weather", cityIn{City: "Oslo"})),
			},
			opts:         toolrun.Options{MaxTurns: 2},
			wantStop:     toolrun.StopMaxTurns,
			wantDetail:   "turn limit of 2 reached",
			wantRuns:     map[string]int{"weather Paris": 1},
			wantSeen:     []string{"t1 error=false sunny in Paris"},
			wantRequests: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(tt.replies...))
			var calls counter
			tools := []toolrun.Tool{weatherTool(&calls), writeTool(&calls, tt.policy)}
			opts := tt.opts
			env := newEnv(t, s, tools, &opts)
			ro := fastRetries
			ro.MaxTurns = tt.opts.MaxTurns
			env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &ro))
			out := outcome(t, env)

			if out.StopReason != tt.wantStop || out.Text != tt.wantText || !strings.Contains(out.Detail, tt.wantDetail) {
				t.Errorf("outcome = %q %q (%s), want %q %q (%s)", out.StopReason, out.Text, out.Detail, tt.wantStop, tt.wantText, tt.wantDetail)
			}
			if diff := cmp.Diff(tt.wantRuns, calls.all()); diff != "" {
				t.Errorf("tool runs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSeen, seenResults(s)); diff != "" {
				t.Errorf("results the model saw (-want +got):\n%s", diff)
			}
			if got := len(s.Requests()); got != tt.wantRequests {
				t.Errorf("got %d requests, want %d", got, tt.wantRequests)
			}
			for i, req := range s.Requests() {
				if req.Stream != tt.opts.Stream {
					t.Errorf("request %d streamed = %v, want %v", i+1, req.Stream, tt.opts.Stream)
				}
			}
			if out.State == nil {
				t.Fatal("outcome has no state")
			}
		})
	}
}

func TestWorkflowApproval(t *testing.T) {
	tests := []struct {
		name     string
		decision toolrun.Decision
		byUpdate bool
		wantRuns map[string]int
		wantSeen []string
	}{
		{
			name:     "allowed by signal",
			decision: toolrun.Decision{},
			wantRuns: map[string]int{"weather Paris": 1, "write /a": 1},
			wantSeen: []string{"t1 error=false sunny in Paris", "t2 error=false wrote /a"},
		},
		{
			name:     "denied by signal",
			decision: policy.Deny("not today"),
			wantRuns: map[string]int{"weather Paris": 1},
			wantSeen: []string{"t1 error=false sunny in Paris", "t2 error=true tool call denied: not today"},
		},
		{
			name:     "allowed with other input by update",
			decision: toolrun.Decision{Kind: toolrun.Allow, Input: []byte(`{"path":"/sandbox/a"}`)},
			byUpdate: true,
			wantRuns: map[string]int{"weather Paris": 1, "write /sandbox/a": 1},
			wantSeen: []string{"t1 error=false sunny in Paris", "t2 error=false wrote /sandbox/a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", cityIn{City: "Paris"}),
					toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/a"})),
				toolruntest.Message(toolruntest.Text("Done.")),
			))
			var calls counter
			tools := []toolrun.Tool{weatherTool(&calls), writeTool(&calls, policy.RequireApproval("writes change files"))}
			env := newEnv(t, s, tools, nil)
			var pending []toolrun.PendingCall
			var rejected, completed error
			env.RegisterDelayedCallback(func() {
				v, err := env.QueryWorkflow(temporal.PendingQuery)
				if err != nil {
					t.Errorf("query: %v", err)
					return
				}
				if err := v.Get(&pending); err != nil {
					t.Errorf("query result: %v", err)
				}
				if len(calls.all()) != 1 {
					t.Errorf("before the decision: runs %v, want the weather call alone", calls.all())
				}
				if !tt.byUpdate {
					env.SignalWorkflow(temporal.DecideSignal, temporal.Approval{ToolUseID: "t2", Decision: tt.decision})
					return
				}
				// An update for a call that does not await approval is
				// rejected; the right one completes.
				env.UpdateWorkflow(temporal.DecideUpdate, "u1", &testsuite.TestUpdateCallback{
					OnReject:   func(err error) { rejected = err },
					OnAccept:   func() {},
					OnComplete: func(any, error) { t.Error("update for t1 completed, want it rejected") },
				}, temporal.Approval{ToolUseID: "t1", Decision: toolrun.Decision{}})
				env.UpdateWorkflow(temporal.DecideUpdate, "u2", &testsuite.TestUpdateCallback{
					OnReject:   func(err error) { t.Errorf("update rejected: %v", err) },
					OnAccept:   func() {},
					OnComplete: func(_ any, err error) { completed = err },
				}, temporal.Approval{ToolUseID: "t2", Decision: tt.decision})
			}, time.Hour)
			env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &fastRetries))
			out := outcome(t, env)

			if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
				t.Errorf("outcome = %q %q, want end_turn %q", out.StopReason, out.Text, "Done.")
			}
			var got []string
			for _, p := range pending {
				got = append(got, p.Call.ID+" "+p.Reason)
			}
			if diff := cmp.Diff([]string{"t2 writes change files"}, got); diff != "" {
				t.Errorf("pending calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRuns, calls.all()); diff != "" {
				t.Errorf("tool runs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSeen, seenResults(s)); diff != "" {
				t.Errorf("results the model saw (-want +got):\n%s", diff)
			}
			if tt.byUpdate && (rejected == nil || completed != nil) {
				t.Errorf("updates: rejected %v, completed with %v; want the first rejected and the second done", rejected, completed)
			}
		})
	}
}

func TestWorkflowContinuesAsNew(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", cityIn{City: "Paris"})),
		toolruntest.Message(toolruntest.ToolUse("t2", "get_weather", cityIn{City: "Oslo"})),
		toolruntest.Message(toolruntest.Text("Done.")),
	))
	var calls counter
	tools := []toolrun.Tool{weatherTool(&calls)}
	ro := fastRetries
	ro.ContinueAsNewAfter = 1
	in := temporal.NewInput(userParams("go"), &ro)
	// A decision for a call not seen yet is carried along.
	early := temporal.Approval{ToolUseID: "t9", Decision: toolrun.Decision{}}
	var turns []int
	for i := 0; ; i++ {
		if i == 5 {
			t.Fatal("the workflow did not finish in 5 executions")
		}
		env := newEnv(t, s, tools, nil)
		if i == 0 {
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(temporal.DecideSignal, early) }, 0)
		}
		env.ExecuteWorkflow(temporal.WorkflowName, in)
		var can *workflow.ContinueAsNewError
		if err := env.GetWorkflowError(); !errors.As(err, &can) {
			out := outcome(t, env)
			if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
				t.Errorf("outcome = %q %q, want end_turn %q", out.StopReason, out.Text, "Done.")
			}
			if out.State.Turns != 3 || out.State.ToolCalls != 2 {
				t.Errorf("final state: %d turns, %d tool calls; want 3 and 2", out.State.Turns, out.State.ToolCalls)
			}
			break
		}
		if can.WorkflowType.Name != temporal.WorkflowName {
			t.Errorf("continued as %q, want %q", can.WorkflowType.Name, temporal.WorkflowName)
		}
		in = temporal.Input{}
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
			t.Fatal(err)
		}
		turns = append(turns, in.State.Turns)
		if in.Options.ContinueAsNewAfter != 1 {
			t.Errorf("options carried over = %+v, want ContinueAsNewAfter 1", in.Options)
		}
		if diff := cmp.Diff([]temporal.Approval{early}, in.Decisions); diff != "" {
			t.Errorf("decisions carried over (-want +got):\n%s", diff)
		}
	}
	if diff := cmp.Diff([]int{1, 2}, turns); diff != "" {
		t.Errorf("turns at each continue-as-new (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"weather Paris": 1, "weather Oslo": 1}, calls.all()); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
	if got := len(s.Requests()); got != 3 {
		t.Errorf("got %d requests, want 3", got)
	}
}

// TestLostToolActivity checks what happens when a call's activity fails, as
// it does when its worker dies: a call of a tool that is not idempotent is
// answered as interrupted and never attempted again; one of an idempotent
// tool is retried.
func TestLostToolActivity(t *testing.T) {
	tests := []struct {
		name         string
		idempotent   bool
		wantRuns     map[string]int
		wantAttempts int32
		wantSeen     string
	}{
		{
			name:         "not idempotent",
			wantRuns:     map[string]int{},
			wantAttempts: 1,
			wantSeen:     `t1 error=true tool call interrupted: it started but did not finish (worker lost), and tool "write_file" is not declared idempotent, so it was not run again; its effects, if any, are unknown`,
		},
		{
			name:         "idempotent",
			idempotent:   true,
			wantRuns:     map[string]int{"write /a": 1},
			wantAttempts: 2,
			wantSeen:     "t1 error=false wrote /a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
				toolruntest.Message(toolruntest.Text("Done.")),
			))
			var calls counter
			w := writeTool(&calls, nil)
			w.Idempotent = tt.idempotent
			acts := temporal.NewActivities(s.Client(), []toolrun.Tool{w}, &toolrun.Options{Logger: discard()})
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(nopLogger)
			env := suite.NewTestWorkflowEnvironment()
			env.RegisterWorkflowWithOptions(temporal.Workflow, workflow.RegisterOptions{Name: temporal.WorkflowName})
			env.RegisterActivityWithOptions(acts.Step, activity.RegisterOptions{Name: temporal.StepActivity})
			env.RegisterActivityWithOptions(acts.Step, activity.RegisterOptions{Name: temporal.StepDeltaActivity})
			// The first attempt of each call is lost before the tool runs.
			var attempts atomic.Int32
			env.RegisterActivityWithOptions(func(ctx context.Context, in temporal.ToolInput) (*temporal.ToolOutput, error) {
				attempts.Add(1)
				if activity.GetInfo(ctx).Attempt == 1 {
					return nil, errors.New("worker lost")
				}
				return acts.RunTool(ctx, in)
			}, activity.RegisterOptions{Name: temporal.ToolActivity})
			env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &fastRetries))
			out := outcome(t, env)

			if out.StopReason != toolrun.StopEndTurn {
				t.Errorf("StopReason = %q, want end_turn", out.StopReason)
			}
			if got := attempts.Load(); got != tt.wantAttempts {
				t.Errorf("tool activity attempted %d times, want %d", got, tt.wantAttempts)
			}
			if diff := cmp.Diff(tt.wantRuns, calls.all()); diff != "" {
				t.Errorf("tool runs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{tt.wantSeen}, seenResults(s)); diff != "" {
				t.Errorf("results the model saw (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParallelAndExclusiveCalls checks that calls of non-exclusive tools run
// together and a call of an exclusive tool runs alone.
func TestParallelAndExclusiveCalls(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(
			toolruntest.ToolUse("a", "meet", map[string]any{}),
			toolruntest.ToolUse("b", "meet", map[string]any{}),
			toolruntest.ToolUse("c", "alone", map[string]any{}),
		),
		toolruntest.Message(toolruntest.Text("Done.")),
	))
	// Both calls of meet wait for each other: they finish only if they run
	// at the same time.
	var meetings sync.WaitGroup
	meetings.Add(2)
	var running, overlaps atomic.Int32
	meet := toolrun.NewTool("meet", "Waits for the other", func(ctx context.Context, in struct{}) (string, error) {
		running.Add(1)
		defer running.Add(-1)
		meetings.Done()
		done := make(chan struct{})
		go func() { meetings.Wait(); close(done) }()
		select {
		case <-done:
			return "met", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	meet.Timeout = 10 * time.Second
	alone := toolrun.NewTool("alone", "Runs alone", func(ctx context.Context, in struct{}) (string, error) {
		if running.Load() != 0 {
			overlaps.Add(1)
		}
		return "alone", nil
	})
	alone.Exclusive = true
	env := newEnv(t, s, []toolrun.Tool{meet, alone}, nil)
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &fastRetries))
	out := outcome(t, env)
	if out.StopReason != toolrun.StopEndTurn {
		t.Errorf("StopReason = %q, want end_turn", out.StopReason)
	}
	want := []string{"a error=false met", "b error=false met", "c error=false alone"}
	if diff := cmp.Diff(want, seenResults(s)); diff != "" {
		t.Errorf("results the model saw (-want +got):\n%s", diff)
	}
	if got := overlaps.Load(); got != 0 {
		t.Errorf("the exclusive call overlapped others %d times, want 0", got)
	}
}

// TestWorkflowStopsCallsAfterAfterTool checks that once a call's answer
// ends the run (AfterTool returns StopRun), the workflow starts no more
// of the turn's calls, in a later group (an exclusive tool) or queued in
// the same group behind MaxParallelTools, as the runner's own executor
// does (driver.Batches): the later call runs no activity and stays
// unanswered in the outcome's state, for a run resumed from it.
func TestWorkflowStopsCallsAfterAfterTool(t *testing.T) {
	tests := []struct {
		name      string
		exclusive bool
		parallel  int
	}{
		{name: "a later group", exclusive: true},
		{name: "queued in the group", parallel: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(
				toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/build"}),
				toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/src"}),
			)))
			var calls counter
			tool := writeTool(&calls, nil)
			tool.Exclusive = tt.exclusive
			env := newEnv(t, s, []toolrun.Tool{tool}, &toolrun.Options{AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
				return toolrun.StopRun("the operator saw enough after one write")
			}})
			var mu sync.Mutex // guards started
			var started []string
			env.SetOnActivityStartedListener(func(info *activity.Info, ctx context.Context, args converter.EncodedValues) {
				if info.ActivityType.Name != temporal.ToolActivity {
					return
				}
				var in temporal.ToolInput
				if err := args.Get(&in); err != nil {
					t.Error(err)
				}
				mu.Lock()
				started = append(started, in.ToolUseID)
				mu.Unlock()
			})
			ro := fastRetries
			ro.MaxParallelTools = tt.parallel
			env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &ro))
			out := outcome(t, env)
			if out.StopReason != toolrun.StopHook {
				t.Errorf("StopReason = %q, want hook", out.StopReason)
			}
			if diff := cmp.Diff([]string{"t1"}, started); diff != "" {
				t.Errorf("tool activities started (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]int{"write /build": 1}, calls.all()); diff != "" {
				t.Errorf("tool runs (-want +got):\n%s", diff)
			}
			if res, ok := out.State.CallResult("t2"); ok {
				t.Errorf("t2 answered with %+v, want it unanswered", res)
			}
		})
	}
}
