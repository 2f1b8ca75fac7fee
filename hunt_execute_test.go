//go:build hunt

package toolrun_test

import (
	"context"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestHuntExecuteCallKeepsTheEnginesStops: ExecuteCall says it answers a
// call "as Runner.Next would, through the same executor", and the
// existing tests drive it right after Next hands out a turn. But it goes
// straight from the call's id to decideCall and execute (engine.go,
// ExecuteCall), past the rules that step enforces before any call of a
// turn starts: a final response's calls (max_tokens, refusal) are
// answered as not run; a turn taken over by RetryTurn/SetMessages runs no
// tool; a turn that would pass Budget.ToolCalls or the turn limit is held
// back (heldBack). Each subtest breaks one of these through ExecuteCall:
// the tool runs where Next would never run it. What should hold: ExecuteCall
// refuses (an error, nothing run) a call of a turn whose response is
// final, that the caller took over, or that heldBack holds back, and a
// call of a run stopped for good (halted: a budget, the turn limit, a
// hook's StopRun) until the stop is lifted.
func TestHuntExecuteCallKeepsTheEnginesStops(t *testing.T) {
	type in struct {
		Path string `json:"path"`
	}
	tests := []struct {
		name  string
		reply toolruntest.Reply
		opts  toolrun.Options
		// drive takes the run to the point where ExecuteCall is called.
		drive func(t *testing.T, r *toolrun.Runner)
	}{
		{
			// README: "a response that ... ends in max_tokens/refusal
			// runs nothing". The input may be cut off mid-way yet parse.
			name: "a max_tokens response's call",
			reply: func() toolruntest.Reply {
				m := toolruntest.Message(toolruntest.ToolUse("t1", "delete", in{Path: "build"}))
				m.StopReason = "max_tokens"
				return m
			}(),
			drive: func(t *testing.T, r *toolrun.Runner) {
				if _, err := r.Next(t.Context()); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "a refusal's call",
			reply: func() toolruntest.Reply {
				m := toolruntest.Message(toolruntest.ToolUse("t1", "delete", in{Path: "build"}))
				m.StopReason = "refusal"
				return m
			}(),
			drive: func(t *testing.T, r *toolrun.Runner) {
				if _, err := r.Next(t.Context()); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			// RetryTurn: "its response is not appended and its tools do
			// not run".
			name:  "a turn discarded with RetryTurn",
			reply: toolruntest.Message(toolruntest.ToolUse("t1", "delete", in{Path: "build"})),
			drive: func(t *testing.T, r *toolrun.Runner) {
				if _, err := r.Next(t.Context()); err != nil {
					t.Fatal(err)
				}
				r.RetryTurn()
			},
		},
		{
			// Budget: the run stops "before the tool calls that would
			// pass ToolCalls".
			name:  "a turn held back by Budget.ToolCalls",
			reply: toolruntest.Message(toolruntest.ToolUse("t1", "delete", in{Path: "build"}), toolruntest.ToolUse("t2", "delete", in{Path: "dist"})),
			opts:  toolrun.Options{Budget: toolrun.Budget{ToolCalls: 1}},
			drive: func(t *testing.T, r *toolrun.Runner) {
				res, _ := r.Run(t.Context())
				if res.StopReason != toolrun.StopBudget {
					t.Fatalf("Run stopped with %q, want budget", res.StopReason)
				}
			},
		},
		{
			name:  "a turn held back by the turn limit",
			reply: toolruntest.Message(toolruntest.ToolUse("t1", "delete", in{Path: "build"})),
			opts:  toolrun.Options{MaxTurns: 1},
			drive: func(t *testing.T, r *toolrun.Runner) {
				res, _ := r.Run(t.Context())
				if res.StopReason != toolrun.StopMaxTurns {
					t.Fatalf("Run stopped with %q, want max_turns", res.StopReason)
				}
			},
		},
		{
			name:  "a run a hook stopped",
			reply: toolruntest.Message(toolruntest.ToolUse("t1", "delete", in{Path: "build"})),
			opts: toolrun.Options{AfterResponse: func(context.Context, int, *anthropic.BetaMessage) error {
				return toolrun.StopRun("the operator stopped it")
			}},
			drive: func(t *testing.T, r *toolrun.Runner) {
				res, _ := r.Run(t.Context())
				if res.StopReason != toolrun.StopHook {
					t.Fatalf("Run stopped with %q, want hook", res.StopReason)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(tt.reply))
			var calls counter
			tool := toolrun.NewTool("delete", "Deletes a path", func(ctx context.Context, v in) (string, error) {
				calls.inc("delete")
				return "deleted " + v.Path, nil
			})
			opts := tt.opts
			opts.Logger = discard()
			r := toolrun.New(client(s), userParams("clean up"), []toolrun.Tool{tool}, &opts)
			tt.drive(t, r)
			res, err := r.ExecuteCall(t.Context(), "t1")
			if got := calls.get("delete"); got != 0 {
				t.Errorf("ExecuteCall ran the tool (%d times; result %+v, error %v); want it refused, as Next would never run it", got, res, err)
			}
			if err == nil && (res == nil || res.Ran) {
				t.Errorf("ExecuteCall = %+v, nil; want an error or a not-run answer", res)
			}
		})
	}
}

// TestHuntExecuteCallAfterAfterToolStoppedTheRun is the Temporal path of
// the defect above, in the root package: AfterTool ends the run with
// StopRun after the first call of a turn; the runner's own executor then
// starts no more calls ("a call queued behind others does not start once
// the run is stopping"), leaving the second call decided, not run. The
// Temporal workflow runs each planned call as an activity that Resumes a
// runner from the run's State and calls ExecuteCall (temporal/
// activities.go RunTool), and its runCalls/runBatch go on to the next
// batch whatever w.state.StopReason says. ExecuteCall on a runner resumed
// from the State of a run stopped by the hook runs the second call: the
// hook's stop is gone around. What should hold: ExecuteCall refuses a call
// of a run that is stopped for good (Runner.halted, here StopHook), with
// an error and nothing run; and the workflow stops scheduling calls once
// a ToolOutput carries a StopReason.
func TestHuntExecuteCallAfterAfterToolStoppedTheRun(t *testing.T) {
	type in struct {
		Path string `json:"path"`
	}
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(
		toolruntest.ToolUse("t1", "delete", in{Path: "build"}),
		toolruntest.ToolUse("t2", "delete", in{Path: "src"}),
	)))
	var calls counter
	tool := toolrun.NewTool("delete", "Deletes a path", func(ctx context.Context, v in) (string, error) {
		calls.inc(v.Path)
		return "deleted " + v.Path, nil
	})
	tool.Exclusive = true // one call per batch, as Batches says
	opts := &toolrun.Options{Logger: discard(), AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
		return toolrun.StopRun("the operator saw enough after one deletion")
	}}
	r := toolrun.New(client(s), userParams("clean up"), []toolrun.Tool{tool}, opts)
	res, _ := r.Run(t.Context())
	if res.StopReason != toolrun.StopHook || calls.get("src") != 0 {
		t.Fatalf("Run stopped with %q having deleted src %d times; want StopHook with src left alone", res.StopReason, calls.get("src"))
	}
	// As the Temporal activity runs a planned call: a runner resumed from
	// the run's State.
	r2, err := toolrun.Resume(client(s), r.State(), []toolrun.Tool{tool}, opts)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r2.ExecuteCall(t.Context(), "t2")
	if got := calls.get("src"); got != 0 {
		t.Errorf("ExecuteCall on the resumed run deleted src (%d times; result ran=%v, error %v), after AfterTool stopped the run", got, out != nil && out.Ran, err)
	}
}
