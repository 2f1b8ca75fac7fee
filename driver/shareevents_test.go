package driver_test

import (
	"context"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestShareEvents: an observer of a run whose Options went through
// ShareEvents gets the request's own history in RequestSent, the same
// messages at each request; any other observer gets a copy of its own.
func TestShareEvents(t *testing.T) {
	for _, tt := range []struct {
		name   string
		share  bool
		shared bool
	}{
		{"shared", true, true},
		{"copied", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("toolu_1", "echo", map[string]any{"s": "a"})),
				toolruntest.Message(toolruntest.Text("done")),
			))
			echo := toolrun.NewTool("echo", "Echoes s.", func(_ context.Context, in struct {
				S string `json:"s"`
			}) (string, error) {
				return in.S, nil
			})
			var firsts []*anthropic.BetaUserMessageParam
			opts := &toolrun.Options{OnEvent: func(_ context.Context, e toolrun.Event) {
				if rs, ok := e.(toolrun.RequestSent); ok {
					firsts = append(firsts, rs.Params.Messages[0].OfUser)
				}
			}}
			if tt.share {
				driver.ShareEvents(opts)
			}
			r := toolrun.New(s.Client(), anthropic.BetaMessageNewParams{
				Model: "claude-test", MaxTokens: 256,
				Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))},
			}, []toolrun.Tool{echo}, opts)
			if _, err := r.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if len(firsts) != 2 {
				t.Fatalf("got %d requests, want 2", len(firsts))
			}
			if got := firsts[0] == firsts[1]; got != tt.shared {
				t.Errorf("the two requests' first message is the same one: got %v, want %v", got, tt.shared)
			}
		})
	}
}
