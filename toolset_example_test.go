package toolrun_test

import (
	"context"
	"fmt"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// A toolset's member runs only the calls the model makes of that toolset:
// here a tool of its own and the browser toolset's member share the name
// navigate, and each gets its own call.
func ExampleToolConfig_toolset() {
	own := toolruntest.ToolUse("toolu_1", "navigate", map[string]string{"url": "https://example.com"})
	member := toolruntest.ToolUse("toolu_2", "navigate", map[string]string{"url": "https://example.org"})
	member.Toolset = "browser"
	server := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(own, member),
		toolruntest.Message(toolruntest.Text("Both pages are open.")),
	))
	defer server.Close()

	type navigateIn struct {
		URL string `json:"url"`
	}
	navigate := func(who string) *toolrun.FuncTool {
		return toolrun.NewTool("navigate", "Go to a page", func(ctx context.Context, in navigateIn) (string, error) {
			fmt.Println(who, "goes to", in.URL)
			return "opened " + in.URL, nil
		})
	}
	browser := navigate("the browser toolset's member")
	browser.Toolset = "browser" // declared by the toolset's entry in Params.Tools; it sends no definition of its own

	params := anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Open both pages."))},
		Tools:     []anthropic.BetaToolUnionParam{{OfBrowserToolset20260801: &anthropic.BetaBrowserToolset20260801Param{}}},
	}
	opts := &toolrun.Options{MaxParallelTools: 1} // calls in order, for the output
	r := toolrun.New(server.Client(), params, []toolrun.Tool{navigate("the tool of its own"), browser}, opts)
	res, err := r.Run(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StopReason, res.ToolCalls)
	// Output:
	// the tool of its own goes to https://example.com
	// the browser toolset's member goes to https://example.org
	// end_turn 2
}
