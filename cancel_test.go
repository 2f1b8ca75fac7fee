package toolrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestCancelAtEveryEvent cancels a run at each of its events in turn (an
// observer cancels the run's context when it sees the k-th), then resumes
// it from its State, through JSON, until it ends. At every point: the run
// ends with the model's answer, no call of the non-idempotent tool runs
// twice, the idempotent one may run again but is answered once, and the
// history stays one the API takes.
func TestCancelAtEveryEvent(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) { cancelAtEveryEvent(t, stream) })
	}
}

func cancelAtEveryEvent(t *testing.T, stream bool) {
	// The reply depends on the conversation, not on how many requests came
	// before: a streamed response cut off by the cancellation is asked for
	// again, and gets the same answer.
	replies := []toolruntest.Reply{
		toolruntest.Message(
			toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/a", Text: "1"}),
			toolruntest.ToolUse("r1", "read_file", map[string]any{"path": "/a"}),
			toolruntest.ToolUse("w2", "write_file", writeIn{Path: "/b", Text: "2"}),
		),
		toolruntest.Message(toolruntest.ToolUse("w3", "write_file", writeIn{Path: "/c", Text: "3"})),
		toolruntest.Message(toolruntest.Text("done")),
	}
	script := func() toolruntest.Options {
		return toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
			n := 0
			for _, m := range req.Conversation {
				if m.Role == "assistant" {
					n++
				}
			}
			return replies[min(n, len(replies)-1)]
		}}
	}
	// The events of a run that is never cancelled.
	var total int
	{
		s := toolruntest.New(t, script())
		var w, rd counter
		read := readPathTool(&rd)
		read.Idempotent = true
		r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{writeTool(&w), read},
			&toolrun.Options{Logger: discard(), Stream: stream, OnEvent: func(context.Context, toolrun.Event) { total++ }})
		if _, err := r.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for k := 1; k <= total; k++ {
		t.Run(fmt.Sprint("event ", k), func(t *testing.T) {
			s := toolruntest.New(t, script())
			var writes, reads counter
			read := readPathTool(&reads)
			read.Idempotent = true
			tools := []toolrun.Tool{writeTool(&writes), read}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			seen := 0
			opts := &toolrun.Options{Logger: discard(), Stream: stream, OnEvent: func(context.Context, toolrun.Event) {
				if seen++; seen == k {
					cancel()
				}
			}}
			r := toolrun.New(client(s), userParams("go"), tools, opts)
			res, _ := r.Run(ctx)
			for round := 0; res.StopReason != toolrun.StopEndTurn; round++ {
				if round > 5 {
					t.Fatalf("the run did not end after %d resumes: %s %q", round, res.StopReason, res.Detail)
				}
				b, err := json.Marshal(r.State())
				if err != nil {
					t.Fatal(err)
				}
				var st toolrun.State
				if err := json.Unmarshal(b, &st); err != nil {
					t.Fatal(err)
				}
				r, err = toolrun.Resume(client(s), &st, tools, &toolrun.Options{Logger: discard(), Stream: stream})
				if err != nil {
					t.Fatal(err)
				}
				res, err = r.Run(t.Context())
				if err != nil && res.StopReason == toolrun.StopEndTurn {
					t.Fatal(err)
				}
			}
			for _, p := range []string{"/a", "/b", "/c"} {
				if n := writes.get(p); n > 1 {
					t.Errorf("write %s ran %d times, want at most once", p, n)
				}
			}
			checkHistory(t, r.Messages())
			results := toolruntest.ResultTexts(r.Messages())
			for _, id := range []string{"w1", "r1", "w2", "w3"} {
				if _, ok := results[id]; !ok {
					t.Errorf("call %s has no result in the history", id)
				}
			}
		})
	}
}
