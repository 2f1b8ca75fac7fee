//go:build hunt

package toolrun_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestHuntWallTimeStopAfterResume: Budget.WallTime "bounds the run's time
// from its first step in this process", and the engine means a wall-time
// stop to be one a run goes on from (engine.go halted: "a new Run gets a
// new wall-time budget"). But the State keeps only the stop's reason, not
// which budget stopped it, and Resume rebuilds the stop without
// Result.Budget (state.go Resume), so halted takes the resumed run for
// stopped for good: Run on a runner resumed, in another process, from the
// State of a run that ran out of wall time returns the old stop at once
// and sends nothing, whatever the new Options say. What should hold: a run
// stopped by its wall time goes on after Resume, as the same run does in
// its own process (keep the budget kind in the State, or let halted read
// it from the Detail-free stop), with its call that was cut off answered
// as interrupted.
func TestHuntWallTimeStopAfterResume(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "wait", map[string]any{})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	wait := toolrun.NewTool("wait", "Waits", func(ctx context.Context, in struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{wait}, &toolrun.Options{
		Logger: discard(), Budget: toolrun.Budget{WallTime: 2 * time.Second},
	})
	res, _ := r.Run(t.Context())
	if res.StopReason != toolrun.StopBudget || res.Budget != toolrun.BudgetWallTime {
		t.Fatalf("Run stopped with %q (%q), want a wall-time budget stop", res.StopReason, res.Budget)
	}
	r2, err := toolrun.Resume(client(s), r.State(), []toolrun.Tool{wait}, &toolrun.Options{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	res2, err := r2.Run(t.Context())
	if res2.StopReason != toolrun.StopEndTurn {
		t.Errorf("Run after Resume = %q (%q), %v, after %d requests in all; want the run to go on to end_turn", res2.StopReason, res2.Budget, err, len(s.Requests()))
	}
}

// TestHuntLimitStopAfterResumeIsAnError: Run's doc says its error "is
// non-nil when the run stopped short of the model's answer: ... a limit
// the caller set ([ErrMaxTurns], [ErrBudget])", and the README that
// "every stop short of the model's answer is an error from Run". Resume
// rebuilds the stop of a saved State without its error (state.go Resume:
// setStopped with a Result that has no Err, nor Budget), so Run, Next and
// Advance on a runner resumed from a run stopped at a limit return the
// stop with a nil error: a caller checking err alone, as Run's doc
// invites, takes the run for finished. What should hold: the resumed stop
// carries the same error (wrapping ErrMaxTurns or ErrBudget) and
// Result.Budget as the stop in the process that made it.
func TestHuntLimitStopAfterResumeIsAnError(t *testing.T) {
	tests := []struct {
		name    string
		opts    toolrun.Options
		wantErr error
	}{
		{name: "turn limit", opts: toolrun.Options{MaxTurns: 1}, wantErr: toolrun.ErrMaxTurns},
		{name: "tool-call budget", opts: toolrun.Options{Budget: toolrun.Budget{ToolCalls: 1}}, wantErr: toolrun.ErrBudget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(
				toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"}),
				toolruntest.ToolUse("t2", "get_weather", map[string]any{"city": "Rome"}),
			)))
			var calls counter
			opts := tt.opts
			opts.Logger = discard()
			r := toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls)}, &opts)
			res, err := r.Run(t.Context())
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Run = %q, %v; want %v", res.StopReason, err, tt.wantErr)
			}
			r2, err := toolrun.Resume(client(s), r.State(), []toolrun.Tool{weatherTool(&calls)}, &opts)
			if err != nil {
				t.Fatal(err)
			}
			res2, err := r2.Run(t.Context())
			if res2.StopReason != res.StopReason || !errors.Is(err, tt.wantErr) || res2.Budget != res.Budget {
				t.Errorf("Run after Resume = %q (budget %q), %v; want %q (budget %q) with an error wrapping %v, as before",
					res2.StopReason, res2.Budget, err, res.StopReason, res.Budget, tt.wantErr)
			}
		})
	}
}
