package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

type writeIn struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

// writeTool records the paths it was called with.
func writeTool(calls *counter) *toolrun.FuncTool {
	return toolrun.NewTool("write_file", "Write a file", func(ctx context.Context, in writeIn) (string, error) {
		calls.inc(in.Path)
		return "wrote " + in.Path, nil
	})
}

func TestDecisions(t *testing.T) {
	tests := []struct {
		name       string
		opts       toolrun.Options
		policy     toolrun.Policy
		wantRuns   map[string]int
		wantResult string // text of the result the model got
		wantError  bool
		wantLog    string // a log message that must be present
	}{
		{
			name:       "allow by default",
			wantRuns:   map[string]int{"/tmp/a": 1},
			wantResult: "wrote /tmp/a",
		},
		{
			name: "deny from Options.Policy",
			opts: toolrun.Options{Policy: func(ctx context.Context, c toolrun.PolicyCall) toolrun.Decision {
				return policy.Deny("writes are disabled today")
			}},
			wantRuns:   map[string]int{},
			wantResult: "tool call denied: writes are disabled today",
			wantError:  true,
			wantLog:    "toolrun: tool call denied",
		},
		{
			name: "allow with modified input",
			opts: toolrun.Options{Policy: func(ctx context.Context, c toolrun.PolicyCall) toolrun.Decision {
				return toolrun.Decision{Kind: toolrun.Allow, Input: json.RawMessage(`{"path":"/sandbox/a","text":"x"}`)}
			}},
			wantRuns:   map[string]int{"/sandbox/a": 1},
			wantResult: "wrote /sandbox/a",
		},
		{
			name: "modified input is validated too",
			opts: toolrun.Options{Policy: func(ctx context.Context, c toolrun.PolicyCall) toolrun.Decision {
				return toolrun.Decision{Kind: toolrun.Allow, Input: json.RawMessage(`{"path":7}`)}
			}},
			wantRuns:   map[string]int{},
			wantResult: `invalid input for tool "write_file"`,
			wantError:  true,
		},
		{
			name: "skip with a supplied result",
			opts: toolrun.Options{Policy: func(ctx context.Context, c toolrun.PolicyCall) toolrun.Decision {
				return policy.Skip(toolrun.Text("dry run: nothing written"))
			}},
			wantRuns:   map[string]int{},
			wantResult: "dry run: nothing written",
			wantLog:    "toolrun: tool call skipped",
		},
		{
			name:       "policy denies",
			policy:     func(context.Context, toolrun.PolicyCall) toolrun.Decision { return policy.Deny("read-only mode") },
			wantRuns:   map[string]int{},
			wantResult: "read-only mode",
			wantError:  true,
		},
		{
			name: "policy of the decoded input",
			policy: policy.Func(func(ctx context.Context, in writeIn) toolrun.Decision {
				if strings.HasPrefix(in.Path, "/tmp/") {
					return toolrun.Decision{}
				}
				return policy.Deny("only /tmp is writable")
			}),
			wantRuns:   map[string]int{"/tmp/a": 1},
			wantResult: "wrote /tmp/a",
		},
		{
			name:       "DenyTools",
			opts:       toolrun.Options{Policy: policy.DenyTools("write_file")},
			wantRuns:   map[string]int{},
			wantResult: `tool "write_file" is not allowed in this run`,
			wantError:  true,
		},
		{
			name:       "AllowOnly without the tool",
			opts:       toolrun.Options{Policy: policy.AllowOnly("read_file")},
			wantRuns:   map[string]int{},
			wantResult: `tool "write_file" is not allowed in this run`,
			wantError:  true,
		},
		{
			name: "Options.Policy allows, the tool's policy still applies",
			opts: toolrun.Options{Policy: func(ctx context.Context, c toolrun.PolicyCall) toolrun.Decision {
				return toolrun.Decision{}
			}},
			policy:     func(context.Context, toolrun.PolicyCall) toolrun.Decision { return policy.Deny("policy says no") },
			wantRuns:   map[string]int{},
			wantResult: "policy says no",
			wantError:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/tmp/a", Text: "hi"})),
				toolruntest.Message(toolruntest.Text("ok")),
			))
			var calls counter
			tool := writeTool(&calls)
			tool.Policy = tt.policy
			log, logs := newLogger()
			opts := tt.opts
			opts.Logger = log
			res, err := toolrun.New(client(s), userParams("write"), []toolrun.Tool{tool}, &opts).Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != toolrun.StopEndTurn {
				t.Errorf("StopReason = %q, want end_turn", res.StopReason)
			}
			got := map[string]int{}
			for k, v := range calls.n {
				got[k] = v
			}
			if diff := cmp.Diff(tt.wantRuns, got); diff != "" {
				t.Errorf("tool runs (-want +got):\n%s", diff)
			}
			results := toolResults(s.Requests()[1])
			if len(results) != 1 {
				t.Fatalf("got %d results, want 1", len(results))
			}
			if !strings.Contains(results[0].ResultText(), tt.wantResult) || results[0].IsError != tt.wantError {
				t.Errorf("result = %q (is_error %v), want %q (is_error %v)", results[0].ResultText(), results[0].IsError, tt.wantResult, tt.wantError)
			}
			if tt.wantLog != "" {
				rec := logs.find(t, tt.wantLog)
				if rec == nil || rec["tool"] != "write_file" || rec["tool_use_id"] != "t1" || rec["reason"] == "" {
					t.Errorf("log record %q = %v, want one with tool, tool_use_id and reason", tt.wantLog, rec)
				}
			}
		})
	}
}

// TestSuspendAndResumeFromJSON defers one call of a turn, saves the State as
// JSON, and resumes in a runner built from nothing but that JSON, the tools
// and a client: the call that needed no decision ran once, before the
// suspension, and never again.
func TestSuspendAndResumeFromJSON(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(
			toolruntest.Text("Reading and writing."),
			toolruntest.ToolUse("t_read", "read_file", map[string]any{"path": "a.txt"}),
			toolruntest.ToolUse("t_write", "write_file", writeIn{Path: "/etc/passwd", Text: "x"}),
			toolruntest.ToolUse("t_write2", "write_file", writeIn{Path: "/tmp/b", Text: "y"}),
		),
		toolruntest.Message(toolruntest.Text("All done.")),
	))
	var reads, writes counter
	tools := func() []toolrun.Tool {
		read := toolrun.NewTool("read_file", "Read a file", func(ctx context.Context, in struct {
			Path string `json:"path"`
		}) (string, error) {
			reads.inc(in.Path)
			return "contents of " + in.Path, nil
		})
		write := writeTool(&writes)
		write.Policy = policy.RequireApproval("writes change files")
		return []toolrun.Tool{read, write}
	}
	r := toolrun.New(client(s), userParams("go"), tools(), &toolrun.Options{Logger: discard()})
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("StopReason = %q, want awaiting_approval", res.StopReason)
	}
	var pending []string
	for _, p := range res.Pending {
		pending = append(pending, p.Call.ID+" "+p.Call.Name+" "+p.Reason)
	}
	if diff := cmp.Diff([]string{"t_write write_file writes change files", "t_write2 write_file writes change files"}, pending); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	if reads.get("a.txt") != 1 || len(writes.n) != 0 {
		t.Fatalf("before approval: reads %v, writes %v; want the read run once and no write", reads.n, writes.n)
	}
	checkHistory(t, res.Messages)

	data, err := json.Marshal(r.State())
	if err != nil {
		t.Fatal(err)
	}

	// A new process: only the JSON, the tools and a client.
	var st toolrun.State
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	r2, err := toolrun.Resume(client(s), &st, tools(), &toolrun.Options{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	if got := r2.Result(); got == nil || got.StopReason != toolrun.StopAwaitingApproval || len(got.Pending) != 2 {
		t.Fatalf("resumed Result = %+v, want awaiting approval with 2 pending", got)
	}
	// Without decisions the run stays suspended and sends nothing.
	if res, _ := r2.Run(t.Context()); res.StopReason != toolrun.StopAwaitingApproval || len(s.Requests()) != 1 {
		t.Fatalf("Run without decisions = %q with %d requests, want still awaiting and 1 request", res.StopReason, len(s.Requests()))
	}
	if err := r2.Decide("t_write", policy.Deny("not /etc")); err != nil {
		t.Fatal(err)
	}
	if err := r2.Decide("t_write2", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	if err := r2.Decide("t_nope", toolrun.Decision{}); err == nil {
		t.Error("Decide of an unknown id succeeded, want an error")
	}
	res, err = r2.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn || res.Text() != "All done." {
		t.Fatalf("after decisions: %q %q, %v; want end_turn", res.StopReason, res.Text(), err)
	}
	if reads.get("a.txt") != 1 || writes.get("/tmp/b") != 1 || writes.get("/etc/passwd") != 0 {
		t.Errorf("runs: reads %v, writes %v; want each approved call once, the denied one never", reads.n, writes.n)
	}
	var got []string
	for _, b := range toolResults(s.Requests()[1]) {
		got = append(got, fmt.Sprintf("%s error=%v %s", b.ToolUseID, b.IsError, b.ResultText()))
	}
	want := []string{
		"t_read error=false contents of a.txt",
		"t_write error=true tool call denied: not /etc",
		"t_write2 error=false wrote /tmp/b",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results the model saw (-want +got):\n%s", diff)
	}
	// The denial is a decision, not a tool failure.
	if res.Turns != 2 || res.ToolCalls != 3 || res.ToolFailures != 0 {
		t.Errorf("Turns, ToolCalls, ToolFailures = %d, %d, %d, want 2, 3, 0", res.Turns, res.ToolCalls, res.ToolFailures)
	}
}

func TestApproveWithEditedInputAndAlways(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/one", Text: "1"})),
		toolruntest.Message(toolruntest.ToolUse("w2", "write_file", writeIn{Path: "/tmp/two", Text: "2"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	var writes counter
	w := writeTool(&writes)
	w.Policy = policy.RequireApproval("writes")
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{w}, &toolrun.Options{Logger: discard()})
	res, _ := r.Run(t.Context())
	if res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("StopReason = %q, want awaiting_approval", res.StopReason)
	}
	d := toolrun.Decision{Kind: toolrun.Allow, Input: json.RawMessage(`{"path":"/tmp/edited","text":"1"}`)}
	d.Always = true
	if err := r.Decide("w1", d); err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %q, %v; want end_turn without asking again", res.StopReason, err)
	}
	if diff := cmp.Diff(map[string]int{"/tmp/edited": 1, "/tmp/two": 1}, writes.n); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if got := r.State().AlwaysAllow; !cmp.Equal(got, []string{"write_file"}) {
		t.Errorf("AlwaysAllow = %v, want [write_file]", got)
	}
	if err := r.Decide("w1", toolrun.Decision{}); !errors.Is(err, toolrun.ErrNotAwaitingApproval) {
		t.Errorf("Decide on a finished run = %v, want ErrNotAwaitingApproval", err)
	}
}

// TestHookOrder pins the documented order of the hooks for one tool turn.
func TestHookOrder(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/tmp/a", Text: "x"})),
		toolruntest.Message(toolruntest.Text("ok")),
	))
	var order []string
	add := func(s string) { order = append(order, s) }
	var writes counter
	w := toolrun.NewTool("write_file", "", func(ctx context.Context, in writeIn) (string, error) {
		add("tool.Run")
		writes.inc(in.Path)
		return "ok", nil
	})
	w.Policy = func(ctx context.Context, c toolrun.PolicyCall) toolrun.Decision {
		add("tool.Policy")
		return toolrun.Decision{}
	}
	opts := &toolrun.Options{
		Logger: discard(),
		BeforeRequest: func(ctx context.Context, turn int, p *anthropic.BetaMessageNewParams) error {
			add(fmt.Sprintf("BeforeRequest %d", turn))
			return nil
		},
		AfterResponse: func(ctx context.Context, turn int, m *anthropic.BetaMessage) error {
			add(fmt.Sprintf("AfterResponse %d", turn))
			return nil
		},
		Policy: func(ctx context.Context, c toolrun.PolicyCall) toolrun.Decision {
			add("Options.Policy")
			return toolrun.Decision{}
		},
		AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error { add("AfterTool"); return nil },
		OnEvent: func(ctx context.Context, e toolrun.Event) {
			switch e.(type) {
			case toolrun.RequestSent, toolrun.ResponseReceived, toolrun.ToolDecided,
				toolrun.ToolStarted, toolrun.ToolFinished, toolrun.TurnFinished, toolrun.RunStopped:
				add(fmt.Sprintf("event %T", e)[len("event toolrun."):])
			}
		},
	}
	if _, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{w}, opts).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, o := range order {
		if strings.HasPrefix(o, "event ") {
			order[i] = "event " + strings.TrimPrefix(o[len("event "):], "toolrun.")
		}
	}
	want := []string{
		"BeforeRequest 1", "RequestSent", "ResponseReceived", "AfterResponse 1",
		"Options.Policy", "tool.Policy", "ToolDecided", "ToolStarted", "tool.Run", "AfterTool", "ToolFinished", "TurnFinished",
		"BeforeRequest 2", "RequestSent", "ResponseReceived", "AfterResponse 2",
		"TurnFinished", "RunStopped",
	}
	var got []string
	for _, o := range order {
		got = append(got, strings.TrimPrefix(strings.TrimPrefix(o, "event "), "toolrun."))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hook order (-want +got):\n%s", diff)
	}
}

func TestRequestHooks(t *testing.T) {
	t.Run("BeforeRequest changes one request only", func(t *testing.T) {
		s := toolruntest.New(t, toolruntest.Script(
			toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
			toolruntest.Message(toolruntest.Text("ok")),
		))
		var calls counter
		_, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
			Logger: discard(),
			BeforeRequest: func(ctx context.Context, turn int, p *anthropic.BetaMessageNewParams) error {
				if turn == 2 {
					p.Model = "claude-other"
					p.MaxTokens = 99
					p.System = []anthropic.BetaTextBlockParam{{Text: "be brief"}}
				}
				return nil
			},
		}).Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		reqs := s.Requests()
		if reqs[0].Params.Model != "claude-test" || reqs[1].Params.Model != "claude-other" || reqs[1].Params.MaxTokens != 99 {
			t.Errorf("models = %q, %q (max_tokens %d), want claude-test then claude-other with 99", reqs[0].Params.Model, reqs[1].Params.Model, reqs[1].Params.MaxTokens)
		}
		if !strings.Contains(string(reqs[1].Params.System), "be brief") {
			t.Errorf("system = %s, want the hook's", reqs[1].Params.System)
		}
	})
	t.Run("AfterResponse ends the run", func(t *testing.T) {
		s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"}))))
		var calls counter
		res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
			Logger: discard(),
			AfterResponse: func(ctx context.Context, turn int, m *anthropic.BetaMessage) error {
				return toolrun.StopRun("the model asked for the weather; that is enough")
			},
		}).Run(t.Context())
		if err != nil || res.StopReason != toolrun.StopHook || res.Detail != "the model asked for the weather; that is enough" {
			t.Errorf("Run = %q %q, %v; want StopHook with the hook's reason", res.StopReason, res.Detail, err)
		}
		if calls.get("get_weather") != 0 {
			t.Error("the tool ran after the hook stopped the run")
		}
		checkHistory(t, res.Messages)
	})
}

// TestExclusiveToolRunsAlone: a tool that asks to run alone never overlaps
// another call of its turn, while the others still run together.
func TestExclusiveToolRunsAlone(t *testing.T) {
	var mu sync.Mutex // guards log
	var log []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, s)
	}
	var pair sync.WaitGroup
	pair.Add(2)
	shared := toolrun.NewTool("shared", "", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		note(fmt.Sprintf("start shared%d", in.N))
		pair.Done()
		pair.Wait() // both shared calls must be running at once
		note(fmt.Sprintf("end shared%d", in.N))
		return "ok", nil
	})
	alone := toolrun.NewTool("alone", "", func(ctx context.Context, in struct{}) (string, error) {
		note("start alone")
		time.Sleep(2 * time.Millisecond)
		note("end alone")
		return "ok", nil
	})
	alone.Exclusive = true
	other := toolrun.NewTool("other", "", func(ctx context.Context, in struct{}) (string, error) {
		note("start other")
		note("end other")
		return "ok", nil
	})
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(
			toolruntest.ToolUse("a", "shared", map[string]int{"n": 1}), toolruntest.ToolUse("b", "shared", map[string]int{"n": 2}),
			toolruntest.ToolUse("c", "alone", nil),
			toolruntest.ToolUse("d", "other", nil),
		),
		toolruntest.Message(toolruntest.Text("ok")),
	))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{shared, alone, other}, &toolrun.Options{Logger: discard()}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	// The first four entries are the two shared calls in some order; then
	// alone, alone's end, and other.
	if len(log) != 8 {
		t.Fatalf("log = %v, want 8 entries", log)
	}
	if diff := cmp.Diff([]string{"start alone", "end alone", "start other", "end other"}, log[4:]); diff != "" {
		t.Errorf("after the shared calls (-want +got):\n%s\nwhole log: %v", diff, log)
	}
	for _, e := range log[:4] {
		if !strings.Contains(e, "shared") {
			t.Errorf("log = %v: the exclusive call overlapped the shared ones", log)
		}
	}
	_ = atomic.Int32{}
}

// TestChain pins the one rule Chain and the runner share: the first Deny
// or Skip decides, an Allow with Input edits the input for later policies
// (validated first), a Defer stands unless something later denies or
// skips, and a Chain nested in Options.Policy decides as a flat one.
func TestChain(t *testing.T) {
	deny := func(reason string) toolrun.Policy {
		return func(context.Context, toolrun.PolicyCall) toolrun.Decision { return policy.Deny(reason) }
	}
	edit := func(input string) toolrun.Policy {
		return func(context.Context, toolrun.PolicyCall) toolrun.Decision {
			return toolrun.Decision{Kind: toolrun.Allow, Input: json.RawMessage(input)}
		}
	}
	skip := func(context.Context, toolrun.PolicyCall) toolrun.Decision {
		return policy.Skip(toolrun.Text("skipped"))
	}
	tests := []struct {
		name     string
		input    any // the model's input; writeIn{Path: "/tmp/a"} if nil
		policy   func(seen *[]string) toolrun.Policy
		wantRuns map[string]int
		wantText string // a substring of the result's text, if answered
		wantStop toolrun.StopReason
		wantSeen []string // the paths the recording policy saw
		wantBy   toolrun.DecidedBy
	}{
		{
			name:     "the first deny wins",
			policy:   func(*[]string) toolrun.Policy { return policy.Chain(deny("a"), deny("b")) },
			wantText: "tool call denied: a",
			wantBy:   toolrun.ByPolicy,
		},
		{
			name:     "a skip ends the chain too",
			policy:   func(*[]string) toolrun.Policy { return policy.Chain(nil, skip, deny("b")) },
			wantText: "skipped",
			wantBy:   toolrun.ByPolicy,
		},
		{
			name:     "an allow does not end it",
			policy:   func(*[]string) toolrun.Policy { return policy.Chain(policy.AllowOnly("write_file"), deny("b")) },
			wantText: "tool call denied: b",
			wantBy:   toolrun.ByPolicy,
		},
		{
			name: "an edit is what later policies see and what runs",
			policy: func(seen *[]string) toolrun.Policy {
				return policy.Chain(edit(`{"path":"/sandbox/a","text":"x"}`), recordPaths(seen))
			},
			wantRuns: map[string]int{"/sandbox/a": 1},
			wantSeen: []string{"/sandbox/a"},
			wantBy:   toolrun.ByPolicy,
		},
		{
			name: "an invalid edit ends the chain with a validation error",
			policy: func(seen *[]string) toolrun.Policy {
				return policy.Chain(edit(`{"path":7}`), recordPaths(seen))
			},
			wantText: `invalid input for tool "write_file"`,
		},
		{
			name: "a nested chain edits as a flat one",
			policy: func(seen *[]string) toolrun.Policy {
				return policy.Chain(policy.Chain(edit(`{"path":"/sandbox/b","text":"x"}`), recordPaths(seen)), recordPaths(seen))
			},
			wantRuns: map[string]int{"/sandbox/b": 1},
			wantSeen: []string{"/sandbox/b", "/sandbox/b"},
			wantBy:   toolrun.ByPolicy,
		},
		{
			name: "an invalid edit in a nested chain is refused too",
			policy: func(seen *[]string) toolrun.Policy {
				return policy.Chain(policy.Chain(edit(`{"path":7}`), recordPaths(seen)), recordPaths(seen))
			},
			wantText: `invalid input for tool "write_file"`,
		},
		{
			// The check of an edit travels with the call, not in the
			// context: a policy that asks a Chain with a context of its
			// own still has the edit checked.
			name: "a chain asked with a context of its own still checks an edit",
			policy: func(seen *[]string) toolrun.Policy {
				chain := policy.Chain(edit(`{"path":7}`), recordPaths(seen))
				return func(_ context.Context, call toolrun.PolicyCall) toolrun.Decision {
					return chain(context.Background(), call)
				}
			},
			wantText: `invalid input for tool "write_file"`,
		},
		{
			name: "a defer stands when nothing later denies",
			policy: func(*[]string) toolrun.Policy {
				return policy.Chain(policy.RequireApproval("ask"), policy.AllowOnly("write_file"))
			},
			wantStop: toolrun.StopAwaitingApproval,
			wantBy:   toolrun.ByPolicy,
		},
		{
			name: "a later deny beats a defer",
			policy: func(*[]string) toolrun.Policy {
				return policy.Chain(policy.RequireApproval("ask"), policy.DenyTools("write_file"))
			},
			wantText: `tool call denied: tool "write_file" is not allowed in this run`,
			wantBy:   toolrun.ByPolicy,
		},
		{
			// The decision order: input is validated before any policy,
			// name-based denials included.
			name:     "DenyTools sees only valid input",
			input:    map[string]any{"path": 7},
			policy:   func(*[]string) toolrun.Policy { return policy.DenyTools("write_file") },
			wantText: `invalid input for tool "write_file"`,
		},
		{
			name:     "AllowOnly lets the named tool through",
			policy:   func(*[]string) toolrun.Policy { return policy.AllowOnly("read_file", "write_file") },
			wantRuns: map[string]int{"/tmp/a": 1},
			wantBy:   toolrun.ByDefault,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := tt.input
			if input == nil {
				input = writeIn{Path: "/tmp/a", Text: "hi"}
			}
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "write_file", input)),
				toolruntest.Message(toolruntest.Text("ok")),
			))
			var calls counter
			var seen []string
			var by []toolrun.DecidedBy
			opts := &toolrun.Options{Logger: discard(), Policy: tt.policy(&seen), OnEvent: func(ctx context.Context, e toolrun.Event) {
				if d, ok := e.(toolrun.ToolDecided); ok {
					by = append(by, d.By)
				}
			}}
			res, err := toolrun.New(client(s), userParams("write"), []toolrun.Tool{writeTool(&calls)}, opts).Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			wantStop := tt.wantStop
			if wantStop == "" {
				wantStop = toolrun.StopEndTurn
			}
			if res.StopReason != wantStop {
				t.Errorf("StopReason = %q, want %q", res.StopReason, wantStop)
			}
			got := map[string]int{}
			for k, v := range calls.n {
				got[k] = v
			}
			wantRuns := tt.wantRuns
			if wantRuns == nil {
				wantRuns = map[string]int{}
			}
			if diff := cmp.Diff(wantRuns, got); diff != "" {
				t.Errorf("tool runs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSeen, seen); diff != "" {
				t.Errorf("paths the later policy saw (-want +got):\n%s", diff)
			}
			var wantBy []toolrun.DecidedBy
			if tt.wantBy != "" {
				wantBy = []toolrun.DecidedBy{tt.wantBy}
			}
			if diff := cmp.Diff(wantBy, by); diff != "" {
				t.Errorf("ToolDecided.By (-want +got):\n%s", diff)
			}
			if tt.wantText != "" {
				results := toolResults(s.Requests()[1])
				if len(results) != 1 || !strings.Contains(results[0].ResultText(), tt.wantText) {
					t.Errorf("results = %+v, want one containing %q", results, tt.wantText)
				}
			}
		})
	}
}

// recordPaths is a policy that notes the path of each call it sees and
// has nothing to say about it.
func recordPaths(seen *[]string) toolrun.Policy {
	return policy.Func(func(ctx context.Context, in writeIn) toolrun.Decision {
		*seen = append(*seen, in.Path)
		return toolrun.Decision{}
	})
}
