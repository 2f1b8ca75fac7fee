package serve_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestAnswersAndMessageAfterFailedRun: a run that answers both of a
// turn's parallel calls (one denied, one approved) and brings a user
// message gives the model the two results and then the message, in one
// request. When that run fails before the thread's State is saved, the
// decisions stay recorded and the message does not: the client's retry
// (the messages again, the decisions taken already) gives the model the
// results and the message once, and the same messages once more send
// nothing.
func TestAnswersAndMessageAfterFailedRun(t *testing.T) {
	var mu sync.Mutex
	var convs [][]string // each request's conversation, a line a block
	model := toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		var conv []string
		assistant := 0
		for _, m := range r.Conversation {
			if m.Role == "assistant" {
				assistant++
			}
			for _, b := range m.Content {
				conv = append(conv, m.Role+" "+b.Type+" "+b.ResultText()+b.ID)
			}
		}
		mu.Lock()
		convs = append(convs, conv)
		mu.Unlock()
		if assistant == 0 {
			return toolruntest.Message(toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 10}), toolruntest.ToolUse("call_refund", "refund", map[string]any{"amount": 20}))
		}
		return toolruntest.Message(toolruntest.Text("ok"))
	}})
	var db *sql.DB
	f := newFixture(t, nil, policy.RequireApproval("payments need a person"), func(c *serve.Config) {
		c.Client = model.Client()
		db = c.DB
	})
	msgs := []map[string]any{user("u1", "pay both")}
	_, evs, body := post(t, f.url, input("t1", "r1", msgs, nil))
	if evs == nil {
		t.Fatal(body)
	}
	byCall := map[string]string{}
	for _, it := range interrupts(t, evs) {
		byCall[it["toolCallId"].(string)] = it["id"].(string)
	}
	msgs = append(msgs, user("u2", "and thanks"))
	answers := map[string]any{"resume": []any{
		resume(byCall["call_refund"], map[string]any{"decision": "deny", "reason": "no refunds"}),
		resume(byCall["call_pay"], map[string]any{"decision": "approve"}),
	}}

	if _, err := db.Exec(`CREATE TRIGGER refuse_save BEFORE UPDATE ON serve_states BEGIN SELECT RAISE(ABORT, 'the disk is full'); END`); err != nil {
		t.Fatal(err)
	}
	status, evs, body := post(t, f.url, input("t1", "r2", msgs, answers))
	if status != 200 || last(evs)["type"] != "RUN_ERROR" {
		t.Fatalf("run with the failing save: %d %s %v, want RUN_ERROR", status, body, types(evs))
	}
	if _, err := db.Exec(`DROP TRIGGER refuse_save`); err != nil {
		t.Fatal(err)
	}
	// The same request again: its decisions are taken already, and the
	// run says so (toolrun.decided) rather than refuse the retry; the
	// message is new still, and goes with the results.
	status, evs, body = post(t, f.url, input("t1", "r3", msgs, answers))
	if status != 200 || outcome(evs)["type"] != "success" {
		t.Fatalf("retry: %d %s %v", status, body, types(evs))
	}
	if n := len(customs(evs, "toolrun.decided")); n != 2 {
		t.Errorf("the retry told %d decisions, want 2", n)
	}
	mu.Lock()
	want := [][]string{
		{"user text pay both"},
		{
			"user text pay both",
			"assistant tool_use call_pay", "assistant tool_use call_refund",
			"user tool_result paid {\"amount\":10}", "user tool_result tool call denied: no refunds",
			"user text and thanks",
		},
	}
	got := convs
	mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`pay{"amount":10}`}, f.calls.got()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	status, evs, body = post(t, f.url, input("t1", "r5", msgs, nil))
	mu.Lock()
	n := len(convs)
	mu.Unlock()
	if status != 200 || outcome(evs)["type"] != "success" || n != 2 {
		t.Errorf("the same messages again: %d %s %v, %d requests; want success with none sent", status, body, types(evs), n)
	}
}

// TestClientToolApprovedWithMessage: a run that approves a client tool's
// call and brings a user message hands the call to the client and keeps
// the message for the turn: the model is asked nothing until the client's
// result, and then gets the result and the message, once.
func TestClientToolApprovedWithMessage(t *testing.T) {
	var mu sync.Mutex
	var convs [][]string
	model := toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		var conv []string
		assistant := 0
		for _, m := range r.Conversation {
			if m.Role == "assistant" {
				assistant++
			}
			for _, b := range m.Content {
				conv = append(conv, m.Role+" "+b.Type+" "+b.ResultText()+b.ID)
			}
		}
		mu.Lock()
		convs = append(convs, conv)
		mu.Unlock()
		if assistant == 0 {
			return toolruntest.Message(toolruntest.ToolUse("call_loc", "get_location", map[string]any{"precise": true}))
		}
		return toolruntest.Message(toolruntest.Text("you are in Paris"))
	}})
	f := newFixture(t, nil, policy.RequireApproval("the location is private"), func(c *serve.Config) { c.Client = model.Client() })
	tools := []any{map[string]any{"name": "get_location", "description": "where the user is", "parameters": map[string]any{"type": "object", "properties": map[string]any{"precise": map[string]any{"type": "boolean"}}}}}
	ctx := []any{map[string]any{"description": "the user's language", "value": "French"}}
	msgs := []map[string]any{user("u1", "where am i")}
	_, evs, body := post(t, f.url, input("t1", "r1", msgs, map[string]any{"tools": tools, "context": ctx}))
	if evs == nil {
		t.Fatal(body)
	}
	its := interrupts(t, evs)
	msgs = append(msgs, user("u2", "in French please"))
	_, evs, body = post(t, f.url, input("t1", "r2", msgs, map[string]any{"tools": tools, "context": ctx, "resume": []any{resume(its[0]["id"].(string), map[string]any{"decision": "approve"})}}))
	if evs == nil {
		t.Fatal(body)
	}
	if o := outcome(evs); o["type"] != "success" || fmt.Sprint(o["pendingToolCallIds"]) != "[call_loc]" {
		t.Fatalf("after the approval: outcome %v, want success pending call_loc", o)
	}
	asst := map[string]any{"id": "a1", "role": "assistant", "toolCalls": []any{map[string]any{"id": "call_loc", "type": "function", "function": map[string]any{"name": "get_location", "arguments": `{"precise":true}`}}}}
	msgs = append(msgs, asst, map[string]any{"id": "m3", "role": "tool", "toolCallId": "call_loc", "content": "Paris"})
	_, evs, body = post(t, f.url, input("t1", "r3", msgs, map[string]any{"tools": tools, "context": ctx}))
	if evs == nil || outcome(evs)["type"] != "success" || last(evs)["result"] != "you are in Paris" {
		t.Fatalf("the client's result: %s %v", body, evs)
	}
	_, evs, body = post(t, f.url, input("t1", "r4", msgs, map[string]any{"tools": tools, "context": ctx}))
	if evs == nil || outcome(evs)["type"] != "success" {
		t.Fatalf("the same messages again: %s %v", body, evs)
	}
	mu.Lock()
	defer mu.Unlock()
	want := [][]string{
		{"user text Context from the client application:\n- the user's language: French", "user text where am i"},
		{
			"user text Context from the client application:\n- the user's language: French", "user text where am i",
			"assistant tool_use call_loc",
			"user tool_result Paris",
			"user text in French please",
		},
	}
	if diff := cmp.Diff(want, convs); diff != "" {
		t.Errorf("the requests (-want +got):\n%s", diff)
	}
}

// TestGreetingThenFailedFirstRun: a client whose chat opens with its own
// assistant greeting sends it with the first user message. When that
// first run fails before the thread's conversation has the message (in
// process its State cannot be saved; over an Executor its Run fails
// before it took the message), the thread is new still: the retry starts
// it from the message, and the model gets it once.
func TestGreetingThenFailedFirstRun(t *testing.T) {
	msgs := []map[string]any{{"id": "greet", "role": "assistant", "content": "Hi! How can I help?"}, user("u1", "hi")}
	t.Run("in process", func(t *testing.T) {
		var mu sync.Mutex
		var texts [][]string
		model := toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
			var got []string
			for _, m := range r.Conversation {
				for _, b := range m.Content {
					if b.Type == "text" {
						got = append(got, m.Role+" "+b.Text)
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
		if _, err := db.Exec(`CREATE TRIGGER refuse_save BEFORE INSERT ON serve_states BEGIN SELECT RAISE(ABORT, 'the disk is full'); END`); err != nil {
			t.Fatal(err)
		}
		status, evs, body := post(t, f.url, input("t1", "r1", msgs, nil))
		if status != 200 || last(evs)["type"] != "RUN_ERROR" {
			t.Fatalf("first run with the failing save: %d %s %v, want RUN_ERROR", status, body, types(evs))
		}
		if _, err := db.Exec(`DROP TRIGGER refuse_save`); err != nil {
			t.Fatal(err)
		}
		status, evs, body = post(t, f.url, input("t1", "r2", msgs, nil))
		if status != 200 || outcome(evs)["type"] != "success" {
			t.Fatalf("retry: %d %s %v", status, body, types(evs))
		}
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff([][]string{{"user hi"}}, texts); diff != "" {
			t.Errorf("the user texts of each request (-want +got):\n%s", diff)
		}
	})
	t.Run("over an executor", func(t *testing.T) {
		ex := &failFirst{}
		f := newFixture(t, nil, nil, func(c *serve.Config) { c.Executor = ex })
		status, evs, body := post(t, f.url, input("t1", "r1", msgs, nil))
		if status != 200 || last(evs)["type"] != "RUN_ERROR" {
			t.Fatalf("first run, failed by the executor: %d %s %v, want RUN_ERROR", status, body, types(evs))
		}
		status, evs, body = post(t, f.url, input("t1", "r2", msgs, nil))
		if status != 200 || outcome(evs)["type"] != "success" {
			t.Fatalf("retry: %d %s %v", status, body, types(evs))
		}
		ex.mu.Lock()
		defer ex.mu.Unlock()
		if diff := cmp.Diff([]bool{true, true}, ex.newThread); diff != "" {
			t.Errorf("ExecutorRun.NewThread of each run (-want +got):\n%s", diff)
		}
	})
}

// failFirst is an Executor whose first Run fails before it takes its
// messages, and whose later runs answer at once.
type failFirst struct {
	mu        sync.Mutex
	newThread []bool // of each run
}

func (e *failFirst) Run(ctx context.Context, r *serve.ExecutorRun) (*toolrun.Result, error) {
	e.mu.Lock()
	e.newThread = append(e.newThread, r.NewThread)
	n := len(e.newThread)
	e.mu.Unlock()
	if n == 1 {
		return nil, errors.New("the executor is unreachable")
	}
	if err := r.MessagesTaken(); err != nil {
		return nil, err
	}
	return &toolrun.Result{StopReason: toolrun.StopEndTurn}, nil
}

func (e *failFirst) Pending(ctx context.Context, thread string) ([]serve.ThreadCall, error) {
	return nil, nil
}

func (e *failFirst) Decide(ctx context.Context, thread, callID string, d toolrun.Decision) error {
	return nil
}

func (e *failFirst) Cancel(ctx context.Context, thread string) error { return nil }
