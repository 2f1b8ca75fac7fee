package serve_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// modelFixture is newFixture with the scripted model at hand, to read the
// requests the runs sent it.
func modelFixture(t *testing.T, s map[string][]toolruntest.Reply, pol toolrun.Policy, mutate func(*serve.Config)) (*fixture, *toolruntest.Server) {
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
	return &fixture{url: srv.URL, h: h, calls: c}, model
}

// postRaw sends body as it is, with token if not "", and returns the
// status, the events and the error body.
func postRaw(t *testing.T, url, token string, body []byte) (int, []map[string]any, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, nil, string(b)
	}
	evs, _ := readSSE(t, resp.Body)
	return resp.StatusCode, evs, ""
}

func postAs(t *testing.T, url, token string, in any) (int, []map[string]any, string) {
	t.Helper()
	b, _ := json.Marshal(in)
	return postRaw(t, url, token, b)
}

// conversationTexts is a request's conversation as role: text lines, a
// tool result as its text.
func conversationTexts(r *toolruntest.Request) []string {
	var out []string
	for _, m := range r.Conversation {
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				out = append(out, m.Role+": "+b.Text)
			case "tool_result":
				out = append(out, "result "+b.ToolUseID+": "+b.ResultText())
			case "tool_use":
				out = append(out, "call "+b.ID)
			default:
				out = append(out, m.Role+": ["+b.Type+"]")
			}
		}
	}
	return out
}

func lastRequest(t *testing.T, model *toolruntest.Server) *toolruntest.Request {
	t.Helper()
	rs := model.Requests()
	if len(rs) == 0 {
		t.Fatal("no model request")
	}
	return rs[len(rs)-1]
}

func customs(evs []map[string]any, name string) []map[string]any {
	var out []map[string]any
	for _, e := range evs {
		if e["type"] == "CUSTOM" && e["name"] == name {
			v, _ := e["value"].(map[string]any)
			out = append(out, v)
		}
	}
	return out
}

// Who may decide is a policy: by default an approval is an approver's,
// and a token with only the run scope that answers its own thread's
// interrupt is refused with 403 and changes nothing; Config.UserApproves
// makes a tool's approvals the user's, which the thread's client gives.
func TestRunScopedResumeOfApproversCallRefused(t *testing.T) {
	tokens := []serve.Token{
		{Name: "app", Secret: "app-secret-0123456789", Scopes: []string{serve.ScopeRun}},
		{Name: "boss", Secret: "boss-secret-0123456789", Scopes: []string{serve.ScopeApprove, serve.ScopeRead}},
	}
	for _, tt := range []struct {
		name         string
		userApproves []string
		want         int
	}{
		{"approver's by default", nil, http.StatusForbidden},
		{"the user's for pay", []string{"pay"}, http.StatusOK},
		{"the user's for every tool", []string{"*"}, http.StatusOK},
		{"the user's for another tool", []string{"refund"}, http.StatusForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, map[string][]toolruntest.Reply{
				"pay": {toolruntest.Message(toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 10})), toolruntest.Message(toolruntest.Text("paid"))},
			}, policy.RequireApproval("payments need a person"), func(c *serve.Config) {
				c.Tokens = tokens
				c.UserApproves = tt.userApproves
			})
			_, evs, body := postAs(t, f.url, "app-secret-0123456789", input("t1", "r1", []map[string]any{user("u1", "pay")}, nil))
			if evs == nil {
				t.Fatal(body)
			}
			id := interrupts(t, evs)[0]["id"].(string)
			status, evs, body := postAs(t, f.url, "app-secret-0123456789", input("t1", "r2", nil, map[string]any{"resume": []any{resume(id, map[string]any{"decision": "approve"})}}))
			if status != tt.want {
				t.Fatalf("the client's resume: %d %s, want %d", status, body, tt.want)
			}
			if status == http.StatusForbidden {
				if !strings.Contains(body, "approver_only") {
					t.Errorf("body %s, want the code approver_only", body)
				}
				if got := f.calls.got(); len(got) != 0 {
					t.Fatalf("a refused resume ran the call: %v", got)
				}
				// Nothing changed: the approver decides it.
				st, body := postJSONAs(t, f.url+"/api/interrupts/"+id+"/decision", "boss-secret-0123456789", map[string]any{"decision": "approve"})
				if st != 200 || !strings.Contains(body, `"decidedBy":"boss"`) {
					t.Fatalf("the approver's decision: %d %s", st, body)
				}
				return
			}
			if outcome(evs)["type"] != "success" || len(f.calls.got()) != 1 {
				t.Errorf("outcome %v calls %v, want the call run once", outcome(evs), f.calls.got())
			}
		})
	}
}

func postJSONAs(t *testing.T, url, token string, body any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// A chat whose interrupt was decided elsewhere (the JSON API, the inbox)
// is told, when it answers, what was decided, by whom and which run went
// on; its answer changes nothing and asks the model nothing, and its next
// message is taken, even with the stale entry @ag-ui/client sends again.
func TestChatCatchesUpWithDecisionTakenElsewhere(t *testing.T) {
	f, model := modelFixture(t, map[string][]toolruntest.Reply{
		"pay":  {toolruntest.Message(toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 10})), toolruntest.Message(toolruntest.Text("paid"))},
		"more": {toolruntest.Message(toolruntest.Text("more done"))},
	}, policy.RequireApproval("payments need a person"), nil)
	u1 := user("u1", "pay")
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{u1}, nil))
	if evs == nil {
		t.Fatal(body)
	}
	id := interrupts(t, evs)[0]["id"].(string)
	status, body := postJSON(t, f.url+"/api/interrupts/"+id+"/decision", map[string]any{"decision": "approve"}, "POST")
	var dec struct{ NextRun string }
	json.Unmarshal([]byte(body), &dec)
	if status != 200 || dec.NextRun == "" {
		t.Fatalf("deciding: %d %s", status, body)
	}
	resp, err := http.Get(f.url + "/runs/" + dec.NextRun + "/events")
	if err != nil {
		t.Fatal(err)
	}
	readSSE(t, resp.Body) // to the continued run's end
	resp.Body.Close()
	requests := len(model.Requests())

	// The chat answers the interrupt it was shown, as CopilotKit does:
	// under the interrupted run's id, with its echo of the decision.
	echo := map[string]any{"id": "echo1", "role": "tool", "toolCallId": "call_pay", "content": `{"approved":true}`}
	status, evs, body = post(t, f.url, input("t1", "r1", []map[string]any{u1, echo}, map[string]any{"resume": []any{resume(id, map[string]any{"approved": true})}}))
	if status != 200 {
		t.Fatalf("the chat's answer: %d %s, want it told what happened", status, body)
	}
	told := customs(evs, "toolrun.decided")
	if len(told) != 1 {
		t.Fatalf("events %v, want one toolrun.decided", types(evs))
	}
	want := map[string]any{"interruptId": id, "toolCallId": "call_pay", "toolName": "pay", "decision": "approve", "decidedBy": "local", "runId": dec.NextRun}
	got := map[string]any{}
	for k := range want {
		got[k] = told[0][k]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("toolrun.decided (-want +got):\n%s", diff)
	}
	if outcome(evs)["type"] != "success" {
		t.Errorf("outcome %v, want success", outcome(evs))
	}
	if n := len(model.Requests()); n != requests {
		t.Errorf("the chat's stale answer sent %d model requests, want none", n-requests)
	}
	if got := f.calls.got(); len(got) != 1 {
		t.Errorf("calls %v, want pay once", got)
	}
	// The next message, with the stale entry again: taken.
	status, evs, body = post(t, f.url, input("t1", "r3", []map[string]any{u1, echo, user("u2", "more")}, map[string]any{"resume": []any{resume(id, map[string]any{"approved": true})}}))
	if status != 200 || last(evs)["result"] != "more done" {
		t.Fatalf("the next message: %d %s %v", status, body, types(evs))
	}
}

// A frontend tool under an approval policy reaches the client (its
// TOOL_CALL_* events) only in the run that follows its approval.
func TestApprovalGatedFrontendToolNotAnnouncedBeforeApproval(t *testing.T) {
	f := newFixture(t, map[string][]toolruntest.Reply{
		"where am i": {
			toolruntest.Message(toolruntest.Text("let me look"), toolruntest.ToolUse("call_loc", "get_location", map[string]any{"precise": true})),
			toolruntest.Message(toolruntest.Text("you are in Paris")),
		},
	}, policy.RequireApproval("the location is private"), nil)
	tools := []any{map[string]any{"name": "get_location", "description": "where the user is"}}
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "where am i")}, map[string]any{"tools": tools}))
	if evs == nil {
		t.Fatal(body)
	}
	for _, e := range evs {
		if e["toolCallId"] == "call_loc" {
			t.Fatalf("event %v before the approval: the client would run the call", e)
		}
	}
	id := interrupts(t, evs)[0]["id"].(string)
	_, evs, body = post(t, f.url, input("t1", "r2", nil, map[string]any{"tools": tools, "resume": []any{resume(id, map[string]any{"approved": true})}}))
	if evs == nil {
		t.Fatal(body)
	}
	var got []string
	for _, e := range evs {
		if e["toolCallId"] == "call_loc" {
			got = append(got, e["type"].(string))
		}
	}
	if diff := cmp.Diff([]string{"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"}, got); diff != "" {
		t.Errorf("the approved call's events (-want +got):\n%s", diff)
	}
	if o := outcome(evs); fmt.Sprint(o["pendingToolCallIds"]) != "[call_loc]" {
		t.Errorf("outcome %v, want call_loc pending", o)
	}
}

// A client that edits an earlier message (same id, new content), or
// drops the last answer to have it again, gets a model request from its
// own history, not the thread's old one.
func TestEditedEarlierMessageBranchesTheThread(t *testing.T) {
	f, model := modelFixture(t, map[string][]toolruntest.Reply{
		"first":        {toolruntest.Message(toolruntest.Text("one"))},
		"second":       {toolruntest.Message(toolruntest.Text("two"))},
		"first edited": {toolruntest.Message(toolruntest.Text("edited one"))},
	}, nil, nil)
	step := func(run string, msgs ...map[string]any) []map[string]any {
		t.Helper()
		_, evs, body := post(t, f.url, input("t1", run, msgs, nil))
		if evs == nil || outcome(evs)["type"] != "success" {
			t.Fatalf("%s: %s %v", run, body, types(evs))
		}
		return evs
	}
	answer := func(evs []map[string]any) map[string]any {
		for _, e := range evs {
			if e["type"] == "TEXT_MESSAGE_START" {
				return map[string]any{"id": e["messageId"], "role": "assistant", "content": last(evs)["result"]}
			}
		}
		t.Fatal("no answer")
		return nil
	}
	u1, u2 := user("u1", "first"), user("u2", "second")
	a1 := answer(step("r1", u1))
	step("r2", u1, a1, u2)
	// Edit: u1 with new content; the client drops what followed it.
	step("r3", user("u1", "first edited"))
	if diff := cmp.Diff([]string{"user: first edited"}, conversationTexts(lastRequest(t, model))); diff != "" {
		t.Errorf("the request after the edit (-want +got):\n%s", diff)
	}
	// Regenerate: the history back with the last answer dropped.
	step("r4", user("u1", "first edited"))
	if diff := cmp.Diff([]string{"user: first edited"}, conversationTexts(lastRequest(t, model))); diff != "" {
		t.Errorf("the request of the regenerate (-want +got):\n%s", diff)
	}
	// And the thread goes on from there as usual.
	evs := step("r5", user("u1", "first edited"), map[string]any{"id": "a9", "role": "assistant", "content": "edited one"}, user("u3", "second"))
	if last(evs)["result"] != "two" {
		t.Errorf("result %v", last(evs)["result"])
	}
	if diff := cmp.Diff([]string{"user: first edited", "assistant: edited one", "user: second"}, conversationTexts(lastRequest(t, model))); diff != "" {
		t.Errorf("the request after the branch (-want +got):\n%s", diff)
	}
}

// CopilotKit answers a tool_call interrupt under the interrupted run's
// id, with {approved: true} or {approved, editedArgs}, and adds a tool
// message answering the call with the payload: the run goes on under that
// id, the call runs once with the server's result (the tool message is
// the client's echo of the decision, not the call's output), and the
// thread goes on with the echo in the client's history.
func TestCopilotKitResumeAndEchoToolMessage(t *testing.T) {
	for _, tt := range []struct {
		name    string
		payload map[string]any
		want    string
	}{
		{"approve", map[string]any{"approved": true}, `pay{"amount":10}`},
		{"edit", map[string]any{"approved": true, "editedArgs": map[string]any{"amount": 7}}, `pay{"amount":7}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, model := modelFixture(t, map[string][]toolruntest.Reply{
				"pay":  {toolruntest.Message(toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 10})), toolruntest.Message(toolruntest.Text("paid"))},
				"more": {toolruntest.Message(toolruntest.Text("more done"))},
			}, policy.RequireApproval("payments need a person"), nil)
			u1 := user("u1", "pay")
			b, _ := json.Marshal(input("t1", "r1", []map[string]any{u1}, nil))
			resp, err := http.Post(f.url, "application/json", bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			evs, ids := readSSE(t, resp.Body)
			resp.Body.Close()
			it := interrupts(t, evs)[0]
			if _, ok := it["responseSchema"].(map[string]any)["oneOf"].([]any); !ok || !strings.Contains(fmt.Sprint(it["responseSchema"]), "editedArgs") {
				t.Errorf("responseSchema %v, want the {approved, editedArgs} shape in it", it["responseSchema"])
			}
			asst := map[string]any{"id": "a1", "role": "assistant", "toolCalls": []any{map[string]any{"id": "call_pay", "type": "function", "function": map[string]any{"name": "pay", "arguments": `{"amount":10}`}}}}
			payload, _ := json.Marshal(tt.payload)
			echo := map[string]any{"id": "echo1", "role": "tool", "toolCallId": "call_pay", "content": string(payload)}
			entry := resume(it["id"].(string), tt.payload)
			entry["metadata"] = map[string]any{"toolCallId": "call_pay"}
			status, evs2, body := post(t, f.url, input("t1", "r1", []map[string]any{u1, asst, echo}, map[string]any{"resume": []any{entry}}))
			if status != 200 {
				t.Fatalf("CopilotKit's resume: %d %s", status, body)
			}
			if evs2[0]["runId"] != "r1" || outcome(evs2)["type"] != "success" {
				t.Fatalf("the resumed run: %v %v", evs2[0], outcome(evs2))
			}
			if diff := cmp.Diff([]string{tt.want}, f.calls.got()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if got := toolResultsOf(evs2)["call_pay"]; !strings.HasPrefix(got, "paid") {
				t.Errorf("the call's result %q, want the server's", got)
			}
			if convo := conversationTexts(lastRequest(t, model)); !slices.ContainsFunc(convo, func(s string) bool { return strings.HasPrefix(s, "result call_pay: paid") }) {
				t.Errorf("the model read %q, want the server's result", convo)
			}
			// The run's events go on under its id: Last-Event-ID at the
			// interrupted run's last event streams the resumed one.
			req, _ := http.NewRequest("GET", f.url+"/runs/r1/events", nil)
			req.Header.Set("Last-Event-ID", ids[len(ids)-1])
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := readSSE(t, resp.Body)
			resp.Body.Close()
			if diff := cmp.Diff(types(evs2), types(again)); diff != "" {
				t.Errorf("GET /runs/r1/events after the interrupted run's last event (-resumed run +got):\n%s", diff)
			}
			// The next message, the echo still in the client's history.
			status, evs3, body := post(t, f.url, input("t1", "r2", []map[string]any{u1, asst, echo, user("u2", "more")}, nil))
			if status != 200 || last(evs3)["result"] != "more done" {
				t.Fatalf("the next message: %d %s %v", status, body, types(evs3))
			}
		})
	}
}

// The server declares on RUN_STARTED the protocol version its stream
// speaks, and sends a client that declared none nothing @ag-ui/core
// 0.0.x refuses; a version it cannot read or a newer one is served,
// with a warning (basic/versioning.mdx, "Version negotiation").
func TestProtocolVersionNegotiated(t *testing.T) {
	tools := []any{map[string]any{"name": "get_location", "description": "where the user is"}}
	for _, tt := range []struct {
		declared    any // nil: none
		speaks      string
		pendingIDs  bool
		warningWith string
	}{
		{nil, "1.0", false, ""},
		{"1.0", "1.0", true, ""},
		{"1.1", "1.1", true, ""},
		{"1.7", "1.1", true, "1.7"},
		{"2.0", "1.1", true, "2.0"},
		{"latest", "1.1", true, "latest"},
	} {
		t.Run(fmt.Sprint(tt.declared), func(t *testing.T) {
			f := newFixture(t, map[string][]toolruntest.Reply{
				"where am i": {toolruntest.Message(toolruntest.ToolUse("call_loc", "get_location", map[string]any{}))},
			}, nil, nil)
			_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "where am i")}, map[string]any{"tools": tools, "protocolVersion": tt.declared}))
			if evs == nil {
				t.Fatal(body)
			}
			if got := evs[0]["protocolVersion"]; got != tt.speaks {
				t.Errorf("RUN_STARTED.protocolVersion %v, want %s", got, tt.speaks)
			}
			if _, got := outcome(evs)["pendingToolCallIds"]; got != tt.pendingIDs {
				t.Errorf("outcome %v: pendingToolCallIds there %v, want %v", outcome(evs), got, tt.pendingIDs)
			}
			warned := false
			for _, w := range customs(evs, "toolrun.warning") {
				warned = warned || tt.warningWith != "" && strings.Contains(fmt.Sprint(w["message"]), tt.warningWith)
			}
			if warned != (tt.warningWith != "") {
				t.Errorf("warnings %v, want one naming %q", customs(evs, "toolrun.warning"), tt.warningWith)
			}
		})
	}
}

// An input that can be read two ways, or that the AG-UI schema rejects,
// is refused with 400 before anything of it is recorded or run.
func TestMalformedInputRefused(t *testing.T) {
	f := newFixture(t, approvalScript(), policy.RequireApproval("payments need a person"), nil)
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil))
	if evs == nil {
		t.Fatal(body)
	}
	its := interrupts(t, evs)
	approve := fmt.Sprintf(`{"interruptId":%q,"status":"resolved","payload":{"decision":"approve"}}`, its[0]["id"])
	for _, tt := range []struct {
		name, body, code string
	}{
		{"duplicate resume keys", `{"threadId":"t1","runId":"x1","messages":[],"resume":[` + approve + `],"resume":[]}`, "bad_input"},
		{"duplicate key in a message", `{"threadId":"t1","runId":"x2","messages":[{"id":"u9","role":"user","content":"a","content":"b"}]}`, "bad_input"},
		{"trailing value", `{"threadId":"t1","runId":"x3","messages":[],"resume":[` + approve + `]} {"threadId":"t1"}`, "bad_input"},
		{"resume with no messages", `{"threadId":"t1","runId":"x4","resume":[` + approve + `]}`, "bad_input"},
		{"null state", `{"threadId":"t1","runId":"x5","messages":[],"state":null,"resume":[` + approve + `]}`, "bad_input"},
		{"null forwardedProps", `{"threadId":"t1","runId":"x6","messages":[],"forwardedProps":null,"resume":[` + approve + `]}`, "bad_input"},
		{"tool with no description", `{"threadId":"t2","runId":"x7","messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[{"name":"get_location"}]}`, "bad_tool"},
		{"context with no value", `{"threadId":"t2","runId":"x8","messages":[{"id":"u1","role":"user","content":"hi"}],"context":[{"description":"who"}]}`, "bad_input"},
		{"number for a string", `{"threadId":"t2","runId":"x9","messages":[{"id":7,"role":"user","content":"hi"}]}`, "bad_input"},
		{"broken toolCalls entry", `{"threadId":"t2","runId":"x10","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","toolCalls":[{"id":"c1","type":"function"}]}]}`, "bad_message"},
		{"system message with parts", `{"threadId":"t2","runId":"x11","messages":[{"id":"s1","role":"system","content":[{"type":"text","text":"x"}]},{"id":"u1","role":"user","content":"hi"}]}`, "bad_message"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := postRaw(t, f.url, "", []byte(tt.body))
			if status != http.StatusBadRequest || !strings.Contains(body, `"code":"`+tt.code+`"`) {
				t.Errorf("%d %s, want 400 %s", status, body, tt.code)
			}
		})
	}
	if got := f.calls.got(); len(got) != 0 {
		t.Fatalf("a refused input ran a call: %v", got)
	}
	// Nothing changed: both interrupts still pending, decided as usual.
	_, evs, body = post(t, f.url, input("t1", "r2", nil, map[string]any{"resume": []any{resume(its[0]["id"].(string), map[string]any{"decision": "approve"}), resume(its[1]["id"].(string), map[string]any{"decision": "approve"})}}))
	if evs == nil || outcome(evs)["type"] != "success" || len(f.calls.got()) != 2 {
		t.Fatalf("after the refusals: %s %v %v", body, types(evs), f.calls.got())
	}
}

// Image and document parts reach the model as Claude's image and document
// blocks, in a user message and in a client tool's result; a part Claude
// cannot read, or of a type AG-UI does not have, is skipped with a
// warning, and the run goes on. A member AG-UI does not have is stripped
// with a warning too.
func TestContentPartsReachTheModel(t *testing.T) {
	f, model := modelFixture(t, map[string][]toolruntest.Reply{
		"look": {
			toolruntest.Message(toolruntest.ToolUse("call_shot", "screenshot", map[string]any{})),
			toolruntest.Message(toolruntest.Text("I see it")),
		},
	}, nil, nil)
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n"))
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4"))
	parts := []any{
		map[string]any{"type": "text", "text": "look"},
		map[string]any{"type": "image", "source": map[string]any{"type": "data", "value": png, "mimeType": "image/png"}},
		map[string]any{"type": "document", "source": map[string]any{"type": "data", "value": pdf, "mimeType": "application/pdf"}},
		map[string]any{"type": "audio", "source": map[string]any{"type": "url", "value": "https://example.com/a.mp3"}},
		map[string]any{"type": "hologram", "value": 3},
	}
	tools := []any{map[string]any{"name": "screenshot", "description": "the user's screen"}}
	u := map[string]any{"id": "u1", "role": "user", "content": parts}
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{u}, map[string]any{"tools": tools, "somethingNew": true}))
	if evs == nil {
		t.Fatal(body)
	}
	if diff := cmp.Diff([]string{"user: look", "user: [image]", "user: [document]"}, conversationTexts(lastRequest(t, model))); diff != "" {
		t.Errorf("the user message as the model read it (-want +got):\n%s", diff)
	}
	var warned []string
	for _, w := range customs(evs, "toolrun.warning") {
		warned = append(warned, fmt.Sprint(w["message"]))
	}
	for _, want := range []string{"somethingNew", "part 3", "part 4"} {
		if !slices.ContainsFunc(warned, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("warnings %q, want one naming %s", warned, want)
		}
	}
	res := map[string]any{"id": "m1", "role": "tool", "toolCallId": "call_shot", "content": []any{
		map[string]any{"type": "text", "text": "the screen"},
		map[string]any{"type": "image", "source": map[string]any{"type": "data", "value": png, "mimeType": "image/png"}},
	}}
	_, evs, body = post(t, f.url, input("t1", "r2", []map[string]any{u, res}, map[string]any{"tools": tools}))
	if evs == nil || last(evs)["result"] != "I see it" {
		t.Fatalf("the tool result: %s %v", body, types(evs))
	}
	var result toolruntest.Block
	for _, m := range lastRequest(t, model).Conversation {
		for _, b := range m.Content {
			if b.Type == "tool_result" && b.ToolUseID == "call_shot" {
				result = b
			}
		}
	}
	var blocks []struct{ Type string }
	json.Unmarshal(result.Content, &blocks)
	var got []string
	for _, b := range blocks {
		got = append(got, b.Type)
	}
	if diff := cmp.Diff([]string{"text", "image"}, got); diff != "" {
		t.Errorf("the client tool's result as the model read it (-want +got):\n%s", diff)
	}
}

// The model's thinking reaches the client as a reasoning message, its
// signature as REASONING_ENCRYPTED_VALUE.
func TestThinkingAsReasoningEvents(t *testing.T) {
	f := newFixture(t, map[string][]toolruntest.Reply{
		"think": {toolruntest.Message(toolruntest.Thinking("let me see", "sig-1"), toolruntest.Text("42"))},
	}, nil, nil)
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "think")}, nil))
	if evs == nil {
		t.Fatal(body)
	}
	want := []string{"RUN_STARTED", "STEP_STARTED", "REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_ENCRYPTED_VALUE", "REASONING_END", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"}
	if diff := cmp.Diff(want, types(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	enc := evs[6]
	if enc["encryptedValue"] != "sig-1" || enc["subtype"] != "message" || enc["entityId"] != evs[2]["messageId"] || enc["encryptedValueType"] == nil {
		t.Errorf("REASONING_ENCRYPTED_VALUE %v", enc)
	}
}

// A run cancelled before the model answered reports no usage, rather than
// a usage of zero it did not measure.
func TestCancelledRunReportsNoUnknownUsage(t *testing.T) {
	f := newFixture(t, map[string][]toolruntest.Reply{
		"hold": {{Content: []toolruntest.Block{toolruntest.Text("late")}, Fault: toolruntest.Fault{EventDelay: time.Hour}}},
	}, nil, nil)
	b, _ := json.Marshal(input("t1", "r1", []map[string]any{user("u1", "hold")}, nil))
	resp, err := http.Post(f.url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if st, body := postJSON(t, f.url+"/runs/r1/cancel", nil, "POST"); st != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", st, body)
	}
	evs, _ := readSSE(t, resp.Body)
	fin := last(evs)
	if outcome(evs)["type"] != "cancelled" {
		t.Fatalf("the run ended with %v, want cancelled", fin)
	}
	if u, ok := fin["usage"]; ok {
		t.Errorf("usage %v on a run that measured none, want none", u)
	}
}
