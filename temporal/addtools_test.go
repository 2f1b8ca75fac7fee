package temporal_test

import (
	"context"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
)

// addedToolInput returns the input of a run that was given write_file
// with Runner.AddTools before it went to Temporal, with the inline-tools
// beta or without it.
func addedToolInput(t *testing.T, model *toolruntest.Server, inline bool, write toolrun.Tool) temporal.Input {
	t.Helper()
	params := userParams("go")
	if inline {
		params.Betas = []anthropic.AnthropicBeta{anthropic.AnthropicBetaInlineTools2026_09_15}
	}
	r := toolrun.New(model.Client(), params, nil, &toolrun.Options{Logger: discard()})
	if err := r.AddTools(write); err != nil {
		t.Fatal(err)
	}
	return temporal.Input{State: r.State()}
}

// TestAddedToolOnServer: a tool added to a run survives the run's trip
// through a real Temporal server, whose activities resume the run from
// the State in the workflow's history (whole for a step, without its
// history for the tool's activity): the model has it on every request,
// its approval policy holds, and it runs once approved.
func TestAddedToolOnServer(t *testing.T) {
	c := dialTemporal(t)
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "tool list", true: "inline-tools beta"}[inline], func(t *testing.T) {
			queue := newQueue("toolrun-addtools")
			model := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
				toolruntest.Message(toolruntest.Text("Done."))))
			calls := &counter{}
			write := writeTool(calls, policy.RequireApproval("writes change files"))
			inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{write}, &toolrun.Options{Logger: discard()}))
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, temporal.WorkflowName, addedToolInput(t, model, inline, write))
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "the call awaiting approval", func() bool {
				pending, err := temporal.Pending(ctx, c, queue, nil)
				if err != nil {
					t.Fatal(err)
				}
				return len(pending) == 1 && pending[0].Call.Name == "write_file"
			})
			if err := temporal.Decide(ctx, c, queue, "t1", toolrun.Decision{}, nil); err != nil {
				t.Fatalf("update: %v", err)
			}
			var out temporal.Outcome
			if err := run.Get(ctx, &out); err != nil {
				t.Fatal(err)
			}
			if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
				t.Errorf("got outcome %q %q, want end_turn %q", out.StopReason, out.Text, "Done.")
			}
			if diff := cmp.Diff(map[string]int{"write /a": 1}, calls.all()); diff != "" {
				t.Errorf("tool runs (-want +got):\n%s", diff)
			}
			var names [][]string
			for _, req := range model.Requests() {
				names = append(names, req.ToolNames())
			}
			if diff := cmp.Diff([][]string{{"write_file"}, {"write_file"}}, names); diff != "" {
				t.Errorf("tools per request (-want +got):\n%s", diff)
			}
			checkInlineWire(t, model, inline)
			if diff := cmp.Diff([]string{"t1 error=false wrote /a"}, seenResults(model)); diff != "" {
				t.Errorf("results the model saw (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAddedToolInTestEnvironment is TestAddedToolOnServer in Temporal's
// test environment, which needs no server: the State's added tools go
// through the SDK's payload converter between the workflow and each
// activity.
func TestAddedToolInTestEnvironment(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "tool list", true: "inline-tools beta"}[inline], func(t *testing.T) {
			model := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
				toolruntest.Message(toolruntest.Text("Done."))))
			calls := &counter{}
			write := writeTool(calls, nil)
			env := newEnv(t, model, []toolrun.Tool{write}, nil)
			env.ExecuteWorkflow(temporal.WorkflowName, addedToolInput(t, model, inline, write))
			out := outcome(t, env)
			if out.StopReason != toolrun.StopEndTurn {
				t.Errorf("got %q, want end_turn", out.StopReason)
			}
			if diff := cmp.Diff(map[string]int{"write /a": 1}, calls.all()); diff != "" {
				t.Errorf("tool runs (-want +got):\n%s", diff)
			}
			for i, req := range model.Requests() {
				if diff := cmp.Diff([]string{"write_file"}, req.ToolNames()); diff != "" {
					t.Errorf("request %d tools (-want +got):\n%s", i+1, diff)
				}
			}
			checkInlineWire(t, model, inline)
		})
	}
}

// checkInlineWire checks that under the inline-tools beta the model was
// given the added tool by a tool_addition block, never in the tool list:
// the State said the tool was added, though the workers have it as any
// other tool.
func checkInlineWire(t *testing.T, model *toolruntest.Server, inline bool) {
	t.Helper()
	for i, req := range model.Requests() {
		added := 0
		for _, m := range req.Conversation {
			for _, b := range m.Content {
				if m.Role == "system" && b.Type == "tool_addition" {
					added++
				}
			}
		}
		switch {
		case inline && (req.Tools != nil || added != 1):
			t.Errorf("request %d: tools %s and %d tool_addition blocks, want no tools and 1", i+1, req.Tools, added)
		case !inline && added != 0:
			t.Errorf("request %d: %d tool_addition blocks without the beta", i+1, added)
		}
	}
}

// TestAddedToolMissingOnWorker: workers without the function of a tool the
// run was given with AddTools fail the run with an error naming it,
// rather than run on without it.
func TestAddedToolMissingOnWorker(t *testing.T) {
	model := toolruntest.New(nil, toolruntest.Script(toolruntest.Message(toolruntest.Text("Done."))))
	defer model.Close()
	calls := &counter{}
	env := newEnv(t, model, []toolrun.Tool{weatherTool(calls)}, nil)
	env.ExecuteWorkflow(temporal.WorkflowName, addedToolInput(t, model, false, writeTool(calls, nil)))
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	// The workflow ends in an error, or in an outcome that holds it.
	why := ""
	if err := env.GetWorkflowError(); err != nil {
		why = err.Error()
	} else {
		var out temporal.Outcome
		if err := env.GetWorkflowResult(&out); err != nil {
			t.Fatal(err)
		}
		why = string(out.StopReason) + ": " + out.Detail
	}
	if !strings.Contains(why, `"write_file"`) || !strings.Contains(why, "added") {
		t.Errorf("the run ended with %q, want an error naming the missing added tool write_file", why)
	}
	if n := len(model.Requests()); n != 0 {
		t.Errorf("the model got %d requests, want 0", n)
	}
}
