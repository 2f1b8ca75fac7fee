package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
)

// deltaReplies is the script of TestDeltasReassembleTheState: five turns
// that call write_file, the third of whose calls (/2) awaits a person's
// decision, and a last turn's text.
func deltaReplies() []toolruntest.Reply {
	var replies []toolruntest.Reply
	for i := range 5 {
		replies = append(replies, toolruntest.Message(toolruntest.Text(fmt.Sprintf("Turn %d.", i)), toolruntest.ToolUse(fmt.Sprintf("t%d", i), "write_file", writeIn{Path: fmt.Sprintf("/%d", i)})))
	}
	return append(replies, toolruntest.Message(toolruntest.Text("Done.")))
}

// deltaTools are the tools of TestDeltasReassembleTheState.
func deltaTools(calls *counter) []toolrun.Tool {
	return []toolrun.Tool{writeTool(calls, func(ctx context.Context, call toolrun.PolicyCall) toolrun.Decision {
		var in writeIn
		if json.Unmarshal(call.Input, &in) == nil && in.Path == "/2" {
			return policy.Defer("writes change files")
		}
		return toolrun.Decision{}
	})}
}

// TestDeltasReassembleTheState runs one conversation on workers without
// a Store, continued as new every two turns, with a person's decision
// while no worker runs and then on a worker that never held the run (its
// first step asks the workflow for the history), and the same
// conversation in process. The workflow's whole state, rebuilt from the
// steps' deltas, is the in-process runner's: while the run awaits the
// decision, as read from the history with no worker ([temporal.ApplyStep]
// on each step's result from the execution's input, as a serve backend
// reads it), and at the end, in the Outcome; Follow reads every turn's
// text and call from the history. Every step's result but the first of a
// run carries only the messages the step added, never the conversation;
// the requests are the in-process run's.
func TestDeltasReassembleTheState(t *testing.T) {
	c := dialTemporal(t)

	// In process.
	local := toolruntest.New(t, toolruntest.Script(deltaReplies()...))
	var localCalls counter
	r := toolrun.New(local.Client(), userParams("go"), deltaTools(&localCalls), &toolrun.Options{Logger: discard()})
	res, err := r.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("in process: %v %v, want a stop awaiting approval", res, err)
	}
	waiting := r.State()
	if err := r.Decide("t2", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	if res, err = r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("in process: %v %v, want end_turn", res, err)
	}
	final := r.State()

	// On Temporal.
	model := toolruntest.New(t, toolruntest.Script(deltaReplies()...))
	var calls counter
	queue := newQueue("toolrun-deltas")
	start := func() worker.Worker {
		w := temporal.NewWorker(c, queue, temporal.NewActivities(model.Client(), deltaTools(&calls), &toolrun.Options{Logger: discard()}), worker.Options{WorkerStopTimeout: 5 * time.Second})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := start()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	ro := fastRetries
	ro.ContinueAsNewAfter = 2
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &ro)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "t2 awaiting approval", func() bool {
		pending, err := temporal.Pending(ctx, c, queue, nil)
		return err == nil && len(pending) == 1 && pending[0].Call.ID == "t2"
	})
	w.Stop()

	// No worker runs: the conversation is read from the history.
	read := stateFromHistory(ctx, t, c, queue)
	sameState(t, "read from the history while awaiting", waiting, read)
	if err := temporal.DecideBySignal(ctx, c, queue, "t2", toolrun.Decision{}, nil); err != nil {
		t.Fatal(err)
	}
	w = start() // a worker whose cache is empty
	defer w.Stop()
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Ref != "" {
		t.Fatalf("got outcome %q (ref %q), want end_turn with the whole state", out.StopReason, out.Ref)
	}
	sameState(t, "the outcome's", final, out.State)
	if diff := cmp.Diff(requestsOf(t, local), requestsOf(t, model)); diff != "" {
		t.Errorf("requests on Temporal differ from those in process (-in process +Temporal):\n%s", diff)
	}
	if diff := cmp.Diff(localCalls.all(), calls.all()); diff != "" {
		t.Errorf("tool runs (-in process +Temporal):\n%s", diff)
	}

	// Follow reads the run from its history, across the executions: each
	// response's text, each call's answer, the end.
	var texts []string
	answered := map[string]bool{}
	var last temporal.RunEvent
	if err := temporal.Follow(ctx, c, queue, run.GetRunID(), 0, func(ev temporal.RunEvent) bool {
		switch ev.Kind {
		case temporal.StepFinished:
			if ev.Text != "" {
				texts = append(texts, ev.Text)
			}
		case temporal.ToolFinished:
			answered[ev.Result.Call.ID] = !ev.Result.IsError
		}
		last = ev
		return true
	}, nil); err != nil {
		t.Fatal(err)
	}
	wantTexts := []string{"Turn 0.", "Turn 1.", "Turn 2.", "Turn 3.", "Turn 4.", "Done."}
	if diff := cmp.Diff(wantTexts, texts); diff != "" {
		t.Errorf("Follow's texts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"t0": true, "t1": true, "t2": true, "t3": true, "t4": true}, answered); diff != "" {
		t.Errorf("Follow's answered calls (-want +got):\n%s", diff)
	}
	if last.Kind != temporal.Finished || last.Outcome == nil || last.Outcome.StopReason != toolrun.StopEndTurn {
		t.Errorf("Follow's last event %v, want Finished with end_turn", last.Kind)
	}

	// The last execution, started by a continue-as-new with the digest.
	recordHistory(t, c, queue, "nostore-deltas-continued")

	// Each step but the run's first is given the state without its
	// history, and its result carries what the step added, not the whole
	// conversation: the first step's (the run's first message and the
	// response), then at most three each: the turn it commits, and the last response.
	steps, deltas := 0, 0
	forEachStep(ctx, t, c, queue, func(name string, in temporal.StepInput, res temporal.StepResult) {
		steps++
		if want := temporal.StepDeltaActivity; steps > 1 && name != want {
			t.Errorf("step %d is activity %q, want %q", steps, name, want)
		}
		if in.Digest == "" && steps > 1 {
			t.Errorf("step %d's input has the whole state, want it without its history", steps)
		}
		if n := len(res.State.Params.Messages); res.Base > 0 {
			deltas++
			if n > 3 {
				t.Errorf("step %d's result carries %d messages after %d, want at most 3", steps, n, res.Base)
			}
		}
		if in.Digest != "" && len(in.State.Params.Messages) != 0 {
			t.Errorf("step %d's input carries %d messages with digest %.12s, want none", steps, len(in.State.Params.Messages), in.Digest)
		}
	})
	if steps != 7 || deltas < steps-1 {
		t.Errorf("%d steps, %d of them deltas; want 7 (six responses, one step that runs the decided call), all deltas but the first", steps, deltas)
	}
}

// sameState fails t unless got has want's conversation, counters and
// calls awaiting approval. The messages are compared as JSON values: a
// block's keys come in another order from a resumed runner than from the
// response, as in process.
func sameState(t *testing.T, what string, want, got *toolrun.State) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no state", what)
	}
	if diff := cmp.Diff(jsonValue(t, want.Params.Messages), jsonValue(t, got.Params.Messages)); diff != "" {
		t.Errorf("%s: history (-in process +Temporal):\n%s", what, diff)
	}
	type counts struct{ Turns, ToolCalls, Awaiting int }
	w := counts{want.Turns, want.ToolCalls, len(want.AwaitingApproval())}
	g := counts{got.Turns, got.ToolCalls, len(got.AwaitingApproval())}
	if w != g {
		t.Errorf("%s: got %+v, want %+v", what, g, w)
	}
	if text, _ := driver.ResponseText(want); text != "" {
		if gt, _ := driver.ResponseText(got); gt != text {
			t.Errorf("%s: the pending response's text %q, want %q", what, gt, text)
		}
	}
}

// jsonValue returns v's JSON decoded as a generic value.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// requestsOf returns the conversation of each request model received.
func requestsOf(t *testing.T, model *toolruntest.Server) []any {
	t.Helper()
	var out []any
	for _, req := range model.Requests() {
		out = append(out, jsonValue(t, req.Conversation))
	}
	return out
}

// stateFromHistory returns the state of workflow id's latest execution
// as its history records it, read with no worker: the execution's input,
// then each step's result applied to it with temporal.ApplyStep.
func stateFromHistory(ctx context.Context, t *testing.T, c client.Client, id string) *toolrun.State {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	var st *toolrun.State
	steps := map[int64]bool{}
	it := c.GetWorkflowHistory(ctx, id, "", false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			var in temporal.Input
			if err := dc.FromPayloads(a.GetInput(), &in); err != nil {
				t.Fatal(err)
			}
			st = in.State
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			n := a.GetActivityType().GetName()
			steps[ev.GetEventId()] = n == temporal.StepActivity || n == temporal.StepDeltaActivity
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && steps[a.GetScheduledEventId()] {
			var res temporal.StepResult
			if err := dc.FromPayloads(a.GetResult(), &res); err != nil {
				t.Fatal(err)
			}
			if st, err = temporal.ApplyStep(st, &res); err != nil {
				t.Fatal(err)
			}
		}
	}
	return st
}

// forEachStep calls f with each step of workflow id's chain of
// executions, from the first: its activity name, input and result.
func forEachStep(ctx context.Context, t *testing.T, c client.Client, id string, f func(name string, in temporal.StepInput, res temporal.StepResult)) {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	runID := desc.GetWorkflowExecutionInfo().GetFirstRunId()
	for runID != "" {
		it := c.GetWorkflowHistory(ctx, id, runID, false, 0)
		runID = ""
		type sched struct {
			name string
			in   temporal.StepInput
		}
		scheduled := map[int64]*sched{}
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				n := a.GetActivityType().GetName()
				if n != temporal.StepActivity && n != temporal.StepDeltaActivity {
					continue
				}
				s := &sched{name: n}
				if err := dc.FromPayloads(a.GetInput(), &s.in); err != nil {
					t.Fatal(err)
				}
				scheduled[ev.GetEventId()] = s
			}
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
				if s := scheduled[a.GetScheduledEventId()]; s != nil {
					var res temporal.StepResult
					if err := dc.FromPayloads(a.GetResult(), &res); err != nil {
						t.Fatal(err)
					}
					f(s.name, s.in, res)
				}
			}
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				runID = a.GetNewExecutionRunId()
			}
		}
	}
}

// TestCacheMissAsksTheWorkflow runs the conversation of
// TestDeltasReassembleTheState on a worker without a state cache, so
// that every step but the run's first is given the state without its
// history and holds none: each asks the workflow for it
// (temporal.HistoryQuery), and none fails for want of it (which would
// make the workflow send the whole state again). The requests and the
// final state are the in-process run's.
func TestCacheMissAsksTheWorkflow(t *testing.T) {
	c := dialTemporal(t)
	local := toolruntest.New(t, toolruntest.Script(deltaReplies()...))
	var localCalls counter
	r := toolrun.New(local.Client(), userParams("go"), deltaTools(&localCalls), &toolrun.Options{Logger: discard()})
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("in process: %v %v, want a stop awaiting approval", res, err)
	}
	if err := r.Decide("t2", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("in process: %v %v, want end_turn", res, err)
	}

	model := toolruntest.New(t, toolruntest.Script(deltaReplies()...))
	var calls counter
	queue := newQueue("toolrun-miss")
	acts := temporal.NewActivities(model.Client(), deltaTools(&calls), &toolrun.Options{Logger: discard()})
	acts.SetStateCacheRuns(-1)
	inProcessWorker(t, c, queue, acts)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ro := fastRetries
	ro.ContinueAsNewAfter = 3
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &ro)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "t2 awaiting approval", func() bool {
		pending, err := temporal.Pending(ctx, c, queue, nil)
		return err == nil && len(pending) == 1 && pending[0].Call.ID == "t2"
	})
	if err := temporal.Decide(ctx, c, queue, "t2", toolrun.Decision{}, nil); err != nil {
		t.Fatal(err)
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	sameState(t, "the outcome's", r.State(), out.State)
	if diff := cmp.Diff(requestsOf(t, local), requestsOf(t, model)); diff != "" {
		t.Errorf("requests on Temporal differ from those in process (-in process +Temporal):\n%s", diff)
	}
	steps, skeletons := 0, 0
	forEachStep(ctx, t, c, queue, func(name string, in temporal.StepInput, res temporal.StepResult) {
		steps++
		if in.Digest != "" {
			skeletons++
		}
	})
	if steps != 7 || skeletons != 6 {
		t.Errorf("%d steps, %d of them given the state without its history; want 7, all but the first", steps, skeletons)
	}
	if n := failedActivities(ctx, t, c, queue); n != 0 {
		t.Errorf("%d activities failed, want none: a step that misses asks the workflow", n)
	}
}

// failedActivities counts the activity failures of workflow id's chain
// of executions.
func failedActivities(ctx context.Context, t *testing.T, c client.Client, id string) int {
	t.Helper()
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	runID := desc.GetWorkflowExecutionInfo().GetFirstRunId()
	for runID != "" {
		it := c.GetWorkflowHistory(ctx, id, runID, false, 0)
		runID = ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if ev.GetActivityTaskFailedEventAttributes() != nil || ev.GetActivityTaskTimedOutEventAttributes() != nil {
				n++
			}
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				runID = a.GetNewExecutionRunId()
			}
		}
	}
	return n
}

// TestMissWithoutAClient runs the conversation of
// TestDeltasReassembleTheState in the SDK's test environment, whose
// activities have no client to query the workflow with, on activities
// without a state cache: each step given the state without its history
// fails for want of it, and the workflow sends it again with the whole
// state. The run ends as in process, with the same requests.
func TestMissWithoutAClient(t *testing.T) {
	local := toolruntest.New(t, toolruntest.Script(deltaReplies()...))
	var localCalls counter
	allowAll := func(calls *counter) []toolrun.Tool { return []toolrun.Tool{writeTool(calls, nil)} }
	r := toolrun.New(local.Client(), userParams("go"), allowAll(&localCalls), &toolrun.Options{Logger: discard()})
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("in process: %v %v, want end_turn", res, err)
	}

	model := toolruntest.New(t, toolruntest.Script(deltaReplies()...))
	var calls counter
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(nopLogger)
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(10 * time.Minute) // minutes: a loaded machine is slow, and only a hang takes this long
	acts := temporal.NewActivities(model.Client(), allowAll(&calls), &toolrun.Options{Logger: discard()})
	acts.SetStateCacheRuns(-1)
	temporal.Register(env, acts)
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &fastRetries))
	out := outcome(t, env)
	if out.StopReason != toolrun.StopEndTurn {
		t.Fatalf("got stop %q (%s), want end_turn", out.StopReason, out.Detail)
	}
	sameState(t, "the outcome's", r.State(), out.State)
	if diff := cmp.Diff(requestsOf(t, local), requestsOf(t, model)); diff != "" {
		t.Errorf("requests in the test environment differ from those in process (-in process +workflow):\n%s", diff)
	}
}

// TestDeltasApprovalOnServer records, for the golden histories, a run on
// workers without a Store whose two calls await a person's decision, the
// first given by update and the second by signal: its steps carry deltas,
// and the step after each decision is given the state without its
// history, which the worker's cache holds.
func TestDeltasApprovalOnServer(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-deltas-approval")
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		toolruntest.Message(toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/b"})),
		toolruntest.Message(toolruntest.Text("Done."))))
	var calls counter
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{writeTool(&calls, policy.RequireApproval("writes change files"))}, &toolrun.Options{Logger: discard()}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"t1", "t2"} {
		waitFor(t, 30*time.Second, id+" awaiting approval", func() bool {
			pending, err := temporal.Pending(ctx, c, queue, nil)
			return err == nil && len(pending) == 1 && pending[0].Call.ID == id
		})
		if i == 0 {
			err = temporal.Decide(ctx, c, queue, id, toolrun.Decision{}, nil)
		} else {
			err = temporal.DecideBySignal(ctx, c, queue, id, toolrun.Decision{}, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." || out.State.Turns != 3 {
		t.Fatalf("got outcome %q %q after %d turns, want end_turn %q after 3", out.StopReason, out.Text, out.State.Turns, "Done.")
	}
	if diff := cmp.Diff(map[string]int{"write /a": 1, "write /b": 1}, calls.all()); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
	skeletons := 0
	forEachStep(ctx, t, c, queue, func(name string, in temporal.StepInput, res temporal.StepResult) {
		if in.Digest != "" {
			skeletons++
		}
	})
	if skeletons < 3 {
		t.Errorf("%d steps were given the state without its history, want every step but the first", skeletons)
	}
	recordHistory(t, c, queue, "nostore-deltas")
}

// TestHistorySinceLeavesOutWhatTheWorkerHolds asks a run waiting for a
// decision (3 steps taken, no Store) for its history as a worker whose
// cache holds an earlier history of it does (temporal.HistorySince, the
// number of messages and digest an earlier step reported): the answer
// leaves those messages out, and they with the answer are the whole
// history. A history the workflow does not know (a wrong digest), or no
// argument (a worker of an earlier release), gets the whole state.
func TestHistorySinceLeavesOutWhatTheWorkerHolds(t *testing.T) {
	c := dialTemporal(t)
	model := toolruntest.New(t, toolruntest.Script(deltaReplies()...))
	var calls counter
	queue := newQueue("toolrun-since")
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), deltaTools(&calls), &toolrun.Options{Logger: discard()}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &fastRetries)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "t2 awaiting approval", func() bool {
		pending, err := temporal.Pending(ctx, c, queue, nil)
		return err == nil && len(pending) == 1 && pending[0].Call.ID == "t2"
	})
	query := func(args ...any) temporal.HistoryAt {
		t.Helper()
		v, err := c.QueryWorkflow(ctx, queue, "", temporal.HistoryQuery, args...)
		if err != nil {
			t.Fatal(err)
		}
		var h temporal.HistoryAt
		if err := v.Get(&h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	whole := query()
	if whole.From != 0 || len(whole.State.Params.Messages) != whole.Messages || whole.Digest == "" {
		t.Fatalf("got an answer without an argument leaving out %d messages, with %d of %d, digest %q; want the whole history, with its digest", whole.From, len(whole.State.Params.Messages), whole.Messages, whole.Digest)
	}
	// The histories the steps before the last one reported.
	var marks []temporal.HistorySince
	forEachStep(ctx, t, c, queue, func(name string, in temporal.StepInput, res temporal.StepResult) {
		if res.Digest != "" && res.Digest != whole.Digest {
			marks = append(marks, temporal.HistorySince{Messages: res.Base + len(res.State.Params.Messages), Digest: res.Digest})
		}
	})
	if len(marks) == 0 {
		t.Fatal("no step before the last reported a digest")
	}
	for _, since := range marks {
		h := query(since)
		if h.From != since.Messages || h.Digest != whole.Digest || h.Messages != whole.Messages {
			t.Errorf("got an answer to %d messages of digest %.12s leaving out %d messages, of %d, digest %.12s; want it to leave out %d, of %d, digest %.12s", since.Messages, since.Digest, h.From, h.Messages, h.Digest, since.Messages, whole.Messages, whole.Digest)
			continue
		}
		got := append(slices.Clip(whole.State.Params.Messages[:h.From]), h.State.Params.Messages...)
		if diff := cmp.Diff(jsonOf(t, whole.State.Params.Messages), jsonOf(t, got)); diff != "" {
			t.Errorf("the messages held and the answer to %d messages are not the whole history (-whole +got):\n%s", since.Messages, diff)
		}
	}
	wrong := marks[0]
	wrong.Digest = strings.Repeat("0", len(wrong.Digest))
	if h := query(wrong); h.From != 0 || len(h.State.Params.Messages) != whole.Messages {
		t.Errorf("got an answer to an unknown history leaving out %d messages, with %d; want the whole history, %d", h.From, len(h.State.Params.Messages), whole.Messages)
	}
	if err := temporal.Decide(ctx, c, queue, "t2", toolrun.Decision{}, nil); err != nil {
		t.Fatal(err)
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil || out.StopReason != toolrun.StopEndTurn {
		t.Fatalf("got %v, %v; want the run to end with end_turn", out.StopReason, err)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
