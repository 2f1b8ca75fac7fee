package toolrun_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// wideTurn is a script of one turn that calls tool n times, then an answer.
func wideTurn(tool string, n int) toolruntest.Options {
	blocks := make([]toolruntest.Block, n)
	for i := range blocks {
		blocks[i] = toolruntest.ToolUse(fmt.Sprintf("toolu_%03d", i), tool, nil)
	}
	return toolruntest.Script(toolruntest.Message(blocks...), toolruntest.Message(toolruntest.Text("done")))
}

// gate is a tool whose calls wait in groups of `want`: the k-th call to
// start waits until the calls of its group (k/want) have all started, or
// the run's context ends. It records the most calls that ran at once.
type gate struct {
	mu      sync.Mutex // guards arrived, running, most
	cond    *sync.Cond
	arrived int
	running int
	most    int
	want    int
}

func newGate(want int) *gate {
	g := &gate{want: want}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gate) tool(name string) *toolrun.FuncTool {
	return toolrun.NewTool(name, "waits for its peers", func(ctx context.Context, in struct{}) (string, error) {
		stop := context.AfterFunc(ctx, func() { g.mu.Lock(); g.cond.Broadcast(); g.mu.Unlock() })
		defer stop()
		g.mu.Lock()
		defer g.mu.Unlock()
		k := g.arrived
		g.arrived++
		g.running++
		g.most = max(g.most, g.running)
		g.cond.Broadcast()
		for g.arrived < (k/g.want+1)*g.want && ctx.Err() == nil {
			g.cond.Wait()
		}
		g.running--
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "ok", nil
	})
}

// TestParallelByDefault checks that, at default options, the 100 calls of
// one turn all run at once (each waits for the other 99, so a lower bound
// would hang until the run's deadline), and that ToolConfig.MaxParallel
// bounds a tool's own calls under it.
func TestParallelByDefault(t *testing.T) {
	tests := []struct {
		name        string
		calls       int
		maxParallel int // ToolConfig.MaxParallel
		want        int // the most calls at once
	}{
		{name: "100 calls at default options", calls: 100, want: 100},
		{name: "a tool bound to 3", calls: 21, maxParallel: 3, want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, wideTurn("wait", tt.calls))
			g := newGate(tt.want)
			tool := g.tool("wait")
			tool.MaxParallel = tt.maxParallel
			r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{tool}, &toolrun.Options{Logger: discard()})
			res, err := r.Run(bounded(t))
			if err != nil {
				t.Fatal(err)
			}
			if res.ToolFailures != 0 || res.ToolCalls != tt.calls {
				t.Errorf("%d calls, %d failed; want %d, none failed", res.ToolCalls, res.ToolFailures, tt.calls)
			}
			if g.most != tt.want {
				t.Errorf("at most %d calls ran at once, want %d", g.most, tt.want)
			}
		})
	}
}
