package toolrun_test

import (
	"context"
	"encoding/json"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// benchServer answers a tool turn, then a final answer, forever: each run is
// two requests and one tool call.
func benchServer(b *testing.B) *toolruntest.Server {
	s := toolruntest.New(nil, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		if len(req.Conversation) == 1 {
			return toolruntest.Message(toolruntest.ToolUse("toolu_1", "echo", map[string]string{"s": "hi"}))
		}
		return toolruntest.Message(toolruntest.Text("done"))
	}})
	b.Cleanup(s.Close)
	return s
}

type echoIn struct {
	S string `json:"s"`
}

// BenchmarkRunnerTwoTurns measures a two-turn run through toolrun: the
// runner's overhead is its difference from BenchmarkHandLoopTwoTurns, which
// does the same requests with nothing but send and append.
func BenchmarkRunnerTwoTurns(b *testing.B) {
	s := benchServer(b)
	c := s.Client()
	echo := toolrun.NewTool("echo", "Echo", func(ctx context.Context, in echoIn) (string, error) { return in.S, nil })
	tools := []toolrun.Tool{echo}
	opts := &toolrun.Options{Logger: discard()}
	b.ReportAllocs()
	for b.Loop() {
		res, err := toolrun.New(c, userParams("go"), tools, opts).Run(context.Background())
		if err != nil || res.Turns != 2 {
			b.Fatalf("Run = %v after %d turns", err, res.Turns)
		}
	}
}

// BenchmarkHandLoopTwoTurns is the floor: a hand-written loop on the same
// client that sends, runs the tool and appends.
func BenchmarkHandLoopTwoTurns(b *testing.B) {
	s := benchServer(b)
	c := s.Client()
	schema := anthropic.BetaToolInputSchemaParam{Properties: map[string]any{"s": map[string]any{"type": "string"}}}
	tool := anthropic.BetaToolUnionParam{OfTool: &anthropic.BetaToolParam{Name: "echo", InputSchema: schema}}
	b.ReportAllocs()
	for b.Loop() {
		params := userParams("go")
		params.Tools = []anthropic.BetaToolUnionParam{tool}
		for {
			msg, err := c.Beta.Messages.New(context.Background(), params)
			if err != nil {
				b.Fatal(err)
			}
			params.Messages = append(params.Messages, msg.ToParam())
			if msg.StopReason != anthropic.BetaStopReasonToolUse {
				break
			}
			var results []anthropic.BetaContentBlockParamUnion
			for _, block := range msg.Content {
				if block.Type == "tool_use" {
					var in echoIn
					_ = json.Unmarshal(block.Input, &in)
					results = append(results, anthropic.NewBetaToolResultBlock(block.ID, in.S, false))
				}
			}
			params.Messages = append(params.Messages, anthropic.NewBetaUserMessage(results...))
		}
	}
}
