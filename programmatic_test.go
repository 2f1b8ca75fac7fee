package toolrun_test

import (
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// codeCall returns a tool_use block of get_weather made from the code of
// the server tool use srvtoolu_1 (programmatic tool calling).
func codeCall(id string) toolruntest.Block {
	b := toolruntest.ToolUse(id, "get_weather", map[string]any{"city": "Paris"})
	b.Caller, b.CallerToolID = "code_execution_20260120", "srvtoolu_1"
	return b
}

// TestProgrammaticResultsAlone checks that the user turn answering calls
// made from code holds only their tool_result blocks, as the API requires:
// a message appended while such a turn is out waits, and goes after the
// results of the next turn that answers no call made from code.
func TestProgrammaticResultsAlone(t *testing.T) {
	var calls counter
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(codeCall("toolu_1")),
		toolruntest.Message(codeCall("toolu_2")),
		toolruntest.Message(toolruntest.ToolUse("toolu_3", "get_weather", map[string]any{"city": "Rome"})),
		toolruntest.Message(toolruntest.Text("Sunny in both.")),
	))
	r := toolrun.New(client(s), userParams("Weather?"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard()})
	ctx := bounded(t)
	for turn, err := range r.Turns(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if turn.Number == 1 {
			r.AppendMessages(anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Also Rome, please.")))
		}
	}
	if errs := s.Errors(); len(errs) > 0 {
		t.Fatalf("the server refused a request: %v", errs)
	}
	// What each request ends with: the roles and block types of the
	// messages after the last assistant message.
	var got [][]string
	for _, req := range s.Requests()[1:] {
		msgs := req.Conversation
		i := len(msgs)
		for i > 0 && msgs[i-1].Role != "assistant" {
			i--
		}
		var tail []string
		for _, m := range msgs[i:] {
			for _, b := range m.Content {
				tail = append(tail, m.Role+":"+b.Type)
			}
		}
		got = append(got, tail)
	}
	want := [][]string{
		{"user:tool_result"},
		{"user:tool_result"},
		{"user:tool_result", "user:text"},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("the user turn of each later request (-got +want):\n%s", diff)
	}
}
