// Command crashserver is an MCP server over stdio that misbehaves on
// request, for the tests of package mcptool, which build and run it. Its
// tools:
//
//   - echo returns its text;
//   - fail returns a tool error (isError) with its text;
//   - crash writes to stderr and exits with status 3 in the middle of the call;
//   - hang never answers, though the server goes on answering pings;
//   - env, with the flag -env-tool only, returns its environment, one
//     variable a line.
//
// Each run writes "crashserver started" to stderr. Its flags:
//
//   - -exit: write an error to stderr and exit with status 1 before
//     serving anything;
//   - -stderr TEXT: write TEXT to stderr at start;
//   - -linger: go on running when the standard input closes, as some
//     servers do, until a signal stops it;
//   - -ignore-term: ignore SIGTERM too, so that only SIGKILL stops it;
//   - -env-tool: serve the tool env.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type textIn struct {
	Text string `json:"text"`
}

func main() {
	exit := flag.Bool("exit", false, "exit with status 1 at once")
	stderr := flag.String("stderr", "", "text to write to stderr at start")
	linger := flag.Bool("linger", false, "keep running after stdin closes")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM")
	envTool := flag.Bool("env-tool", false, "serve the tool env")
	alias := flag.String("alias", "", "serve echo under this name too")
	flag.Parse()
	fmt.Fprintln(os.Stderr, "crashserver started")
	if *stderr != "" {
		fmt.Fprintln(os.Stderr, *stderr)
	}
	if *exit {
		fmt.Fprintln(os.Stderr, "crashserver: bad config")
		os.Exit(1)
	}
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "crashserver", Version: "v1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	if *alias != "" {
		mcp.AddTool(s, &mcp.Tool{Name: *alias, Description: "Returns its text."},
			func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
			})
	}
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
	if *envTool {
		mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Returns its environment."},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
				env := os.Environ()
				slices.Sort(env)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(env, "\n")}}}, nil, nil
			})
	}
	err := s.Run(context.Background(), &mcp.StdioTransport{})
	for *linger {
		time.Sleep(time.Hour) // until a signal ends the process
	}
	if err != nil {
		log.Fatal(err)
	}
}
