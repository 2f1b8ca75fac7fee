// Command crashserver is an MCP server over stdio that misbehaves on
// request, for the tests of package mcptool, which build and run it. Its
// tools:
//
//   - echo returns its text;
//   - fail returns a tool error (isError) with its text;
//   - crash writes to stderr and exits with status 3 in the middle of the call;
//   - hang never answers, though the server goes on answering pings.
//
// Each run writes "crashserver started" to stderr. Run with the argument
// -exit, it writes an error to stderr and exits with status 1 before it
// serves anything.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type textIn struct {
	Text string `json:"text"`
}

func main() {
	fmt.Fprintln(os.Stderr, "crashserver started")
	if len(os.Args) > 1 && os.Args[1] == "-exit" {
		fmt.Fprintln(os.Stderr, "crashserver: bad config")
		os.Exit(1)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "crashserver", Version: "v1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fails with its text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New(in.Text)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits mid-call."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "crashserver: fatal: crash requested")
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Never answers."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			<-ctx.Done() // until the client cancels the call or goes away
			return nil, nil, ctx.Err()
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
