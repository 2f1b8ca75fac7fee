package servetemporal_test

import (
	"net/http"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/client"

	"github.com/toolrun/toolrun/temporal"
)

// TestMessageKeptWhenRunFailsOnTemporal: a new thread's first run fails
// because a workflow that is not this server's runs under the thread's
// id; the message it brought is not the thread's yet, so once that
// workflow is gone the client's retry with the same message id starts
// the thread with it, from a conversation of its own, and the model
// answers it.
func TestMessageKeptWhenRunFailsOnTemporal(t *testing.T) {
	f := newFixture(t)
	thread := newName("thread")
	// Another's workflow, awaiting a decision, under the thread's id.
	foreign, err := temporal.Start(t.Context(), f.c, client.StartWorkflowOptions{ID: f.queue + "/" + thread, TaskQueue: f.queue},
		anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024, Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("pay"))}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Its first request is out once it awaits the decision.
	deadline := time.Now().Add(30 * time.Second)
	for {
		pending, err := temporal.Pending(t.Context(), f.c, foreign.GetID())
		if err == nil && len(pending) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the foreign workflow does not await a decision: %v, %v", pending, err)
		}
		time.Sleep(50 * time.Millisecond) // polling the Temporal server, not timing the code
	}
	msgs := []map[string]any{user("u1", "hi")}
	evs := f.run(t, input(thread, "r1", msgs, nil))
	if last := evs[len(evs)-1]; last["type"] != "RUN_ERROR" {
		t.Fatalf("the first run with a foreign workflow under the thread's id: %v, want RUN_ERROR", types(evs))
	}
	if err := f.c.TerminateWorkflow(t.Context(), foreign.GetID(), foreign.GetRunID(), "not this server's"); err != nil {
		t.Fatal(err)
	}

	before := len(f.model.Requests())
	status, body := request(t, http.MethodPost, f.url+"/", input(thread, "r2", msgs, nil))
	if status != http.StatusOK {
		t.Fatalf("the retry = %d %s, want 200", status, body)
	}
	evs = events(t, body)
	if o := outcome(evs); o["type"] != "success" || evs[len(evs)-1]["result"] != "hello" {
		t.Fatalf("the retry: outcome %v, last event %v, want the model's answer to the message: %v", o, evs[len(evs)-1], types(evs))
	}
	want := [][]string{{`user: text "hi"`}}
	if diff := cmp.Diff(want, conversations(f.model.Requests()[before:])); diff != "" {
		t.Errorf("the retry's requests (-want +got):\n%s", diff)
	}
}
