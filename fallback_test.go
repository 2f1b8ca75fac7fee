package toolrun_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// fallbackReply is a response whose first attempt called get_weather for
// Paris and was declined, and whose fallback model called it for Rome.
func fallbackReply() toolruntest.Reply {
	return toolruntest.Message(
		toolruntest.ToolUse("toolu_declined", "get_weather", map[string]any{"city": "Paris"}),
		toolruntest.Fallback("claude-test", "claude-fallback"),
		toolruntest.Text("Checking Rome."),
		toolruntest.ToolUse("toolu_2", "get_weather", map[string]any{"city": "Rome"}),
	)
}

// TestFallbackDeclinedCallsNotRun checks that the calls before a response's
// last fallback block, which belong to the declined attempt, are neither
// decided, run, answered nor shown as pending, in process and streamed, on
// a thread and not: the fake refuses a tool_result for a tool_use the API
// strips from the replayed history.
func TestFallbackDeclinedCallsNotRun(t *testing.T) {
	for _, mode := range []struct {
		name             string
		stream, noThread bool
	}{{"thread", false, false}, {"no thread", false, true}, {"streamed", true, false}} {
		t.Run(mode.name, func(t *testing.T) {
			var calls counter
			s := toolruntest.New(t, toolruntest.Script(fallbackReply(), toolruntest.Message(toolruntest.Text("Sunny in Rome."))))
			var decided []string
			opts := &toolrun.Options{Logger: discard(), Stream: mode.stream, NoThread: mode.noThread,
				Policy: func(_ context.Context, c toolrun.PolicyCall) toolrun.Decision {
					decided = append(decided, c.ID)
					return policy.Defer("a person looks first")
				}}
			r := toolrun.New(client(s), userParams("Weather?"), []toolrun.Tool{weatherTool(&calls)}, opts)
			res, err := r.Run(bounded(t))
			if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
				t.Fatalf("Run = %v, %v; want awaiting_approval", res, err)
			}
			var pending []string
			for _, p := range r.State().AwaitingApproval() {
				pending = append(pending, p.Call.ID)
			}
			if diff := cmp.Diff(pending, []string{"toolu_2"}); diff != "" {
				t.Errorf("pending calls (-got +want):\n%s", diff)
			}
			// The rest in a runner resumed from the State, through JSON,
			// as another process would.
			raw, err := json.Marshal(r.State())
			if err != nil {
				t.Fatal(err)
			}
			var st toolrun.State
			if err := json.Unmarshal(raw, &st); err != nil {
				t.Fatal(err)
			}
			if err := st.Decide("toolu_2", toolrun.Decision{}); err != nil {
				t.Fatal(err)
			}
			r, err = toolrun.Resume(client(s), &st, []toolrun.Tool{weatherTool(&calls)}, opts)
			if err != nil {
				t.Fatal(err)
			}
			res, err = r.Run(bounded(t))
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run after the decision = %v, %v; want end_turn", res, err)
			}
			// The policy is asked again when the person answers (Policy's
			// decision order), so toolu_2 is there twice.
			if diff := cmp.Diff(decided, []string{"toolu_2", "toolu_2"}); diff != "" {
				t.Errorf("calls the policy decided (-got +want):\n%s", diff)
			}
			if got := calls.get("get_weather"); got != 1 {
				t.Errorf("get_weather ran %d times, want 1 (Rome's call only)", got)
			}
			if res.ToolCalls != 1 {
				t.Errorf("Result.ToolCalls = %d, want 1", res.ToolCalls)
			}
			if errs := s.Errors(); len(errs) > 0 {
				t.Errorf("the fake refused a request: %v", errs)
			}
			reqs := s.Requests()
			if len(reqs) != 2 {
				t.Fatalf("got %d requests, want 2", len(reqs))
			}
			var answered []string
			conv := reqs[1].Conversation
			for _, b := range conv[len(conv)-1].Content {
				if b.Type == "tool_result" {
					answered = append(answered, b.ToolUseID)
				}
			}
			if diff := cmp.Diff(answered, []string{"toolu_2"}); diff != "" {
				t.Errorf("tool_results sent (-got +want):\n%s", diff)
			}
		})
	}
}

// TestFallbackToolResultRefused checks the fake as the API: a tool_result
// for a tool_use before a fallback block answers nothing the API keeps.
func TestFallbackToolResultRefused(t *testing.T) {
	body := `{"model":"m","max_tokens":10,"messages":[
		{"role":"user","content":"hi"},
		{"role":"assistant","content":[
			{"type":"tool_use","id":"toolu_declined","name":"t","input":{}},
			{"type":"fallback","from":{"model":"a"},"to":{"model":"b"},"trigger":null},
			{"type":"tool_use","id":"toolu_2","name":"t","input":{}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"toolu_declined","content":"x"},
			{"type":"tool_result","tool_use_id":"toolu_2","content":"y"}]}]}`
	if err := toolruntest.Validate([]byte(body)); err == nil {
		t.Errorf("Validate accepted a tool_result for a declined attempt's tool_use")
	}
}
