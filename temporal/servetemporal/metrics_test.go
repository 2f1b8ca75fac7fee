package servetemporal_test

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/toolrun/toolrun/temporal"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
)

// TestTurnLatencyOnTemporal: /metrics' turn latency over Temporal is the
// time each step that sent a model request took on a worker, as the
// workflow's history records it (its activity's started and completed
// events), summed over the turns, with one count per turn.
func TestTurnLatencyOnTemporal(t *testing.T) {
	f := newFixture(t)
	plain, paying := newName("thread"), newName("thread")
	if o := outcome(f.run(t, input(plain, "r1", []map[string]any{user("m1", "hi")}, nil))); o["type"] != "success" {
		t.Fatalf("the plain run: outcome %v, want success", o)
	}
	id := interruptID(t, f.run(t, input(paying, "r2", []map[string]any{user("m1", "pay")}, nil)))
	evs := f.run(t, input(paying, "r3", nil, map[string]any{"resume": []map[string]any{{"interruptId": id, "status": "resolved", "payload": map[string]any{"decision": "approve"}}}}))
	if o := outcome(evs); o["type"] != "success" {
		t.Fatalf("the approved run: outcome %v, want success", o)
	}

	var nanos int64
	turns := 0
	for _, thread := range []string{plain, paying} {
		for _, d := range requestSteps(t, f, f.queue+"/"+thread) {
			nanos += int64(d)
			turns++
		}
	}
	if turns != 3 {
		t.Fatalf("the histories have %d steps that sent a request, want 3 (hi; pay and its answer)", turns)
	}
	if nanos <= 0 {
		t.Fatalf("the histories' steps took %v in all, want more than 0", time.Duration(nanos))
	}
	status, body := request(t, http.MethodGet, f.url+"/metrics", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", status, body)
	}
	metric := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics has no %s:\n%s", name, body)
		}
		return string(m[1])
	}
	if got, want := metric("toolrun_serve_turn_seconds_count"), strconv.Itoa(turns); got != want {
		t.Errorf("toolrun_serve_turn_seconds_count %s, want %s", got, want)
	}
	if got, want := metric("toolrun_serve_turn_seconds_sum"), strconv.FormatFloat(time.Duration(nanos).Seconds(), 'f', -1, 64); got != want {
		t.Errorf("toolrun_serve_turn_seconds_sum %s, want %s: the steps' times in the history", got, want)
	}
}

// requestSteps returns, for each step of workflow id's latest execution
// that sent a model request (its result has more turns than its input),
// the time between its activity's started and completed events.
func requestSteps(t *testing.T, f *fixture, id string) []time.Duration {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	type step struct {
		in      temporal.StepInput
		started time.Time
	}
	steps := map[int64]*step{}
	var out []time.Duration
	it := f.c.GetWorkflowHistory(t.Context(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && (a.GetActivityType().GetName() == temporal.StepActivity || a.GetActivityType().GetName() == temporal.StepDeltaActivity) {
			s := &step{}
			if err := dc.FromPayloads(a.GetInput(), &s.in); err != nil {
				t.Fatal(err)
			}
			steps[ev.GetEventId()] = s
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && steps[a.GetScheduledEventId()] != nil {
			steps[a.GetScheduledEventId()].started = ev.GetEventTime().AsTime()
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && steps[a.GetScheduledEventId()] != nil {
			s := steps[a.GetScheduledEventId()]
			var res temporal.StepResult
			if err := dc.FromPayloads(a.GetResult(), &res); err != nil {
				t.Fatal(err)
			}
			if res.State.Turns > s.in.State.Turns {
				out = append(out, ev.GetEventTime().AsTime().Sub(s.started))
			}
		}
	}
	return out
}
