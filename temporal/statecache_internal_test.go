package temporal

import (
	"context"
	"log/slog"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

type pathIn struct {
	Path string `json:"path"`
}

// advanced returns a runner of a run whose first message is prompt and
// whose first response calls write_file with path, advanced once, and its
// state; with deferred, the call awaits a person's decision.
func advanced(t *testing.T, prompt, path string, deferred bool) (*toolrun.Runner, *toolrun.State) {
	t.Helper()
	model := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "write_file", pathIn{Path: path}))))
	tool := toolrun.NewTool("write_file", "Write a file", func(ctx context.Context, in pathIn) (string, error) { return "wrote " + in.Path, nil })
	if deferred {
		tool.Policy = policy.RequireApproval("writes change files")
	}
	params := anthropic.BetaMessageNewParams{Model: "claude-test", MaxTokens: 1024, Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(prompt))}}
	r := toolrun.New(model.Client(), params, []toolrun.Tool{tool}, &toolrun.Options{Logger: slog.New(slog.DiscardHandler)})
	if _, err := driver.Advance(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r, r.State()
}

func wrote(t *testing.T, s *toolrun.State) *toolrun.State {
	t.Helper()
	if err := driver.SetResult(s, "t1", &toolrun.ToolResult{Content: []toolrun.Content{toolrun.Text("wrote")}, Ran: true}); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCachedRunResume checks which states a cached runner is used for: the
// state its step returned, with the results the workflow recorded since,
// and nothing else: another run's state of the same shape (same turn,
// same call id), a call with other input, a person's decision, another
// Store key, other tools (a ClientTools change). Each of those is a miss,
// so that no stale runner sends a request.
func TestCachedRunResume(t *testing.T) {
	plain := func(t *testing.T) (*toolrun.Runner, *toolrun.State) { return advanced(t, "go", "/a", false) }
	awaiting := func(t *testing.T) (*toolrun.Runner, *toolrun.State) { return advanced(t, "go", "/a", true) }
	tests := []struct {
		name string
		step func(t *testing.T) (*toolrun.Runner, *toolrun.State) // the step before, and what it returned
		ref  string                                               // the key the step saved its state under
		// in is what the next step is given, from what the step before returned.
		in    func(t *testing.T, whole *toolrun.State) *toolrun.State
		inRef string
		hit   bool
	}{
		{name: "the state returned", step: plain, in: func(t *testing.T, whole *toolrun.State) *toolrun.State { return whole }, hit: true},
		{name: "with the call's result", step: plain, in: func(t *testing.T, whole *toolrun.State) *toolrun.State { return wrote(t, whole) }, hit: true},
		{name: "another conversation of the same shape", step: plain, in: func(t *testing.T, _ *toolrun.State) *toolrun.State {
			_, other := advanced(t, "stop", "/a", false)
			return wrote(t, other)
		}, hit: false},
		{name: "a call with other input", step: plain, in: func(t *testing.T, _ *toolrun.State) *toolrun.State {
			_, other := advanced(t, "go", "/b", false)
			return wrote(t, other)
		}, hit: false},
		{name: "awaiting, as returned", step: awaiting, ref: "k1", in: func(t *testing.T, whole *toolrun.State) *toolrun.State { return driver.Skeleton(whole) }, inRef: "k1", hit: true},
		{name: "a person's decision", step: awaiting, ref: "k1", in: func(t *testing.T, whole *toolrun.State) *toolrun.State {
			s := driver.Skeleton(whole)
			if err := s.Decide("t1", toolrun.Decision{}); err != nil {
				t.Fatal(err)
			}
			return s
		}, inRef: "k1", hit: false},
		{name: "another Store key", step: awaiting, ref: "k1", in: func(t *testing.T, whole *toolrun.State) *toolrun.State { return driver.Skeleton(whole) }, inRef: "k2", hit: false},
		{name: "a client tool added", step: awaiting, ref: "k1", in: func(t *testing.T, whole *toolrun.State) *toolrun.State {
			s := driver.Skeleton(whole)
			def := anthropic.BetaToolParam{Name: "get_location", InputSchema: anthropic.BetaToolInputSchemaParam{Properties: map[string]any{}}}
			if err := driver.ChangeTools(s, nil, anthropic.BetaToolUnionParam{OfTool: &def}); err != nil {
				t.Fatal(err)
			}
			return s
		}, inRef: "k1", hit: false},
		{name: "a tool taken out", step: awaiting, ref: "k1", in: func(t *testing.T, whole *toolrun.State) *toolrun.State {
			s := driver.Skeleton(whole)
			s.Removed = append(s.Removed, "write_file")
			return s
		}, inRef: "k1", hit: false},
		{name: "a whole state for a stored one", step: awaiting, ref: "k1", in: func(t *testing.T, whole *toolrun.State) *toolrun.State { return whole }, hit: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, whole := tt.step(t)
			e := newCachedRun("wf", r, whole, tt.ref)
			if e == nil {
				t.Fatal("no entry")
			}
			got := e.resume(tt.in(t, driver.Merge(driver.Skeleton(whole), whole)), tt.inRef, "", 0)
			if hit := got != nil; hit != tt.hit {
				t.Fatalf("got hit %v, want %v", hit, tt.hit)
			}
		})
	}
	t.Run("the result reaches the runner", func(t *testing.T) {
		r, whole := plain(t)
		e := newCachedRun("wf", r, whole, "")
		if got := e.resume(wrote(t, driver.Merge(driver.Skeleton(whole), whole)), "", "", 0); got == nil {
			t.Fatal("got a miss, want a hit")
		}
		if res, ok := r.State().CallResult("t1"); !ok || res.IsError {
			t.Errorf("got result %+v, %v on the runner; want the result the workflow recorded", res, ok)
		}
	})
}

// TestStateCacheBound checks that the cache holds at most its bound of
// runs, dropping the least recently put, and that a taken entry is gone.
func TestStateCacheBound(t *testing.T) {
	c := &stateCache{max: 2}
	for _, id := range []string{"a", "b", "c"} {
		c.put(&cachedRun{workflowID: id})
	}
	if n := c.len(); n != 2 {
		t.Errorf("got %d runs, want 2", n)
	}
	if e := c.take("a"); e != nil {
		t.Error("the least recently put run is still cached")
	}
	if e := c.take("c"); e == nil || e.workflowID != "c" {
		t.Errorf("got %v for c, want its entry", e)
	}
	if e := c.take("c"); e != nil {
		t.Error("a taken run is still cached")
	}
	off := &stateCache{max: -1}
	off.put(&cachedRun{workflowID: "a"})
	if e := off.take("a"); e != nil {
		t.Error("a cache turned off keeps a run")
	}
}

// TestStateCacheBytes checks the cache's bound in bytes: the least
// recently put runs are dropped once the runs held take more than it,
// a run larger than the bound alone is not kept, and a run taken out
// gives its bytes back.
func TestStateCacheBytes(t *testing.T) {
	c := &stateCache{max: 10, maxBytes: 100}
	put := func(id string, size int64) { c.put(&cachedRun{workflowID: id, size: size}) }
	held := func() []string {
		var ids []string
		for e := c.order.Front(); e != nil; e = e.Next() {
			ids = append(ids, e.Value.(*cachedRun).workflowID)
		}
		return ids
	}
	put("a", 40)
	put("b", 40)
	if got := held(); len(got) != 2 || c.bytes != 80 {
		t.Fatalf("held %v, %d bytes; want b, a and 80 bytes", got, c.bytes)
	}
	put("c", 40) // 120 > 100: a goes
	if got := held(); len(got) != 2 || got[0] != "c" || got[1] != "b" || c.bytes != 80 {
		t.Fatalf("held %v, %d bytes; want c, b and 80 bytes", got, c.bytes)
	}
	if e := c.take("b"); e == nil || c.bytes != 40 {
		t.Fatalf("took %v, %d bytes left; want b, and 40 bytes", e, c.bytes)
	}
	put("c", 60) // replaces c's entry: 60 bytes, not 100
	if got := held(); len(got) != 1 || c.bytes != 60 {
		t.Fatalf("held %v, %d bytes; want c alone and 60 bytes", got, c.bytes)
	}
	put("big", 101)
	if got := held(); len(got) != 1 || got[0] != "c" || c.bytes != 60 {
		t.Fatalf("held %v, %d bytes after a run over the bound; want c alone and 60 bytes", got, c.bytes)
	}
	// No bound in bytes: only the runs count.
	c = &stateCache{max: 2}
	put("a", 1<<40)
	put("b", 1<<40)
	if got := held(); len(got) != 2 {
		t.Fatalf("held %v without a bound in bytes, want both", got)
	}
}
