package toolrun_test

import (
	"strings"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestNonObjectToolInput checks a tool_use whose input is a JSON string or
// array, which the API refuses in a request: the call is answered with
// is_error and a message saying what to send, the tool does not run, and
// the next request, sent through the fake server's validation (which
// refuses such an input as the API does), is accepted, with and without a
// message thread, streamed or not.
func TestNonObjectToolInput(t *testing.T) {
	tests := []struct {
		name  string
		input any
		kind  string
	}{
		{"string", "Paris", "a JSON string"},
		{"array", []string{"Paris"}, "a JSON array"},
		{"number", 42, "a JSON number"},
		{"null", jsonNull{}, "JSON null"},
	}
	for _, tt := range tests {
		for _, mode := range []struct {
			name             string
			noThread, stream bool
		}{{"thread", false, false}, {"no thread", true, false}, {"streamed", false, true}} {
			t.Run(tt.name+"/"+mode.name, func(t *testing.T) {
				var calls counter
				s := toolruntest.New(t, toolruntest.Script(
					toolruntest.Message(toolruntest.Text("Checking."), toolruntest.ToolUse("toolu_1", "get_weather", tt.input)),
					toolruntest.Message(toolruntest.ToolUse("toolu_2", "get_weather", map[string]any{"city": "Paris"})),
					toolruntest.Message(toolruntest.Text("It is sunny in Paris.")),
				))
				log, logs := newLogger()
				r := toolrun.New(client(s), userParams("Weather in Paris?"), []toolrun.Tool{weatherTool(&calls)},
					&toolrun.Options{Logger: log, NoThread: mode.noThread, Stream: mode.stream})
				res, err := r.Run(bounded(t))
				if err != nil {
					t.Fatal(err)
				}
				if res.StopReason != toolrun.StopEndTurn || res.Turns != 3 {
					t.Fatalf("got %q after %d turns, want end_turn after 3", res.StopReason, res.Turns)
				}
				if got := calls.get("get_weather"); got != 1 {
					t.Errorf("get_weather ran %d times, want 1: only the call with an object", got)
				}
				checkHistory(t, res.Messages)
				results := toolResults(s.Requests()[1])
				if len(results) != 1 || !results[0].IsError || !strings.Contains(string(results[0].Content), "JSON object") ||
					!strings.Contains(string(results[0].Content), tt.kind) {
					t.Errorf("result of the call = %+v, want is_error naming %s and asking for a JSON object", results, tt.kind)
				}
				if rec := logs.find(t, "toolrun: a tool_use input is not a JSON object; the history holds {} in its place"); rec["tool"] != "get_weather" {
					t.Errorf("log record = %v, want one naming the tool", rec)
				}
			})
		}
	}
}

// jsonNull marshals as null.
type jsonNull struct{}

func (jsonNull) MarshalJSON() ([]byte, error) { return []byte("null"), nil }
