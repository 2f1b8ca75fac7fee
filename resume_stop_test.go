package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestLimitStopAfterResumeIsAnError checks that a run resumed from the
// State of a run stopped at a limit the caller set returns that stop as
// the run that saved it did: with an error wrapping ErrMaxTurns or
// ErrBudget, and Result.Budget naming the bound, so that a caller
// checking the error alone does not take the run for finished.
func TestLimitStopAfterResumeIsAnError(t *testing.T) {
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
			if !errors.Is(res2.Err, tt.wantErr) {
				t.Errorf("Result.Err after Resume = %v, want one wrapping %v", res2.Err, tt.wantErr)
			}
			if len(s.Requests()) != 1 || res2.ToolCalls != res.ToolCalls {
				t.Errorf("%d requests and %d tool calls answered, want 1 and %d: the resumed run went on", len(s.Requests()), res2.ToolCalls, res.ToolCalls)
			}
		})
	}
}

// TestWallTimeStopAfterResume checks Budget.WallTime's rule: it counts
// from the runner's first step and is never reset, so a runner stopped by
// it stays stopped (Run again sends nothing); a runner resumed from its
// State counts its own time, and the run goes on, the call that was cut
// off answered as interrupted. The first part runs in a synctest bubble,
// where the 2-second budget takes no time.
func TestWallTimeStopAfterResume(t *testing.T) {
	wait := toolrun.NewTool("wait", "Waits", func(ctx context.Context, in struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	var state *toolrun.State
	synctest.Test(t, func(t *testing.T) {
		// No server: a request would fail, and the run stop with
		// StopError.
		offline := anthropic.NewClient(option.WithAPIKey("unused"), option.WithBaseURL("http://127.0.0.1:1"), option.WithMaxRetries(0))
		r, err := toolrun.Resume(offline, pendingState(t, "wait"), []toolrun.Tool{wait}, &toolrun.Options{
			Logger: discard(), Budget: toolrun.Budget{WallTime: 2 * time.Second},
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			res, err := r.Run(t.Context())
			if res.StopReason != toolrun.StopBudget || res.Budget != toolrun.BudgetWallTime || !errors.Is(err, toolrun.ErrBudget) {
				t.Fatalf("Run %d = %q (%q), %v; want a wall-time budget stop", i+1, res.StopReason, res.Budget, err)
			}
		}
		state = r.State()
	})

	for _, budget := range []toolrun.Budget{{}, {WallTime: time.Hour}} {
		s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
		r, err := toolrun.Resume(client(s), state, []toolrun.Tool{wait}, &toolrun.Options{Logger: discard(), Budget: budget})
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Run(t.Context())
		if res.StopReason != toolrun.StopEndTurn || err != nil {
			t.Errorf("with %+v: Run after Resume = %q (%q), %v after %d requests; want the run to go on to end_turn",
				budget, res.StopReason, res.Budget, err, len(s.Requests()))
			continue
		}
		if got := toolResults(s.Requests()[0]); len(got) != 1 || !got[0].IsError {
			t.Errorf("with %+v: results sent %+v, want the cut-off call answered with an error", budget, got)
		}
	}
}

// TestResumeBudgetStopOfAnOlderState checks a State written before
// State.Budget was kept: it decodes, its budget stop comes back as an
// error wrapping ErrBudget, and, its bound unknown, it is taken for final:
// nothing is sent.
func TestResumeBudgetStopOfAnOlderState(t *testing.T) {
	var state toolrun.State
	if err := json.Unmarshal([]byte(`{"format":2,
		"params":{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]}]},
		"turns":1,"stop_reason":"budget","detail":"wall-time budget of 2s used up"}`), &state); err != nil {
		t.Fatal(err)
	}
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
	r, err := toolrun.Resume(client(s), &state, nil, &toolrun.Options{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if res.StopReason != toolrun.StopBudget || res.Budget != "" || !errors.Is(err, toolrun.ErrBudget) || len(s.Requests()) != 0 {
		t.Errorf("Run = %q (%q), %v after %d requests; want the budget stop with ErrBudget, nothing sent", res.StopReason, res.Budget, err, len(s.Requests()))
	}
}
