//go:build review

// This test fails on purpose: it pins a defect left open. A run whose
// history does not encode as JSON (a caller's tool_use input that is not
// JSON) cannot be deep-copied by Runner.State, which now logs an Error and
// returns a shallow copy; a fix would refuse such a history in New (an
// API that returns no error) or copy messages without JSON. Run it with
// go test -tags review -run 'TestPending' .

package toolrun_test

import (
	"encoding/json"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestPendingStateOfUnencodableRunSharesNothing: Runner.State says it
// "shares nothing with the runner", but when the run's data does not
// encode (here a history the caller gave with a tool_use input that is not
// JSON) it silently returns the shallow clone, whose messages' blocks are
// the runner's own: writing into the copy changes the run's history.
// It should say so (an error or a log) and still share nothing.
func TestPendingStateOfUnencodableRunSharesNothing(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
	p := userParams("go")
	p.Messages = append(p.Messages,
		anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{
			{OfText: &anthropic.BetaTextBlockParam{Text: "thinking aloud"}},
			{OfToolUse: &anthropic.BetaToolUseBlockParam{ID: "x1", Name: "write_file", Input: json.RawMessage(`{"path":`)}},
		}}})
	r := toolrun.New(client(s), p, nil, &toolrun.Options{Logger: discard()})
	st := r.State()
	st.Params.Messages[1].OfAssistant.Content[0].OfText.Text = "forged"
	if got := r.Messages()[1].OfAssistant.Content[0].OfText.Text; got != "thinking aloud" {
		t.Errorf("the runner's history changed through Runner.State's copy: %q", got)
	}
}
