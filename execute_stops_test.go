package toolrun_test

import (
	"context"
	"errors"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// deleteIn is the input of the delete tool of the tests below.
type deleteIn struct {
	Path string `json:"path"`
}

// deleteTool counts its calls by path.
func deleteTool(calls *counter) *toolrun.FuncTool {
	return toolrun.NewTool("delete", "Deletes a path", func(ctx context.Context, v deleteIn) (string, error) {
		calls.inc(v.Path)
		return "deleted " + v.Path, nil
	})
}

// deleteBuild is a response that calls delete on "build", with the
// stop_reason stop ("" for tool_use).
func deleteBuild(stop string) toolruntest.Reply {
	m := toolruntest.Message(toolruntest.ToolUse("t1", "delete", deleteIn{Path: "build"}))
	if stop != "" {
		m.StopReason = stop
	}
	return m
}

// TestExecuteCallKeepsTheEnginesStops checks that ExecuteCall runs only a
// call that Next would run: it asks the engine's one rule (held) before
// it decides or runs a call, so a final response's calls (max_tokens,
// refusal), a turn the caller took over (RetryTurn), a turn held back by
// Budget.ToolCalls or the turn limit (handed out, or stopped at), and a
// run a hook stopped are refused with an error wrapping ErrNotRun (and
// ErrBudget or ErrMaxTurns for a limit), nothing run and the call left
// unanswered for the next step.
func TestExecuteCallKeepsTheEnginesStops(t *testing.T) {
	tests := []struct {
		name  string
		reply toolruntest.Reply
		opts  toolrun.Options
		// drive takes the run to the point where ExecuteCall is called.
		drive func(t *testing.T, r *toolrun.Runner)
		// wantLimit, if set, is a limit the error wraps besides ErrNotRun.
		wantLimit error
	}{
		{
			// README: "a response that ... ends in max_tokens/refusal
			// runs nothing". The input may be cut off mid-way yet parse.
			name:  "a max_tokens response's call",
			reply: deleteBuild("max_tokens"),
			drive: next,
		},
		{
			name:  "a refusal's call",
			reply: deleteBuild("refusal"),
			drive: next,
		},
		{
			// RetryTurn: "its response is not appended and its tools do
			// not run".
			name:  "a turn discarded with RetryTurn",
			reply: deleteBuild(""),
			drive: func(t *testing.T, r *toolrun.Runner) {
				next(t, r)
				r.RetryTurn()
			},
		},
		{
			// Budget: the run stops "before the tool calls that would
			// pass ToolCalls". Handed out, the turn is not stopped yet:
			// its next step would stop it.
			name:      "a handed-out turn over Budget.ToolCalls",
			reply:     toolruntest.Message(toolruntest.ToolUse("t1", "delete", deleteIn{Path: "build"}), toolruntest.ToolUse("t2", "delete", deleteIn{Path: "dist"})),
			opts:      toolrun.Options{Budget: toolrun.Budget{ToolCalls: 1}},
			drive:     next,
			wantLimit: toolrun.ErrBudget,
		},
		{
			name:      "a run stopped by Budget.ToolCalls",
			reply:     toolruntest.Message(toolruntest.ToolUse("t1", "delete", deleteIn{Path: "build"}), toolruntest.ToolUse("t2", "delete", deleteIn{Path: "dist"})),
			opts:      toolrun.Options{Budget: toolrun.Budget{ToolCalls: 1}},
			drive:     runTo(toolrun.StopBudget),
			wantLimit: toolrun.ErrBudget,
		},
		{
			name:      "a handed-out turn at the turn limit",
			reply:     deleteBuild(""),
			opts:      toolrun.Options{MaxTurns: 1},
			drive:     next,
			wantLimit: toolrun.ErrMaxTurns,
		},
		{
			name:      "a run stopped at the turn limit",
			reply:     deleteBuild(""),
			opts:      toolrun.Options{MaxTurns: 1},
			drive:     runTo(toolrun.StopMaxTurns),
			wantLimit: toolrun.ErrMaxTurns,
		},
		{
			name:  "a run a hook stopped",
			reply: deleteBuild(""),
			opts: toolrun.Options{AfterResponse: func(context.Context, int, *anthropic.BetaMessage) error {
				return toolrun.StopRun("the operator stopped it")
			}},
			drive: runTo(toolrun.StopHook),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(tt.reply))
			var calls counter
			opts := tt.opts
			opts.Logger = discard()
			r := toolrun.New(client(s), userParams("clean up"), []toolrun.Tool{deleteTool(&calls)}, &opts)
			tt.drive(t, r)
			res, err := driver.ExecuteCall(t.Context(), r, "t1")
			if got := calls.get("build"); got != 0 {
				t.Errorf("ExecuteCall ran the tool %d times (result %+v, error %v); want it refused, as Next would never run it", got, res, err)
			}
			if res != nil || !errors.Is(err, toolrun.ErrNotRun) {
				t.Errorf("ExecuteCall = %+v, %v; want no result and an error wrapping ErrNotRun", res, err)
			}
			if tt.wantLimit != nil && !errors.Is(err, tt.wantLimit) {
				t.Errorf("ExecuteCall error = %v, want one wrapping %v too", err, tt.wantLimit)
			}
			st := r.State()
			if got := toolrun.PhaseOf(st, "t1"); got != "new" {
				t.Errorf("call t1 is %q after the refusal, want new: the next step takes it as it would have", got)
			}
		})
	}
}

// next hands out the run's first turn.
func next(t *testing.T, r *toolrun.Runner) {
	t.Helper()
	if _, err := r.Next(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// runTo runs the run until it stops, with want.
func runTo(want toolrun.StopReason) func(t *testing.T, r *toolrun.Runner) {
	return func(t *testing.T, r *toolrun.Runner) {
		t.Helper()
		res, _ := r.Run(t.Context())
		if res.StopReason != want {
			t.Fatalf("Run stopped with %q, want %q", res.StopReason, want)
		}
	}
}

// TestExecuteCallAfterAfterToolStoppedTheRun is the Temporal path of the
// rule above: AfterTool ends the run with StopRun after the first call of
// a turn, and a runner resumed from the run's State (as the workflow's
// tool activity is) refuses to run the second call.
func TestExecuteCallAfterAfterToolStoppedTheRun(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(
		toolruntest.ToolUse("t1", "delete", deleteIn{Path: "build"}),
		toolruntest.ToolUse("t2", "delete", deleteIn{Path: "src"}),
	)))
	var calls counter
	tool := deleteTool(&calls)
	tool.Exclusive = true // one call per group, as Batches says
	opts := &toolrun.Options{Logger: discard(), AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
		return toolrun.StopRun("the operator saw enough after one deletion")
	}}
	r := toolrun.New(client(s), userParams("clean up"), []toolrun.Tool{tool}, opts)
	res, _ := r.Run(t.Context())
	if res.StopReason != toolrun.StopHook || calls.get("src") != 0 {
		t.Fatalf("Run stopped with %q having deleted src %d times; want StopHook with src left alone", res.StopReason, calls.get("src"))
	}
	r2, err := toolrun.Resume(client(s), r.State(), []toolrun.Tool{tool}, opts)
	if err != nil {
		t.Fatal(err)
	}
	out, err := driver.ExecuteCall(t.Context(), r2, "t2")
	if got := calls.get("src"); got != 0 {
		t.Errorf("ExecuteCall on the resumed run deleted src %d times (result %+v, error %v), after AfterTool stopped the run", got, out, err)
	}
	if out != nil || !errors.Is(err, toolrun.ErrNotRun) {
		t.Errorf("ExecuteCall = %+v, %v; want no result and an error wrapping ErrNotRun", out, err)
	}
	// The call answered before the stop is still answered as it was.
	done, err := driver.ExecuteCall(t.Context(), r2, "t1")
	if err != nil || done == nil || !done.Ran {
		t.Errorf("ExecuteCall(t1) = %+v, %v; want the recorded result", done, err)
	}
}

// TestExecuteCallWhileOthersAwaitApproval checks the one stop that held
// does not count as for good: a run suspended awaiting approval runs a
// call a person has allowed, while another call of its turn still awaits
// a decision.
func TestExecuteCallWhileOthersAwaitApproval(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(
		toolruntest.ToolUse("t1", "delete", deleteIn{Path: "build"}),
		toolruntest.ToolUse("t2", "delete", deleteIn{Path: "src"}),
	)))
	var calls counter
	tool := deleteTool(&calls)
	tool.Policy = policy.RequireApproval("a person decides")
	r := toolrun.New(client(s), userParams("clean up"), []toolrun.Tool{tool}, &toolrun.Options{Logger: discard()})
	res, err := r.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("Run = %q, %v; want awaiting_approval", res.StopReason, err)
	}
	if err := r.Decide("t1", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	out, err := driver.ExecuteCall(t.Context(), r, "t1")
	if err != nil || out == nil || !out.Ran || calls.get("build") != 1 {
		t.Fatalf("ExecuteCall(t1) = %+v, %v with %d runs; want it run once", out, err, calls.get("build"))
	}
	if _, err := driver.ExecuteCall(t.Context(), r, "t2"); err == nil || errors.Is(err, toolrun.ErrNotRun) || calls.get("src") != 0 {
		t.Errorf("ExecuteCall(t2) = %v with %d runs; want the awaiting-a-decision error and no run", err, calls.get("src"))
	}
}

// TestAfterToolStopStartsNoQueuedCall checks the executor's side of the
// rule Batches states: once AfterTool ends the run, a call of the same
// group queued behind MaxParallelTools does not start, and stays decided,
// not run.
func TestAfterToolStopStartsNoQueuedCall(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(
		toolruntest.ToolUse("t1", "delete", deleteIn{Path: "build"}),
		toolruntest.ToolUse("t2", "delete", deleteIn{Path: "src"}),
	)))
	var calls counter
	opts := &toolrun.Options{Logger: discard(), MaxParallelTools: 1, AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
		return toolrun.StopRun("the operator saw enough after one deletion")
	}}
	r := toolrun.New(client(s), userParams("clean up"), []toolrun.Tool{deleteTool(&calls)}, opts)
	res, _ := r.Run(t.Context())
	if res.StopReason != toolrun.StopHook {
		t.Fatalf("Run stopped with %q, want hook", res.StopReason)
	}
	if got := calls.get("build") + calls.get("src"); got != 1 {
		t.Errorf("the tool ran %d times, want once: the queued call starts after the stop", got)
	}
	if got := toolrun.PhaseOf(r.State(), "t2"); got != "decided" {
		t.Errorf("call t2 is %q, want decided: not run, for a resumed run", got)
	}
}
