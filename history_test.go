package toolrun_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// roles summarises a request's history: the role and block types of each
// message, such as "user:text" or "assistant:text,tool_use".
func roles(req *toolruntest.Request) []string {
	var out []string
	for _, m := range req.Conversation {
		s := m.Role + ":"
		for i, b := range m.Content {
			if i > 0 {
				s += ","
			}
			s += b.Type
		}
		out = append(out, s)
	}
	return out
}

func TestHistoryEditsInLoopBody(t *testing.T) {
	toolTurn := toolruntest.Message(toolruntest.Text("checking"), toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"}))
	final := toolruntest.Message(toolruntest.Text("done"))
	tests := []struct {
		name      string
		replies   []toolruntest.Reply
		body      func(r *toolrun.Runner, turn *toolrun.Turn)
		wantRuns  int
		wantLast  []string // roles of the last request
		wantTurns int
	}{
		{
			name:      "untouched: the runner appends the turn and its results",
			replies:   []toolruntest.Reply{toolTurn, final},
			body:      func(r *toolrun.Runner, turn *toolrun.Turn) {},
			wantRuns:  1,
			wantLast:  []string{"user:text", "assistant:text,tool_use", "user:tool_result"},
			wantTurns: 2,
		},
		{
			name:    "append after a tool turn: the turn stays, the message follows its results",
			replies: []toolruntest.Reply{toolTurn, final},
			body: func(r *toolrun.Runner, turn *toolrun.Turn) {
				if turn.Number == 1 {
					r.AppendMessages(anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("and tomorrow?")))
				}
			},
			wantRuns:  1,
			wantLast:  []string{"user:text", "assistant:text,tool_use", "user:tool_result", "user:text"},
			wantTurns: 2,
		},
		{
			name:    "replace after a tool turn: the caller owns the turn",
			replies: []toolruntest.Reply{toolTurn, final},
			body: func(r *toolrun.Runner, turn *toolrun.Turn) {
				if turn.Number == 1 {
					r.SetMessages(append(r.Messages(), anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("never mind, just say done"))))
				}
			},
			wantRuns:  0,
			wantLast:  []string{"user:text", "user:text"},
			wantTurns: 2,
		},
		{
			name:    "the caller answers the calls itself",
			replies: []toolruntest.Reply{toolTurn, final},
			body: func(r *toolrun.Runner, turn *toolrun.Turn) {
				if len(turn.ToolCalls) == 0 {
					return
				}
				var results []anthropic.BetaContentBlockParamUnion
				for _, c := range turn.ToolCalls {
					results = append(results, anthropic.NewBetaToolResultBlock(c.ID, "cached: cloudy", false))
				}
				r.SetMessages(append(r.Messages(), turn.Message.ToParam(), anthropic.NewBetaUserMessage(results...)))
			},
			wantRuns:  0,
			wantLast:  []string{"user:text", "assistant:text,tool_use", "user:tool_result"},
			wantTurns: 2,
		},
		{
			name:    "rewrite history",
			replies: []toolruntest.Reply{toolTurn, final},
			body: func(r *toolrun.Runner, turn *toolrun.Turn) {
				if turn.Number == 1 {
					r.SetMessages([]anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("a different question"))})
				}
			},
			wantRuns:  0,
			wantLast:  []string{"user:text"},
			wantTurns: 2,
		},
		{
			name:    "retry a turn",
			replies: []toolruntest.Reply{toolruntest.Message(toolruntest.Text("meh")), toolTurn, final},
			body: func(r *toolrun.Runner, turn *toolrun.Turn) {
				if turn.Number == 1 {
					r.RetryTurn()
				}
			},
			wantRuns:  1,
			wantLast:  []string{"user:text", "assistant:text,tool_use", "user:tool_result"},
			wantTurns: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(tt.replies...))
			var calls counter
			r := toolrun.New(client(s), userParams("weather?"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard(), MaxTurns: 5})
			for turn, err := range r.Turns(t.Context()) {
				if err != nil {
					t.Fatal(err)
				}
				tt.body(r, turn)
			}
			res := r.Result()
			if res.StopReason != toolrun.StopEndTurn || res.Turns != tt.wantTurns {
				t.Errorf("stop = %q after %d turns, want end_turn after %d", res.StopReason, res.Turns, tt.wantTurns)
			}
			if got := calls.get("get_weather"); got != tt.wantRuns {
				t.Errorf("tool ran %d times, want %d", got, tt.wantRuns)
			}
			reqs := s.Requests()
			if diff := cmp.Diff(tt.wantLast, roles(reqs[len(reqs)-1])); diff != "" {
				t.Errorf("last request's history (-want +got):\n%s", diff)
			}
			checkHistory(t, res.Messages)
		})
	}
}

// TestAppendingEveryTurnIsBounded: a loop body that takes every turn over
// (SetMessages with one more message) keeps the runner from committing any
// turn, yet the run still ends at its turn limit, and no tool_result is
// orphaned.
func TestAppendingEveryTurnIsBounded(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		return toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", len(req.Conversation)), "get_weather", map[string]any{"city": "Oslo"}))
	}})
	var calls counter
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard(), MaxTurns: 4})
	for _, err := range r.Turns(t.Context()) {
		if errors.Is(err, toolrun.ErrMaxTurns) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		r.SetMessages(append(r.Messages(), anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("and again"))))
	}
	res := r.Result()
	if res.StopReason != toolrun.StopMaxTurns || res.Turns != 4 {
		t.Errorf("stop = %q after %d turns, want max_turns after 4", res.StopReason, res.Turns)
	}
	if calls.get("get_weather") != 0 {
		t.Errorf("tool ran; the caller owned every turn")
	}
	checkHistory(t, res.Messages)
}

// TestTurnsBreakAndResume: leaving the loop with break keeps the run; ranging
// again picks it up, and no tool runs twice.
func TestTurnsBreakAndResume(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
		toolruntest.Message(toolruntest.ToolUse("t2", "get_weather", map[string]any{"city": "Bergen"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	var calls counter
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard()})
	for turn, err := range r.Turns(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if turn.Number == 1 {
			break
		}
	}
	if calls.get("get_weather") != 0 || r.Result() != nil {
		t.Fatalf("after break: %d tool runs, result %v; want 0 and a run still going", calls.get("get_weather"), r.Result())
	}
	var numbers []int
	for turn, err := range r.Turns(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		numbers = append(numbers, turn.Number)
	}
	if diff := cmp.Diff([]int{2, 3}, numbers); diff != "" {
		t.Errorf("turns after resuming (-want +got):\n%s", diff)
	}
	if got := calls.get("get_weather"); got != 2 {
		t.Errorf("tool ran %d times, want 2", got)
	}
}

// TestNextStepByStep drives the run with Next and checks that a stopped run
// keeps returning nil, and that appending to a finished conversation
// continues it.
func TestNextStepByStep(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.Text("Hello!")),
		toolruntest.Message(toolruntest.Text("Goodbye!")),
	))
	r := toolrun.New(client(s), userParams("hi"), nil, &toolrun.Options{Logger: discard()})
	ctx := context.Background()
	turn, err := r.Next(ctx)
	if err != nil || turn == nil || turn.Number != 1 {
		t.Fatalf("Next = %v, %v; want turn 1", turn, err)
	}
	if turn, err := r.Next(ctx); turn != nil || err != nil || r.Result().StopReason != toolrun.StopEndTurn {
		t.Fatalf("Next = %v, %v; want nil, nil with the run stopped", turn, err)
	}
	if turn, err := r.Next(ctx); turn != nil || err != nil {
		t.Fatalf("Next after the stop = %v, %v; want nil, nil", turn, err)
	}
	r.AppendMessages(anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("bye")))
	res, err := r.Run(ctx)
	if err != nil || res.Text() != "Goodbye!" || res.Turns != 2 {
		t.Fatalf("Run after appending = %q after %d turns, %v; want Goodbye! after 2", res.Text(), res.Turns, err)
	}
	checkHistory(t, res.Messages)
	if got := len(res.Messages); got != 4 {
		t.Errorf("history has %d messages, want 4", got)
	}
}
