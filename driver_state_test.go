package toolrun_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestDriverState: a driver that keeps the State itself carries its
// skeleton, decides on it, merges it back and resumes; and a payload-limit
// stop it records holds in the resumed runner, while a stop it may not
// make is refused.
func TestDriverState(t *testing.T) {
	srv := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("d1", "deploy", map[string]string{"s": "b"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	deploy := toolrun.NewTool("deploy", "Deploy", func(ctx context.Context, in echoIn) (string, error) { return "deployed " + in.S, nil })
	deploy.Policy = policy.RequireApproval("deploys")
	tools := []toolrun.Tool{deploy}
	opts := &toolrun.Options{Logger: discard()}
	ctx := context.Background()
	r := toolrun.New(client(srv), userParams("go"), tools, opts)
	res, err := r.Run(ctx)
	if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("Run = %v, %v; want awaiting approval", res.StopReason, err)
	}
	whole := r.State() // what a workflow holds
	skel := driver.Skeleton(whole)
	if len(skel.Params.Messages) != 0 || !driver.HasCall(skel, "d1") || driver.HasCall(skel, "x") {
		t.Fatalf("skeleton: %d messages, has d1 %v, has x %v; want 0, true, false", len(skel.Params.Messages), driver.HasCall(skel, "d1"), driver.HasCall(skel, "x"))
	}
	if err := driver.CanDecide(skel, "d1", toolrun.Decision{}); err != nil {
		t.Fatalf("CanDecide: %v", err)
	}
	if err := skel.Decide("d1", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	if err := driver.CanDecide(skel, "d1", toolrun.Decision{}); err == nil {
		t.Errorf("CanDecide after Decide = nil, want the refusal")
	}
	merged := driver.Merge(skel, whole)
	if len(merged.Params.Messages) != len(whole.Params.Messages) {
		t.Errorf("merged: %d messages, want %d", len(merged.Params.Messages), len(whole.Params.Messages))
	}
	stopped := driver.Merge(merged, merged) // a copy to stop
	if err := stopped.Stop(toolrun.StopEndTurn, "no"); err == nil {
		t.Errorf("Stop(end_turn) = nil, want an error")
	}
	if err := stopped.Stop(toolrun.StopPayloadTooLarge, "the state is 3 MB, the limit 2 MB"); err != nil {
		t.Fatal(err)
	}
	held, err := toolrun.Resume(client(srv), stopped, tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := held.Run(ctx); err != nil || res.StopReason != toolrun.StopPayloadTooLarge || res.Turns != 1 {
		t.Errorf("Run of a payload-limit stop = %v after %d turns, %v; want it held after 1", res.StopReason, res.Turns, err)
	}
	goOn, err := toolrun.Resume(client(srv), merged, tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := goOn.Run(ctx); err != nil || res.StopReason != toolrun.StopEndTurn || res.ToolCalls != 1 {
		t.Errorf("Run of the merged state = %v with %d calls, %v; want end_turn, 1", res.StopReason, res.ToolCalls, err)
	}
}

// TestRetryable: the exported rule says what the runner's own retries do
// of a rate limit and of a bad request.
func TestRetryable(t *testing.T) {
	srv := toolruntest.New(t, toolruntest.Script(
		toolruntest.RateLimited(0),
		toolruntest.Reply{Fault: toolruntest.Fault{Status: 400}},
	))
	c := srv.Client(option.WithMaxRetries(0))
	for _, want := range []bool{true, false} {
		_, err := c.Beta.Messages.New(context.Background(), userParams("go"))
		if err == nil {
			t.Fatal("request succeeded, want the script's fault")
		}
		if got, _ := driver.Retryable(err); got != want {
			t.Errorf("Retryable(%v) = %v, want %v", err, got, want)
		}
	}
}

// TestSnapshotAndResumeOwned: a driver that reads the state after each
// step with driver.Snapshot gets what State gives, whose messages stay
// as they were while the run goes on, and a runner that took a decoded
// state over with driver.ResumeOwned runs as one resumed with
// toolrun.Resume does.
func TestSnapshotAndResumeOwned(t *testing.T) {
	script := func() *toolruntest.Server {
		return toolruntest.New(t, toolruntest.Script(
			toolruntest.Message(toolruntest.ToolUse("e1", "echo", map[string]string{"s": "a"})),
			toolruntest.Message(toolruntest.ToolUse("e2", "echo", map[string]string{"s": "b"})),
			toolruntest.Message(toolruntest.Text("done")),
		))
	}
	echo := toolrun.NewTool("echo", "Echo", func(ctx context.Context, in echoIn) (string, error) { return "echo " + in.S, nil })
	tools := []toolrun.Tool{echo}
	opts := &toolrun.Options{Logger: discard()}
	ctx := context.Background()
	srv := script()
	r := toolrun.New(client(srv), userParams("go"), tools, opts)
	if _, err := driver.Advance(ctx, r); err != nil {
		t.Fatal(err)
	}
	snap := driver.Snapshot(r)
	before, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(r.State())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(before)); diff != "" {
		t.Errorf("Snapshot's JSON differs from State's (-State +Snapshot):\n%s", diff)
	}
	if _, err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(before), string(after)); diff != "" {
		t.Errorf("the snapshot changed as the run went on (-before +after):\n%s", diff)
	}

	// The same run, resumed after its first step from a decoded state,
	// taken over and copied.
	results := map[string]*toolrun.Result{}
	for _, name := range []string{"Resume", "ResumeOwned"} {
		srv := script()
		first := toolrun.New(client(srv), userParams("go"), tools, opts)
		if _, err := driver.Advance(ctx, first); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(first.State())
		if err != nil {
			t.Fatal(err)
		}
		var decoded toolrun.State
		if err := json.Unmarshal(b, &decoded); err != nil {
			t.Fatal(err)
		}
		resume := toolrun.Resume
		if name == "ResumeOwned" {
			resume = driver.ResumeOwned
		}
		next, err := resume(client(srv), &decoded, tools, opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		res, err := next.Run(ctx)
		if err != nil {
			t.Fatalf("%s: Run: %v", name, err)
		}
		results[name] = res
	}
	got, want2 := results["ResumeOwned"], results["Resume"]
	if got.StopReason != want2.StopReason || got.Text() != want2.Text() || got.ToolCalls != want2.ToolCalls || got.Turns != want2.Turns {
		t.Errorf("ResumeOwned's run ended %v %q after %d turns and %d calls; want %v %q after %d and %d, as Resume's", got.StopReason, got.Text(), got.Turns, got.ToolCalls, want2.StopReason, want2.Text(), want2.Turns, want2.ToolCalls)
	}
}
