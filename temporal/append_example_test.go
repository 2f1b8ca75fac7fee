package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/testsuite"
)

// Example_appendMessages runs the workflow in the SDK's test environment:
// while a call awaits approval, a user message arrives with
// [temporal.AppendUpdate] (what [temporal.AppendMessages] sends), then the
// approval; the model's next request has the call's result and then the
// message.
func Example_appendMessages() {
	model := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "refund", map[string]any{"order": "A-17"})),
		toolruntest.Message(toolruntest.Text("Refunded A-17; B-2 next?")),
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
		msg := anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("and refund B-2 too"))
		env.UpdateWorkflow(temporal.AppendUpdate, "append-1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { fmt.Println("refused:", err) },
			OnComplete: func(_ any, err error) {
				// The messages are in; now the decision.
				env.SignalWorkflow(temporal.DecideSignal, temporal.Approval{ToolUseID: "toolu_1", Decision: toolrun.Decision{}})
			},
		}, []anthropic.BetaMessageParam{msg})
	}, time.Minute)
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("Refund order A-17."), nil))

	var out temporal.Outcome
	if err := env.GetWorkflowResult(&out); err != nil {
		fmt.Println("error:", err)
		return
	}
	conv := model.Requests()[1].Conversation
	for _, m := range conv[len(conv)-2:] {
		for _, b := range m.Content {
			fmt.Println(m.Role, b.Type, b.ResultText())
		}
	}
	fmt.Println(out.StopReason, out.Text)
	// Output:
	// user tool_result refunded A-17
	// user text and refund B-2 too
	// end_turn Refunded A-17; B-2 next?
}

// Example_appendMessagesWithTools: the run was given the client's tool
// get_location; while a call awaits approval the client's next message
// arrives declaring no tools ([temporal.ClientTools] with none, what
// [temporal.AppendMessagesWithTools] sends), and the model's next request
// offers the workers' tool alone.
func Example_appendMessagesWithTools() {
	model := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "refund", map[string]any{"order": "A-17"})),
		toolruntest.Message(toolruntest.Text("Refunded A-17.")),
	))
	defer model.Close()

	refund := toolrun.NewTool("refund", "Refund an order", func(ctx context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "refunded " + in.Order, nil
	})
	refund.Policy = policy.RequireApproval("refunds need a person")

	// The run as "toolrun serve" starts one: the client's tool added, its
	// calls deferred to the client by the workers.
	location, err := toolrun.NewRawTool("get_location", "Where the user is", []byte(`{"type":"object"}`),
		func(context.Context, json.RawMessage) (string, error) { return "", nil })
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	r := toolrun.New(anthropic.Client{}, userParams("Refund order A-17."), nil, &toolrun.Options{Logger: discard()})
	if err := r.AddTools(location); err != nil {
		fmt.Println("error:", err)
		return
	}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(nopLogger)
	env := suite.NewTestWorkflowEnvironment()
	temporal.Register(env, temporal.NewActivities(model.Client(), []toolrun.Tool{refund}, &toolrun.Options{Logger: discard()}).DeferClientTools())

	env.RegisterDelayedCallback(func() {
		msg := anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("thanks"))
		env.UpdateWorkflow(temporal.AppendUpdate, "append-1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { fmt.Println("refused:", err) },
			OnComplete: func(_ any, err error) {
				env.SignalWorkflow(temporal.DecideSignal, temporal.Approval{ToolUseID: "toolu_1", Decision: toolrun.Decision{}})
			},
		}, []anthropic.BetaMessageParam{msg}, &temporal.ClientTools{})
	}, time.Minute)
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.Input{State: r.State()})

	var out temporal.Outcome
	if err := env.GetWorkflowResult(&out); err != nil {
		fmt.Println("error:", err)
		return
	}
	for i, req := range model.Requests() {
		fmt.Println("request", i+1, "tools:", req.ToolNames())
	}
	fmt.Println(out.StopReason, out.Text)
	// Output:
	// request 1 tools: [refund get_location]
	// request 2 tools: [refund]
	// end_turn Refunded A-17.
}
