package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	_ "modernc.org/sqlite"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
	"github.com/toolrun/toolrun/transcript"
)

// scenes is a scripted model: the reply to a request is chosen by the
// conversation's last user text (the scene) and the number of assistant
// messages after it, so every thread plays its own scene from its start.
func scenes(t *testing.T, s map[string][]toolruntest.Reply) *toolruntest.Server {
	return toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		scene, k := "", 0
		for _, m := range r.Conversation {
			if m.Role == "assistant" {
				k++
				continue
			}
			for _, b := range m.Content {
				if b.Type == "text" {
					scene, k = b.Text, 0
				}
			}
		}
		replies := s[scene]
		if k >= len(replies) {
			return toolruntest.Message(toolruntest.Text(fmt.Sprintf("script: no reply %d for %q", k, scene)))
		}
		return replies[k]
	}})
}

// counter is a server tool that counts its calls by input.
type counter struct {
	mu    sync.Mutex
	calls []string // the inputs, in order
}

func (c *counter) tool(t *testing.T, name string) toolrun.Tool {
	t.Helper()
	tool, err := toolrun.NewRawTool(name, "sends a payment", []byte(`{"type":"object","properties":{"amount":{"type":"integer","maximum":100}},"required":["amount"]}`),
		func(ctx context.Context, in json.RawMessage) (string, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.calls = append(c.calls, name+string(in))
			return "paid " + string(in), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func (c *counter) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

func openDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

type fixture struct {
	url   string
	h     *serve.Handler
	calls *counter
}

func newFixture(t *testing.T, s map[string][]toolruntest.Reply, pol toolrun.Policy, mutate func(*serve.Config)) *fixture {
	t.Helper()
	model := scenes(t, s)
	c := &counter{}
	cfg := serve.Config{
		Client:  model.Client(),
		Params:  anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024},
		Tools:   []toolrun.Tool{c.tool(t, "pay"), c.tool(t, "refund")},
		Options: toolrun.Options{Policy: pol},
		DB:      openDB(t, filepath.Join(t.TempDir(), "serve.db")),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	h, err := serve.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Shutdown(context.Background())
		srv.Close()
	})
	return &fixture{url: srv.URL, h: h, calls: c}
}

// post sends a RunAgentInput and returns the status and the events (or
// the error body).
func post(t *testing.T, url string, in any) (int, []map[string]any, string) {
	t.Helper()
	b, _ := json.Marshal(in)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, nil, string(body)
	}
	evs, _ := readSSE(t, resp.Body)
	return resp.StatusCode, evs, ""
}

// readSSE reads events and their ids to the end of the stream.
func readSSE(t *testing.T, r io.Reader) ([]map[string]any, []string) {
	t.Helper()
	var evs []map[string]any
	var ids []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			ids = append(ids, id)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var e map[string]any
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			evs = append(evs, e)
		}
	}
	return evs, ids
}

func types(evs []map[string]any) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e["type"].(string))
	}
	return out
}

func user(id, text string) map[string]any {
	return map[string]any{"id": id, "role": "user", "content": text}
}

func input(thread, run string, msgs []map[string]any, extra map[string]any) map[string]any {
	if msgs == nil {
		msgs = []map[string]any{} // AG-UI requires the member
	}
	in := map[string]any{"threadId": thread, "runId": run, "messages": msgs, "protocolVersion": serve.ProtocolVersion}
	for k, v := range extra {
		if v == nil {
			delete(in, k) // a member left out
			continue
		}
		in[k] = v
	}
	return in
}

func last(evs []map[string]any) map[string]any { return evs[len(evs)-1] }

func outcome(evs []map[string]any) map[string]any {
	o, _ := last(evs)["outcome"].(map[string]any)
	return o
}

func interrupts(t *testing.T, evs []map[string]any) []map[string]any {
	t.Helper()
	o := outcome(evs)
	if o["type"] != "interrupt" {
		t.Fatalf("outcome %v, want an interrupt", o)
	}
	var out []map[string]any
	for _, it := range o["interrupts"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

func TestPlainRunEvents(t *testing.T) {
	f := newFixture(t, map[string][]toolruntest.Reply{
		"hi": {toolruntest.Message(toolruntest.Text("hello there"))},
	}, nil, nil)
	status, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "hi")}, nil))
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	want := []string{"RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"}
	if diff := cmp.Diff(want, types(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if got := evs[3]["delta"]; got != "hello there" {
		t.Errorf("text %v, want hello there", got)
	}
	fin := last(evs)
	if outcome(evs)["type"] != "success" || fin["threadId"] != "t1" || fin["runId"] != "r1" {
		t.Errorf("RUN_FINISHED %v", fin)
	}
	usage := fin["usage"].([]any)[0].(map[string]any)
	if usage["inputTokens"].(float64) <= 0 || usage["outputTokens"].(float64) <= 0 {
		t.Errorf("usage %v, want tokens counted", usage)
	}
	// The thread goes on: the same messages and a new one continue it.
	status, evs, body = post(t, f.url, input("t1", "r2", []map[string]any{user("u1", "hi"), {"id": evs[2]["messageId"], "role": "assistant", "content": "hello there"}, user("u2", "hi")}, nil))
	if status != 200 || outcome(evs)["type"] != "success" {
		t.Fatalf("second run: %d %s %v", status, body, types(evs))
	}
	// A run id once used is refused.
	if status, _, body := post(t, f.url, input("t1", "r2", []map[string]any{user("u3", "hi")}, nil)); status != http.StatusConflict {
		t.Errorf("reused run id: %d %s, want 409", status, body)
	}
}

// approvalScript makes the model call pay and refund in one turn, then
// answer.
func approvalScript() map[string][]toolruntest.Reply {
	return map[string][]toolruntest.Reply{
		"pay both": {
			toolruntest.Message(toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 10}), toolruntest.ToolUse("call_refund", "refund", map[string]any{"amount": 20})),
			toolruntest.Message(toolruntest.Text("done")),
		},
	}
}

func resume(id string, payload any) map[string]any {
	return map[string]any{"interruptId": id, "status": "resolved", "payload": payload}
}

// Parallel interrupts are routed to their own calls, answered in the
// opposite order over two runs; a denied call never runs; no call runs
// before its decision.
func TestParallelInterruptsRoutedToTheirCalls(t *testing.T) {
	f := newFixture(t, approvalScript(), policy.RequireApproval("payments need a person"), nil)
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil))
	if evs == nil {
		t.Fatal(body)
	}
	its := interrupts(t, evs)
	if len(its) != 2 {
		t.Fatalf("%d interrupts, want 2", len(its))
	}
	byCall := map[string]string{}
	for _, it := range its {
		if it["reason"] != "tool_call" || it["expiresAt"] == nil || it["responseSchema"] == nil {
			t.Errorf("interrupt %v lacks a field", it)
		}
		byCall[it["toolCallId"].(string)] = it["id"].(string)
	}
	if got := f.calls.got(); len(got) != 0 {
		t.Fatalf("calls ran before any decision: %v", got)
	}
	// The second interrupt first: deny refund. pay stays pending, with
	// the same interrupt id.
	_, evs, body = post(t, f.url, input("t1", "r2", nil, map[string]any{"resume": []any{resume(byCall["call_refund"], map[string]any{"decision": "deny", "reason": "no refunds"})}}))
	if evs == nil {
		t.Fatal(body)
	}
	its = interrupts(t, evs)
	if len(its) != 1 || its[0]["id"] != byCall["call_pay"] || its[0]["toolCallId"] != "call_pay" {
		t.Fatalf("after denying refund: interrupts %v, want pay's alone", its)
	}
	if got := f.calls.got(); len(got) != 0 {
		t.Fatalf("calls ran with a decision pending: %v", got)
	}
	_, evs, body = post(t, f.url, input("t1", "r3", nil, map[string]any{"resume": []any{resume(byCall["call_pay"], map[string]any{"decision": "edit", "input": map[string]any{"amount": 7}})}}))
	if evs == nil {
		t.Fatal(body)
	}
	if outcome(evs)["type"] != "success" {
		t.Fatalf("outcome %v", outcome(evs))
	}
	if diff := cmp.Diff([]string{`pay{"amount":7}`}, f.calls.got()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	results := map[string]string{}
	for _, e := range evs {
		if e["type"] == "TOOL_CALL_RESULT" {
			results[e["toolCallId"].(string)] = e["content"].(string)
		}
	}
	if !strings.Contains(results["call_refund"], "no refunds") || !strings.Contains(results["call_pay"], "paid") {
		t.Errorf("results %v: want refund denied with the reason and pay paid", results)
	}
}

// A decision for an interrupt decided already, of another thread, or not
// pending is refused and changes nothing.
func TestStaleOrForeignDecisionRefused(t *testing.T) {
	f := newFixture(t, approvalScript(), policy.RequireApproval("payments need a person"), nil)
	_, evs1, _ := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil))
	_, evs2, _ := post(t, f.url, input("t2", "r2", []map[string]any{user("u1", "pay both")}, nil))
	a, b := interrupts(t, evs1), interrupts(t, evs2)
	approve := map[string]any{"decision": "approve"}
	tests := []struct {
		name   string
		thread string
		resume []any
		want   string
	}{
		{"foreign", "t1", []any{resume(b[0]["id"].(string), approve)}, "foreign_interrupt"},
		{"one good one foreign", "t1", []any{resume(a[0]["id"].(string), approve), resume(b[0]["id"].(string), approve)}, "foreign_interrupt"},
		{"bad payload", "t1", []any{resume(a[0]["id"].(string), map[string]any{"decision": "maybe"})}, "bad_decision"},
		{"invalid edit", "t1", []any{resume(a[0]["id"].(string), map[string]any{"decision": "edit", "input": map[string]any{"amount": 1000}})}, "invalid_input"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := post(t, f.url, input(tt.thread, fmt.Sprintf("bad%d", i), nil, map[string]any{"resume": tt.resume}))
			if status == 200 || !strings.Contains(body, tt.want) {
				t.Errorf("status %d body %s, want a refusal %s", status, body, tt.want)
			}
		})
	}
	if got := f.calls.got(); len(got) != 0 {
		t.Fatalf("a refused decision ran a call: %v", got)
	}
	// Nothing changed: both interrupts of t1 still pending and decidable.
	_, evs, body := post(t, f.url, input("t1", "r3", nil, map[string]any{"resume": []any{resume(a[0]["id"].(string), approve), resume(a[1]["id"].(string), approve)}}))
	if evs == nil || outcome(evs)["type"] != "success" {
		t.Fatalf("deciding after the refusals: %s %v", body, evs)
	}
	// The same decision again is stale: the run tells the client what
	// was decided, and changes nothing.
	_, evs, body = post(t, f.url, input("t1", "r4", nil, map[string]any{"resume": []any{resume(a[0]["id"].(string), approve)}}))
	if evs == nil || !slices.ContainsFunc(evs, func(e map[string]any) bool { return e["name"] == "toolrun.decided" }) {
		t.Errorf("stale decision: %s %v, want the run to tell what was decided", body, types(evs))
	}
	if got := f.calls.got(); len(got) != 2 {
		t.Errorf("calls %v, want each once", got)
	}
}

// A client tool's call ends the run with pendingToolCallIds; its result
// comes back as a tool message; a result for a call not pending, answered
// already, or of the wrong shape is refused.
func TestClientTool(t *testing.T) {
	f := newFixture(t, map[string][]toolruntest.Reply{
		"where am i": {
			toolruntest.Message(toolruntest.ToolUse("call_loc", "get_location", map[string]any{"precise": true})),
			toolruntest.Message(toolruntest.Text("you are in Paris")),
		},
	}, nil, nil)
	tools := []any{map[string]any{"name": "get_location", "description": "where the user is", "parameters": map[string]any{"type": "object", "properties": map[string]any{"precise": map[string]any{"type": "boolean"}}}}}
	u := user("u1", "where am i")
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{u}, map[string]any{"tools": tools}))
	if evs == nil {
		t.Fatal(body)
	}
	o := outcome(evs)
	if o["type"] != "success" || fmt.Sprint(o["pendingToolCallIds"]) != "[call_loc]" {
		t.Fatalf("outcome %v, want success pending call_loc", o)
	}
	asst := map[string]any{"id": "a1", "role": "assistant", "toolCalls": []any{map[string]any{"id": "call_loc", "type": "function", "function": map[string]any{"name": "get_location", "arguments": `{"precise":true}`}}}}
	for i, tt := range []struct {
		name string
		msg  map[string]any
		want string
	}{
		{"not pending", map[string]any{"id": "m1", "role": "tool", "toolCallId": "call_other", "content": "x"}, "not_pending"},
		{"wrong shape", map[string]any{"id": "m2", "role": "tool", "toolCallId": "call_loc", "content": 42}, "bad_result"},
	} {
		status, _, body := post(t, f.url, input("t1", fmt.Sprintf("bad%d", i), []map[string]any{u, asst, tt.msg}, map[string]any{"tools": tools}))
		if status == 200 || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d %s, want %s", tt.name, status, body, tt.want)
		}
	}
	res := map[string]any{"id": "m3", "role": "tool", "toolCallId": "call_loc", "content": "Paris"}
	_, evs, body = post(t, f.url, input("t1", "r2", []map[string]any{u, asst, res}, map[string]any{"tools": tools}))
	if evs == nil || outcome(evs)["type"] != "success" || last(evs)["result"] != "you are in Paris" {
		t.Fatalf("answering the client tool: %s %v", body, evs)
	}
	again := map[string]any{"id": "m4", "role": "tool", "toolCallId": "call_loc", "content": "Lyon"}
	status, _, body := post(t, f.url, input("t1", "r3", []map[string]any{u, asst, res, again}, map[string]any{"tools": tools}))
	if status != http.StatusConflict || !strings.Contains(body, "already_answered") {
		t.Errorf("answered twice: %d %s", status, body)
	}
}

// Last-Event-ID resumes a run's stream after the event it names.
func TestReconnectLastEventID(t *testing.T) {
	f := newFixture(t, approvalScript(), nil, nil)
	b, _ := json.Marshal(input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil))
	resp, err := http.Post(f.url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	all, ids := readSSE(t, resp.Body)
	resp.Body.Close()
	for cut := range len(all) {
		req, _ := http.NewRequest("GET", f.url+"/runs/r1/events", nil)
		if cut > 0 {
			req.Header.Set("Last-Event-ID", ids[cut-1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rest, _ := readSSE(t, resp.Body)
		resp.Body.Close()
		if diff := cmp.Diff(all[cut:], rest); diff != "" {
			t.Fatalf("after event %d (-want +got):\n%s", cut, diff)
		}
	}
}

// Without tokens, only loopback clients are served; with tokens, scopes
// hold and decisions are recorded under the token's name.
func TestTokensAndScopes(t *testing.T) {
	var decided atomic.Value
	f := newFixture(t, approvalScript(), policy.RequireApproval("payments"), func(c *serve.Config) {
		c.Tokens = []serve.Token{
			{Name: "runner", Secret: "run-secret-0123456789", Scopes: []string{"run"}},
			{Name: "alice", Secret: "approve-secret-0123456789", Scopes: []string{"approve", "read"}},
		}
	})
	_ = decided
	do := func(method, path, token string, body any) (int, string) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, f.url+path, bytes.NewReader(b))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	in := input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil)
	if status, _ := do("POST", "/", "", in); status != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", status)
	}
	if status, _ := do("POST", "/", "approve-secret-0123456789", in); status != http.StatusForbidden {
		t.Errorf("approve token running: %d, want 403", status)
	}
	if status, body := do("POST", "/", "run-secret-0123456789", in); status != 200 || !strings.Contains(body, "interrupt") {
		t.Fatalf("run token: %d %s", status, body)
	}
	if status, _ := do("GET", "/api/pending", "run-secret-0123456789", nil); status != http.StatusForbidden {
		t.Errorf("run token listing: %d, want 403", status)
	}
	status, body := do("GET", "/api/pending", "approve-secret-0123456789", nil)
	var list struct {
		Pending []struct{ ID, ToolName string }
	}
	json.Unmarshal([]byte(body), &list)
	if status != 200 || len(list.Pending) != 2 {
		t.Fatalf("pending: %d %s", status, body)
	}
	id := list.Pending[0].ID
	if status, body := do("POST", "/api/interrupts/"+id+"/decision", "approve-secret-0123456789", map[string]any{"decision": "approve"}); status != 200 || !strings.Contains(body, `"decidedBy":"alice"`) {
		t.Errorf("decide: %d %s", status, body)
	}
	if status, body := do("POST", "/api/interrupts/"+id+"/decision", "approve-secret-0123456789", map[string]any{"decision": "deny"}); status != http.StatusConflict || !strings.Contains(body, "alice") {
		t.Errorf("second decision: %d %s, want 409 naming alice", status, body)
	}
	if status, body := do("GET", "/healthz", "", nil); status != 200 || body != "ok\n" {
		t.Errorf("healthz: %d %q", status, body)
	}
	if status, body := do("GET", "/metrics", "approve-secret-0123456789", nil); status != 200 || !strings.Contains(body, `toolrun_serve_pending_approvals{tenant=""} 1`) {
		t.Errorf("metrics: %d %s", status, body)
	}
	if strings.Contains(body, "secret-0123456789") {
		t.Errorf("a response carries a token")
	}
}

// An approval on a thread whose State is several MB goes through, and a
// run that brings no decision runs no deferred call.
func TestApprovalOnLargeState(t *testing.T) {
	big := strings.Repeat("x", 3<<20)
	f := newFixture(t, map[string][]toolruntest.Reply{
		big: {
			toolruntest.Message(toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 5})),
			toolruntest.Message(toolruntest.Text("paid")),
		},
	}, policy.RequireApproval("payments"), func(c *serve.Config) { c.MaxBodyBytes = 16 << 20 })
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", big)}, nil))
	if evs == nil {
		t.Fatal(body)
	}
	its := interrupts(t, evs)
	// No decision: the call stays pending and does not run.
	_, evs, body = post(t, f.url, input("t1", "r2", nil, nil))
	if evs == nil {
		t.Fatal(body)
	}
	if again := interrupts(t, evs); len(again) != 1 || again[0]["id"] != its[0]["id"] {
		t.Fatalf("a run without a decision: interrupts %v, want the same one", again)
	}
	if got := f.calls.got(); len(got) != 0 {
		t.Fatalf("a deferred call ran without a decision: %v", got)
	}
	_, evs, body = post(t, f.url, input("t1", "r3", nil, map[string]any{"resume": []any{resume(its[0]["id"].(string), map[string]any{"decision": "approve"})}}))
	if evs == nil || last(evs)["result"] != "paid" {
		t.Fatalf("approving on a large state: %s %v", body, types(evs))
	}
	if diff := cmp.Diff([]string{`pay{"amount":5}`}, f.calls.got()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// A client tool's call is validated like the server's: input that breaks
// its parameters goes back to the model, not to the client.
func TestClientToolInputValidated(t *testing.T) {
	f := newFixture(t, map[string][]toolruntest.Reply{
		"go": {
			toolruntest.Message(toolruntest.ToolUse("call_x", "pick", map[string]any{"n": "not a number"})),
			toolruntest.Message(toolruntest.Text("sorry")),
		},
	}, nil, nil)
	tools := []any{map[string]any{"name": "pick", "description": "pick n", "parameters": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []string{"n"}}}}
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "go")}, map[string]any{"tools": tools}))
	if evs == nil {
		t.Fatal(body)
	}
	if o := outcome(evs); o["type"] != "success" || o["pendingToolCallIds"] != nil || last(evs)["result"] != "sorry" {
		t.Fatalf("outcome %v result %v: want the invalid call answered to the model", o, last(evs)["result"])
	}
	if r := toolResultsOf(evs)["call_x"]; !strings.Contains(r, "/n") {
		t.Errorf("result %q, want the validation error naming /n", r)
	}
}

func toolResultsOf(evs []map[string]any) map[string]string {
	out := map[string]string{}
	for _, e := range evs {
		if e["type"] == "TOOL_CALL_RESULT" {
			out[e["toolCallId"].(string)] = e["content"].(string)
		}
	}
	return out
}

// The limits of an exposed server: loopback only without tokens, body
// size, per-token concurrent runs, CORS only for named origins, expired
// interrupts, and no secret in an error.
func TestExposureLimits(t *testing.T) {
	var now atomic.Int64
	now.Store(1_800_000_000)
	f := newFixture(t, map[string][]toolruntest.Reply{
		"hold": {{Content: []toolruntest.Block{toolruntest.Text("late")}, Fault: toolruntest.Fault{EventDelay: time.Hour}}},
		"pay":  {toolruntest.Message(toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 5})), toolruntest.Message(toolruntest.Text("ok"))},
		"leak": {{Fault: toolruntest.Fault{Status: 400, Message: "bad key sk-ant-api03-" + strings.Repeat("A", 90) + "AA"}}},
	}, policy.RequireApproval("payments"), func(c *serve.Config) {
		c.MaxBodyBytes = 1 << 10
		c.AllowedOrigins = []string{"https://app.example"}
		c.Tokens = []serve.Token{{Name: "a", Secret: "secret-secret-secret", Scopes: []string{"run"}, MaxRuns: 1}}
		c.UserApproves = []string{"*"} // the client answers its own interrupts here
		c.Now = func() time.Time { return time.Unix(now.Load(), 0) }
		c.ApprovalTTL = time.Minute
	})
	do := func(method, path string, body string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer secret-secret-secret")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	mustJSON := func(v any) string { b, _ := json.Marshal(v); return string(b) }

	// Without tokens, a request from another machine is refused.
	h2 := newFixture(t, nil, nil, nil).h
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/api/pending", nil)
	req.RemoteAddr = "192.0.2.7:4000"
	req.Host = "127.0.0.1:8080" // a loopback name: the peer alone is foreign
	h2.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("a non-loopback request without tokens: %d, want 401", rec.Code)
	}

	if resp := do("POST", "/", strings.Repeat(" ", 2<<10)+"{}", nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit: %d, want 413", resp.StatusCode)
	}
	if resp := do("OPTIONS", "/", "", map[string]string{"Origin": "https://evil.example"}); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS for an origin not named")
	}
	if resp := do("OPTIONS", "/", "", map[string]string{"Origin": "https://app.example"}); resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("no CORS for the named origin")
	}

	// One run in flight is the token's cap; cancel ends it.
	hold := do("POST", "/", mustJSON(input("t1", "r1", []map[string]any{user("u1", "hold")}, nil)), nil)
	defer hold.Body.Close()
	if hold.StatusCode != 200 {
		t.Fatalf("hold: %d", hold.StatusCode)
	}
	if resp := do("POST", "/", mustJSON(input("t2", "r2", []map[string]any{user("u1", "pay")}, nil)), nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a second run over the cap: %d, want 429", resp.StatusCode)
	}
	if resp := do("POST", "/runs/r1/cancel", "", nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	evs, _ := readSSE(t, hold.Body)
	if outcome(evs)["type"] != "cancelled" {
		t.Errorf("the cancelled run ended with %v", last(evs))
	}

	// An interrupt past its expiry cannot be approved, only cancelled.
	resp := do("POST", "/", mustJSON(input("t2", "r3", []map[string]any{user("u1", "pay")}, nil)), nil)
	evs, _ = readSSE(t, resp.Body)
	resp.Body.Close()
	id := interrupts(t, evs)[0]["id"].(string)
	now.Add(3600)
	resp = do("POST", "/", mustJSON(input("t2", "r4", nil, map[string]any{"resume": []any{resume(id, map[string]any{"decision": "approve"})}})), nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), "expired") {
		t.Errorf("approving an expired interrupt: %d %s", resp.StatusCode, b)
	}
	resp = do("POST", "/", mustJSON(input("t2", "r5", nil, map[string]any{"resume": []any{map[string]any{"interruptId": id, "status": "cancelled"}}})), nil)
	evs, _ = readSSE(t, resp.Body)
	if last(evs)["result"] != "ok" || len(f.calls.got()) != 0 {
		t.Errorf("cancelling an expired interrupt: %v, calls %v", last(evs), f.calls.got())
	}

	// A model error that carries a key reaches the client redacted.
	resp = do("POST", "/", mustJSON(input("t3", "r6", []map[string]any{user("u1", "leak")}, nil)), nil)
	b, _ = io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "RUN_ERROR") || strings.Contains(string(b), "AAAAAAAAAA") {
		t.Errorf("the error stream %s: want a RUN_ERROR without the key", b)
	}
}

// With RecordDir, each run leaves a transcript that package transcript
// reads.
func TestRunsRecorded(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, approvalScript(), nil, func(c *serve.Config) { c.RecordDir = dir })
	if _, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil)); evs == nil {
		t.Fatal(body)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("transcripts %v, want one", files)
	}
	tr, err := transcript.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Turns()) != 2 || tr.Stop() == nil {
		t.Errorf("transcript turns %d (stop %v), want 2 and a stop", len(tr.Turns()), tr.Stop())
	}
}

// Of many decisions sent at once for one call, exactly one wins.
func TestConcurrentDecisionsFirstWins(t *testing.T) {
	f := newFixture(t, approvalScript(), policy.RequireApproval("payments"), nil)
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil))
	if evs == nil {
		t.Fatal(body)
	}
	id := interrupts(t, evs)[0]["id"].(string)
	var wg sync.WaitGroup
	var won, lost atomic.Int32
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := map[string]any{"decision": "approve"}
			if i%2 == 1 {
				d = map[string]any{"decision": "deny", "reason": "no"}
			}
			b, _ := json.Marshal(d)
			resp, err := http.Post(f.url+"/api/interrupts/"+id+"/decision", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case 200:
				won.Add(1)
			case http.StatusConflict:
				lost.Add(1)
			default:
				t.Errorf("status %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 || lost.Load() != 15 {
		t.Errorf("%d decisions won and %d lost, want 1 and 15", won.Load(), lost.Load())
	}
}

// A client that goes away ends its run only if the run asked for that;
// a drain past its grace stops the runs in flight with their state saved,
// and refuses new ones.
func TestDisconnectAndDrainPastGrace(t *testing.T) {
	held := toolruntest.Reply{Content: []toolruntest.Block{toolruntest.Text("late")}, Fault: toolruntest.Fault{EventDelay: time.Hour}}
	f := newFixture(t, map[string][]toolruntest.Reply{"hold": {held}, "hold too": {held}}, nil, nil)
	start := func(thread, run string, extra map[string]any) *http.Response {
		b, _ := json.Marshal(input(thread, run, []map[string]any{user("u1", "hold")}, extra))
		resp, err := http.Post(f.url, "application/json", bytes.NewReader(b))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("start %s: %v %v", run, err, resp)
		}
		bufio.NewReader(resp.Body).ReadString('\n') // RUN_STARTED's id line
		return resp
	}
	events := func(run string) []map[string]any {
		resp, err := http.Get(f.url + "/runs/" + run + "/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		evs, _ := readSSE(t, resp.Body)
		return evs
	}
	start("t1", "r1", map[string]any{"forwardedProps": map[string]any{"cancelOnDisconnect": true}}).Body.Close()
	if o := outcome(events("r1")); o["type"] != "cancelled" {
		t.Errorf("a run that asked to end with its client: outcome %v, want cancelled", o)
	}
	kept := start("t2", "r2", nil)
	kept.Body.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace at all
	if err := f.h.Shutdown(ctx); err == nil {
		t.Errorf("Shutdown past its grace returned nil, want ctx's error")
	}
	if o := outcome(events("r2")); o["type"] != "cancelled" {
		t.Errorf("a run whose client left, stopped by the drain: outcome %v, want cancelled", o)
	}
	b, _ := json.Marshal(input("t3", "r3", []map[string]any{user("u1", "hold")}, nil))
	resp, err := http.Post(f.url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a run after the drain: %d, want 503", resp.StatusCode)
	}
}

// A decision over the JSON API that leaves the thread with no call
// waiting continues its run, as the inbox's does: the answer names the
// run, whose events end with the model's answer after the calls ran.
func TestJSONDecisionContinuesRun(t *testing.T) {
	f := newFixture(t, approvalScript(), policy.RequireApproval("payments"), nil)
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil))
	if evs == nil {
		t.Fatal(body)
	}
	decide := func(id string, d map[string]any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(d)
		resp, err := http.Post(f.url+"/api/interrupts/"+id+"/decision", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != 200 {
			t.Fatalf("deciding %s: %d %v", id, resp.StatusCode, out)
		}
		return out
	}
	its := interrupts(t, evs)
	first := decide(its[0]["id"].(string), map[string]any{"decision": "approve"})
	if first["nextRun"] != "" {
		t.Fatalf("the first of two decisions started run %v, want none while a call waits", first["nextRun"])
	}
	second := decide(its[1]["id"].(string), map[string]any{"decision": "deny", "reason": "not today"})
	next, _ := second["nextRun"].(string)
	if next == "" {
		t.Fatalf("the last decision started no run: %v", second)
	}
	resp, err := http.Get(f.url + "/runs/" + next + "/events")
	if err != nil {
		t.Fatal(err)
	}
	evs, _ = readSSE(t, resp.Body)
	resp.Body.Close()
	if len(evs) == 0 || outcome(evs)["type"] != "success" || last(evs)["result"] != "done" {
		t.Fatalf("the continued run: %v, want success with the model's answer", evs)
	}
	ran := f.calls.got()
	wantCall := `pay{"amount":10}`
	if its[0]["toolCallId"] == "call_refund" {
		wantCall = `refund{"amount":20}`
	}
	if diff := cmp.Diff([]string{wantCall}, ran); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// A client tool under an approval policy is handed to the client only
// once a person approves its call: the first run stops with an
// interrupt, the approval ends the next with pendingToolCallIds, and
// nothing of the call runs on the server. A denied one never reaches the
// client, and an edit is refused, since the client has the call's input
// already.
func TestClientToolApprovedBeforeHandedOver(t *testing.T) {
	script := map[string][]toolruntest.Reply{
		"where am i": {
			toolruntest.Message(toolruntest.ToolUse("call_loc", "get_location", map[string]any{"precise": true})),
			toolruntest.Message(toolruntest.Text("you are in Paris")),
		},
	}
	tools := []any{map[string]any{"name": "get_location", "description": "where the user is", "parameters": map[string]any{"type": "object", "properties": map[string]any{"precise": map[string]any{"type": "boolean"}}}}}
	u := user("u1", "where am i")
	asst := map[string]any{"id": "a1", "role": "assistant", "toolCalls": []any{map[string]any{"id": "call_loc", "type": "function", "function": map[string]any{"name": "get_location", "arguments": `{"precise":true}`}}}}
	start := func(t *testing.T, f *fixture) string {
		t.Helper()
		_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{u}, map[string]any{"tools": tools}))
		if evs == nil {
			t.Fatal(body)
		}
		its := interrupts(t, evs)
		if len(its) != 1 || its[0]["toolCallId"] != "call_loc" {
			t.Fatalf("interrupts %v, want call_loc's", its)
		}
		return its[0]["id"].(string)
	}
	t.Run("approved", func(t *testing.T) {
		f := newFixture(t, script, policy.RequireApproval("the location is private"), nil)
		id := start(t, f)
		status, body := postJSON(t, f.url+"/api/pending", nil, "GET")
		if status != 200 || !strings.Contains(body, "get_location") {
			t.Fatalf("pending: %d %s, want the client tool's call listed", status, body)
		}
		_, evs, body := post(t, f.url, input("t1", "r2", []map[string]any{u}, map[string]any{"tools": tools, "resume": []any{resume(id, map[string]any{"decision": "approve"})}}))
		if evs == nil {
			t.Fatal(body)
		}
		o := outcome(evs)
		if o["type"] != "success" || fmt.Sprint(o["pendingToolCallIds"]) != "[call_loc]" {
			t.Fatalf("after the approval: outcome %v, want success pending call_loc", o)
		}
		if got := toolResultsOf(evs); len(got) != 0 {
			t.Fatalf("results %v: the client's call ran on the server", got)
		}
		res := map[string]any{"id": "m3", "role": "tool", "toolCallId": "call_loc", "content": "Paris"}
		_, evs, body = post(t, f.url, input("t1", "r3", []map[string]any{u, asst, res}, map[string]any{"tools": tools}))
		if evs == nil || outcome(evs)["type"] != "success" || last(evs)["result"] != "you are in Paris" {
			t.Fatalf("answering the approved client tool: %s %v", body, evs)
		}
		if status, body := postJSON(t, f.url+"/api/pending", nil, "GET"); status != 200 || strings.Contains(body, "get_location") {
			t.Errorf("pending at the end: %d %s, want none", status, body)
		}
	})
	t.Run("approved over the JSON API", func(t *testing.T) {
		f := newFixture(t, script, policy.RequireApproval("the location is private"), nil)
		id := start(t, f)
		status, body := postJSON(t, f.url+"/api/interrupts/"+id+"/decision", map[string]any{"decision": "approve"}, "POST")
		var out struct{ NextRun string }
		json.Unmarshal([]byte(body), &out)
		if status != 200 || out.NextRun == "" {
			t.Fatalf("deciding: %d %s", status, body)
		}
		resp, err := http.Get(f.url + "/runs/" + out.NextRun + "/events")
		if err != nil {
			t.Fatal(err)
		}
		evs, _ := readSSE(t, resp.Body)
		resp.Body.Close()
		if len(evs) == 0 {
			t.Fatal("the continued run has no events")
		}
		if o := outcome(evs); o["type"] != "success" || fmt.Sprint(o["pendingToolCallIds"]) != "[call_loc]" {
			t.Fatalf("the continued run: outcome %v, want success pending call_loc", o)
		}
	})
	t.Run("denied", func(t *testing.T) {
		f := newFixture(t, script, policy.RequireApproval("the location is private"), nil)
		id := start(t, f)
		_, evs, body := post(t, f.url, input("t1", "r2", []map[string]any{u}, map[string]any{"tools": tools, "resume": []any{resume(id, map[string]any{"decision": "deny", "reason": "no tracking"})}}))
		if evs == nil {
			t.Fatal(body)
		}
		if o := outcome(evs); o["type"] != "success" || o["pendingToolCallIds"] != nil {
			t.Fatalf("after the denial: outcome %v, want success with no call for the client", o)
		}
		// The call was never shown to the client, and its denial is not
		// either: the model has it.
		for _, e := range evs {
			if e["toolCallId"] == "call_loc" {
				t.Errorf("event %v: a denied client tool's call reached the client", e)
			}
		}
	})
	t.Run("edit refused", func(t *testing.T) {
		f := newFixture(t, script, policy.RequireApproval("the location is private"), nil)
		id := start(t, f)
		status, _, body := post(t, f.url, input("t1", "r2", []map[string]any{u}, map[string]any{"tools": tools, "resume": []any{resume(id, map[string]any{"decision": "edit", "input": map[string]any{"precise": false}})}}))
		if status != http.StatusBadRequest || !strings.Contains(body, "client tool") {
			t.Fatalf("edit: %d %s, want a 400 saying a client tool's call cannot be edited", status, body)
		}
		// Nothing changed: the interrupt is still pending and decidable.
		_, evs, body := post(t, f.url, input("t1", "r3", []map[string]any{u}, map[string]any{"tools": tools, "resume": []any{resume(id, map[string]any{"decision": "approve"})}}))
		if evs == nil || fmt.Sprint(outcome(evs)["pendingToolCallIds"]) != "[call_loc]" {
			t.Fatalf("approving after the refused edit: %s %v", body, evs)
		}
	})
}

// postJSON sends body (nil for none) to url with method and returns the
// status and the answer's body.
func postJSON(t *testing.T, url string, body any, method string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, r)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// A client's system and developer messages and its RunAgentInput context
// reach the model as a preamble of the run's first new user message,
// beside the server's own system prompt, which they do not replace; a
// context the thread has already is not repeated; instructions or a new
// context with no user message to carry them are refused, not dropped.
func TestClientContextAndSystemMessages(t *testing.T) {
	var mu sync.Mutex
	var seen []*toolruntest.Request
	model := toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		return toolruntest.Message(toolruntest.Text("ok"))
	}})
	f := newFixture(t, nil, nil, func(c *serve.Config) {
		c.Client = model.Client()
		c.Params.System = []anthropic.BetaTextBlockParam{{Text: "be brief"}}
	})
	lastUser := func(t *testing.T) ([]string, string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		r := seen[len(seen)-1]
		m := r.Conversation[len(r.Conversation)-1]
		var texts []string
		for _, b := range m.Content {
			texts = append(texts, b.Text)
		}
		return texts, string(r.System)
	}
	ctx1 := []any{map[string]any{"description": "the user's city", "value": "Paris"}}
	sys := map[string]any{"id": "s1", "role": "system", "content": "answer in French"}
	dev := map[string]any{"id": "d1", "role": "developer", "content": "never mention prices"}
	msgs := []map[string]any{sys, dev, user("u1", "hi")}
	if status, _, body := post(t, f.url, input("t1", "r1", msgs, map[string]any{"context": ctx1})); status != 200 {
		t.Fatalf("first run: %d %s", status, body)
	}
	texts, system := lastUser(t)
	want := []string{"Instructions from the client application:\nanswer in French\n\nInstructions from the client application:\nnever mention prices\n\nContext from the client application:\n- the user's city: Paris", "hi"}
	if diff := cmp.Diff(want, texts); diff != "" {
		t.Errorf("the first user message (-want +got):\n%s", diff)
	}
	if !strings.Contains(system, "be brief") || strings.Contains(system, "French") {
		t.Errorf("system prompt %s, want the server's alone", system)
	}
	// The same context again, and the same system messages: nothing new.
	msgs = append(msgs, user("u2", "again"))
	if status, _, body := post(t, f.url, input("t1", "r2", msgs, map[string]any{"context": ctx1})); status != 200 {
		t.Fatalf("second run: %d %s", status, body)
	}
	if texts, _ := lastUser(t); !cmp.Equal(texts, []string{"again"}) {
		t.Errorf("the second user message %q, want the text alone", texts)
	}
	ctx2 := []any{map[string]any{"description": "the user's city", "value": "Lyon"}}
	tests := []struct {
		name  string
		msgs  []map[string]any
		extra map[string]any
	}{
		{"new context, no message", msgs, map[string]any{"context": ctx2}},
		{"system message, no user message", append(slices.Clone(msgs), map[string]any{"id": "s2", "role": "system", "content": "be rude"}), nil},
		{"system message of the wrong shape", append(slices.Clone(msgs), map[string]any{"id": "s3", "role": "system", "content": 7}, user("u9", "x")), nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := post(t, f.url, input("t1", fmt.Sprintf("bad%d", i), tt.msgs, tt.extra))
			if status != http.StatusBadRequest {
				t.Errorf("status %d %s, want 400", status, body)
			}
		})
	}
	// The refusals changed nothing: the new context goes with the next
	// user message.
	msgs = append(msgs, user("u3", "and now"))
	if status, _, body := post(t, f.url, input("t1", "r3", msgs, map[string]any{"context": ctx2})); status != 200 {
		t.Fatalf("third run: %d %s", status, body)
	}
	if texts, _ := lastUser(t); !cmp.Equal(texts, []string{"Context from the client application:\n- the user's city: Lyon", "and now"}) {
		t.Errorf("the third user message %q, want Lyon's context and the text", texts)
	}
}

// A person's decision names who took it and when, in the run's
// transcript: the identity the server knows the decider by (on loopback
// without tokens, "local"), and the decision's own time, not the time the
// run went on.
func TestDecisionsNameTheirTaker(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, approvalScript(), policy.RequireApproval("payments"), func(c *serve.Config) { c.RecordDir = dir })
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil))
	if evs == nil {
		t.Fatal(body)
	}
	before := time.Now().UTC()
	var next string
	for _, it := range interrupts(t, evs) {
		b, _ := json.Marshal(map[string]any{"decision": "approve"})
		resp, err := http.Post(f.url+"/api/interrupts/"+it["id"].(string)+"/decision", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("deciding: %d %v", resp.StatusCode, out)
		}
		if n, _ := out["nextRun"].(string); n != "" {
			next = n
		}
	}
	if next == "" {
		t.Fatal("the decisions started no run")
	}
	resp, err := http.Get(f.url + "/runs/" + next + "/events")
	if err != nil {
		t.Fatal(err)
	}
	readSSE(t, resp.Body)
	resp.Body.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	people := 0
	for _, file := range files {
		tr, err := transcript.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range tr.Entries {
			if e.Type != transcript.TypeDecision || e.By != string(toolrun.ByApproval) {
				continue
			}
			people++
			if d := e.Decision; d.Who != "local" || d.At.Before(before.Add(-time.Second)) || d.At.After(time.Now().UTC()) {
				t.Errorf("a person's decision of %s: who %q at %v, want %q between %v and now", e.ToolUseID, d.Who, d.At, "local", before)
			}
		}
	}
	if people != 2 {
		t.Errorf("%d decisions by a person in the transcripts %v, want 2", people, files)
	}
}
