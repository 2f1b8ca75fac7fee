package servetemporal_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/temporal/servetemporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/api/enums/v1"
)

func init() {
	script["pay thrice"] = []toolruntest.Reply{
		toolruntest.Message(toolruntest.ToolUse("call_1", "pay", map[string]int{"amount": 1})),
		toolruntest.Message(toolruntest.ToolUse("call_2", "pay", map[string]int{"amount": 2})),
		toolruntest.Message(toolruntest.ToolUse("call_3", "pay", map[string]int{"amount": 3})),
		toolruntest.Message(toolruntest.Text("paid thrice")),
	}
}

// TestLoadStateFromDeltas: with no Store, a workflow's steps after the
// first return only what they added (toolrun.StepDelta), and the
// conversation of a thread whose workflow waits is read from its history
// with no worker running (Executor.LoadState, what the inbox shows): the
// whole of it, rebuilt from the first step's state and each delta.
func TestLoadStateFromDeltas(t *testing.T) {
	f := newFixture(t)
	thread := newName("thread")
	id := interruptID(t, f.run(t, input(thread, "r1", []map[string]any{user("m1", "pay thrice")}, nil)))
	for _, run := range []string{"r2", "r3"} { // approve call_1, then call_2: call_3 waits
		id = interruptID(t, f.run(t, input(thread, run, nil, map[string]any{"resume": []map[string]any{{"interruptId": id, "status": "resolved", "payload": map[string]any{"decision": "approve"}}}})))
	}
	f.stopWorker()

	wid := f.queue + "/" + thread
	deltas := 0
	it := f.c.GetWorkflowHistory(t.Context(), wid, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == temporal.StepDeltaActivity {
			deltas++
		}
	}
	if deltas < 2 {
		t.Fatalf("the workflow ran %d delta steps, want at least 2: the test would not read a rebuilt state", deltas)
	}

	ex := servetemporal.New(servetemporal.Config{Client: f.c, TaskQueue: f.queue, WorkflowIDPrefix: f.queue + "/"})
	st, err := ex.LoadState(t.Context(), thread)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range st.Params.Messages {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Role    string `json:"role"`
			Content []struct {
				Type    string          `json:"type"`
				Text    string          `json:"text"`
				ID      string          `json:"id"`
				Input   json.RawMessage `json:"input"`
				UseID   string          `json:"tool_use_id"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"content"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		for _, c := range v.Content {
			switch c.Type {
			case "text":
				got = append(got, v.Role+" text "+c.Text)
			case "tool_use":
				got = append(got, fmt.Sprintf("%s tool_use %s %s", v.Role, c.ID, c.Input))
			case "tool_result":
				text := ""
				for _, x := range c.Content {
					text += x.Text
				}
				got = append(got, fmt.Sprintf("%s tool_result %s %s", v.Role, c.UseID, text))
			}
		}
	}
	want := []string{
		"user text pay thrice",
		`assistant tool_use call_1 {"amount":1}`,
		`user tool_result call_1 paid {"amount":1}`,
		`assistant tool_use call_2 {"amount":2}`,
		`user tool_result call_2 paid {"amount":2}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the conversation read with no worker (-want +got):\n%s", diff)
	}
	pending := st.AwaitingApproval()
	if len(pending) != 1 || pending[0].Call.ID != "call_3" {
		t.Errorf("awaiting %v, want call_3", pending)
	}
}
