package toolrun_test

import (
	"context"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestDecideWhileAdvancing: a driver of Advance may give a person's
// decision as soon as a call awaits it, before the run has stopped to wait:
// Runner.Decide takes it when State.Decide would.
func TestDecideWhileAdvancing(t *testing.T) {
	srv := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("e1", "echo", map[string]string{"s": "a"}), toolruntest.ToolUse("d1", "deploy", map[string]string{"s": "b"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	echo := toolrun.NewTool("echo", "Echo", func(ctx context.Context, in echoIn) (string, error) { return in.S, nil })
	deploy := toolrun.NewTool("deploy", "Deploy", func(ctx context.Context, in echoIn) (string, error) { return "deployed " + in.S, nil })
	deploy.Policy = policy.RequireApproval("deploys")
	r := toolrun.New(client(srv), userParams("go"), []toolrun.Tool{echo, deploy}, &toolrun.Options{Logger: discard()})
	ctx := context.Background()
	plans, err := driver.Advance(ctx, r)
	if err != nil || len(plans) != 1 || plans[0].Call.ID != "e1" {
		t.Fatalf("Advance = %v, %v; want the echo call alone", plans, err)
	}
	if err := r.State().Decide("d1", toolrun.Decision{}); err != nil {
		t.Fatalf("State.Decide: %v", err)
	}
	if err := r.Decide("d1", toolrun.Decision{}); err != nil {
		t.Fatalf("Runner.Decide where State.Decide takes the decision: %v", err)
	}
	for {
		plans, err := driver.Advance(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range plans {
			if _, err := driver.ExecuteCall(ctx, r, p.Call.ID); err != nil {
				t.Fatal(err)
			}
		}
		if res := r.Result(); res != nil {
			if res.StopReason != toolrun.StopEndTurn || res.ToolCalls != 2 || res.ToolFailures != 0 {
				t.Errorf("got %s with %d calls, %d failed; want end_turn, 2, 0", res.StopReason, res.ToolCalls, res.ToolFailures)
			}
			return
		}
	}
}

// TestDenialLoggedOnce: a denied call is one Warn record, where it was
// decided, not a second one when its result is sent.
func TestDenialLoggedOnce(t *testing.T) {
	srv := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("e1", "echo", map[string]string{"s": "a"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	echo := toolrun.NewTool("echo", "Echo", func(ctx context.Context, in echoIn) (string, error) { return in.S, nil })
	log, logs := newLogger()
	r := toolrun.New(client(srv), userParams("go"), []toolrun.Tool{echo}, &toolrun.Options{Logger: log, Policy: policy.DenyTools("echo")})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var warns []any
	for _, rec := range logs.records(t) {
		if rec["level"] == "WARN" && rec["tool_use_id"] == "e1" {
			warns = append(warns, rec["msg"])
		}
	}
	if len(warns) != 1 {
		t.Errorf("got %d Warn records of the denied call %v, want 1", len(warns), warns)
	}
}
