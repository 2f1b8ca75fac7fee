package toolrun_test

// A run whose history does not encode as JSON: a caller's tool_use input
// that is not JSON, or an Input holding a value encoding/json refuses.
// Runner.State must still return a copy that shares nothing with the run
// (it used to return a shallow one, whose blocks were the runner's own),
// and a run of it must fail clearly, sending nothing.

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// unencodableInputs are tool_use inputs that make a history that does not
// encode. Each has a slice or bytes inside that forge writes into, through
// whatever holds the input, and intact tells whether the input is as it
// was built.
var unencodableInputs = []struct {
	name   string
	input  func() any
	forge  func(input any)
	intact func(input any) bool
}{
	{
		name:   "input not JSON",
		input:  func() any { return json.RawMessage(`{"path":`) },
		forge:  func(in any) { in.(json.RawMessage)[1] = 'X' },
		intact: func(in any) bool { return string(in.(json.RawMessage)) == `{"path":` },
	},
	{
		name:  "input holding +Inf",
		input: func() any { return map[string]any{"limit": math.Inf(1), "paths": []string{"a.txt"}} },
		forge: func(in any) {
			m := in.(map[string]any)
			m["paths"].([]string)[0] = "/etc/shadow"
			m["limit"] = 1.0
		},
		intact: func(in any) bool {
			m := in.(map[string]any)
			return len(m) == 2 && math.IsInf(m["limit"].(float64), 1) && slices.Equal(m["paths"].([]string), []string{"a.txt"})
		},
	},
	{
		name: "input holding a channel",
		input: func() any {
			return &struct {
				Done  chan struct{}
				Paths []string
			}{Done: make(chan struct{}), Paths: []string{"a.txt"}}
		},
		forge: func(in any) {
			in.(*struct {
				Done  chan struct{}
				Paths []string
			}).Paths[0] = "/etc/shadow"
		},
		intact: func(in any) bool {
			return slices.Equal(in.(*struct {
				Done  chan struct{}
				Paths []string
			}).Paths, []string{"a.txt"})
		},
	},
}

// unencodableHistory returns a user message, then an assistant message with
// a text block and a tool_use of input, then that call's result.
func unencodableHistory(input any) []anthropic.BetaMessageParam {
	return []anthropic.BetaMessageParam{
		anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go")),
		{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{
			{OfText: &anthropic.BetaTextBlockParam{Text: "thinking aloud"}},
			{OfToolUse: &anthropic.BetaToolUseBlockParam{ID: "x1", Name: "write_file", Input: input}},
		}}},
		anthropic.NewBetaUserMessage(anthropic.NewBetaToolResultBlock("x1", "written", false)),
	}
}

// TestStateOfUnencodableRunSharesNothing: Runner.State's copy of such a
// run holds the same history, and writing into it, down to the text of a
// block and the bytes or contents of a tool_use input, does not change the
// run's; State logs an Error that the state does not encode.
func TestStateOfUnencodableRunSharesNothing(t *testing.T) {
	for _, tt := range unencodableInputs {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
			p := userParams("go")
			p.Messages = unencodableHistory(tt.input())
			p.StopSequences = []string{"STOP"}
			log, buf := newLogger()
			r := toolrun.New(client(s), p, nil, &toolrun.Options{Logger: log})

			st := r.State()
			if buf.find(t, "toolrun: the run's state does not encode as JSON; State returns a copy made without it, which a Store cannot save") == nil {
				t.Errorf("no Error logged that the state does not encode; log: %v", buf.records(t))
			}
			if got, want := len(st.Params.Messages), len(p.Messages); got != want {
				t.Fatalf("got %d messages in the copy, want %d", got, want)
			}
			blocks := st.Params.Messages[1].OfAssistant.Content
			if got := blocks[0].OfText.Text; got != "thinking aloud" {
				t.Errorf("got text %q in the copy, want %q", got, "thinking aloud")
			}
			if !tt.intact(blocks[1].OfToolUse.Input) {
				t.Errorf("got input %#v in the copy, want it as built", blocks[1].OfToolUse.Input)
			}
			if diff := cmp.Diff([]string{"STOP"}, st.Params.StopSequences); diff != "" {
				t.Errorf("stop sequences in the copy (-want +got):\n%s", diff)
			}

			blocks[0].OfText.Text = "forged"
			tt.forge(blocks[1].OfToolUse.Input)
			st.Params.StopSequences[0] = "forged"
			st.Params.Messages[0].OfUser.Content[0].OfText.Text = "forged"

			msgs := r.Messages()
			if got := msgs[1].OfAssistant.Content[0].OfText.Text; got != "thinking aloud" {
				t.Errorf("the run's text block changed through Runner.State's copy: %q", got)
			}
			if in := msgs[1].OfAssistant.Content[1].OfToolUse.Input; !tt.intact(in) {
				t.Errorf("the run's tool_use input changed through Runner.State's copy: %#v", in)
			}
			if got := msgs[0].OfUser.Content[0].OfText.Text; got != "go" {
				t.Errorf("the run's user message changed through Runner.State's copy: %q", got)
			}
			if got := r.State().Params.StopSequences; !slices.Equal(got, []string{"STOP"}) {
				t.Errorf("the run's stop sequences changed through Runner.State's copy: %q", got)
			}
		})
	}
}

// TestRunOfUnencodableHistory: a run whose history does not encode stops
// with StopError and a *TurnError carrying the encoding's error, before
// anything is sent, as often as it is run, with the stream or without;
// replacing the bad message lets it go on. The run first makes a turn of
// its own with a tool, so that nothing it did is done again either.
func TestRunOfUnencodableHistory(t *testing.T) {
	for _, tt := range unencodableInputs {
		for _, stream := range []bool{false, true} {
			name := tt.name
			if stream {
				name += " stream"
			}
			t.Run(name, func(t *testing.T) {
				s := toolruntest.New(t, toolruntest.Script(
					toolruntest.Message(toolruntest.ToolUse("t1", "count", map[string]any{})),
					toolruntest.Message(toolruntest.Text("counted")),
					toolruntest.Message(toolruntest.Text("done")),
				))
				var calls counter
				count := toolrun.NewTool("count", "Count", func(ctx context.Context, in struct{}) (string, error) {
					calls.inc("count")
					return "1", nil
				})
				r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{count}, &toolrun.Options{Logger: discard(), Stream: stream})
				if _, err := r.Run(t.Context()); err != nil {
					t.Fatal(err)
				}
				good := r.Messages()
				r.AppendMessages(unencodableHistory(tt.input())...)

				for attempt := range 2 {
					res, err := r.Run(t.Context())
					// The SDK encodes with its own copy of encoding/json, whose
					// error types a caller cannot name: the text says it.
					var te *toolrun.TurnError
					if !errors.As(err, &te) || !strings.Contains(err.Error(), "json: ") {
						t.Fatalf("run %d: got error %v, want a *TurnError with the JSON encoding's error", attempt+1, err)
					}
					if res.StopReason != toolrun.StopError {
						t.Errorf("run %d: got stop reason %q, want %q", attempt+1, res.StopReason, toolrun.StopError)
					}
					if got := len(s.Requests()); got != 2 {
						t.Errorf("run %d: the server got %d requests, want the first run's 2", attempt+1, got)
					}
					if got := calls.get("count"); got != 1 {
						t.Errorf("run %d: the tool ran %d times, want once", attempt+1, got)
					}
				}

				r.SetMessages(append(good, anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("again"))))
				res, err := r.Run(t.Context())
				if err != nil || res.StopReason != toolrun.StopEndTurn {
					t.Fatalf("after the history was mended: got %v, %v; want end_turn", res.StopReason, err)
				}
				if got := len(s.Requests()); got != 3 {
					t.Errorf("the server got %d requests, want 3", got)
				}
				if got := calls.get("count"); got != 1 {
					t.Errorf("the tool ran %d times, want once", got)
				}
			})
		}
	}
}
