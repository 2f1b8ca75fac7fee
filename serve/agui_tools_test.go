package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// The model is offered the client tools of the run's own RunAgentInput
// and no other (run-input.mdx, "tools": a run that declares tools: []
// offers none of an earlier run's). A result for an earlier run's call of
// a client tool the run no longer declares is still taken and reaches the
// model; a call of such a tool that the model makes anyway (a stale
// history can name it) is answered as a call of an unknown tool, never
// handed to the client.
func TestRunOffersOnlyTheToolsItDeclares(t *testing.T) {
	f, model := modelFixture(t, map[string][]toolruntest.Reply{
		"where am i": {
			toolruntest.Message(toolruntest.ToolUse("call_loc", "get_location", map[string]any{"precise": true})),
			toolruntest.Message(toolruntest.Text("you are in Paris")),
		},
		"and now": {
			toolruntest.Message(toolruntest.ToolUse("call_loc2", "get_location", map[string]any{"precise": true})),
			toolruntest.Message(toolruntest.Text("I cannot tell")),
		},
	}, nil, nil)
	location := map[string]any{"name": "get_location", "description": "where the user is", "parameters": map[string]any{"type": "object", "properties": map[string]any{"precise": map[string]any{"type": "boolean"}}}}
	u1 := user("u1", "where am i")
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{u1}, map[string]any{"tools": []any{location}}))
	if evs == nil || fmt.Sprint(outcome(evs)["pendingToolCallIds"]) != "[call_loc]" {
		t.Fatalf("the first run: %s %v, want call_loc pending", body, evs)
	}
	if diff := cmp.Diff([]string{"pay", "refund", "get_location"}, lastRequest(t, model).ToolNames()); diff != "" {
		t.Errorf("the first run's request offered (-want +got):\n%s", diff)
	}

	// The client answers the call in a run that declares no tool.
	asst := map[string]any{"id": "a1", "role": "assistant", "toolCalls": []any{map[string]any{"id": "call_loc", "type": "function", "function": map[string]any{"name": "get_location", "arguments": `{"precise":true}`}}}}
	res := map[string]any{"id": "t1", "role": "tool", "toolCallId": "call_loc", "content": "Paris"}
	_, evs, body = post(t, f.url, input("t1", "r2", []map[string]any{u1, asst, res}, map[string]any{"tools": []any{}}))
	if evs == nil || outcome(evs)["type"] != "success" || last(evs)["result"] != "you are in Paris" {
		t.Fatalf("the answer in a run with tools: []: %s %v, want the run to go on", body, evs)
	}
	req := lastRequest(t, model)
	if diff := cmp.Diff([]string{"pay", "refund"}, req.ToolNames()); diff != "" {
		t.Errorf("the request of the run with tools: [] offered (-want +got):\n%s", diff)
	}
	if got := conversationTexts(req); !strings.Contains(strings.Join(got, "\n"), "result call_loc: Paris") {
		t.Errorf("the model read %q, want the client's result of call_loc", got)
	}

	// The model calls the tool no run offers any more: an unknown tool.
	a2 := map[string]any{"id": "a2", "role": "assistant", "content": "you are in Paris"}
	_, evs, body = post(t, f.url, input("t1", "r3", []map[string]any{u1, asst, res, a2, user("u2", "and now")}, map[string]any{"tools": []any{}}))
	if evs == nil {
		t.Fatal(body)
	}
	if o := outcome(evs); o["type"] != "success" || o["pendingToolCallIds"] != nil || last(evs)["result"] != "I cannot tell" {
		t.Errorf("the run's end %v, want success with no call left to the client", last(evs))
	}
	var result string
	for _, e := range evs {
		if e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == "call_loc2" {
			result, _ = e["content"].(string)
		}
	}
	if !strings.Contains(result, "unknown tool") {
		t.Errorf("call_loc2's result %q, want the server's answer for an unknown tool", result)
	}
	if diff := cmp.Diff([]string{"pay", "refund"}, lastRequest(t, model).ToolNames()); diff != "" {
		t.Errorf("the third run's request offered (-want +got):\n%s", diff)
	}
}

// A call of an earlier run's client tool that the run neither offers nor
// answers still waits for the client, rather than being answered as a
// call of an unknown tool, when the run goes on with another call of its
// turn (an approved call of the server's): the run that answers it goes
// on, offering only its own tools.
func TestUndeclaredToolsCallStillWaits(t *testing.T) {
	payNeedsPerson := func(_ context.Context, c toolrun.PolicyCall) toolrun.Decision {
		if c.Name == "pay" {
			return policy.Defer("payments need a person")
		}
		return toolrun.Decision{}
	}
	f, model := modelFixture(t, map[string][]toolruntest.Reply{
		"pay and look": {
			toolruntest.Message(toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 10}), toolruntest.ToolUse("call_shot", "take_screenshot", map[string]any{})),
			toolruntest.Message(toolruntest.Text("paid, and a page")),
		},
	}, payNeedsPerson, nil)
	shot := map[string]any{"name": "take_screenshot", "description": "a screenshot of the page", "parameters": map[string]any{"type": "object"}}
	u1 := user("u1", "pay and look")
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{u1}, map[string]any{"tools": []any{shot}}))
	if evs == nil {
		t.Fatal(body)
	}
	id := interrupts(t, evs)[0]["id"].(string)
	requests := len(model.Requests())
	// The approval comes in a run that declares no tool.
	_, evs, body = post(t, f.url, input("t1", "r2", []map[string]any{u1}, map[string]any{"tools": []any{}, "resume": []any{resume(id, map[string]any{"decision": "approve"})}}))
	if evs == nil || fmt.Sprint(outcome(evs)["pendingToolCallIds"]) != "[call_shot]" {
		t.Fatalf("the approval: %s %v, want call_shot handed to the client", body, evs)
	}
	if n := len(model.Requests()); n != requests {
		t.Errorf("the approval sent %d model requests, want none: call_shot still waits", n-requests)
	}
	asst := map[string]any{"id": "a1", "role": "assistant", "toolCalls": []any{map[string]any{"id": "call_shot", "type": "function", "function": map[string]any{"name": "take_screenshot", "arguments": `{}`}}}}
	res := map[string]any{"id": "t2", "role": "tool", "toolCallId": "call_shot", "content": "a page"}
	_, evs, body = post(t, f.url, input("t1", "r3", []map[string]any{u1, asst, res}, map[string]any{"tools": []any{}}))
	if evs == nil || last(evs)["result"] != "paid, and a page" {
		t.Fatalf("answering call_shot: %s %v, want the run to go on", body, evs)
	}
	req := lastRequest(t, model)
	if diff := cmp.Diff([]string{"pay", "refund"}, req.ToolNames()); diff != "" {
		t.Errorf("the request after both answers offered (-want +got):\n%s", diff)
	}
	if got := strings.Join(conversationTexts(req), "\n"); !strings.Contains(got, "result call_shot: a page") {
		t.Errorf("the model read %q, want the client's result", got)
	}
	if got := f.calls.got(); len(got) != 1 {
		t.Errorf("calls %v, want pay once", got)
	}
}

// A run a decision starts (the JSON API's, the inbox's), which no client
// declared tools for, offers the client tools of the thread's last client
// run: not those an earlier run declared and the last one dropped.
func TestDecidedRunOffersTheLastClientRunsTools(t *testing.T) {
	f, model := modelFixture(t, map[string][]toolruntest.Reply{
		"pay": {toolruntest.Message(toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 10})), toolruntest.Message(toolruntest.Text("paid"))},
		"hi":  {toolruntest.Message(toolruntest.Text("hello"))},
	}, policy.RequireApproval("payments need a person"), nil)
	location := map[string]any{"name": "get_location", "description": "where the user is", "parameters": map[string]any{"type": "object"}}
	shot := map[string]any{"name": "take_screenshot", "description": "a screenshot of the page", "parameters": map[string]any{"type": "object"}}
	if status, _, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "hi")}, map[string]any{"tools": []any{location}})); status != 200 {
		t.Fatal(body)
	}
	_, evs, body := post(t, f.url, input("t1", "r2", []map[string]any{user("u1", "hi"), user("u2", "pay")}, map[string]any{"tools": []any{shot}}))
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
	evs, _ = readSSE(t, resp.Body)
	resp.Body.Close()
	if last(evs)["result"] != "paid" {
		t.Fatalf("the decided run: %v", types(evs))
	}
	if diff := cmp.Diff([]string{"pay", "refund", "take_screenshot"}, lastRequest(t, model).ToolNames()); diff != "" {
		t.Errorf("the decided run's request offered (-want +got):\n%s", diff)
	}
}
