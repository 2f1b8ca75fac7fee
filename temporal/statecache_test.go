package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// TestStateCacheSendsTheState runs one conversation of eight turns,
// continued as new every three, whose calls t3 and t5 await a person's
// decision, on workers with and without the state cache, with and without
// a Store, and checks that every request carries exactly the conversation,
// system prompt and tools of the run without the cache: a cached runner
// sends no stale history. With the cache, a step that follows a step on
// the same worker continues the runner's message thread (a request sends
// fewer messages than its conversation has), and the others are misses
// that load the state: the first, the two after a decision, and in the
// "second worker" case those on a worker B whose cache is empty and on
// the worker A again, whose cache holds the run as it was two turns
// before, which must not be used; in the "restart" case, on a new worker
// after each decision. Without a Store the workflow holds the history
// and a step is given the state without it: a step that misses asks the
// workflow for it. The requests are compared as JSON
// values: a block's keys come in another order from a resumed runner
// than from the response, as in process.
func TestStateCacheSendsTheState(t *testing.T) {
	c := dialTemporal(t)
	for _, store := range []bool{false, true} {
		t.Run(storeName(store), func(t *testing.T) {
			want := cacheRun(t, c, store, "no cache")
			if want.continued != 0 {
				t.Errorf("without the cache, %d requests continued a thread, want 0", want.continued)
			}
			for _, mode := range []string{"cache", "second worker", "restart"} {
				t.Run(mode, func(t *testing.T) {
					got := cacheRun(t, c, store, mode)
					if diff := cmp.Diff(want.requests, got.requests); diff != "" {
						t.Errorf("requests with the cache differ from those without (-without +with):\n%s", diff)
					}
					// 8 requests. The step after a decision misses,
					// resumes a runner and sends no request (it runs the
					// decided call), so the request after it starts a
					// thread; every other request continues the thread
					// of the step before, on the same worker.
					if got.continued != 5 {
						t.Errorf("%d requests continued the runner's thread, want 5 (every request but the first and the first after each decision)", got.continued)
					}
				})
			}
		})
	}
}

// cacheResult is what a run of cacheRun sent to the model.
type cacheResult struct {
	requests  []string // each request's conversation, system prompt and tools, as JSON
	continued int      // requests that continued a message thread
}

// cacheRun runs the conversation of TestStateCacheSendsTheState on
// workers with the cache, or not ("no cache"), or ("second worker") on a
// worker A until t3 awaits a decision, then a worker B until t5 does, then
// on A again, whose cache still holds the run at t3; or ("restart") on a
// new worker after each decision.
func cacheRun(t *testing.T, c client.Client, store bool, mode string) cacheResult {
	t.Helper()
	var replies []toolruntest.Reply
	for i := range 7 {
		replies = append(replies, toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", i), "write_file", writeIn{Path: fmt.Sprintf("/%d", i)})))
	}
	replies = append(replies, toolruntest.Message(toolruntest.Text("Done.")))
	model := toolruntest.New(t, toolruntest.Script(replies...))
	opts := &toolrun.Options{Logger: discard()}
	if store {
		opts.Store = &filestore.Store{Dir: t.TempDir()}
	}
	var calls counter
	tools := []toolrun.Tool{writeTool(&calls, func(ctx context.Context, call toolrun.PolicyCall) toolrun.Decision {
		var in writeIn
		if json.Unmarshal(call.Input, &in) == nil && (in.Path == "/3" || in.Path == "/5") {
			return policy.Defer("writes change files")
		}
		return toolrun.Decision{}
	})}
	newActs := func() *temporal.Activities {
		a := temporal.NewActivities(model.Client(), tools, opts)
		if mode == "no cache" {
			a.SetStateCacheRuns(-1)
		}
		return a
	}
	queue := newQueue("toolrun-cache")
	start := func(a *temporal.Activities) worker.Worker {
		w := temporal.NewWorker(c, queue, a, worker.Options{WorkerStopTimeout: 5 * time.Second})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	a := newActs()
	w := start(a)
	// A stop lets the worker's polls under way end: on a server that does
	// not complete them on shutdown, up to its long poll, a minute.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	ro := fastRetries
	ro.ContinueAsNewAfter = 3
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &ro)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"t3", "t5"} {
		waitFor(t, 30*time.Second, id+" awaiting approval", func() bool {
			pending, err := temporal.Pending(ctx, c, queue, nil)
			return err == nil && len(pending) == 1 && pending[0].Call.ID == id
		})
		switch mode {
		case "second worker":
			// t3: on to a worker B, whose cache is empty; t5: back to
			// A, whose cache holds the run at t3.
			w.Stop()
			if id == "t3" {
				w = start(newActs())
			} else {
				w = start(a)
			}
		case "restart":
			// The worker restarts: a new one, whose cache is empty.
			w.Stop()
			w = start(newActs())
		}
		if err := temporal.Decide(ctx, c, queue, id, toolrun.Decision{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
		t.Fatalf("got outcome %q %q, want end_turn %q", out.StopReason, out.Text, "Done.")
	}
	var res cacheResult
	for _, req := range model.Requests() {
		b, err := json.Marshal(struct {
			Conversation []toolruntest.MessageParam
			System       json.RawMessage
			Tools        json.RawMessage
		}{req.Conversation, req.System, req.Tools})
		if err != nil {
			t.Fatal(err)
		}
		// The JSON of a block as a resumed runner sends it has its keys in
		// another order than the response's, as in process: compared as
		// JSON values, not as bytes.
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
		res.requests = append(res.requests, string(b))
		if len(req.Params.Messages) < len(req.Conversation) {
			res.continued++
		}
	}
	return res
}
