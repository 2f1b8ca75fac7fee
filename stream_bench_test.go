package toolrun_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// BenchmarkEarlyToolStart measures the wall time of a streamed tool turn,
// from its request to its tool results, with Options.EarlyToolStart off and
// on, side by side in each iteration, and reports their ratio as
// early/off (below 1: early start saves time). The response streams a
// sentence, then three calls of tools that take the given times, then a
// closing sentence, with eventDelay before each of its events; so the
// first calls' blocks are whole well before the response is.
func BenchmarkEarlyToolStart(b *testing.B) {
	const eventDelay = 5 * time.Millisecond
	for _, lengths := range [][]time.Duration{
		{10 * time.Millisecond, 30 * time.Millisecond, 60 * time.Millisecond},
		{60 * time.Millisecond, 30 * time.Millisecond, 10 * time.Millisecond},
	} {
		var names []string
		for _, d := range lengths {
			names = append(names, fmt.Sprint(d.Milliseconds()))
		}
		b.Run("tools="+strings.Join(names, ",")+"ms", func(b *testing.B) {
			var calls []toolruntest.Block
			var tools []toolrun.Tool
			for i, d := range lengths {
				name := fmt.Sprintf("tool%d", i)
				calls = append(calls, toolruntest.ToolUse(fmt.Sprintf("toolu_%d", i), name, nil))
				tools = append(tools, toolrun.NewTool(name, "", func(ctx context.Context, in struct{}) (string, error) {
					select {
					case <-time.After(d):
						return "done", nil
					case <-ctx.Done():
						return "", ctx.Err()
					}
				}))
			}
			content := append([]toolruntest.Block{toolruntest.Text("Let me run all three.")}, calls...)
			content = append(content, toolruntest.Text("They are running."))
			s := toolruntest.NewServerFunc(func(req *toolruntest.Request) toolruntest.Reply {
				if len(req.Params.Messages) > 1 {
					return toolruntest.Message(toolruntest.Text("done"))
				}
				return toolruntest.Reply{Content: content, StopReason: "tool_use", Fault: toolruntest.Fault{EventDelay: eventDelay}}
			})
			defer s.Close()
			c := client(s)

			// turn runs a whole run and returns the wall time of its first
			// turn: until its tool results are in.
			turn := func(early bool) time.Duration {
				var start time.Time
				var took time.Duration
				r := toolrun.New(c, userParams("go"), tools, &toolrun.Options{
					Logger: discard(), Stream: true, EarlyToolStart: early,
					OnEvent: func(ctx context.Context, e toolrun.Event) {
						switch e := e.(type) {
						case toolrun.RequestSent:
							if e.Turn == 1 {
								start = time.Now()
							}
						case toolrun.TurnFinished:
							if e.Turn == 1 {
								took = time.Since(start)
							}
						}
					},
				})
				res, err := r.Run(b.Context())
				if err != nil || res.StopReason != toolrun.StopEndTurn || res.ToolCalls != len(lengths) {
					b.Fatalf("run: %v, %+v", err, res)
				}
				return took
			}

			var off, on time.Duration
			for b.Loop() {
				off += turn(false)
				on += turn(true)
			}
			n := time.Duration(b.N)
			b.ReportMetric(float64(on)/float64(off), "early/off")
			b.ReportMetric(float64((off/n).Microseconds())/1000, "ms/turn-off")
			b.ReportMetric(float64((on/n).Microseconds())/1000, "ms/turn-early")
		})
	}
}
