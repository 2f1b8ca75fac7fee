package servetemporal_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestNextMessageAfterDecisionOnTemporal: a chat whose interrupt was
// decided over the JSON API sends its next message at once, while the
// workflow the decision continued still takes its turn (a held reply):
// the message waits for the run that follows that workflow and is
// taken, rather than refused with 409 thread_busy.
func TestNextMessageAfterDecisionOnTemporal(t *testing.T) {
	f := newFixture(t)
	thread := newName("thread")
	u1 := user("m1", "pay slowly")
	evs := f.run(t, input(thread, "r1", []map[string]any{u1}, nil))
	id := interruptID(t, evs)
	status, body := request(t, http.MethodPost, f.url+"/api/interrupts/"+id+"/decision", map[string]any{"decision": "approve"})
	var dec struct{ NextRun string }
	json.Unmarshal(body, &dec)
	if status != http.StatusOK || dec.NextRun == "" {
		t.Fatalf("deciding: %d %s, want 200 naming the run that goes on", status, body)
	}
	status, body = request(t, http.MethodPost, f.url+"/", input(thread, "r2", []map[string]any{u1, user("m2", "hi")}, nil))
	if status != http.StatusOK {
		t.Fatalf("the next message while the decided workflow runs: %d %s, want 200", status, body)
	}
	evs = events(t, body)
	if o := outcome(evs); o["type"] != "success" || evs[len(evs)-1]["result"] != "hello" {
		t.Errorf("the next message's run ended %v, want success with hello (events %v)", evs[len(evs)-1], types(evs))
	}
	if got := f.calls.got(); len(got) != 1 {
		t.Errorf("calls %v, want pay once", got)
	}
}
