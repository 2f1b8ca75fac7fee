package toolrun_test

import (
	"context"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// navigateIn is the input of the navigate tools of TestToolsetDispatch.
type navigateIn struct {
	URL string `json:"url"`
}

// navigateTool returns a tool named navigate that answers with who ran it,
// a member of toolset if toolset is not "".
func navigateTool(who, toolset string) *toolrun.FuncTool {
	t := toolrun.NewTool("navigate", "Go to a page", func(ctx context.Context, in navigateIn) (string, error) {
		return who + " went to " + in.URL, nil
	})
	t.Toolset = toolset
	return t
}

// memberCall returns a tool_use block of a member of toolset ("" for a
// tool of its own).
func memberCall(id, toolset, name string) toolruntest.Block {
	b := toolruntest.ToolUse(id, name, map[string]any{"url": "https://example.com"})
	b.Toolset = toolset
	return b
}

// TestToolsetDispatch checks that a call is dispatched on its toolset and
// name together: three tools named navigate (one of its own, one of the
// browser toolset, one of the computer toolset) each get only their own
// calls, a call of a member the run lacks gets the unknown-tool result,
// and each member's result carries its toolset_name back.
func TestToolsetDispatch(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(
			memberCall("toolu_1", "", "navigate"),
			memberCall("toolu_2", "browser", "navigate"),
			memberCall("toolu_3", "computer", "navigate"),
			memberCall("toolu_4", "browser", "scroll"),
		),
		toolruntest.Message(toolruntest.Text("Done.")),
	))
	params := userParams("Open example.com")
	params.Tools = []anthropic.BetaToolUnionParam{
		{OfBrowserToolset20260801: &anthropic.BetaBrowserToolset20260801Param{}},
		{OfComputerToolset20260801: &anthropic.BetaComputerToolset20260801Param{}},
	}
	tools := []toolrun.Tool{navigateTool("own", ""), navigateTool("browser", "browser"), navigateTool("computer", "computer")}
	r := toolrun.New(client(s), params, tools, &toolrun.Options{Logger: discard()})
	if _, err := r.Run(bounded(t)); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("got %d requests, want 2", len(reqs))
	}
	type result struct {
		ID, Toolset, Text string
		IsError           bool
	}
	var got []result
	for _, b := range toolResults(reqs[1]) {
		got = append(got, result{b.ToolUseID, b.Toolset, b.ResultText(), b.IsError})
	}
	want := []result{
		{"toolu_1", "", "own went to https://example.com", false},
		{"toolu_2", "browser", "browser went to https://example.com", false},
		{"toolu_3", "computer", "computer went to https://example.com", false},
		{"toolu_4", "browser", `unknown tool "scroll" of toolset "browser"; available tools of the toolset: navigate`, true},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("tool results (-got +want):\n%s", diff)
	}
	// A member sends no definition of its own: the toolset entry declares
	// it, and the fake, like the API, refuses two tools of one name.
	var names []string
	for _, d := range reqs[0].Params.Tools {
		names = append(names, d.Name)
	}
	if diff := cmp.Diff(names, []string{"browser", "computer", "navigate"}); diff != "" {
		t.Errorf("tools sent (-got +want):\n%s", diff)
	}
}
