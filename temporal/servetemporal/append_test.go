package servetemporal_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
)

// inProcess is a server that runs its runs in process, with the tools,
// the policy and the script of newFixture's, and its own scripted model.
func inProcess(t *testing.T) (url string, model *toolruntest.Server) {
	t.Helper()
	model = scenes(t, script)
	calls := &counter{}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "serve.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	h, err := serve.New(t.Context(), serve.Config{
		Client: model.Client(),
		Params: anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024},
		Tools:  []toolrun.Tool{calls.tool(t)},
		Options: toolrun.Options{Logger: discard(), Policy: func(_ context.Context, call toolrun.PolicyCall) toolrun.Decision {
			if call.Name == "pay" {
				return policy.Defer(call.Name + " needs a person")
			}
			return toolrun.Decision{}
		}},
		DB:     db,
		Logger: discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Shutdown(context.Background())
		srv.Close()
	})
	return srv.URL, model
}

// conversations returns each request's conversation, a line a message:
// its role and its blocks (text, tool_use id, tool_result id and text).
func conversations(reqs []*toolruntest.Request) [][]string {
	var out [][]string
	for _, r := range reqs {
		var conv []string
		for _, m := range r.Conversation {
			var blocks []string
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					blocks = append(blocks, fmt.Sprintf("text %q", b.Text))
				case "tool_use":
					blocks = append(blocks, "tool_use "+b.ID)
				case "tool_result":
					blocks = append(blocks, fmt.Sprintf("tool_result %s %q", b.ToolUseID, b.ResultText()))
				default:
					blocks = append(blocks, b.Type)
				}
			}
			conv = append(conv, m.Role+": "+strings.Join(blocks, ", "))
		}
		out = append(out, conv)
	}
	return out
}

// TestAnswerWithMessageOnTemporal: a run that answers the thread's last
// pending call (an approval's resume entry, a client tool's result) and
// brings a new user message does both over Temporal, as in process: the
// model gets the call's result and then the message in one request, the
// same requests in both, and the run ends with the model's answer.
func TestAnswerWithMessageOnTemporal(t *testing.T) {
	f := newFixture(t)
	local, localModel := inProcess(t)
	tools := []map[string]any{{"name": "get_location", "description": "where the user is", "parameters": map[string]any{"type": "object", "properties": map[string]any{"precise": map[string]any{"type": "boolean"}}}}}
	for _, tt := range []struct {
		name   string
		scene  string
		answer func(evs []map[string]any) (msgs []map[string]any, extra map[string]any)
		want   [][]string // the requests' conversations
	}{{
		name:  "approval",
		scene: "pay",
		answer: func(evs []map[string]any) ([]map[string]any, map[string]any) {
			id := interruptID(t, evs)
			return []map[string]any{user("u1", "pay"), user("u2", "hi")}, map[string]any{"resume": []map[string]any{{"interruptId": id, "status": "resolved", "payload": map[string]any{"decision": "approve"}}}}
		},
		want: [][]string{
			{`user: text "pay"`},
			{`user: text "pay"`, `assistant: text "paying", tool_use call_pay`, `user: tool_result call_pay "paid {\"amount\":5}"`, `user: text "hi"`},
		},
	}, {
		name:  "client tool",
		scene: "where am i",
		answer: func(evs []map[string]any) ([]map[string]any, map[string]any) {
			if o := outcome(evs); fmt.Sprint(o["pendingToolCallIds"]) != "[call_loc]" {
				t.Fatalf("outcome %v, want call_loc pending", o)
			}
			return []map[string]any{user("u1", "where am i"), {"id": "t1", "role": "tool", "toolCallId": "call_loc", "content": "Paris"}, user("u2", "hi")}, map[string]any{"tools": tools}
		},
		want: [][]string{
			{`user: text "where am i"`},
			{`user: text "where am i"`, `assistant: tool_use call_loc`, `user: tool_result call_loc "Paris"`, `user: text "hi"`},
		},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string][][]string{}
			for _, srv := range []struct {
				name  string
				url   string
				model *toolruntest.Server
			}{{"temporal", f.url, f.model}, {"in process", local, localModel}} {
				thread := newName("thread")
				before := len(srv.model.Requests())
				status, body := request(t, http.MethodPost, srv.url+"/", input(thread, "r1-"+thread, []map[string]any{user("u1", tt.scene)}, map[string]any{"tools": tools}))
				if status != http.StatusOK {
					t.Fatalf("%s: the first run = %d %s", srv.name, status, body)
				}
				msgs, extra := tt.answer(events(t, body))
				status, body = request(t, http.MethodPost, srv.url+"/", input(thread, "r2-"+thread, msgs, extra))
				if status != http.StatusOK {
					t.Fatalf("%s: the run with the answer and a message = %d %s, want 200", srv.name, status, body)
				}
				evs := events(t, body)
				if o := outcome(evs); o["type"] != "success" || evs[len(evs)-1]["result"] != "hello" {
					t.Fatalf("%s: the run with the answer and a message: outcome %v, last event %v, want success with the answer to the message: %v", srv.name, o, evs[len(evs)-1], types(evs))
				}
				got[srv.name] = conversations(srv.model.Requests()[before:])
			}
			if diff := cmp.Diff(tt.want, got["in process"]); diff != "" {
				t.Errorf("the requests in process (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(got["in process"], got["temporal"]); diff != "" {
				t.Errorf("the requests over Temporal differ from those in process (-in process +temporal):\n%s", diff)
			}
		})
	}
}

// TestMessageWithCallsOpenOnTemporal: a new user message while the
// thread's workflow awaits a decision that the run does not answer is
// refused, with the call named, and changes nothing: the call still awaits
// its decision, which then continues the run.
func TestMessageWithCallsOpenOnTemporal(t *testing.T) {
	f := newFixture(t)
	thread := newName("thread")
	id := interruptID(t, f.run(t, input(thread, "r1", []map[string]any{user("u1", "pay")}, nil)))
	status, body := request(t, http.MethodPost, f.url+"/", input(thread, "r2", []map[string]any{user("u1", "pay"), user("u2", "hi")}, nil))
	if status != http.StatusConflict || !strings.Contains(string(body), "pending_calls") || !strings.Contains(string(body), "call_pay") {
		t.Fatalf("a message with call_pay open = %d %s, want 409 pending_calls naming call_pay", status, body)
	}
	evs := f.run(t, input(thread, "r3", nil, map[string]any{"resume": []map[string]any{{"interruptId": id, "status": "resolved", "payload": map[string]any{"decision": "approve"}}}}))
	if o := outcome(evs); o["type"] != "success" || evs[len(evs)-1]["result"] != "paid" {
		t.Fatalf("the approval after the refusal: outcome %v, %v", o, types(evs))
	}
	for _, r := range f.model.Requests() {
		for _, m := range r.Conversation {
			if slices.ContainsFunc(m.Content, func(b toolruntest.Block) bool { return b.Text == "hi" }) {
				t.Fatalf("the refused message reached the model: %v", conversations([]*toolruntest.Request{r}))
			}
		}
	}
}

// TestMessageWhileTurnInFlightOnTemporal: a new user message while the
// thread's workflow takes a turn that this server is not following (as
// after a restart of the server) is refused with 409 thread_busy, as in
// process while a run is in flight, and nothing of it is recorded: once
// the turn is over, the same message continues the thread.
func TestMessageWhileTurnInFlightOnTemporal(t *testing.T) {
	f := newFixture(t)
	thread := newName("thread")
	if o := outcome(f.run(t, input(thread, "r1", []map[string]any{user("u1", "hi")}, nil))); o["type"] != "success" {
		t.Fatalf("the first run: outcome %v", o)
	}
	// A turn the server does not follow: the model holds its reply back
	// for seconds (the "slow" scene).
	run, err := temporal.Start(t.Context(), f.c, client.StartWorkflowOptions{ID: f.queue + "/" + thread, TaskQueue: f.queue},
		anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024, Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("slow"))}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []map[string]any{user("u1", "hi"), user("u2", "hi")}
	status, body := request(t, http.MethodPost, f.url+"/", input(thread, "r2", msgs, nil))
	if status != http.StatusConflict || !strings.Contains(string(body), "thread_busy") {
		t.Fatalf("a message during the turn = %d %s, want 409 thread_busy", status, body)
	}
	if err := run.Get(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	evs := f.run(t, input(thread, "r3", msgs, nil))
	if o := outcome(evs); o["type"] != "success" || evs[len(evs)-1]["result"] != "hello" {
		t.Fatalf("the same message after the turn: outcome %v, %v; want the model's answer to it", o, types(evs))
	}
	reqs := f.model.Requests()
	last := reqs[len(reqs)-1].Conversation
	if b := last[len(last)-1].Content; len(b) == 0 || b[len(b)-1].Text != "hi" || len(last) != 3 {
		t.Errorf("the last request ends with %v, want the last workflow's conversation (slow, too late) and then the message %q", conversations(reqs[len(reqs)-1:]), "hi")
	}
}
