package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestToolUseIDOfAnEarlierTurn: a response whose tool_use id is that of a
// call of an earlier turn (a faulty API or proxy replaying a cached
// response, say) is malformed like a repeat within one response: it is
// asked for once more, then the run stops with StopError wrapping
// ErrMalformedResponse. Nothing of it runs, the history stays one the API
// accepts (each tool_use id once), and Run again goes on. Before, the
// call ran a second time and its tool_use was committed, and the API
// refused the history at every later request: a wedged run. The ids the
// runner knows include those of a history given to New and of messages
// appended later.
func TestToolUseIDOfAnEarlierTurn(t *testing.T) {
	again := func() toolruntest.Reply {
		return toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"}))
	}
	for _, tt := range []struct {
		name    string
		stream  bool
		history bool // t1 is in the history given to New, not a turn of this run
	}{
		{name: "an earlier turn"},
		{name: "an earlier turn, streamed", stream: true},
		{name: "the history given to New", history: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			script := []toolruntest.Reply{again(), again(), again(), toolruntest.Message(toolruntest.Text("done"))}
			wantRuns := 1
			p := userParams("weather")
			if tt.history {
				script = script[1:]
				wantRuns = 0
				p.Messages = append(p.Messages,
					anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{
						{OfToolUse: &anthropic.BetaToolUseBlockParam{ID: "t1", Name: "get_weather", Input: json.RawMessage(`{"city":"Oslo"}`)}},
					}}},
					anthropic.NewBetaUserMessage(anthropic.NewBetaToolResultBlock("t1", "12 °C", false)),
					anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("and again?")))
			}
			s := toolruntest.New(t, toolruntest.Script(script...))
			var calls counter
			r := toolrun.New(client(s), p, []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard(), Stream: tt.stream})
			res, err := r.Run(t.Context())
			if res.StopReason != toolrun.StopError || !errors.Is(err, toolrun.ErrMalformedResponse) {
				t.Fatalf("Run = %q, %v; want StopError wrapping ErrMalformedResponse", res.StopReason, err)
			}
			if got := calls.get("get_weather"); got != wantRuns {
				t.Errorf("get_weather ran %d times, want %d: a tool_use id runs once", got, wantRuns)
			}
			checkHistory(t, res.Messages)
			res, err = r.Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Errorf("Run again = %q, %v; want end_turn: the run goes on", res.StopReason, err)
			}
			checkHistory(t, res.Messages)
		})
	}
}

// TestTurnLeftOutWithCallsThatRanIsAWarning: a caller who replaces the
// history (SetMessages) while a run awaits approval takes the turn over,
// as documented;
// the calls of that turn that already ran keep their effects, but the
// model never sees their results. That is a Warn naming them, not a Debug
// record only. A turn left out with no call that ran stays a Debug record.
// (The run stays suspended until its deferred calls are decided, and
// those decisions are then moot: the turn is left out, nothing of it runs
// any more.)
func TestTurnLeftOutWithCallsThatRanIsAWarning(t *testing.T) {
	for _, tt := range []struct {
		name     string
		weather  bool // the turn has a call that runs before the suspension
		wantWarn bool
	}{
		{"a call ran", true, true},
		{"no call ran", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			blocks := []toolruntest.Block{toolruntest.ToolUse("m1", "send_mail", map[string]any{"city": "to Oslo"})}
			if tt.weather {
				blocks = append(blocks, toolruntest.ToolUse("w1", "get_weather", map[string]any{"city": "Oslo"}))
			}
			s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(blocks...), toolruntest.Message(toolruntest.Text("done"))))
			var calls counter
			mail := toolrun.NewTool("send_mail", "Sends mail", func(ctx context.Context, in weatherIn) (string, error) {
				calls.inc("send_mail")
				return "sent", nil
			})
			mail.Policy = policy.RequireApproval("sends mail")
			log, logs := newLogger()
			r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{mail, weatherTool(&calls)}, &toolrun.Options{Logger: log})
			res, err := r.Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
				t.Fatalf("Run = %q, %v; want awaiting_approval", res.StopReason, err)
			}
			r.SetMessages(append(r.Messages(), anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("never mind"))))
			// The run stays suspended until the call is decided; the
			// decision is then moot, as the turn was taken over.
			if err := r.Decide("m1", toolrun.Decision{}); err != nil {
				t.Fatal(err)
			}
			if res, err = r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run after SetMessages = %q, %v; want end_turn", res.StopReason, err)
			}
			warn := logs.find(t, "toolrun: history changed by the caller; turn left out with calls that ran, whose results the model will not see")
			if got := warn != nil; got != tt.wantWarn {
				t.Fatalf("Warn record logged: %v, want %v (records: %v)", got, tt.wantWarn, logs.records(t))
			}
			if warn != nil {
				if ids, _ := warn["tool_use_ids"].([]any); warn["level"] != "WARN" || len(ids) != 1 || ids[0] != "w1" {
					t.Errorf("record = %v, want a WARN naming w1", warn)
				}
			} else if logs.find(t, "toolrun: history changed by the caller; turn left out") == nil {
				t.Error("no Debug record of the turn left out")
			}
			if calls.get("send_mail") != 0 {
				t.Error("the deferred call ran")
			}
		})
	}
}
