package toolrun_test

import (
	"context"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestCompactAskedSurvivesResume: CompactBeforeNextTurn is kept in the
// run's State, so a run resumed from it compacts before its next turn, as
// the runner it was asked of would have.
func TestCompactAskedSurvivesResume(t *testing.T) {
	for _, clientSide := range []bool{false, true} {
		name := "server-side"
		if clientSide {
			name = "client-side"
		}
		t.Run(name, func(t *testing.T) {
			srv := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
				if len(req.Conversation) == 1 {
					return toolruntest.Message(toolruntest.ToolUse("e1", "echo", map[string]string{"s": "a"}))
				}
				return toolruntest.Message(toolruntest.Text("summary or done"))
			}})
			echo := toolrun.NewTool("echo", "Echo", func(ctx context.Context, in echoIn) (string, error) { return in.S, nil })
			var compacted int
			opts := &toolrun.Options{Logger: discard(), Compaction: toolrun.Compaction{ClientSide: clientSide},
				OnEvent: func(ctx context.Context, e toolrun.Event) {
					if _, ok := e.(toolrun.Compacted); ok {
						compacted++
					}
				}}
			tools := []toolrun.Tool{echo}
			r := toolrun.New(client(srv), userParams("go"), tools, opts)
			ctx := context.Background()
			if _, err := r.Next(ctx); err != nil {
				t.Fatal(err)
			}
			r.CompactBeforeNextTurn()
			resumed, err := toolrun.Resume(client(srv), r.State(), tools, opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := resumed.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if compacted != 1 {
				t.Errorf("got %d compactions after the resume, want 1", compacted)
			}
		})
	}
}
