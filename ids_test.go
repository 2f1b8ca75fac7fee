package toolrun_test

import (
	"encoding/json"
	"errors"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun"
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
