package toolrun_test

import (
	"context"
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// sandboxPolicy allows every write_file call with its path moved under
// /sandbox: a runner-wide rule that edits input instead of denying it.
func sandboxPolicy() toolrun.Policy {
	return policy.Func(func(ctx context.Context, in writeIn) toolrun.Decision {
		if strings.HasPrefix(in.Path, "/sandbox/") {
			return toolrun.Decision{}
		}
		in.Path = "/sandbox/" + path.Base(in.Path)
		b, _ := json.Marshal(in)
		return toolrun.Decision{Kind: toolrun.Allow, Input: b}
	})
}

// TestPersonEditStillEditedByPolicy: a person's Allow with input of its
// own is the input the policies see (Policy, step 2), and an Allow with
// Input from Options.Policy replaces it "for the policies after this one
// and for the run" (Decision.Input): the call runs with the policy's edit
// of the person's input, never with the person's input around the policy,
// in process and after Resume.
func TestPersonEditStillEditedByPolicy(t *testing.T) {
	for _, resume := range []bool{false, true} {
		name := map[bool]string{false: "in process", true: "after Resume"}[resume]
		t.Run(name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/one", Text: "1"})),
				toolruntest.Message(toolruntest.Text("done")),
			))
			var writes counter
			w := writeTool(&writes)
			w.Policy = policy.RequireApproval("writes need a person")
			opts := &toolrun.Options{Logger: discard(), Policy: sandboxPolicy()}
			r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{w}, opts)
			res, _ := r.Run(t.Context())
			if res.StopReason != toolrun.StopAwaitingApproval {
				t.Fatalf("StopReason = %q, want awaiting_approval", res.StopReason)
			}
			person := toolrun.Decision{Kind: toolrun.Allow, Input: json.RawMessage(`{"path":"/etc/passwd","text":"x"}`)}
			if resume {
				st := r.State()
				if err := st.Decide("w1", person); err != nil {
					t.Fatal(err)
				}
				w2 := writeTool(&writes)
				w2.Policy = policy.RequireApproval("writes need a person")
				var err error
				r, err = toolrun.Resume(client(s), st, []toolrun.Tool{w2}, &toolrun.Options{Logger: discard(), Policy: sandboxPolicy()})
				if err != nil {
					t.Fatal(err)
				}
			} else if err := r.Decide("w1", person); err != nil {
				t.Fatal(err)
			}
			res, err := r.Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
			}
			if diff := cmp.Diff(map[string]int{"/sandbox/passwd": 1}, writes.n); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnknownDecisionKindFailsClosed: a decision of a kind that is none of
// Allow, Deny, Skip or Defer never runs the call. From a policy it denies
// the call with a reason that says so; from a person, State.Decide and
// Runner.Decide refuse it, and the call still awaits a decision.
func TestUnknownDecisionKindFailsClosed(t *testing.T) {
	t.Run("policy", func(t *testing.T) {
		var writes counter
		bogus := func(context.Context, toolrun.PolicyCall) toolrun.Decision { return toolrun.Decision{Kind: 7} }
		for _, p := range []toolrun.Policy{bogus, policy.Chain(bogus)} {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/one", Text: "1"})),
				toolruntest.Message(toolruntest.Text("done")),
			))
			r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{writeTool(&writes)}, &toolrun.Options{Logger: discard(), Policy: p})
			res, err := r.Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
			}
			if got := toolruntest.ResultTexts(r.Messages())["w1"]; !strings.Contains(got, "unknown decision kind") {
				t.Errorf("the model got %q, want a denial naming the unknown kind", got)
			}
		}
		if len(writes.n) != 0 {
			t.Errorf("writes = %v, want none", writes.n)
		}
	})
	t.Run("person", func(t *testing.T) {
		_, st, _, _ := awaitingState(t)
		if err := st.Decide("w1", toolrun.Decision{Kind: 9}); err == nil {
			t.Error("State.Decide with kind 9 = nil, want an error")
		}
		if got := st.AwaitingApproval(); len(got) != 1 || got[0].Call.ID != "w1" {
			t.Errorf("AwaitingApproval = %v, want w1 still", got)
		}
		r, _, _, writes := awaitingState(t)
		if err := r.Decide("w1", toolrun.Decision{Kind: 9}); err == nil {
			t.Error("Runner.Decide with kind 9 = nil, want an error")
		}
		if res, _ := r.Run(t.Context()); res.StopReason != toolrun.StopAwaitingApproval || len(writes.n) != 0 {
			t.Errorf("Run = %q, writes %v; want still awaiting approval, no write", res.StopReason, writes.n)
		}
	})
}

// TestCancelDuringPolicyLosesNoCall: a policy that gives up when its ctx
// ends (a person asked and not answering, an authorization service not
// reached) denies for want of an answer, not on the call's merits; the run
// stops cancelled with the call undecided, as for a validation cut off by
// cancellation, and a resumed run decides it again and runs it once.
func TestCancelDuringPolicyLosesNoCall(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/one", Text: "1"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	var writes counter
	ctx, cancel := context.WithCancel(t.Context())
	askAndGiveUp := func(ctx context.Context, c toolrun.PolicyCall) toolrun.Decision {
		cancel() // the person walks away
		<-ctx.Done()
		return policy.Deny("no answer: " + context.Cause(ctx).Error())
	}
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{writeTool(&writes)}, &toolrun.Options{Logger: discard(), Policy: askAndGiveUp})
	res, _ := r.Run(ctx)
	if res.StopReason != toolrun.StopCanceled {
		t.Fatalf("StopReason = %q, want canceled", res.StopReason)
	}
	st := r.State()
	if got, ok := st.CallResult("w1"); ok {
		t.Fatalf("w1 was answered by a policy cut off by cancellation: %q", got.Content[0].OfText.Text)
	}
	if got, ok := toolruntest.ResultTexts(st.Params.Messages)["w1"]; ok {
		t.Fatalf("w1 was answered by a policy cut off by cancellation: %q", got)
	}
	r, err := toolrun.Resume(client(s), st, []toolrun.Tool{writeTool(&writes)}, &toolrun.Options{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	res, err = r.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run after Resume = %q, %v; want end_turn", res.StopReason, err)
	}
	if got := toolruntest.ResultTexts(r.Messages())["w1"]; got != "wrote /tmp/one" || writes.get("/tmp/one") != 1 {
		t.Errorf("the model got %q with %d writes; want the write, once", got, writes.get("/tmp/one"))
	}
}

// TestPersonInputNotJSONIsRefused: a person's Allow whose Input is not
// JSON is refused by State.Decide and Runner.Decide, and the call still
// awaits a decision. Taken, it left a State that no longer encodes, so
// Runner.State fell back to a copy sharing the runner's data, and a run
// with a Store could not save its journal.
func TestPersonInputNotJSONIsRefused(t *testing.T) {
	bad := toolrun.Decision{Kind: toolrun.Allow, Input: json.RawMessage(`{"path":`)}
	r, st, _, writes := awaitingState(t, toolruntest.Message(toolruntest.Text("done")))
	if err := st.Decide("w1", bad); err == nil {
		t.Error("State.Decide with input that is not JSON = nil, want an error")
	}
	if err := r.Decide("w1", bad); err == nil {
		t.Error("Runner.Decide with input that is not JSON = nil, want an error")
	}
	if _, err := json.Marshal(r.State()); err != nil {
		t.Fatalf("the runner's State no longer encodes: %v", err)
	}
	if got := r.State().AwaitingApproval(); len(got) != 1 {
		t.Fatalf("AwaitingApproval = %v, want w1 still", got)
	}
	if err := r.Decide("w1", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn || writes.get("/tmp/one") != 1 {
		t.Errorf("Run = %q, %v, writes %v; want end_turn with one write", res.StopReason, err, writes.n)
	}
}

// TestDenyRulesSeePersonEdit: the deny rules judge the input that would
// run: a person's Allow that edits a harmless call into one a rule denies
// is denied, by Options.Policy in process and by a new Options.Policy or
// tool Policy after Resume.
func TestDenyRulesSeePersonEdit(t *testing.T) {
	noEtc := func(ctx context.Context, c toolrun.PolicyCall) toolrun.Decision {
		if strings.Contains(string(c.Input), "/etc/") {
			return policy.Deny("not /etc")
		}
		return toolrun.Decision{}
	}
	tests := []struct {
		name              string
		first, resumed    toolrun.Policy
		resumedToolPolicy toolrun.Policy
		resume            bool
	}{
		{name: "Options.Policy in process", first: noEtc},
		{name: "Options.Policy after Resume", resumed: noEtc, resume: true},
		{name: "a tool's Policy after Resume", resumedToolPolicy: policy.Chain(policy.RequireApproval("ask"), noEtc), resume: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/one", Text: "1"})),
				toolruntest.Message(toolruntest.Text("done")),
			))
			var writes counter
			w := writeTool(&writes)
			w.Policy = policy.RequireApproval("ask")
			r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{w}, &toolrun.Options{Logger: discard(), Policy: tt.first})
			if res, _ := r.Run(t.Context()); res.StopReason != toolrun.StopAwaitingApproval {
				t.Fatalf("StopReason = %q, want awaiting_approval", res.StopReason)
			}
			edit := toolrun.Decision{Kind: toolrun.Allow, Always: true, Input: json.RawMessage(`{"path":"/etc/passwd","text":"x"}`)}
			if err := r.Decide("w1", edit); err != nil {
				t.Fatal(err)
			}
			if tt.resume {
				w2 := writeTool(&writes)
				w2.Policy = policy.RequireApproval("ask")
				if tt.resumedToolPolicy != nil {
					w2.Policy = tt.resumedToolPolicy
				}
				var err error
				r, err = toolrun.Resume(client(s), r.State(), []toolrun.Tool{w2}, &toolrun.Options{Logger: discard(), Policy: tt.resumed})
				if err != nil {
					t.Fatal(err)
				}
			}
			res, err := r.Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
			}
			if len(writes.n) != 0 {
				t.Errorf("writes = %v, want none", writes.n)
			}
			if got := toolruntest.ResultTexts(r.Messages())["w1"]; !strings.Contains(got, "not /etc") {
				t.Errorf("the model got %q, want the denial", got)
			}
		})
	}
}
