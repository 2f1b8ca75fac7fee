package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// roundTrip sends s through JSON, as a workflow engine or a store does.
func roundTrip(t *testing.T, s *toolrun.State) *toolrun.State {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out toolrun.State
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// callResult returns the result of call id in s, or nil.
func callResult(s *toolrun.State, id string) *toolrun.ToolResult {
	res, _ := s.CallResult(id)
	return res
}

// distributed drives a run the way a durable workflow does: each step on a
// runner resumed from the state's JSON, each tool call on a runner of its
// own resumed from the state without its history, and each result and
// decision written back into the state as data.
type distributed struct {
	t         *testing.T
	server    *toolruntest.Server
	tools     func() []toolrun.Tool // new tools for each "process"
	opts      *toolrun.Options
	decisions map[string]toolrun.Decision

	requestsPerAdvance []int
	plans              [][]driver.PlannedCall
}

func (d *distributed) resume(s *toolrun.State) *toolrun.Runner {
	d.t.Helper()
	r, err := toolrun.Resume(client(d.server), roundTrip(d.t, s), d.tools(), d.opts)
	if err != nil {
		d.t.Fatal(err)
	}
	return r
}

func (d *distributed) run(s *toolrun.State) *toolrun.State {
	t := d.t
	t.Helper()
	for range 20 {
		r := d.resume(s)
		before := len(d.server.Requests())
		plans, err := driver.Advance(t.Context(), r)
		if err != nil && !errors.Is(err, toolrun.ErrMaxTurns) && !errors.Is(err, toolrun.ErrBudget) && !errors.Is(err, toolrun.ErrIncomplete) {
			t.Fatalf("Advance: %v", err)
		}
		d.requestsPerAdvance = append(d.requestsPerAdvance, len(d.server.Requests())-before)
		d.plans = append(d.plans, plans)
		s = roundTrip(t, r.State())
		if res := r.Result(); res != nil {
			if res.StopReason != toolrun.StopAwaitingApproval || len(plans) > 0 {
				return s
			}
			decided := false
			for _, p := range s.AwaitingApproval() {
				if dec, ok := d.decisions[p.Call.ID]; ok {
					if err := s.Decide(p.Call.ID, dec); err != nil {
						t.Fatal(err)
					}
					decided = true
				}
			}
			if !decided {
				return s
			}
			continue
		}
		for _, p := range plans {
			one := roundTrip(t, s)
			one.Params.Messages = nil // a tool call needs no history
			rr := d.resume(one)
			if _, err := driver.ExecuteCall(t.Context(), rr, p.Call.ID); err != nil {
				t.Fatalf("ExecuteCall(%s): %v", p.Call.ID, err)
			}
			res := callResult(rr.State(), p.Call.ID)
			if res == nil {
				t.Fatalf("ExecuteCall(%s) recorded no result", p.Call.ID)
			}
			if err := driver.SetResult(s, p.Call.ID, res); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatal("the run did not stop in 20 steps")
	return nil
}

// seenResults lists the tool results of every request as "id error=bool text".
func seenResults(s *toolruntest.Server) []string {
	var out []string
	for _, req := range s.Requests() {
		for _, b := range toolResults(req) {
			out = append(out, fmt.Sprintf("%s error=%v %s", b.ToolUseID, b.IsError, b.ResultText()))
		}
	}
	return out
}

func TestAdvanceAndExecuteCallElsewhere(t *testing.T) {
	slow := func(calls *counter) *toolrun.FuncTool {
		tool := toolrun.NewTool("slow", "Slow and safe", func(ctx context.Context, in struct{}) (string, error) {
			calls.inc("slow")
			return "slow done", nil
		})
		tool.Exclusive, tool.Idempotent, tool.Timeout = true, true, time.Minute
		return tool
	}
	tests := []struct {
		name      string
		replies   []toolruntest.Reply
		opts      toolrun.Options
		policy    toolrun.Policy // of write_file
		decisions map[string]toolrun.Decision
		wantStop  toolrun.StopReason
		wantRuns  map[string]int
		wantSeen  []string // tool results the model saw
		wantPlans []string // "id name input" of each plan, per Advance
		// wantRequests counts the requests each Advance sent: never more than one.
		wantRequests []int
	}{
		{
			name: "two turns",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Paris"}),
					toolruntest.ToolUse("t2", "slow", map[string]any{})),
				toolruntest.Message(toolruntest.Text("Sunny.")),
			},
			opts:         toolrun.Options{Timeouts: toolrun.Timeouts{Tool: time.Second}},
			wantStop:     toolrun.StopEndTurn,
			wantRuns:     map[string]int{"get_weather": 1, "slow": 1},
			wantSeen:     []string{"t1 error=false sunny in Paris", "t2 error=false slow done"},
			wantPlans:    []string{`t1 get_weather {"city":"Paris"} timeout=1s`, `t2 slow {} exclusive idempotent timeout=1m0s`},
			wantRequests: []int{1, 1},
		},
		{
			name: "denied and skipped calls are answered by Advance",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Paris"}),
					toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/a", Text: "x"})),
				toolruntest.Message(toolruntest.Text("Fine.")),
			},
			opts: toolrun.Options{Policy: policy.DenyTools("get_weather")},
			policy: func(context.Context, toolrun.PolicyCall) toolrun.Decision {
				return policy.Skip(toolrun.Text("dry run"))
			},
			wantStop: toolrun.StopEndTurn,
			wantRuns: map[string]int{},
			wantSeen: []string{
				`t1 error=true tool call denied: tool "get_weather" is not allowed in this run`,
				"t2 error=false dry run",
			},
			wantRequests: []int{1, 1},
		},
		{
			name: "a deferred call runs once a person allows it",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Paris"}),
					toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/a", Text: "x"})),
				toolruntest.Message(toolruntest.Text("Written.")),
			},
			policy:    policy.RequireApproval("writes change files"),
			decisions: map[string]toolrun.Decision{"t2": toolrun.Decision{Kind: toolrun.Allow, Input: json.RawMessage(`{"path":"/sandbox/a","text":"x"}`)}},
			wantStop:  toolrun.StopEndTurn,
			wantRuns:  map[string]int{"get_weather": 1, "/sandbox/a": 1},
			wantSeen:  []string{"t1 error=false sunny in Paris", "t2 error=false wrote /sandbox/a"},
			wantPlans: []string{`t1 get_weather {"city":"Paris"}`, `t2 write_file {"path":"/sandbox/a","text":"x"}`},
			// The allowed call runs first; then the run stops for the
			// person, then goes on.
			wantRequests: []int{1, 0, 0, 1},
		},
		{
			name: "a deferred call denied by a person",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/etc/passwd", Text: "x"})),
				toolruntest.Message(toolruntest.Text("Not written.")),
			},
			policy:       policy.RequireApproval("writes change files"),
			decisions:    map[string]toolrun.Decision{"t2": policy.Deny("not /etc")},
			wantStop:     toolrun.StopEndTurn,
			wantRuns:     map[string]int{},
			wantSeen:     []string{"t2 error=true tool call denied: not /etc"},
			wantRequests: []int{1, 1},
		},
		{
			name: "awaiting a person, nothing runs",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/a", Text: "x"})),
			},
			policy:       policy.RequireApproval("writes change files"),
			wantStop:     toolrun.StopAwaitingApproval,
			wantRuns:     map[string]int{},
			wantRequests: []int{1},
		},
		{
			name: "pause_turn is sent back by the next Advance",
			replies: []toolruntest.Reply{
				{Content: []toolruntest.Block{toolruntest.Text("Searching...")}, StopReason: "pause_turn"},
				toolruntest.Message(toolruntest.Text("Found it.")),
			},
			wantStop:     toolrun.StopEndTurn,
			wantRuns:     map[string]int{},
			wantRequests: []int{1, 1},
		},
		{
			name: "the turn limit leaves the last calls pending",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Paris"})),
			},
			opts:         toolrun.Options{MaxTurns: 1},
			wantStop:     toolrun.StopMaxTurns,
			wantRuns:     map[string]int{},
			wantRequests: []int{1},
		},
		{
			name: "calls of a response cut off are not run",
			replies: []toolruntest.Reply{
				{Content: []toolruntest.Block{toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Paris"})}, StopReason: "max_tokens"},
			},
			wantStop:     toolrun.StopMaxTokens,
			wantRuns:     map[string]int{},
			wantRequests: []int{1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(tt.replies...))
			var calls counter
			tools := func() []toolrun.Tool {
				w := writeTool(&calls)
				w.Policy = tt.policy
				return []toolrun.Tool{weatherTool(&calls), w, slow(&calls)}
			}
			opts := tt.opts
			opts.Logger = discard()
			d := &distributed{t: t, server: s, tools: tools, opts: &opts, decisions: tt.decisions}
			start := toolrun.New(client(s), userParams("go"), nil, &toolrun.Options{MaxTurns: tt.opts.MaxTurns}).State()
			end := d.run(start)

			if got := end.StopReason; got != tt.wantStop {
				t.Errorf("StopReason = %q, want %q", got, tt.wantStop)
			}
			runs := map[string]int{}
			for k, v := range calls.n {
				runs[k] = v
			}
			if diff := cmp.Diff(tt.wantRuns, runs); diff != "" {
				t.Errorf("tool runs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSeen, seenResults(s)); diff != "" {
				t.Errorf("results the model saw (-want +got):\n%s", diff)
			}
			var plans []string
			for _, ps := range d.plans {
				for _, p := range ps {
					desc := fmt.Sprintf("%s %s %s", p.Call.ID, p.Call.Name, p.Call.Input)
					if p.Exclusive {
						desc += " exclusive"
					}
					if p.Idempotent {
						desc += " idempotent"
					}
					if p.Timeout > 0 {
						desc += " timeout=" + p.Timeout.String()
					}
					plans = append(plans, desc)
				}
			}
			if diff := cmp.Diff(tt.wantPlans, plans); diff != "" {
				t.Errorf("planned calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRequests, d.requestsPerAdvance); diff != "" {
				t.Errorf("requests per Advance (-want +got):\n%s", diff)
			}
			checkHistory(t, end.Params.Messages)
		})
	}
}

// TestResumedRunnerKeepsDecision checks that a call allowed by a policy in
// one Advance is not decided again by the runner that runs it elsewhere:
// the decision recorded in the State stands, so the policy is asked once
// and ToolDecided is sent once, and the call runs with the policy's edit.
func TestResumedRunnerKeepsDecision(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Paris"})),
		toolruntest.Message(toolruntest.Text("Sunny.")),
	))
	var asked, calls counter
	var events []string
	opts := &toolrun.Options{
		Logger: discard(),
		Policy: func(ctx context.Context, c toolrun.PolicyCall) toolrun.Decision {
			asked.inc(c.ID)
			return toolrun.Decision{Kind: toolrun.Allow, Input: json.RawMessage(`{"city":"Lyon"}`)}
		},
		OnEvent: func(ctx context.Context, e toolrun.Event) {
			switch e := e.(type) {
			case toolrun.ToolDecided:
				events = append(events, "decided "+string(e.By))
			case toolrun.ToolStarted:
				events = append(events, "started "+string(e.Call.Input))
			case toolrun.ToolFinished:
				events = append(events, "finished "+e.Result.Call.ID)
			}
		},
	}
	tools := func() []toolrun.Tool { return []toolrun.Tool{weatherTool(&calls)} }
	d := &distributed{t: t, server: s, tools: tools, opts: opts}
	end := d.run(toolrun.New(client(s), userParams("go"), nil, nil).State())
	if end.StopReason != toolrun.StopEndTurn {
		t.Fatalf("StopReason = %q, want end_turn", end.StopReason)
	}
	if got := asked.get("t1"); got != 1 {
		t.Errorf("the policy was asked %d times, want 1: by Advance's runner alone", got)
	}
	// ToolStarted carries the call as it runs: with the policy's Lyon.
	want := []string{"decided policy", `started {"city":"Lyon"}`, "finished t1"}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"t1 error=false sunny in Lyon"}, seenResults(s)); diff != "" {
		t.Errorf("results the model saw (-want +got):\n%s", diff)
	}
}

func TestExecuteCall(t *testing.T) {
	type in struct {
		N int `json:"n"`
	}
	tests := []struct {
		name    string
		input   any
		policy  toolrun.Policy
		timeout time.Duration
		run     func(ctx context.Context, n int) (string, error)
		opts    toolrun.Options
		// ctx, if set, is the context ExecuteCall runs with.
		ctx       func(t *testing.T) context.Context
		id        string // the id executed; "t1" if empty
		wantErr   error  // matched with errors.Is; errAny for any error
		wantMsg   string // a substring of the error's text, if set
		wantText  string // the result's text, if it has one
		wantIsErr bool
		wantRan   bool
		wantTyped error // a sentinel matched with errors.Is, or a pointer to an error type matched with errors.As, against the result's Err
		wantStop  toolrun.StopReason
	}{
		{
			name:     "runs",
			input:    in{N: 2},
			run:      func(ctx context.Context, n int) (string, error) { return fmt.Sprint(n * 2), nil },
			wantText: "4",
			wantRan:  true,
		},
		{
			name:      "a panic is a failed call",
			input:     in{N: 1},
			run:       func(ctx context.Context, n int) (string, error) { panic("boom") },
			wantText:  `tool "calc" panicked: boom`,
			wantIsErr: true,
			wantRan:   true,
			wantTyped: &toolrun.PanicError{},
		},
		{
			name:    "a timeout is a failed call",
			input:   in{N: 1},
			timeout: 10 * time.Millisecond,
			run: func(ctx context.Context, n int) (string, error) {
				<-ctx.Done()
				return "", ctx.Err()
			},
			wantText:  `tool "calc" timed out after 10ms and was cancelled`,
			wantIsErr: true,
			wantRan:   true,
			wantTyped: &toolrun.TimeoutError{},
		},
		{
			name:      "invalid input is not run",
			input:     map[string]any{"n": "two"},
			run:       func(ctx context.Context, n int) (string, error) { return "ran", nil },
			wantIsErr: true,
			wantTyped: &toolrun.ValidationError{},
		},
		{
			name:      "denied",
			input:     in{N: 1},
			policy:    func(context.Context, toolrun.PolicyCall) toolrun.Decision { return policy.Deny("no maths") },
			run:       func(ctx context.Context, n int) (string, error) { return "ran", nil },
			wantText:  "tool call denied: no maths",
			wantIsErr: true,
			wantTyped: toolrun.ErrDenied,
		},
		{
			name:    "deferred",
			input:   in{N: 1},
			policy:  policy.RequireApproval("ask"),
			run:     func(ctx context.Context, n int) (string, error) { return "ran", nil },
			wantErr: errAny,
			wantMsg: `toolrun: execute call: call "t1" (calc) awaits a person's decision`,
		},
		{
			name:    "unknown id",
			input:   in{N: 1},
			id:      "t9",
			run:     func(ctx context.Context, n int) (string, error) { return "ran", nil },
			wantErr: errAny,
		},
		{
			name:  "cancelled while running",
			input: in{N: 1},
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			},
			run: func(ctx context.Context, n int) (string, error) {
				<-ctx.Done()
				return "", ctx.Err()
			},
			wantErr: context.DeadlineExceeded,
		},
		{
			name:  "AfterTool ends the run",
			input: in{N: 1},
			opts: toolrun.Options{AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
				return toolrun.StopRun("seen enough")
			}},
			run:      func(ctx context.Context, n int) (string, error) { return "ran", nil },
			wantText: "ran",
			wantRan:  true,
			wantStop: toolrun.StopHook,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "calc", tt.input))))
			var calls counter
			tool := toolrun.NewTool("calc", "Doubles", func(ctx context.Context, v in) (string, error) {
				calls.inc("calc")
				return tt.run(ctx, v.N)
			})
			tool.Policy, tool.Timeout = tt.policy, tt.timeout
			opts := tt.opts
			opts.Logger = discard()
			r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{tool}, &opts)
			if _, err := r.Next(t.Context()); err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tt.ctx != nil {
				ctx = tt.ctx(t)
			}
			id := tt.id
			if id == "" {
				id = "t1"
			}
			res, err := driver.ExecuteCall(ctx, r, id)
			switch {
			case tt.wantErr == errAny && err == nil:
				t.Fatalf("ExecuteCall succeeded, want an error")
			case tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Fatalf("ExecuteCall error = %v, want %v", err, tt.wantErr)
			case tt.wantErr == nil && err != nil:
				t.Fatalf("ExecuteCall: %v", err)
			case tt.wantMsg != "" && (err == nil || !strings.Contains(err.Error(), tt.wantMsg)):
				t.Fatalf("ExecuteCall error = %v, want one containing %q", err, tt.wantMsg)
			}
			if tt.wantErr != nil {
				if res != nil {
					t.Errorf("result = %+v, want none with an error", res)
				}
				if c := callResult(r.State(), "t1"); c != nil {
					t.Errorf("call answered with %+v, want it left unanswered", c)
				}
				return
			}
			if res.IsError != tt.wantIsErr || res.Ran != tt.wantRan {
				t.Errorf("IsError, Ran = %v, %v, want %v, %v", res.IsError, res.Ran, tt.wantIsErr, tt.wantRan)
			}
			if tt.wantText != "" && (len(res.Content) != 1 || res.Content[0].OfText == nil || res.Content[0].OfText.Text != tt.wantText) {
				t.Errorf("Content = %+v, want the text %q", res.Content, tt.wantText)
			}
			if tt.wantTyped != nil {
				var (
					ve *toolrun.ValidationError
					pe *toolrun.PanicError
					te *toolrun.TimeoutError
					ok bool
				)
				switch tt.wantTyped.(type) {
				case *toolrun.ValidationError:
					ok = errors.As(res.Err, &ve)
				case *toolrun.PanicError:
					ok = errors.As(res.Err, &pe)
				case *toolrun.TimeoutError:
					ok = errors.As(res.Err, &te)
				default:
					ok = errors.Is(res.Err, tt.wantTyped)
				}
				if !ok {
					t.Errorf("Err = %v, want %T %v", res.Err, tt.wantTyped, tt.wantTyped)
				}
			}
			wantRuns := 0
			if tt.wantRan {
				wantRuns = 1
			}
			// Executing it again returns the same result without running it.
			again, err := driver.ExecuteCall(t.Context(), r, id)
			if b1, _ := json.Marshal(res); err != nil || again == nil || string(mustJSON(t, again)) != string(b1) || again.Ran != res.Ran {
				t.Errorf("second ExecuteCall = %+v, %v, want the first result %+v", again, err, res)
			}
			if got := calls.get("calc"); got != wantRuns {
				t.Errorf("tool ran %d times, want %d", got, wantRuns)
			}
			if got := callResult(r.State(), id); got == nil || got.IsError != res.IsError {
				t.Errorf("State has result %+v, want the call's", got)
			}
			var stop toolrun.StopReason
			if r.Result() != nil {
				stop = r.Result().StopReason
			}
			if stop != tt.wantStop {
				t.Errorf("stopped with %q, want %q", stop, tt.wantStop)
			}
		})
	}
}

// errAny stands for any error in a table.
var errAny = errors.New("any error")

// TestExecuteCallAfterCancelRunsAgain checks that a call cut off by a
// cancelled ctx is left unanswered and runs when executed again.
func TestExecuteCallAfterCancelRunsAgain(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "wait", map[string]any{}))))
	var calls counter
	block := true
	tool := toolrun.NewTool("wait", "Waits", func(ctx context.Context, in struct{}) (string, error) {
		calls.inc("wait")
		if block {
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "done", nil
	})
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{tool}, &toolrun.Options{Logger: discard()})
	if _, err := r.Next(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := driver.ExecuteCall(ctx, r, "t1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ExecuteCall with a cancelled ctx = %v, want context.Canceled", err)
	}
	block = false
	res, err := driver.ExecuteCall(t.Context(), r, "t1")
	if err != nil || res.IsError || res.Content[0].OfText.Text != "done" {
		t.Fatalf("ExecuteCall = %+v, %v, want done", res, err)
	}
	if got := calls.get("wait"); got != 1 {
		t.Errorf("tool ran %d times, want 1 (a cancelled ctx does not start it)", got)
	}
}

func TestStateAsData(t *testing.T) {
	pending := func() *toolrun.State {
		var s toolrun.State
		if err := json.Unmarshal([]byte(`{"format": 2, "pending": {"turn": 1, "stop_reason": "tool_use",
			"message": {"role": "assistant", "content": []},
			"calls": [
				{"call": {"id": "a", "name": "write"}, "phase": "decided", "decided_by": "policy", "decision": {"kind": "defer", "reason": "writes"}},
				{"call": {"id": "b", "name": "read"}, "phase": "decided", "decided_by": "default", "decision": {"kind": "allow"}},
				{"call": {"id": "c", "name": "write"}, "phase": "answered", "decided_by": "policy", "decision": {"kind": "defer"},
					"result": {"content": [{"type": "text", "text": "old"}]}}]}}`), &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	tests := []struct {
		name       string
		change     func(s *toolrun.State) error
		wantErr    string // a substring of the error, if one is wanted
		wantAwait  []string
		wantAlways []string
	}{
		{name: "nothing", wantAwait: []string{"a write writes"}},
		{
			name: "allow always",
			change: func(s *toolrun.State) error {
				return s.Decide("a", toolrun.Decision{Kind: toolrun.Allow, Always: true})
			},
			wantAlways: []string{"write"},
		},
		{
			name:      "a person cannot defer",
			change:    func(s *toolrun.State) error { return s.Decide("a", policy.Defer("later")) },
			wantErr:   "cannot be Defer",
			wantAwait: []string{"a write writes"},
		},
		{
			name:      "a call not deferred",
			change:    func(s *toolrun.State) error { return s.Decide("b", toolrun.Decision{}) },
			wantErr:   `not awaiting approval: call "b" (read) was never deferred to a person`,
			wantAwait: []string{"a write writes"},
		},
		{
			name:      "a call answered",
			change:    func(s *toolrun.State) error { return s.Decide("c", toolrun.Decision{}) },
			wantErr:   `not awaiting approval: call "c" (write) was decided, or has run, already`,
			wantAwait: []string{"a write writes"},
		},
		{
			name:      "set a result",
			change:    func(s *toolrun.State) error { return driver.SetResult(s, "b", &toolrun.ToolResult{Ran: true}) },
			wantAwait: []string{"a write writes"},
		},
		{
			name:      "set a result twice",
			change:    func(s *toolrun.State) error { return driver.SetResult(s, "c", &toolrun.ToolResult{}) },
			wantErr:   `call "c" already has a result`,
			wantAwait: []string{"a write writes"},
		},
		{
			name:      "set the result of no call",
			change:    func(s *toolrun.State) error { return driver.SetResult(s, "z", &toolrun.ToolResult{}) },
			wantErr:   `no call "z"`,
			wantAwait: []string{"a write writes"},
		},
		{
			name: "no pending turn",
			change: func(s *toolrun.State) error {
				*s = toolrun.State{Format: 2}
				return s.Decide("a", toolrun.Decision{})
			},
			wantErr: `no call "a" in the pending turn`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := pending()
			var err error
			if tt.change != nil {
				err = tt.change(s)
			}
			if tt.wantErr == "" && err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
			var await []string
			for _, p := range s.AwaitingApproval() {
				await = append(await, p.Call.ID+" "+p.Call.Name+" "+p.Reason)
			}
			if diff := cmp.Diff(tt.wantAwait, await); diff != "" {
				t.Errorf("AwaitingApproval (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAlways, s.AlwaysAllow); diff != "" {
				t.Errorf("AlwaysAllow (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExecuteCallStartedBefore checks that a call that started and never
// finished (its process died) runs again only if its tool is idempotent.
func TestExecuteCallStartedBefore(t *testing.T) {
	tests := []struct {
		name       string
		idempotent bool
		wantRuns   int
		wantText   string
	}{
		{name: "not idempotent", wantRuns: 0, wantText: `tool call interrupted: it started but did not finish (the run was stopped or its process died), and tool "calc" is not declared idempotent, so it was not run again; its effects, if any, are unknown`},
		{name: "idempotent", idempotent: true, wantRuns: 1, wantText: "ran"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "calc", map[string]any{}))))
			var calls counter
			tool := toolrun.NewTool("calc", "Counts", func(ctx context.Context, in struct{}) (string, error) {
				calls.inc("calc")
				return "ran", nil
			})
			tool.Idempotent = tt.idempotent
			opts := &toolrun.Options{Logger: discard()}
			r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{tool}, opts)
			if _, err := r.Next(t.Context()); err != nil {
				t.Fatal(err)
			}
			st := roundTrip(t, r.State())
			toolrun.MarkStarted(st, "t1") // as a crashed process left it
			r, err := toolrun.Resume(client(s), st, []toolrun.Tool{tool}, opts)
			if err != nil {
				t.Fatal(err)
			}
			res, err := driver.ExecuteCall(t.Context(), r, "t1")
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Content[0].OfText.Text; got != tt.wantText {
				t.Errorf("result = %q, want %q", got, tt.wantText)
			}
			if got := calls.get("calc"); got != tt.wantRuns {
				t.Errorf("tool ran %d times, want %d", got, tt.wantRuns)
			}
		})
	}
}
