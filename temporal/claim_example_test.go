package temporal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/testsuite"
)

// ExampleRunOptions_claimCheck runs a tool whose result, 200 KB, is over
// the claim threshold, with the workers' states in a filestore.Store: the
// result goes through the Store rather than through the workflow's
// history, the model sees it whole, and the Store keeps no claim once the
// run has ended.
func ExampleRunOptions_claimCheck() {
	model := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "export", map[string]any{})),
		toolruntest.Message(toolruntest.Text("Exported.")),
	))
	defer model.Close()
	export := toolrun.NewTool("export", "Export the orders", func(ctx context.Context, in struct{}) (string, error) {
		return strings.Repeat("order;", 200<<10/6), nil
	})
	dir, err := os.MkdirTemp("", "claims")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer os.RemoveAll(dir)

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(nopLogger)
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(10 * time.Minute) // the default 3 s is tripped by a loaded machine
	temporal.Register(env, temporal.NewActivities(model.Client(), []toolrun.Tool{export}, &toolrun.Options{
		Logger:         discard(),
		Store:          &filestore.Store{Dir: dir},
		MaxResultBytes: 1 << 20, // what the model may see of a result
	}))
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("Export the orders."),
		&temporal.RunOptions{ClaimThreshold: temporal.DefaultClaimThreshold}))

	var out temporal.Outcome
	if err := env.GetWorkflowResult(&out); err != nil {
		fmt.Println("error:", err)
		return
	}
	reqs := model.Requests()
	conv := reqs[len(reqs)-1].Conversation
	seen := conv[len(conv)-1].Content[0].ResultText()
	left, _ := filepath.Glob(filepath.Join(dir, "*.blob"))
	fmt.Println(out.StopReason, out.Text)
	fmt.Printf("the model saw %d bytes of the result; claims left in the Store: %d\n", len(seen), len(left))
	// Output:
	// end_turn Exported.
	// the model saw 204798 bytes of the result; claims left in the Store: 0
}
