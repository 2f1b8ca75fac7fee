package toolrun_test

import (
	"context"
	"encoding/json"
	"fmt"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// A tool given mid-run, once the model has found what it needs it for.
// With the inline-tools beta in the params' Betas, the tool list stays as
// the run began (and with it the prompt cache and the message thread), and
// the new tool goes to the model in a tool_addition block.
func ExampleRunner_AddTools() {
	server := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "find_ticket", map[string]string{"query": "login fails"})),
		toolruntest.Message(toolruntest.ToolUse("toolu_2", "close_ticket", map[string]string{"id": "T-42"})),
		toolruntest.Message(toolruntest.Text("Closed T-42.")),
	))
	defer server.Close()

	type findIn struct {
		Query string `json:"query"`
	}
	type closeIn struct {
		ID string `json:"id"`
	}
	find := toolrun.NewTool("find_ticket", "Find a ticket", func(ctx context.Context, in findIn) (string, error) {
		return "T-42: " + in.Query, nil
	})
	closeTicket := toolrun.NewTool("close_ticket", "Close a ticket", func(ctx context.Context, in closeIn) (string, error) {
		return "closed " + in.ID, nil
	})

	r := toolrun.New(server.Client(), anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Betas:     []anthropic.AnthropicBeta{anthropic.AnthropicBetaInlineTools2026_09_15},
		Messages: []anthropic.BetaMessageParam{
			anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Close the ticket about failing logins.")),
		},
	}, []toolrun.Tool{find}, nil)

	for turn, err := range r.Turns(context.Background()) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if turn.Number == 1 {
			// Checked as New checks its tools; an error, not a panic.
			if err := r.AddTools(closeTicket); err != nil {
				fmt.Println("error:", err)
				return
			}
		}
	}
	for i, req := range server.Requests() {
		// The tool list the request stands for: on a message thread, the
		// one the thread was created with.
		var list []struct{ Name string }
		json.Unmarshal(req.Tools, &list)
		var listed []string
		for _, def := range list {
			listed = append(listed, def.Name)
		}
		fmt.Printf("request %d: tool list %v, the model has %v\n", i+1, listed, req.ToolNames())
	}
	fmt.Println(r.Result().Text())
	// Output:
	// request 1: tool list [find_ticket], the model has [find_ticket]
	// request 2: tool list [find_ticket], the model has [find_ticket close_ticket]
	// request 3: tool list [find_ticket], the model has [find_ticket close_ticket]
	// Closed T-42.
}
