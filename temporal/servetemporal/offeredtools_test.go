package servetemporal_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestRunOffersItsOwnClientToolsOnTemporal: each run's model request
// offers the server's tools and exactly the client tools that run
// declares, as in process: a run that declares tools: [] after one that
// declared get_location is offered none of the client's, and a later run
// that declares get_location again is offered it again.
func TestRunOffersItsOwnClientToolsOnTemporal(t *testing.T) {
	f := newFixture(t)
	thread := newName("thread")
	location := []map[string]any{{"name": "get_location", "description": "where the user is", "parameters": map[string]any{"type": "object", "properties": map[string]any{"precise": map[string]any{"type": "boolean"}}}}}
	none := []map[string]any{}
	runs := []struct {
		tools []map[string]any
		want  []string
	}{
		{location, []string{"pay", "get_location"}},
		{none, []string{"pay"}},
		{location, []string{"pay", "get_location"}},
		{none, []string{"pay"}},
	}
	var msgs []map[string]any
	for i, run := range runs {
		msgs = append(msgs, user("u"+string(rune('1'+i)), "hi"))
		before := len(f.model.Requests())
		status, body := request(t, http.MethodPost, f.url+"/", input(thread, "r"+string(rune('1'+i)), msgs, map[string]any{"tools": run.tools}))
		if status != http.StatusOK {
			t.Fatalf("run %d = %d %s, want 200", i+1, status, body)
		}
		evs := events(t, body)
		if o := outcome(evs); o["type"] != "success" {
			t.Fatalf("run %d: outcome %v: %v", i+1, o, types(evs))
		}
		var answer any
		for _, e := range evs {
			if e["type"] == "TEXT_MESSAGE_START" {
				answer = e["messageId"]
			}
		}
		msgs = append(msgs, map[string]any{"id": answer, "role": "assistant", "content": "hello"})
		reqs := f.model.Requests()[before:]
		if len(reqs) != 1 {
			t.Fatalf("run %d sent %d model requests, want 1", i+1, len(reqs))
		}
		var defs []struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(reqs[0].Tools, &defs); err != nil {
			t.Fatalf("run %d: the request's tools %s: %v", i+1, reqs[0].Tools, err)
		}
		var got []string
		for _, d := range defs {
			got = append(got, d.Name)
		}
		if diff := cmp.Diff(run.want, got); diff != "" {
			t.Errorf("run %d (tools %v): the tools its model request offers (-want +got):\n%s", i+1, run.tools, diff)
		}
	}
}

// TestAnswerWithMessageOffersItsOwnToolsOnTemporal: a run that answers
// the call the thread's workflow waits for (a person's approval, a client
// tool's result) and brings a new user message offers the model, in the
// request after the answer, exactly the client tools it declares, as in
// process: none of the earlier run's for tools: [], only the new one for
// another tool, though the workflow that takes the message was started
// with the earlier run's. The client tool's result reaches the model
// though its tool is no longer offered.
func TestAnswerWithMessageOffersItsOwnToolsOnTemporal(t *testing.T) {
	f := newFixture(t)
	local, localModel := inProcess(t)
	tool := func(name string) map[string]any {
		return map[string]any{"name": name, "description": "the client's " + name, "parameters": map[string]any{"type": "object", "properties": map[string]any{"precise": map[string]any{"type": "boolean"}}}}
	}
	first := []map[string]any{tool("get_location")}
	for _, tt := range []struct {
		name     string
		scene    string
		declared []map[string]any // the tools of the run with the answer
		answer   func(evs []map[string]any) []map[string]any
		resume   bool
		want     []string // the tools of the request after the answer
		result   string   // the answer the model gets
	}{
		{name: "approval, tools: []", scene: "pay", declared: []map[string]any{}, resume: true, want: []string{"pay"}, result: `paid {"amount":5}`},
		{name: "approval, another tool", scene: "pay", declared: []map[string]any{tool("get_weather")}, resume: true, want: []string{"pay", "get_weather"}, result: `paid {"amount":5}`},
		{name: "client tool, tools: []", scene: "where am i", declared: []map[string]any{}, want: []string{"pay"}, result: "Paris"},
		{name: "client tool, another tool", scene: "where am i", declared: []map[string]any{tool("get_weather")}, want: []string{"pay", "get_weather"}, result: "Paris"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string][]string{}
			results := map[string][]string{}
			for _, srv := range []struct {
				name  string
				url   string
				model *toolruntest.Server
			}{{"temporal", f.url, f.model}, {"in process", local, localModel}} {
				thread := newName("thread")
				before := len(srv.model.Requests())
				status, body := request(t, http.MethodPost, srv.url+"/", input(thread, "r1-"+thread, []map[string]any{user("u1", tt.scene)}, map[string]any{"tools": first}))
				if status != http.StatusOK {
					t.Fatalf("%s: the first run = %d %s", srv.name, status, body)
				}
				evs := events(t, body)
				msgs := []map[string]any{user("u1", tt.scene)}
				extra := map[string]any{"tools": tt.declared}
				if tt.resume {
					extra["resume"] = []map[string]any{{"interruptId": interruptID(t, evs), "status": "resolved", "payload": map[string]any{"decision": "approve"}}}
				} else {
					if o := outcome(evs); fmt.Sprint(o["pendingToolCallIds"]) != "[call_loc]" {
						t.Fatalf("%s: outcome %v, want call_loc pending", srv.name, o)
					}
					msgs = append(msgs, map[string]any{"id": "t1", "role": "tool", "toolCallId": "call_loc", "content": "Paris"})
				}
				msgs = append(msgs, user("u2", "hi"))
				status, body = request(t, http.MethodPost, srv.url+"/", input(thread, "r2-"+thread, msgs, extra))
				if status != http.StatusOK {
					t.Fatalf("%s: the run with the answer and a message = %d %s, want 200", srv.name, status, body)
				}
				evs = events(t, body)
				if o := outcome(evs); o["type"] != "success" || evs[len(evs)-1]["result"] != "hello" {
					t.Fatalf("%s: the run with the answer and a message: outcome %v, last event %v: %v", srv.name, o, evs[len(evs)-1], types(evs))
				}
				reqs := srv.model.Requests()[before:]
				if len(reqs) != 2 {
					t.Fatalf("%s: %d model requests, want 2", srv.name, len(reqs))
				}
				got[srv.name] = reqs[1].ToolNames()
				for _, m := range reqs[1].Conversation {
					for _, b := range m.Content {
						if b.Type == "tool_result" {
							results[srv.name] = append(results[srv.name], b.ResultText())
						}
					}
				}
			}
			for _, name := range []string{"in process", "temporal"} {
				if diff := cmp.Diff(tt.want, got[name]); diff != "" {
					t.Errorf("%s: the tools of the request after the answer (-want +got):\n%s", name, diff)
				}
				if diff := cmp.Diff([]string{tt.result}, results[name]); diff != "" {
					t.Errorf("%s: the results of the request after the answer (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}
