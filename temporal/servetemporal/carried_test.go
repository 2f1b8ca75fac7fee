package servetemporal_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
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
		pending, err := temporal.Pending(t.Context(), f.c, foreign.GetID(), nil)
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

// TestMessageTakenThenCancelledOnTemporal: a run whose workflow took its
// user message and that is then cancelled has the message recorded as the
// thread's (the executor said so once the workflow had it), so the
// client's next run, which sends it again with a new one, does not give
// it to the model twice.
func TestMessageTakenThenCancelledOnTemporal(t *testing.T) {
	f := newFixture(t)
	thread := newName("thread")
	evs := f.run(t, input(thread, "r1", []map[string]any{user("u1", "hi")}, nil))
	if o := outcome(evs); o["type"] != "success" {
		t.Fatalf("the first run: outcome %v", o)
	}
	var answer any
	for _, e := range evs {
		if e["type"] == "TEXT_MESSAGE_START" {
			answer = e["messageId"]
		}
	}
	msgs := []map[string]any{user("u1", "hi"), {"id": answer, "role": "assistant", "content": "hello"}, user("u2", "slow")}

	// The run with "slow" is cancelled once its workflow has the message.
	b, _ := json.Marshal(input(thread, "r2", msgs, nil))
	resp, err := http.Post(f.url+"/", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	cancelled := false
	var last map[string]any
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		last = nil
		json.Unmarshal([]byte(data), &last)
		if !cancelled && last["type"] == "STEP_STARTED" {
			// A step started: the workflow took the message and sent it.
			cancelled = true
			if status, body := request(t, http.MethodPost, f.url+"/runs/r2/cancel", nil); status != http.StatusAccepted {
				t.Fatalf("the cancel = %d %s, want 202", status, body)
			}
		}
	}
	if o, _ := last["outcome"].(map[string]any); o["type"] != "cancelled" {
		t.Fatalf("the cancelled run ends with %v", last)
	}

	evs = f.run(t, input(thread, "r3", append(msgs, user("u3", "hi")), nil))
	if o := outcome(evs); o["type"] != "success" {
		t.Fatalf("the next run: outcome %v: %v", o, types(evs))
	}
	reqs := f.model.Requests()
	var texts []string
	for _, m := range reqs[len(reqs)-1].Conversation {
		for _, b := range m.Content {
			if m.Role == "user" && b.Type == "text" {
				texts = append(texts, b.Text)
			}
		}
	}
	if diff := cmp.Diff([]string{"hi", "slow", "hi"}, texts); diff != "" {
		t.Errorf("the next run's request's user texts (-want +got):\n%s", diff)
	}
}
