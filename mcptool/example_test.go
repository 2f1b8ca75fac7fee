package mcptool_test

import (
	"context"
	"fmt"
	"log/slog"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/mcptool"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

func Example() {
	ctx := context.Background()

	// An MCP server in this process, for the example; mcptool.Command and
	// mcptool.StreamableHTTP reach servers elsewhere.
	docs := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "v1"}, nil)
	type searchIn struct {
		Query string `json:"query" jsonschema:"what to look for"`
	}
	mcp.AddTool(docs, &mcp.Tool{Name: "search", Description: "Search the docs."},
		func(ctx context.Context, req *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "3 pages mention " + in.Query}}}, nil, nil
		})

	srv, err := mcptool.Connect(ctx, "docs", mcptool.InMemory(docs), &mcptool.Options{
		Restart: mcptool.RestartPolicy{MaxRestarts: 3},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	tools, err := srv.Tools(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range tools {
		fmt.Printf("%s: %s\n", t.Name(), t.Description())
	}

	// A scripted model that calls the tool, in place of the API.
	model := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "docs__search", map[string]string{"query": "retries"})),
		toolruntest.Message(toolruntest.Text("Three pages cover retries.")),
	))
	defer model.Close()

	r := toolrun.New(model.Client(), anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("What do the docs say about retries?"))},
	}, tools, &toolrun.Options{Logger: slog.New(slog.DiscardHandler)})
	res, err := r.Run(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	sent := model.Requests()[1].Conversation
	fmt.Println("tool result:", sent[len(sent)-1].Content[0].ResultText())
	fmt.Println(res.Text())
	// Output:
	// docs__search: Search the docs.
	// tool result: 3 pages mention retries
	// Three pages cover retries.
}

func ExampleToolName() {
	fmt.Println(mcptool.ToolName("github", "search"))
	fmt.Println(mcptool.ToolName("jira", "search"))
	fmt.Println(mcptool.ToolName("files.v2", "read file"))
	// Output:
	// github__search
	// jira__search
	// files_v2__read_file
}

// ExampleOptions_configFor asks a person before a destructive MCP tool
// runs, as for a Go tool with the same policy.
func ExampleOptions_configFor() {
	ctx := context.Background()
	files := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v1"}, nil)
	type pathIn struct {
		Path string `json:"path"`
	}
	mcp.AddTool(files, &mcp.Tool{Name: "delete", Description: "Delete a file."},
		func(ctx context.Context, req *mcp.CallToolRequest, in pathIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.Path}}}, nil, nil
		})
	srv, err := mcptool.Connect(ctx, "files", mcptool.InMemory(files), &mcptool.Options{
		ConfigFor: func(t *mcp.Tool) toolrun.ToolConfig {
			if t.Annotations == nil || !t.Annotations.ReadOnlyHint {
				return toolrun.ToolConfig{Policy: policy.RequireApproval(t.Name + " may change files")}
			}
			return toolrun.ToolConfig{}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	tools, err := srv.Tools(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}

	model := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "files__delete", map[string]string{"path": "/tmp/x"})),
		toolruntest.Message(toolruntest.Text("Deleted.")),
	))
	defer model.Close()
	r := toolrun.New(model.Client(), anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Delete /tmp/x"))},
	}, tools, &toolrun.Options{Logger: slog.New(slog.DiscardHandler)})
	res, err := r.Run(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.StopReason, res.Pending[0].Call.Name, "—", res.Pending[0].Reason)

	// A person approves; the run goes on.
	if err := r.Decide("toolu_1", toolrun.Decision{}); err != nil {
		fmt.Println(err)
		return
	}
	if res, err = r.Run(ctx); err != nil {
		fmt.Println(err)
		return
	}
	sent := model.Requests()[1].Conversation
	fmt.Println("tool result:", sent[len(sent)-1].Content[0].ResultText())
	fmt.Println(res.Text())
	// Output:
	// awaiting_approval files__delete — delete may change files
	// tool result: deleted /tmp/x
	// Deleted.
}
