package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// bigRun is a model that calls fetch turns times, then answers.
func bigRun(turns int) func(*toolruntest.Request) toolruntest.Reply {
	return func(req *toolruntest.Request) toolruntest.Reply {
		n := len(req.Conversation) / 2 // the fetches answered so far
		if n < turns {
			return toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("f%d", n), "fetch", map[string]any{"page": n}))
		}
		return toolruntest.Message(toolruntest.Text("Read them all."))
	}
}

// fetchTool returns a 100 KB page.
func fetchTool() *toolrun.FuncTool {
	page := strings.Repeat("lorem ipsum ", 100<<10/12)
	return toolrun.NewTool("fetch", "Fetches a page", func(ctx context.Context, in struct {
		Page int `json:"page"`
	}) (string, error) {
		return fmt.Sprintf("page %d: %s", in.Page, page), nil
	})
}

// memStore is a toolrun.Store in memory.
type memStore struct {
	mu     sync.Mutex // guards states
	states map[string][]byte
}

func (m *memStore) Save(ctx context.Context, id string, s *toolrun.State, prev uint64) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.states == nil {
		m.states = map[string][]byte{}
	}
	var cur struct {
		Version uint64 `json:"version"`
	}
	if old, ok := m.states[id]; ok {
		_ = json.Unmarshal(old, &cur)
	}
	if cur.Version != prev {
		return fmt.Errorf("run %q is at version %d, not %d: %w", id, cur.Version, prev, toolrun.ErrRunBusy)
	}
	m.states[id] = b
	return nil
}

func (m *memStore) Load(ctx context.Context, id string) (*toolrun.State, error) {
	m.mu.Lock()
	b, ok := m.states[id]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("state %q: %w", id, fs.ErrNotExist)
	}
	var s toolrun.State
	return &s, json.Unmarshal(b, &s)
}

func (m *memStore) Delete(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.states, id)
	return nil
}

// payloads records the largest activity input and result, in JSON.
type payloads struct {
	mu  sync.Mutex // guards max
	max int
}

func (p *payloads) see(v any) {
	b, _ := json.Marshal(v)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.max = max(p.max, len(b))
}

// measuredEnv is newEnv with activities that record their payloads.
func measuredEnv(t *testing.T, acts *temporal.Activities, p *payloads) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(nopLogger)
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(10 * time.Minute) // minutes: a loaded machine is slow, and only a hang takes this long
	env.RegisterWorkflowWithOptions(temporal.Workflow, workflow.RegisterOptions{Name: temporal.WorkflowName})
	step := func(ctx context.Context, in temporal.StepInput) (*temporal.StepResult, error) {
		p.see(in)
		res, err := acts.Step(ctx, in)
		p.see(res)
		return res, err
	}
	env.RegisterActivityWithOptions(step, activity.RegisterOptions{Name: temporal.StepActivity})
	env.RegisterActivityWithOptions(step, activity.RegisterOptions{Name: temporal.StepDeltaActivity})
	env.RegisterActivityWithOptions(func(ctx context.Context, in temporal.ToolInput) (*temporal.ToolOutput, error) {
		p.see(in)
		res, err := acts.RunTool(ctx, in)
		p.see(res)
		return res, err
	}, activity.RegisterOptions{Name: temporal.ToolActivity})
	return env
}

// TestRunsOfAnySize drives a run whose state grows past the 2 MB a Temporal
// server takes in one payload: with a Store, the workflow holds a key to the
// state and the payloads stay the size of one turn, and the run finishes;
// without one, the payload guard stops the run with StopPayloadTooLarge and
// an Outcome before any payload is over the limit.
func TestRunsOfAnySize(t *testing.T) {
	const turns = 22 // 22 × 100 KB: 2.2 MB of tool results
	tests := []struct {
		name       string
		store      bool
		wantStop   toolrun.StopReason
		limit      int // RunOptions.PayloadLimit
		maxPayload int
	}{
		{name: "claim check", store: true, wantStop: toolrun.StopEndTurn, maxPayload: 200 << 10},
		// A limit below the default keeps the states the workflow decodes
		// small enough for the deadlock detector under the race detector.
		{name: "inline, stopped by the guard", wantStop: toolrun.StopPayloadTooLarge, limit: 512 << 10, maxPayload: 512 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Options{Func: bigRun(turns)})
			opts := &toolrun.Options{Logger: discard()}
			store := &memStore{}
			if tt.store {
				opts.Store = store
			}
			var p payloads
			env := measuredEnv(t, temporal.NewActivities(s.Client(), []toolrun.Tool{fetchTool()}, opts), &p)
			ro := fastRetries
			ro.ContinueAsNewAfter = 1000
			ro.MaxTurns = -1
			ro.PayloadLimit = tt.limit
			env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("read"), &ro))
			out := outcome(t, env)

			if out.StopReason != tt.wantStop {
				t.Fatalf("got stop reason %q (%s), want %q", out.StopReason, out.Detail, tt.wantStop)
			}
			if p.max > tt.maxPayload {
				t.Errorf("got a payload of %d bytes, want at most %d", p.max, tt.maxPayload)
			}
			if !tt.store {
				if !strings.Contains(out.Detail, "over the payload limit") {
					t.Errorf("got detail %q, want it to name the payload limit", out.Detail)
				}
				return
			}
			if out.Text != "Read them all." || out.State.Turns != turns+1 {
				t.Errorf("got %q after %d turns, want %q after %d", out.Text, out.State.Turns, "Read them all.", turns+1)
			}
			whole, err := temporal.LoadState(t.Context(), store, out)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(whole)
			if got, want := len(whole.Params.Messages), 2*turns+2; got != want || len(b) < 2<<20 {
				t.Errorf("got a stored state of %d messages, %d bytes; want %d messages, over 2 MB", got, len(b), want)
			}
		})
	}
}

// TestLargeResultOnServer: a tool result of 2 MB, over the server's
// payload limit, is cut on the worker to the tool's MaxResultBytes, as in
// process, and the run goes on: the model sees exactly the result an
// in-process runner sends, where the whole result used to stop the run
// with payload_too_large. No Store, so the result travels in the history.
func TestLargeResultOnServer(t *testing.T) {
	c := dialTemporal(t)
	big := strings.Repeat("é", 1<<20) // 2 MB
	tool := func() toolrun.Tool {
		return toolrun.NewTool("big", "Returns a lot", func(ctx context.Context, in struct{}) (string, error) { return big, nil })
	}
	script := func() toolruntest.Options {
		return toolruntest.Script(
			toolruntest.Message(toolruntest.ToolUse("b1", "big", map[string]any{})),
			toolruntest.Message(toolruntest.Text("Read it.")))
	}
	lastResults := func(s *toolruntest.Server) []toolruntest.Block {
		reqs := s.Requests()
		if len(reqs) == 0 {
			return nil
		}
		var out []toolruntest.Block
		msgs := reqs[len(reqs)-1].Conversation
		for _, b := range msgs[len(msgs)-1].Content {
			if b.Type == "tool_result" {
				out = append(out, b)
			}
		}
		return out
	}
	inProc := toolruntest.New(t, script())
	r := toolrun.New(inProc.Client(), userParams("go"), []toolrun.Tool{tool()}, &toolrun.Options{Logger: discard()})
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("in process: %v, %v", res.StopReason, err)
	}

	model := toolruntest.New(t, script())
	queue := newQueue("toolrun-big-result")
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{tool()}, &toolrun.Options{Logger: discard()}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Read it." {
		t.Fatalf("got outcome %q (%s) %q, want end_turn %q", out.StopReason, out.Detail, out.Text, "Read it.")
	}
	if diff := cmp.Diff(lastResults(inProc), lastResults(model)); diff != "" {
		t.Errorf("the model saw (-in process +workflow):\n%.2000s", diff)
	}
}

// TestTurnOverTheLimit: a turn whose results together, each under the
// payload limit, would bring a run without a Store over it stops with
// StopPayloadTooLarge at the result that would cross it, answered with an
// error in its place, and the Outcome stays within the limit: one over
// it, which the state with every result made, is refused by the server
// (over 4 MB, the gRPC limit), and the run retried its workflow task for
// ever.
func TestTurnOverTheLimit(t *testing.T) {
	const calls, limit = 8, 256 << 10
	page := strings.Repeat("lorem ipsum ", 64<<10/12) // 64 KB a result
	var uses []toolruntest.Block
	for i := range calls {
		uses = append(uses, toolruntest.ToolUse(fmt.Sprintf("r%d", i), "read", struct{}{}))
	}
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(uses...), toolruntest.Message(toolruntest.Text("Read them all."))))
	var ran counter
	tool := toolrun.NewTool("read", "Reads a page", func(ctx context.Context, in struct{}) (string, error) {
		ran.inc("read")
		return page, nil
	})
	env := newEnv(t, s, []toolrun.Tool{tool}, nil)
	ro := fastRetries
	ro.PayloadLimit = limit
	ro.MaxParallelTools = 1
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("read"), &ro))
	out := outcome(t, env)
	if out.StopReason != toolrun.StopPayloadTooLarge {
		t.Fatalf("got stop reason %q (%s), want %q", out.StopReason, out.Detail, toolrun.StopPayloadTooLarge)
	}
	b, _ := json.Marshal(out)
	if len(b) > limit {
		t.Errorf("got an Outcome of %d bytes, want at most the payload limit, %d", len(b), limit)
	}
	answered := 0
	for _, c := range out.State.Calls() {
		if r, ok := out.State.CallResult(c.ID); ok && !r.IsError {
			answered++
		}
	}
	if answered == 0 || answered >= calls {
		t.Errorf("got %d calls answered with their result, want those before the one that crossed the limit", answered)
	}
	if ran.all()["read"] >= calls {
		t.Errorf("%d calls ran, want none after the stop", ran.all()["read"])
	}
}
