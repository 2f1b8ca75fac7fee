package temporal_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
)

// ExampleFollow streams a run's events as they are recorded, from the
// start (after 0); a reader that reconnects passes the last Seq it had.
func ExampleFollow() {
	c, err := client.Dial(client.Options{})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer c.Close()
	err = temporal.Follow(context.Background(), c, "run-1", "", 0, func(e temporal.RunEvent) bool {
		switch e.Kind {
		case temporal.StepFinished:
			fmt.Printf("%d: turn %d: %s\n", e.Seq, e.Turn, e.Text)
		case temporal.ToolFinished:
			fmt.Printf("%d: %s answered (error: %v)\n", e.Seq, e.Result.Call.Name, e.Result.IsError)
		case temporal.Awaiting:
			fmt.Printf("%d: %d calls await a decision\n", e.Seq, len(e.Pending)+e.More)
		case temporal.Finished:
			if e.Err != nil {
				fmt.Printf("%d: ended: %v\n", e.Seq, e.Err)
			} else {
				fmt.Printf("%d: ended: %s\n", e.Seq, e.Outcome.StopReason)
			}
		}
		return true
	}, nil)
	if err != nil {
		fmt.Println("error:", err)
	}
}

// describe is what a test compares of a RunEvent: every field its kind
// sets, as text.
func describe(e temporal.RunEvent) string {
	switch e.Kind {
	case temporal.StepStarted:
		return fmt.Sprintf("StepStarted turn=%d", e.Turn)
	case temporal.StepFinished:
		var calls []string
		for _, p := range e.Calls {
			calls = append(calls, p.Call.ID+":"+p.Call.Name+":"+string(p.Call.Input))
		}
		return fmt.Sprintf("StepFinished turn=%d text=%q calls=%v", e.Turn, e.Text, calls)
	case temporal.ToolFinished:
		if e.Result == nil {
			return "ToolFinished with no result"
		}
		var text strings.Builder
		for _, c := range e.Result.Content {
			if c.OfText != nil {
				text.WriteString(c.OfText.Text)
			}
		}
		return fmt.Sprintf("ToolFinished %s:%s error=%v %s", e.Result.Call.ID, e.Result.Call.Name, e.Result.IsError, text.String())
	case temporal.Awaiting:
		var calls []string
		for _, p := range e.Pending {
			calls = append(calls, fmt.Sprintf("%s:%s:%d bytes of input:%s", p.Call.ID, p.Call.Name, len(p.Call.Input), p.Reason))
		}
		return fmt.Sprintf("Awaiting %v more=%d", calls, e.More)
	case temporal.Finished:
		if e.Err != nil {
			return "Finished err"
		}
		if e.Outcome == nil {
			return "Finished with neither outcome nor error"
		}
		return fmt.Sprintf("Finished %s %q", e.Outcome.StopReason, e.Outcome.Text)
	}
	return e.Kind.String()
}

// follow returns the events Follow yields for run id after after, and its
// error, with the client's converter dc (nil for the default).
func follow(ctx context.Context, c client.Client, id, runID string, after int64, dc converter.DataConverter) ([]temporal.RunEvent, error) {
	var out []temporal.RunEvent
	err := temporal.Follow(ctx, c, id, runID, after, func(e temporal.RunEvent) bool {
		out = append(out, e)
		return true
	}, &temporal.ClientOptions{DataConverter: dc})
	return out, err
}

func describeAll(events []temporal.RunEvent) []string {
	var out []string
	for _, e := range events {
		out = append(out, describe(e))
	}
	return out
}

// checkSeq fails the test unless the events' Seqs strictly increase.
func checkSeq(t *testing.T, events []temporal.RunEvent) {
	t.Helper()
	for i := 1; i < len(events); i++ {
		if events[i].Seq <= events[i-1].Seq {
			t.Errorf("event %d (%s) has Seq %d, not above event %d's %d", i, describe(events[i]), events[i].Seq, i-1, events[i-1].Seq)
		}
	}
}

// TestFollowContinueAsNew follows a run of three tool turns that continues
// as new after every turn, with and without a Store: the events come in
// order, with Seqs strictly increasing across the executions, each call's
// result once, the usage growing to the outcome's; following again after
// any Seq gives exactly the rest, and following the latest execution
// numbers the events the same.
func TestFollowContinueAsNew(t *testing.T) {
	c := dialTemporal(t)
	for _, withStore := range []bool{false, true} {
		t.Run(fmt.Sprintf("store=%v", withStore), func(t *testing.T) {
			queue := newQueue("toolrun-follow-can")
			model := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.Text("One."), toolruntest.ToolUse("c1", "get_weather", cityIn{City: "Paris"})),
				toolruntest.Message(toolruntest.ToolUse("c2", "get_weather", cityIn{City: "Rome"}), toolruntest.ToolUse("c3", "get_weather", cityIn{City: "Oslo"})),
				toolruntest.Message(toolruntest.ToolUse("c4", "get_weather", cityIn{City: "Lima"})),
				toolruntest.Message(toolruntest.Text("Done."))))
			opts := &toolrun.Options{Logger: discard()}
			if withStore {
				opts.Store = &filestore.Store{Dir: t.TempDir()}
			}
			calls := &counter{}
			inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{weatherTool(calls)}, opts))
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &temporal.RunOptions{ContinueAsNewAfter: 1})
			if err != nil {
				t.Fatal(err)
			}
			// Follow from the start, while the run goes on.
			events, err := follow(ctx, c, queue, run.GetRunID(), 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			var out temporal.Outcome
			if err := run.Get(ctx, &out); err != nil {
				t.Fatal(err)
			}
			want := []string{
				"StepStarted turn=1",
				`StepFinished turn=1 text="One." calls=[c1:get_weather:{"city":"Paris"}]`,
				"ToolFinished c1:get_weather error=false sunny in Paris",
				"StepStarted turn=2",
				`StepFinished turn=2 text="" calls=[c2:get_weather:{"city":"Rome"} c3:get_weather:{"city":"Oslo"}]`,
				"ToolFinished c2:get_weather error=false sunny in Rome",
				"ToolFinished c3:get_weather error=false sunny in Oslo",
				"StepStarted turn=3",
				`StepFinished turn=3 text="" calls=[c4:get_weather:{"city":"Lima"}]`,
				"ToolFinished c4:get_weather error=false sunny in Lima",
				"StepStarted turn=4",
				`StepFinished turn=4 text="Done." calls=[]`,
				`Finished end_turn "Done."`,
			}
			got := describeAll(events)
			// The two calls of turn 2 run at once: their results come in
			// either order.
			if len(got) == len(want) && got[5] == want[6] && got[6] == want[5] {
				got[5], got[6] = got[6], got[5]
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			checkSeq(t, events)
			if execs := events[len(events)-1].Seq>>43 - events[0].Seq>>43; execs < 2 {
				t.Errorf("the run went over %d continue-as-new, want at least 2 (Seqs %d to %d)", execs, events[0].Seq, events[len(events)-1].Seq)
			}
			var last toolrun.Usage
			for _, e := range events {
				if e.Kind != temporal.StepFinished {
					continue
				}
				if e.Usage.InputTokens < last.InputTokens || e.Usage.OutputTokens < last.OutputTokens {
					t.Errorf("turn %d: usage %+v is below the turn before's %+v", e.Turn, e.Usage, last)
				}
				last = e.Usage
			}
			if last != out.State.Usage || last.InputTokens == 0 {
				t.Errorf("the last step's usage is %+v, want the outcome's %+v (not zero)", last, out.State.Usage)
			}
			if diff := cmp.Diff(map[string]int{"weather Paris": 1, "weather Rome": 1, "weather Oslo": 1, "weather Lima": 1}, calls.all()); diff != "" {
				t.Errorf("tool runs (-want +got):\n%s", diff)
			}

			// A step's result carries no copy of the results the tools
			// gave, which the history holds already.
			it := c.GetWorkflowHistory(ctx, queue, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			steps := 0
			for it.HasNext() {
				e, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				a := e.GetActivityTaskCompletedEventAttributes()
				if a == nil {
					continue
				}
				var res temporal.StepResult
				if err := converter.GetDefaultDataConverter().FromPayloads(a.GetResult(), &res); err != nil || res.State == nil {
					continue // a tool's
				}
				steps++
				if len(res.Committed) != 0 {
					t.Errorf("a step's result holds %d committed results, want none: the tools' results are in the history already", len(res.Committed))
				}
			}
			if steps == 0 {
				t.Error("no step in the last execution's history")
			}

			// Again, from the start: the same events with the same Seqs.
			again, err := follow(ctx, c, queue, run.GetRunID(), 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			seqs := func(events []temporal.RunEvent) []string {
				var out []string
				for _, e := range events {
					out = append(out, fmt.Sprintf("%d %s", e.Seq, describe(e)))
				}
				return out
			}
			if diff := cmp.Diff(seqs(events), seqs(again)); diff != "" {
				t.Errorf("a second read (-first +second):\n%s", diff)
			}
			// The latest execution names the same chain.
			latest, err := follow(ctx, c, queue, "", 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(seqs(events), seqs(latest)); diff != "" {
				t.Errorf("a read of the latest execution (-first execution's +latest's):\n%s", diff)
			}
			// After each Seq, exactly the rest.
			for i, e := range events {
				rest, err := follow(ctx, c, queue, run.GetRunID(), e.Seq, nil)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(seqs(events[i+1:]), seqs(rest)); diff != "" {
					t.Errorf("after event %d's Seq %d (-want +got):\n%s", i, e.Seq, diff)
				}
			}
		})
	}
}

// TestFollowApprovalNoWorker follows a run whose two calls await a
// person, while no worker runs: Follow reports them Awaiting (a long input
// the memo leaves out put back), decisions are sent by signal, and once a
// worker runs again the same Follow reports the calls left waiting, the
// denied call's result, the approved call's, and the end.
func TestFollowApprovalNoWorker(t *testing.T) {
	t.Run("default converter", func(t *testing.T) { testFollowApproval(t, false) })
	t.Run("encrypting codec", func(t *testing.T) { testFollowApproval(t, true) })
}

func testFollowApproval(t *testing.T, encrypt bool) {
	c := dialTemporal(t)
	plain := c
	var dc converter.DataConverter
	if encrypt {
		dc = converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), newAESCodec(t))
		cc, err := client.NewClientFromExisting(c, client.Options{DataConverter: dc, Logger: nopLogger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cc.Close)
		c = cc
	}
	queue := newQueue("toolrun-follow-approval")
	long := "/" + strings.Repeat("x", temporal.MemoMaxInput)
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"}), toolruntest.ToolUse("t2", "write_file", writeIn{Path: long})),
		toolruntest.Message(toolruntest.Text("Done."))))
	calls := &counter{}
	acts := temporal.NewActivities(model.Client(), []toolrun.Tool{writeTool(calls, policy.RequireApproval("writes change files"))}, &toolrun.Options{Logger: discard()})
	w := temporal.NewWorker(c, queue, acts, worker.Options{WorkerStopTimeout: 5 * time.Second})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
	if err != nil {
		w.Stop()
		t.Fatal(err)
	}
	longInput := len(fmt.Sprintf(`{"path":%q}`, long))
	waiting := []string{
		"StepStarted turn=1",
		fmt.Sprintf(`StepFinished turn=1 text="" calls=[t1:write_file:{"path":"/a"} t2:write_file:{"path":%q}]`, long),
		fmt.Sprintf("Awaiting [t1:write_file:13 bytes of input:writes change files t2:write_file:%d bytes of input:writes change files] more=0", longInput),
	}
	// Follow until the run waits, with the worker running; then stop it.
	var first []temporal.RunEvent
	err = temporal.Follow(ctx, c, queue, run.GetRunID(), 0, func(e temporal.RunEvent) bool {
		first = append(first, e)
		return e.Kind != temporal.Awaiting
	}, &temporal.ClientOptions{DataConverter: dc})
	w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(waiting, describeAll(first)); diff != "" {
		t.Fatalf("events up to the wait (-want +got):\n%s", diff)
	}
	if encrypt {
		if _, err := follow(ctx, plain, queue, run.GetRunID(), 0, nil); err == nil || !strings.Contains(err.Error(), "data converter") {
			t.Errorf("Follow through a client without the codec: got %v, want an error naming the data converter", err)
		}
	}

	// With no worker running, Follow reads the same from the history, and
	// goes on waiting.
	events := make(chan temporal.RunEvent)
	done := make(chan error, 1)
	go func() {
		done <- temporal.Follow(ctx, c, queue, run.GetRunID(), 0, func(e temporal.RunEvent) bool {
			select {
			case events <- e:
				return true
			case <-ctx.Done():
				return false
			}
		}, &temporal.ClientOptions{DataConverter: dc})
		close(events)
	}()
	next := func() temporal.RunEvent {
		t.Helper()
		e, ok := <-events
		if !ok {
			t.Fatalf("Follow ended early: %v", <-done)
		}
		return e
	}
	var got []temporal.RunEvent
	for range waiting {
		got = append(got, next())
	}
	if diff := cmp.Diff(waiting, describeAll(got)); diff != "" {
		t.Fatalf("events read with no worker (-want +got):\n%s", diff)
	}
	for i := range got {
		if got[i].Seq != first[i].Seq {
			t.Errorf("event %d: Seq %d with no worker, %d before", i, got[i].Seq, first[i].Seq)
		}
	}

	if err := temporal.DecideBySignal(ctx, c, queue, "t1", toolrun.Decision{}, nil); err != nil {
		t.Fatal(err)
	}
	inProcessWorker(t, c, queue, acts)
	// t2 alone waits now.
	got = append(got, next())
	if err := temporal.DecideBySignal(ctx, c, queue, "t2", policy.Deny("no"), nil); err != nil {
		t.Fatal(err)
	}
	for e, ok := <-events; ok; e, ok = <-events {
		got = append(got, e)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := append(waiting,
		fmt.Sprintf("Awaiting [t2:write_file:%d bytes of input:writes change files] more=0", longInput),
		"StepStarted turn=2",
		"ToolFinished t2:write_file error=true tool call denied: no",
		`StepFinished turn=1 text="" calls=[]`,
		"ToolFinished t1:write_file error=false wrote /a",
		"StepStarted turn=2",
		`StepFinished turn=2 text="Done." calls=[]`,
		`Finished end_turn "Done."`,
	)
	if diff := cmp.Diff(want, describeAll(got)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	checkSeq(t, got)
	if diff := cmp.Diff(map[string]int{"write /a": 1}, calls.all()); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
}

// TestFollowEnds follows runs that end without an Outcome: one whose
// workflow fails, one terminated, one cancelled. Each Follow ends with a
// Finished carrying an error that says how.
func TestFollowEnds(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-follow-ends")
	// One reply for each run that awaits approval.
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"}))))
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{writeTool(&counter{}, policy.RequireApproval("writes change files"))}, &toolrun.Options{Logger: discard()}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	last := func(id string) temporal.RunEvent {
		t.Helper()
		events, err := follow(ctx, c, id, "", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) == 0 {
			t.Fatal("no events")
		}
		return events[len(events)-1]
	}
	check := func(id, what string) {
		t.Helper()
		e := last(id)
		if e.Kind != temporal.Finished || e.Err == nil || e.Outcome != nil || !strings.Contains(e.Err.Error(), what) {
			t.Errorf("%s: the last event is %s (err %v), want Finished with an error saying %q", id, describe(e), e.Err, what)
		}
	}

	if err := temporal.Follow(ctx, c, queue, "", 0, nil, nil); err == nil {
		t.Error("Follow with a nil yield returned no error")
	}
	// A run that does not exist is an error, at once.
	if _, err := follow(ctx, c, queue+"-none", "", 0, nil); err == nil {
		t.Error("Follow of a workflow that does not exist returned no error")
	}

	// An input with no state fails the workflow.
	failed, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue + "-failed", TaskQueue: queue}, temporal.WorkflowName, temporal.Input{})
	if err != nil {
		t.Fatal(err)
	}
	if err := failed.Get(ctx, nil); err == nil {
		t.Fatal("the workflow with no state did not fail")
	}
	check(queue+"-failed", "workflow input has no state")

	// Terminated, and cancelled, while awaiting approval.
	for _, end := range []string{"terminated", "cancelled"} {
		id := queue + "-" + end
		run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, userParams("go"), nil)
		if err != nil {
			t.Fatal(err)
		}
		err = temporal.Follow(ctx, c, id, run.GetRunID(), 0, func(e temporal.RunEvent) bool { return e.Kind != temporal.Awaiting }, nil)
		if err != nil {
			t.Fatal(err)
		}
		if end == "terminated" {
			err = c.TerminateWorkflow(ctx, id, "", "enough")
		} else {
			err = c.CancelWorkflow(ctx, id, "")
		}
		if err != nil {
			t.Fatal(err)
		}
		check(id, end)
	}
}

// TestFollowCanceled cancels the context of a Follow waiting for a run's
// next event: it returns the context's error.
func TestFollowCanceled(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-follow-cancel")
	ctx, run, _, _ := startApprovalRun(t, c, queue,
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})))
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	awaiting := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- temporal.Follow(fctx, c, queue, run.GetRunID(), 0, func(e temporal.RunEvent) bool {
			if e.Kind == temporal.Awaiting {
				close(awaiting)
			}
			return true
		}, nil)
	}()
	select {
	case <-awaiting:
	case err := <-done:
		t.Fatalf("Follow returned %v before the run awaited approval", err)
	}
	// Follow now long-polls for the next event, which no one sends.
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || err != fctx.Err() {
		t.Errorf("Follow returned %v once its context was cancelled, want %v", err, context.Canceled)
	}
	// A context that ended already ends Follow at once.
	if err := temporal.Follow(fctx, c, queue, run.GetRunID(), 0, func(temporal.RunEvent) bool { return true }, nil); err != context.Canceled {
		t.Errorf("Follow with a cancelled context returned %v, want %v", err, context.Canceled)
	}
}

// TestFollowInterrupted follows a run whose call's activity times out (the
// tool runs past its timeout): Follow reports the call answered as
// interrupted, with the very result the model then receives.
func TestFollowInterrupted(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-follow-interrupted")
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("s1", "stuck", map[string]any{})),
		toolruntest.Message(toolruntest.Text("Done."))))
	// The tool returns only once the test ends: its activity times out.
	release := make(chan struct{})
	stuck := toolrun.NewTool("stuck", "Never returns in time", func(ctx context.Context, _ struct{}) (string, error) {
		<-release
		return "too late", nil
	})
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{stuck}, &toolrun.Options{Logger: discard()}))
	t.Cleanup(func() { close(release) }) // before the worker stops
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &temporal.RunOptions{ToolTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	events, err := follow(ctx, c, queue, run.GetRunID(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, e := range events {
		if e.Kind == temporal.ToolFinished {
			results = append(results, strings.TrimPrefix(describe(e), "ToolFinished "))
		}
	}
	var seen []string
	for _, r := range seenResults(model) {
		id, rest, _ := strings.Cut(r, " ")
		seen = append(seen, id+":stuck "+rest)
	}
	if len(seen) != 1 || !strings.Contains(seen[0], "interrupted") {
		t.Fatalf("the model saw %q, want one interrupted call", seen)
	}
	if diff := cmp.Diff(seen, results); diff != "" {
		t.Errorf("ToolFinished results (-what the model saw +Follow's):\n%s", diff)
	}
	if last := events[len(events)-1]; describe(last) != `Finished end_turn "Done."` {
		t.Errorf("the last event is %s, want the run's end", describe(last))
	}
}

// TestFollowDeniedThenAnswered follows a run whose one call a person
// denies: the step that takes the denial answers the call and sends the
// next request at once, and Follow reports the call's result before the
// reply to it, with and without a Store (where the history holds no
// conversation).
func TestFollowDeniedThenAnswered(t *testing.T) {
	c := dialTemporal(t)
	for _, withStore := range []bool{false, true} {
		t.Run(fmt.Sprintf("store=%v", withStore), func(t *testing.T) { testFollowDenied(t, c, withStore) })
	}
}

func testFollowDenied(t *testing.T, c client.Client, withStore bool) {
	queue := newQueue("toolrun-follow-denied")
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.Text("Let me write."), toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		toolruntest.Message(toolruntest.Text("Not written."))))
	calls := &counter{}
	opts := &toolrun.Options{Logger: discard()}
	if withStore {
		opts.Store = &filestore.Store{Dir: t.TempDir()}
	}
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{writeTool(calls, policy.RequireApproval("writes change files"))}, opts))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []temporal.RunEvent
	err = temporal.Follow(ctx, c, queue, run.GetRunID(), 0, func(e temporal.RunEvent) bool {
		got = append(got, e)
		if e.Kind == temporal.Awaiting {
			if err := temporal.DecideBySignal(ctx, c, queue, "t1", policy.Deny("not now"), nil); err != nil {
				t.Error(err)
				return false
			}
		}
		return true
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"StepStarted turn=1",
		`StepFinished turn=1 text="Let me write." calls=[t1:write_file:{"path":"/a"}]`,
		"Awaiting [t1:write_file:13 bytes of input:writes change files] more=0",
		"StepStarted turn=2",
		"ToolFinished t1:write_file error=true tool call denied: not now",
		`StepFinished turn=2 text="Not written." calls=[]`,
		`Finished end_turn "Not written."`,
	}
	if diff := cmp.Diff(want, describeAll(got)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"t1 error=true tool call denied: not now"}, seenResults(model)); diff != "" {
		t.Errorf("results the model saw (-want +got):\n%s", diff)
	}
	if n := len(calls.all()); n != 0 {
		t.Errorf("the denied tool ran %d times", n)
	}
}

// TestFollowManyAwaiting follows a run with more calls awaiting approval
// than the memo lists: the first Awaiting lists MemoMaxCalls of them and
// counts the other; as the listed ones are decided, each Awaiting shows
// fewer calls waiting, until the one left out is listed alone.
func TestFollowManyAwaiting(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-follow-many")
	n := temporal.MemoMaxCalls + 1
	id := func(i int) string { return fmt.Sprintf("w%02d", i) }
	var uses []toolruntest.Block
	for i := range n {
		uses = append(uses, toolruntest.ToolUse(id(i), "write_file", writeIn{Path: fmt.Sprintf("/%d", i)}))
	}
	model := toolruntest.New(t, toolruntest.Script(toolruntest.Message(uses...), toolruntest.Message(toolruntest.Text("Done."))))
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{writeTool(&counter{}, policy.RequireApproval("writes change files"))}, &toolrun.Options{Logger: discard()}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	deny := func(i int) bool {
		if err := temporal.DecideBySignal(ctx, c, queue, id(i), policy.Deny("no"), nil); err != nil {
			t.Error(err)
			return false
		}
		return true
	}
	var waits []temporal.RunEvent
	var last *temporal.RunEvent
	err = temporal.Follow(ctx, c, queue, run.GetRunID(), 0, func(e temporal.RunEvent) bool {
		switch {
		case e.Kind == temporal.Finished:
			last = &e
		case e.Kind != temporal.Awaiting:
		case len(waits) == 0:
			// The listed calls, not the one beyond.
			for i := range n - 1 {
				if !deny(i) {
					return false
				}
			}
		case len(e.Pending) == 1 && e.Pending[0].Call.ID == id(n-1) && e.More == 0:
			if !deny(n - 1) {
				return false
			}
		}
		if e.Kind == temporal.Awaiting {
			waits = append(waits, e)
		}
		return true
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if last == nil || last.Outcome == nil || last.Outcome.Text != "Done." {
		t.Fatalf("the run did not end with its answer: %v", last)
	}
	if first := waits[0]; len(first.Pending) != temporal.MemoMaxCalls || first.More != 1 || first.Pending[0].Call.ID != id(0) {
		t.Errorf("the first Awaiting lists %d calls from %s and counts %d more, want %d from %s and 1 more", len(first.Pending), first.Pending[0].Call.ID, first.More, temporal.MemoMaxCalls, id(0))
	}
	for i := 1; i < len(waits); i++ {
		if now, before := len(waits[i].Pending)+waits[i].More, len(waits[i-1].Pending)+waits[i-1].More; now >= before {
			t.Errorf("Awaiting %d shows %d calls waiting, not fewer than the %d before", i, now, before)
		}
	}
}

// TestFollowAnsweredInStep follows runs whose response has calls that the
// step receiving it answers itself (an unknown tool's, a call a policy
// denies or skips, an input the schema refuses, the calls of a response
// cut off at max_tokens), alone, so that the step also commits the turn,
// or next to a call that runs: Follow reports each call with the
// response and its answer once, after the step, as a run in process
// reports them, with and without a Store.
func TestFollowAnsweredInStep(t *testing.T) {
	c := dialTemporal(t)
	skip := policy.Func(func(ctx context.Context, in writeIn) toolrun.Decision {
		if in.Path == "/deny" {
			return policy.Deny("not there")
		}
		return policy.Skip(toolrun.Text("skipped " + in.Path))
	})
	done := toolruntest.Message(toolruntest.Text("Done."))
	cut := toolruntest.Message(toolruntest.Text("Let me"), toolruntest.ToolUse("m1", "get_weather", cityIn{City: "Paris"}))
	cut.StopReason = "max_tokens"
	tests := []struct {
		name    string
		replies []toolruntest.Reply
		want    []string
	}{{
		name:    "unknown tool",
		replies: []toolruntest.Reply{toolruntest.Message(toolruntest.ToolUse("u1", "get_location", struct{}{})), done},
		want: []string{
			"StepStarted turn=1",
			`StepFinished turn=1 text="" calls=[u1:get_location:{}]`,
			`ToolFinished u1:get_location error=true unknown tool "get_location"; available tools: get_weather, write_file`,
			"StepStarted turn=2",
			`StepFinished turn=2 text="Done." calls=[]`,
			`Finished end_turn "Done."`,
		},
	}, {
		name: "denied and skipped by a policy",
		replies: []toolruntest.Reply{toolruntest.Message(toolruntest.Text("Writing."),
			toolruntest.ToolUse("d1", "write_file", writeIn{Path: "/deny"}), toolruntest.ToolUse("s1", "write_file", writeIn{Path: "/b"})), done},
		want: []string{
			"StepStarted turn=1",
			`StepFinished turn=1 text="Writing." calls=[d1:write_file:{"path":"/deny"} s1:write_file:{"path":"/b"}]`,
			"ToolFinished d1:write_file error=true tool call denied: not there",
			"ToolFinished s1:write_file error=false skipped /b",
			"StepStarted turn=2",
			`StepFinished turn=2 text="Done." calls=[]`,
			`Finished end_turn "Done."`,
		},
	}, {
		name:    "input the schema refuses",
		replies: []toolruntest.Reply{toolruntest.Message(toolruntest.ToolUse("v1", "get_weather", map[string]any{"city": 3})), done},
		want: []string{
			"StepStarted turn=1",
			`StepFinished turn=1 text="" calls=[v1:get_weather:{"city":3}]`,
			"", // the validation error's text, checked against the run in process
			"StepStarted turn=2",
			`StepFinished turn=2 text="Done." calls=[]`,
			`Finished end_turn "Done."`,
		},
	}, {
		name:    "final response",
		replies: []toolruntest.Reply{cut},
		want: []string{
			"StepStarted turn=1",
			`StepFinished turn=1 text="Let me" calls=[m1:get_weather:{"city":"Paris"}]`,
			"", // the not-run error's text, checked against the run in process
			`Finished max_tokens "Let me"`,
		},
	}, {
		name: "next to a call that runs",
		replies: []toolruntest.Reply{toolruntest.Message(toolruntest.ToolUse("u1", "get_location", struct{}{}),
			toolruntest.ToolUse("w1", "get_weather", cityIn{City: "Rome"})), done},
		want: []string{
			"StepStarted turn=1",
			`StepFinished turn=1 text="" calls=[u1:get_location:{} w1:get_weather:{"city":"Rome"}]`,
			`ToolFinished u1:get_location error=true unknown tool "get_location"; available tools: get_weather, write_file`,
			"ToolFinished w1:get_weather error=false sunny in Rome",
			"StepStarted turn=2",
			`StepFinished turn=2 text="Done." calls=[]`,
			`Finished end_turn "Done."`,
		},
	}}
	for _, tt := range tests {
		for _, withStore := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/store=%v", tt.name, withStore), func(t *testing.T) {
				tools := func(calls *counter) []toolrun.Tool {
					return []toolrun.Tool{weatherTool(calls), writeTool(calls, skip)}
				}
				// The run in process: the responses and answers its events
				// report, which Follow must report alike.
				var inProcess []string
				local := toolruntest.New(t, toolruntest.Script(tt.replies...))
				r := toolrun.New(local.Client(), userParams("go"), tools(&counter{}), &toolrun.Options{Logger: discard(), OnEvent: func(ctx context.Context, e toolrun.Event) {
					switch e := e.(type) {
					case toolrun.ResponseReceived:
						var ids []string
						for _, b := range e.Message.Content {
							if b.Type == "tool_use" {
								ids = append(ids, b.ID)
							}
						}
						inProcess = append(inProcess, fmt.Sprintf("response turn=%d calls=%v", e.Turn, ids))
					case toolrun.ToolFinished:
						inProcess = append(inProcess, describe(temporal.RunEvent{Kind: temporal.ToolFinished, Result: e.Result}))
					}
				}})
				if _, err := r.Run(t.Context()); err != nil && !errors.Is(err, toolrun.ErrIncomplete) {
					t.Fatal(err)
				}

				queue := newQueue("toolrun-follow-answered")
				model := toolruntest.New(t, toolruntest.Script(tt.replies...))
				opts := &toolrun.Options{Logger: discard()}
				if withStore {
					opts.Store = &filestore.Store{Dir: t.TempDir()}
				}
				calls := &counter{}
				inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), tools(calls), opts))
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
				if err != nil {
					t.Fatal(err)
				}
				events, err := follow(ctx, c, queue, run.GetRunID(), 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				checkSeq(t, events)
				got := describeAll(events)
				want := slices.Clone(tt.want)
				var followed []string
				for i, e := range events {
					switch e.Kind {
					case temporal.StepFinished:
						if e.Turn > 0 && (len(e.Calls) > 0 || e.Text != "") {
							var ids []string
							for _, p := range e.Calls {
								ids = append(ids, p.Call.ID)
							}
							followed = append(followed, fmt.Sprintf("response turn=%d calls=%v", e.Turn, ids))
						}
					case temporal.ToolFinished:
						followed = append(followed, got[i])
						if i < len(want) && want[i] == "" {
							want[i] = got[i] // its text is compared with the run in process's below
						}
					}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(inProcess, followed); diff != "" {
					t.Errorf("responses and answers, in process (-) and as Follow reports them (+):\n%s", diff)
				}
				if n := len(calls.all()); n > 1 {
					t.Errorf("the tools ran %d times, want at most once (get_weather next to a call answered in the step): %v", n, calls.all())
				}
			})
		}
	}
}
