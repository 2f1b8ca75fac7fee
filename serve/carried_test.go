package serve_test

import (
	"database/sql"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestMessageKeptWhenRunFails: a run that fails before its conversation
// has the user message it brings (here the thread's State cannot be
// saved) leaves the message's id unknown, so the client's retry with the
// same message ids gives the message to the model, once, with the
// context that came with it.
func TestMessageKeptWhenRunFails(t *testing.T) {
	var mu sync.Mutex
	var texts [][]string // the user texts of each request
	model := toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		var got []string
		for _, m := range r.Conversation {
			if m.Role != "user" {
				continue
			}
			for _, b := range m.Content {
				if b.Type == "text" {
					got = append(got, b.Text)
				}
			}
		}
		mu.Lock()
		texts = append(texts, got)
		mu.Unlock()
		return toolruntest.Message(toolruntest.Text("ok"))
	}})
	var db *sql.DB
	f := newFixture(t, nil, nil, func(c *serve.Config) {
		c.Client = model.Client()
		db = c.DB
	})
	msgs := []map[string]any{user("u1", "hi")}
	status, evs, body := post(t, f.url, input("t1", "r1", msgs, nil))
	if status != 200 || outcome(evs)["type"] != "success" {
		t.Fatalf("first run: %d %s %v", status, body, types(evs))
	}
	msgs = append(msgs, map[string]any{"id": evs[2]["messageId"], "role": "assistant", "content": "ok"}, user("u2", "and the rest"))
	ctx := map[string]any{"context": []any{map[string]any{"description": "the user's city", "value": "Paris"}}}

	// The database refuses to save the thread's State: the run fails
	// before its first request.
	if _, err := db.Exec(`CREATE TRIGGER refuse_save BEFORE UPDATE ON serve_states BEGIN SELECT RAISE(ABORT, 'the disk is full'); END`); err != nil {
		t.Fatal(err)
	}
	status, evs, body = post(t, f.url, input("t1", "r2", msgs, ctx))
	if status != 200 || last(evs)["type"] != "RUN_ERROR" {
		t.Fatalf("run with the failing save: %d %s %v, want RUN_ERROR", status, body, types(evs))
	}
	if _, err := db.Exec(`DROP TRIGGER refuse_save`); err != nil {
		t.Fatal(err)
	}

	status, evs, body = post(t, f.url, input("t1", "r3", msgs, ctx))
	if status != 200 || outcome(evs)["type"] != "success" {
		t.Fatalf("retry: %d %s %v", status, body, types(evs))
	}
	mu.Lock()
	want := [][]string{
		{"hi"},
		{"hi", "Context from the client application:\n- the user's city: Paris", "and the rest"},
	}
	if diff := cmp.Diff(want, texts); diff != "" {
		t.Errorf("the user texts of each request (-want +got):\n%s", diff)
	}
	mu.Unlock()
	// Once in the conversation, the message is known: the same messages
	// again (without the answer to the last) ask for that answer again,
	// from the same conversation, context included, given once.
	status, evs, body = post(t, f.url, input("t1", "r4", msgs, ctx))
	mu.Lock()
	defer mu.Unlock()
	if status != 200 || outcome(evs)["type"] != "success" || len(texts) != 3 {
		t.Fatalf("the same messages again: %d %s %v, %d requests; want success with one more", status, body, types(evs), len(texts))
	}
	if diff := cmp.Diff(want[1], texts[2]); diff != "" {
		t.Errorf("the regenerated request's user texts (-want +got):\n%s", diff)
	}
}
