package serve_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// snapshotOf returns the run's MESSAGES_SNAPSHOT as "role id: content"
// lines (a tool call as "call ID NAME", a tool result as "tool ID for
// CALL: content"), and how many the run sent.
func snapshotOf(evs []map[string]any) ([]string, int) {
	var out []string
	n := 0
	for _, e := range evs {
		if e["type"] != "MESSAGES_SNAPSHOT" {
			continue
		}
		n++
		out = nil
		msgs, _ := e["messages"].([]any)
		for _, m := range msgs {
			m := m.(map[string]any)
			switch m["role"] {
			case "tool":
				out = append(out, fmt.Sprintf("tool %v for %v: %v", m["id"], m["toolCallId"], m["content"]))
			case "assistant":
				if c, ok := m["content"]; ok {
					out = append(out, fmt.Sprintf("assistant: %v", c))
				}
				calls, _ := m["toolCalls"].([]any)
				for _, c := range calls {
					c := c.(map[string]any)
					fn := c["function"].(map[string]any)
					out = append(out, fmt.Sprintf("call %v %v %v", c["id"], fn["name"], fn["arguments"]))
				}
			default:
				out = append(out, fmt.Sprintf("%v %v: %v", m["role"], m["id"], m["content"]))
			}
		}
	}
	return out, n
}

// A client whose history is not the thread's is sent a MESSAGES_SNAPSHOT
// of the conversation the model is sent (snapshots.mdx), with the ids it
// has: one that answers an interrupt approved elsewhere (CopilotKit
// resuming with {approved: true}) sees what the run that went on said,
// and one that shows an altered result of a call the server ran sees the
// server's. A client whose history agrees gets none.
func TestMessagesSnapshotWhenHistoryDiffers(t *testing.T) {
	f, _ := modelFixture(t, map[string][]toolruntest.Reply{
		"pay":   {toolruntest.Message(toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 10})), toolruntest.Message(toolruntest.Text("paid"))},
		"more":  {toolruntest.Message(toolruntest.Text("more done"))},
		"again": {toolruntest.Message(toolruntest.Text("again done"))},
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
	went, _ := readSSE(t, resp.Body)
	resp.Body.Close()
	result := ""
	for _, e := range went {
		if e["type"] == "TOOL_CALL_RESULT" {
			result, _ = e["content"].(string)
		}
	}
	if result == "" {
		t.Fatalf("the run that went on gave no result: %v", types(went))
	}

	// The chat answers the interrupt it was shown, approved elsewhere.
	echo := map[string]any{"id": "echo1", "role": "tool", "toolCallId": "call_pay", "content": `{"approved":true}`}
	_, evs, body = post(t, f.url, input("t1", "r1", []map[string]any{u1, echo}, map[string]any{"resume": []any{resume(id, map[string]any{"approved": true})}}))
	if evs == nil {
		t.Fatal(body)
	}
	got, n := snapshotOf(evs)
	want := []string{
		"user u1: pay",
		`call call_pay pay {"amount":10}`,
		"tool result_call_pay for call_pay: " + result,
		"assistant: paid",
	}
	if n != 1 {
		t.Fatalf("approved elsewhere: %d MESSAGES_SNAPSHOTs in %v, want 1", n, types(evs))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("approved elsewhere: the snapshot (-want +got):\n%s", diff)
	}

	// The history as the snapshot gave it, and a next message: it agrees,
	// so no snapshot.
	var snap []map[string]any
	for _, e := range evs {
		if e["type"] == "MESSAGES_SNAPSHOT" {
			b, _ := json.Marshal(e["messages"])
			json.Unmarshal(b, &snap)
		}
	}
	_, evs, body = post(t, f.url, input("t1", "r3", append(snap, user("u2", "more")), nil))
	if evs == nil || last(evs)["result"] != "more done" {
		t.Fatalf("the next message: %s %v", body, types(evs))
	}
	if _, n := snapshotOf(evs); n != 0 {
		t.Errorf("a history that agrees got %d MESSAGES_SNAPSHOTs, want none", n)
	}

	// The client alters the result of the call the server ran: the
	// snapshot shows the server's.
	tampered := append([]map[string]any{}, snap...)
	for i, m := range tampered {
		if m["role"] == "tool" {
			m = maps(m)
			m["content"] = "tampered"
			tampered[i] = m
		}
	}
	_, evs, body = post(t, f.url, input("t1", "r4", append(tampered, user("u2", "more"), user("u3", "again")), nil))
	if evs == nil || last(evs)["result"] != "again done" {
		t.Fatalf("the altered history: %s %v", body, types(evs))
	}
	got, n = snapshotOf(evs)
	if n != 1 {
		t.Fatalf("altered result: %d MESSAGES_SNAPSHOTs in %v, want 1", n, types(evs))
	}
	if want := "tool result_call_pay for call_pay: " + result; len(got) < 3 || got[2] != want {
		t.Errorf("altered result: the snapshot %q, want its third %q", got, want)
	}
}

// maps returns a copy of m.
func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// A cancelled run ends as its client's schema reads it: RUN_FINISHED
// with outcome cancelled for a client that declared protocolVersion, and
// RUN_ERROR with code "cancelled" for one that declared none
// (@ag-ui/core 0.0.59 refuses the cancelled outcome).
func TestCancelledRunEndsAsTheClientsVersionReadsIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version any // nil: left out
		want    map[string]any
	}{
		{"1.1", "1.1", map[string]any{"type": "RUN_FINISHED", "outcome": map[string]any{"type": "cancelled"}}},
		{"1.0", "1.0", map[string]any{"type": "RUN_FINISHED", "outcome": map[string]any{"type": "cancelled"}}},
		{"none", nil, map[string]any{"type": "RUN_ERROR", "code": "cancelled", "message": "the run was cancelled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string][]toolruntest.Reply{
				"hold": {{Content: []toolruntest.Block{toolruntest.Text("late")}, Fault: toolruntest.Fault{EventDelay: time.Hour}}},
			}, nil, nil)
			b, _ := json.Marshal(input("t1", "r1", []map[string]any{user("u1", "hold")}, map[string]any{"protocolVersion": tc.version}))
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
			got := map[string]any{}
			for k := range tc.want {
				got[k] = fin[k]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("the run's last event (-want +got):\n%s\nall: %v", diff, fin)
			}
		})
	}
}
