package temporal_test

import (
	"errors"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/testsuite"
)

// TestToolActivityRefusalIsTyped runs the tool activity on a call that the
// turn limit holds back: the activity refuses it, and the error that
// crosses the activity boundary says why to errors.Is, as in process:
// ErrNotRun, and ErrMaxTurns for the limit.
func TestToolActivityRefusalIsTyped(t *testing.T) {
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
	))
	var calls counter
	tools := []toolrun.Tool{writeTool(&calls, nil)}
	opts := &toolrun.Options{Logger: discard(), MaxTurns: 1}
	r := toolrun.New(model.Client(), userParams("go"), tools, opts)
	if _, err := r.Run(t.Context()); !errors.Is(err, toolrun.ErrMaxTurns) {
		t.Fatalf("Run: got %v, want ErrMaxTurns", err)
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(nopLogger)
	env := suite.NewTestActivityEnvironment()
	acts := temporal.NewActivities(model.Client(), tools, opts)
	env.RegisterActivity(acts.RunTool)
	_, err := env.ExecuteActivity(acts.RunTool, temporal.ToolInput{State: driver.ForCall(r.State(), "t1"), ToolUseID: "t1"})
	if err == nil {
		t.Fatal("the activity ran a call the turn limit holds back")
	}
	err = temporal.FromFailure(err)
	for _, want := range []error{toolrun.ErrNotRun, toolrun.ErrMaxTurns} {
		if !errors.Is(err, want) {
			t.Errorf("got %v, want it to wrap %v", err, want)
		}
	}
	if got := calls.all(); len(got) != 0 {
		t.Errorf("tool runs: got %v, want none", got)
	}
}
