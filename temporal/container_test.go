package temporal_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/client"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
)

// sentContainer is the container id a request sent, "" for none.
func sentContainer(t *testing.T, req *toolruntest.Request) string {
	t.Helper()
	raw, ok := req.Params.Raw["container"]
	if !ok {
		return ""
	}
	var id string
	if json.Unmarshal(raw, &id) == nil {
		return id
	}
	var obj struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("container %s: %v", raw, err)
	}
	return obj.ID
}

// TestContainerOnServer runs, on a Temporal dev server, a run whose first
// response reports a container and holds a code_execution server tool's
// blocks beside a client call, with a continue-as-new after every turn:
// every later request, in each activity and each run of the chain, sends
// the container, and carries the server tool's blocks as the server sent
// them, while only the client tool runs.
func TestContainerOnServer(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-container")
	exec := toolruntest.ServerToolUse("srvtoolu_01", "code_execution", map[string]any{"code": "print(6*7)"})
	result := toolruntest.ServerToolResult("code_execution_tool_result", "srvtoolu_01", map[string]any{
		"type": "code_execution_result", "stdout": "42\n", "stderr": "", "return_code": 0, "content": []any{},
	})
	first := toolruntest.Message(exec, result, toolruntest.ToolUse("t1", "get_weather", cityIn{City: "Paris"}))
	first.Container = "container_tmp1"
	model := toolruntest.New(t, toolruntest.Script(
		first,
		toolruntest.Message(toolruntest.ToolUse("t2", "get_weather", cityIn{City: "Oslo"})),
		toolruntest.Message(toolruntest.ToolUse("t3", "get_weather", cityIn{City: "Rome"})),
		toolruntest.Message(toolruntest.Text("Sunny everywhere.")),
	))
	var calls counter
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard()}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	params := userParams("go")
	params.Tools = []anthropic.BetaToolUnionParam{{OfCodeExecutionTool20250825: &anthropic.BetaCodeExecutionTool20250825Param{}}}
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, params, &temporal.RunOptions{ContinueAsNewAfter: 1})
	if err != nil {
		t.Fatal(err)
	}
	firstRun := run.GetRunID()
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	// The run continued as new: its last run is not its first.
	desc, err := c.DescribeWorkflowExecution(ctx, queue, "")
	if err != nil {
		t.Fatal(err)
	}
	if latest := desc.WorkflowExecutionInfo.Execution.RunId; latest == firstRun {
		t.Errorf("the workflow's last run is its first (%s), want a continue-as-new", latest)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Sunny everywhere." {
		t.Errorf("got outcome %q %q, want end_turn", out.StopReason, out.Text)
	}
	if diff := cmp.Diff(map[string]int{"weather Paris": 1, "weather Oslo": 1, "weather Rome": 1}, calls.all()); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
	var containers []string
	reqs := model.Requests()
	for _, req := range reqs {
		containers = append(containers, sentContainer(t, req))
	}
	if diff := cmp.Diff([]string{"", "container_tmp1", "container_tmp1", "container_tmp1"}, containers); diff != "" {
		t.Errorf("containers sent (-want +got):\n%s", diff)
	}
	var want []any
	for _, b := range []toolruntest.Block{exec, result} {
		var v any
		if err := json.Unmarshal(b.Raw, &v); err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
	}
	last := reqs[len(reqs)-1]
	var got []any
	for _, m := range last.Conversation {
		for _, b := range m.Content {
			if b.Type == "server_tool_use" || b.Type == "code_execution_tool_result" {
				var v any
				if err := json.Unmarshal(b.Raw, &v); err != nil {
					t.Fatal(err)
				}
				got = append(got, v)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the last request's server tool blocks (-want +got):\n%s", diff)
	}
}
