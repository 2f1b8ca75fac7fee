package temporal_test

import (
	"context"
	"fmt"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/testsuite"
)

// Example runs the workflow in the SDK's test environment against the fake
// model: the first turn calls a tool that needs approval, a person allows
// it with a signal, and the second turn answers.
func Example() {
	model := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "refund", map[string]any{"order": "A-17"})),
		toolruntest.Message(toolruntest.Text("Refunded order A-17.")),
	))
	defer model.Close()

	refund := toolrun.NewTool("refund", "Refund an order", func(ctx context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "refunded " + in.Order, nil
	})
	refund.Policy = policy.RequireApproval("refunds need a person")

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(nopLogger)
	env := suite.NewTestWorkflowEnvironment()
	temporal.Register(env, temporal.NewActivities(model.Client(), []toolrun.Tool{refund}, &toolrun.Options{Logger: discard()}))

	env.RegisterDelayedCallback(func() {
		v, _ := env.QueryWorkflow(temporal.PendingQuery)
		var pending []toolrun.PendingCall
		v.Get(&pending)
		for _, p := range pending {
			fmt.Printf("awaiting approval: %s %s (%s)\n", p.Call.Name, p.Call.Input, p.Reason)
			env.SignalWorkflow(temporal.DecideSignal, temporal.Approval{ToolUseID: p.Call.ID, Decision: toolrun.Decision{}})
		}
	}, time.Minute) // on the test environment's clock: a person answers a minute later
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("Refund order A-17."), nil))

	var out temporal.Outcome
	if err := env.GetWorkflowResult(&out); err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(out.StopReason, out.Text)
	// Output:
	// awaiting approval: refund {"order":"A-17"} (refunds need a person)
	// end_turn Refunded order A-17.
}
