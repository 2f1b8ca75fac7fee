package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// This file holds a regression test for each promise of the engine and of
// the runner's hardening: each one was broken on the first cut.

// TestResultErrorsKeepTheirKindAcrossState checks that a result's error
// answers errors.Is and errors.As the same after the State that holds it
// went through JSON as in the process that ran the call, and after the
// ToolResult itself did (as the Temporal module sends it).
func TestResultErrorsKeepTheirKindAcrossState(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(
			toolruntest.ToolUse("denied", "write_file", writeIn{Path: "/a"}),
			toolruntest.ToolUse("unknown", "nope", map[string]any{}),
			toolruntest.ToolUse("invalid", "get_weather", map[string]any{"city": 5}),
			toolruntest.ToolUse("panics", "boom", map[string]any{}),
			toolruntest.ToolUse("slow", "slow", map[string]any{}),
			toolruntest.ToolUse("held", "held", map[string]any{}),
		),
	))
	var calls counter
	boom := toolrun.NewTool("boom", "", func(ctx context.Context, in struct{}) (string, error) { panic("kaboom") })
	slow := toolrun.NewTool("slow", "", func(ctx context.Context, in struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	slow.Timeout = time.Millisecond
	held := toolrun.NewTool("held", "", func(ctx context.Context, in struct{}) (string, error) { return "ok", nil })
	held.Policy = policy.RequireApproval("a person decides")
	tools := []toolrun.Tool{writeTool(&calls), weatherTool(&calls), boom, slow, held}
	opts := &toolrun.Options{Logger: discard(), Policy: policy.DenyTools("write_file")}
	r := toolrun.New(client(s), userParams("go"), tools, opts)
	res, err := r.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("Run = %v, %v; want awaiting_approval", res.StopReason, err)
	}
	r2, err := toolrun.Resume(client(s), roundTrip(t, r.State()), tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	results, viaJSON := map[string]error{}, map[string]error{}
	st2 := roundTrip(t, r2.State())
	for _, c := range st2.Calls() {
		if _, ok := st2.CallResult(c.ID); !ok {
			continue
		}
		// A resumed runner answers ExecuteCall with the recorded result.
		res, err := driver.ExecuteCall(t.Context(), r2, c.ID)
		if err != nil {
			t.Fatalf("ExecuteCall(%s): %v", c.ID, err)
		}
		results[c.ID] = res.Err
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		var back toolrun.ToolResult
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Err == nil || back.Err.Error() != res.Err.Error() || !back.IsError {
			t.Errorf("%s: ToolResult JSON round trip = %v (is_error %t), want %v", c.ID, back.Err, back.IsError, res.Err)
		}
		viaJSON[c.ID] = back.Err
	}
	var (
		ve *toolrun.ValidationError
		pe *toolrun.PanicError
		te *toolrun.TimeoutError
	)
	for how, results := range map[string]map[string]error{"a State round trip": results, "a ToolResult round trip": viaJSON} {
		checks := []struct {
			id   string
			want bool
			what string
		}{
			{"denied", errors.Is(results["denied"], toolrun.ErrDenied), "errors.Is ErrDenied"},
			{"unknown", errors.Is(results["unknown"], toolrun.ErrUnknownTool), "errors.Is ErrUnknownTool"},
			{"invalid", errors.As(results["invalid"], &ve) && len(ve.Violations) > 0, "errors.As *ValidationError"},
			{"panics", errors.As(results["panics"], &pe) && pe.Tool == "boom", "errors.As *PanicError"},
			{"slow", errors.As(results["slow"], &te) && te.After == time.Millisecond, "errors.As *TimeoutError"},
		}
		for _, c := range checks {
			if !c.want {
				t.Errorf("%s: %v after %s: want %s", c.id, results[c.id], how, c.what)
			}
		}
	}
}

// TestInterruptedAndNotRunKeepTheirKind checks the two sentinels a runner
// gives to calls it never ran, after a State round trip.
func TestInterruptedAndNotRunKeepTheirKind(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "wait", map[string]any{})), toolruntest.Message(toolruntest.Text("ok"))))
	wait := toolrun.NewTool("wait", "", func(ctx context.Context, in struct{}) (string, error) { return "done", nil })
	opts := &toolrun.Options{Logger: discard()}
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{wait}, opts)
	if _, err := r.Next(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := roundTrip(t, r.State())
	toolrun.MarkStarted(st, st.Calls()[0].ID) // a crash mid-call
	r, err := toolrun.Resume(client(s), st, []toolrun.Tool{wait}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	st = roundTrip(t, r.State())
	if calls := st.Calls(); calls != nil {
		t.Fatalf("pending turn left: %+v", calls)
	}
	// The answer is in the history; rebuild it through a fresh state.
	blocks := toolResults(s.Requests()[1])
	if len(blocks) != 1 || !strings.Contains(blocks[0].ResultText(), "interrupted") {
		t.Errorf("tool result = %+v, want an interrupted answer", blocks)
	}
}

// TestAlwaysNeverBeatsADenyRule checks the decision order: a remembered
// Always approval answers only what would be deferred to a person, and
// never lets through a call that Options.Policy (DenyTools, AllowOnly, a
// func) or the tool's policy denies, in process and after Resume with other
// Options.
func TestAlwaysNeverBeatsADenyRule(t *testing.T) {
	denyDecide := func(ctx context.Context, c toolrun.PolicyCall) toolrun.Decision {
		if strings.Contains(string(c.Input), "9999") {
			return policy.Deny("too much")
		}
		return toolrun.Decision{}
	}
	tests := []struct {
		name     string
		first    toolrun.Options // the options of the run a person approves in
		resumed  *toolrun.Options
		policy   toolrun.Policy // the tool's own, besides RequireApproval
		wantRuns int            // wire_money runs, of the two calls
	}{
		{name: "no deny rule: Always answers the second deferral", wantRuns: 2},
		{name: "Options.Policy denies the second call in process", first: toolrun.Options{Policy: denyDecide}, wantRuns: 1},
		{name: "DenyTools after Resume", resumed: &toolrun.Options{Policy: policy.DenyTools("wire_money")}, wantRuns: 0},
		{name: "Options.Policy after Resume", resumed: &toolrun.Options{Policy: denyDecide}, wantRuns: 1},
		{name: "AllowOnly after Resume", resumed: &toolrun.Options{Policy: policy.AllowOnly("other")}, wantRuns: 0},
		{name: "a Chain after Resume", resumed: &toolrun.Options{Policy: policy.Chain(policy.RequireApproval("ask"), denyDecide)}, wantRuns: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "wire_money", map[string]any{"amount": 10})),
				toolruntest.Message(toolruntest.ToolUse("t2", "wire_money", map[string]any{"amount": 9999})),
				toolruntest.Message(toolruntest.Text("done")),
			))
			var runs counter
			type wireIn struct {
				Amount int `json:"amount"`
			}
			wire := toolrun.NewTool("wire_money", "Wire money", func(ctx context.Context, in wireIn) (string, error) {
				runs.inc("wire")
				return "wired", nil
			})
			wire.Policy = policy.RequireApproval("moves money")
			tools := []toolrun.Tool{wire}
			first := tt.first
			first.Logger = discard()
			r := toolrun.New(client(s), userParams("pay"), tools, &first)
			res, err := r.Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
				t.Fatalf("Run = %v, %v; want awaiting_approval", res.StopReason, err)
			}
			if err := r.Decide("t1", toolrun.Decision{Kind: toolrun.Allow, Always: true}); err != nil {
				t.Fatal(err)
			}
			if tt.resumed != nil {
				opts := *tt.resumed
				opts.Logger = discard()
				r, err = toolrun.Resume(client(s), roundTrip(t, r.State()), tools, &opts)
				if err != nil {
					t.Fatal(err)
				}
			}
			res, err = r.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != toolrun.StopEndTurn {
				t.Errorf("StopReason = %q, want end_turn", res.StopReason)
			}
			if got := runs.get("wire"); got != tt.wantRuns {
				t.Errorf("wire_money ran %d times, want %d", got, tt.wantRuns)
			}
			checkHistory(t, res.Messages)
		})
	}
}

// TestDecisionsStick checks that a call decided by a person cannot be
// decided again, by any path.
func TestDecisionsStick(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "deploy", map[string]any{})), toolruntest.Message(toolruntest.Text("ok"))))
	var runs counter
	deploy := toolrun.NewTool("deploy", "", func(ctx context.Context, in struct{}) (string, error) { runs.inc("deploy"); return "deployed", nil })
	deploy.Policy = policy.RequireApproval("deploys")
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{deploy}, &toolrun.Options{Logger: discard()})
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.Decide("t1", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Decide("t1", policy.Deny("changed my mind")); !errors.Is(err, toolrun.ErrNotAwaitingApproval) {
		t.Errorf("second Decide = %v, want ErrNotAwaitingApproval", err)
	}
	st := roundTrip(t, r.State())
	if err := st.Decide("t1", toolrun.Decision{Kind: toolrun.Allow, Input: json.RawMessage(`{}`)}); !errors.Is(err, toolrun.ErrNotAwaitingApproval) {
		t.Errorf("State.Decide after a decision = %v, want ErrNotAwaitingApproval", err)
	}
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn || runs.get("deploy") != 1 {
		t.Errorf("Run = %v, %v with %d deploys; want end_turn with 1", res.StopReason, err, runs.get("deploy"))
	}
}

// TestOneExecutorForEveryDriver checks that Run, Events and Advance run a
// turn's calls in the same batches: the calls before an exclusive tool's
// together, the exclusive one alone, then the rest.
func TestOneExecutorForEveryDriver(t *testing.T) {
	script := func() []toolruntest.Reply {
		return []toolruntest.Reply{
			toolruntest.Message(
				toolruntest.ToolUse("a", "read", map[string]any{"id": "a"}),
				toolruntest.ToolUse("b", "read", map[string]any{"id": "b"}),
				toolruntest.ToolUse("x", "excl", map[string]any{"id": "x"}),
				toolruntest.ToolUse("c", "read", map[string]any{"id": "c"}),
			),
			toolruntest.Message(toolruntest.Text("done")),
		}
	}
	// Each call records when it started and ended, in a sequence shared by
	// all; two calls ran together if their spans overlap. A call waits a
	// while for another to start, so that calls that may run together do.
	type span struct{ start, end int }
	type tracker struct {
		mu    sync.Mutex
		seq   int
		spans map[string]*span
	}
	newTools := func(tr *tracker) []toolrun.Tool {
		type idIn struct {
			ID string `json:"id"`
		}
		mk := func(name string) *toolrun.FuncTool {
			return toolrun.NewTool(name, "", func(ctx context.Context, in idIn) (string, error) {
				tr.mu.Lock()
				tr.seq++
				sp := &span{start: tr.seq}
				tr.spans[in.ID] = sp
				for deadline := time.Now().Add(time.Second); tr.seq == sp.start && time.Now().Before(deadline); {
					tr.mu.Unlock()
					time.Sleep(5 * time.Millisecond)
					tr.mu.Lock()
				}
				tr.seq++
				sp.end = tr.seq
				tr.mu.Unlock()
				return "ok", nil
			})
		}
		excl := mk("excl")
		excl.Exclusive = true
		return []toolrun.Tool{mk("read"), excl}
	}
	batchesOf := func(tr *tracker) map[string]string {
		out := map[string]string{}
		for id, a := range tr.spans {
			var with []string
			for other, b := range tr.spans {
				if other != id && a.start < b.end && b.start < a.end {
					with = append(with, other)
				}
			}
			slices.Sort(with)
			out[id] = strings.Join(with, ",")
		}
		return out
	}
	want := map[string]string{"a": "b", "b": "a", "x": "", "c": ""}
	drivers := map[string]func(t *testing.T, s *toolruntest.Server, tools []toolrun.Tool){
		"Run": func(t *testing.T, s *toolruntest.Server, tools []toolrun.Tool) {
			if _, err := toolrun.New(client(s), userParams("go"), tools, &toolrun.Options{Logger: discard()}).Run(t.Context()); err != nil {
				t.Fatal(err)
			}
		},
		"Events": func(t *testing.T, s *toolruntest.Server, tools []toolrun.Tool) {
			r := toolrun.New(client(s), userParams("go"), tools, &toolrun.Options{Logger: discard(), Stream: true})
			for _, err := range r.Events(t.Context()) {
				if err != nil {
					t.Fatal(err)
				}
			}
		},
		"Advance": func(t *testing.T, s *toolruntest.Server, tools []toolrun.Tool) {
			opts := &toolrun.Options{Logger: discard()}
			st := toolrun.New(client(s), userParams("go"), nil, nil).State()
			for range 5 {
				r, err := toolrun.Resume(client(s), st, tools, opts)
				if err != nil {
					t.Fatal(err)
				}
				plans, err := driver.Advance(t.Context(), r)
				if err != nil {
					t.Fatal(err)
				}
				st = r.State()
				if r.Result() != nil {
					return
				}
				for _, batch := range driver.Batches(plans) {
					// A runner is not safe for concurrent use: each call of
					// a batch runs on a runner of its own, as a workflow's
					// activities do.
					answered := make([]*toolrun.State, len(batch))
					var wg sync.WaitGroup
					for i, p := range batch {
						rp, err := toolrun.Resume(client(s), st, tools, opts)
						if err != nil {
							t.Fatal(err)
						}
						wg.Go(func() {
							if _, err := driver.ExecuteCall(t.Context(), rp, p.Call.ID); err != nil {
								t.Error(err)
							}
							answered[i] = rp.State()
						})
					}
					wg.Wait()
					for i, p := range batch {
						if res, ok := answered[i].CallResult(p.Call.ID); ok {
							if err := driver.SetResult(st, p.Call.ID, res); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			}
			t.Fatal("the run did not stop in 5 Advances")
		},
	}
	for name, drive := range drivers {
		t.Run(name, func(t *testing.T) {
			tr := &tracker{spans: map[string]*span{}}
			drive(t, toolruntest.New(t, toolruntest.Script(script()...)), newTools(tr))
			if diff := cmp.Diff(want, batchesOf(tr)); diff != "" {
				t.Errorf("calls running alongside each call (-want +got):\n%s", diff)
			}
		})
	}
}

// stallTransport answers every request with 200 and headers, then a body
// that sends head and nothing more until the request is cancelled: a
// server that stalls. It runs in memory, so a synctest bubble's clock
// moves while the body waits.
type stallTransport struct {
	head     string // the body's first bytes
	sse      bool
	requests int
	mu       sync.Mutex
}

func (s *stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	ct := "application/json"
	if s.sse {
		ct = "text/event-stream"
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Request: req,
		Body: &stalledBody{ctx: req.Context(), head: []byte(s.head)}}, nil
}

type stalledBody struct {
	ctx  context.Context
	head []byte
}

func (b *stalledBody) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (b *stalledBody) Close() error { return nil }

func stallClient(tr *stallTransport) anthropic.Client {
	return anthropic.NewClient(option.WithAPIKey("unused"), option.WithBaseURL("http://stall.invalid"),
		option.WithHTTPClient(&http.Client{Transport: tr}), option.WithMaxRetries(0))
}

// TestNoHangOnAStalledResponse checks that a response that stalls after
// its headers ends the attempt: a stream after Options.Timeouts.StreamIdle
// (and is retried like any stream fault), a response that is not streamed
// after Options.Timeouts.Request.
func TestNoHangOnAStalledResponse(t *testing.T) {
	tests := []struct {
		name         string
		tr           *stallTransport
		opts         toolrun.Options
		wantElapsed  time.Duration
		wantRequests int
		wantIdle     bool
	}{
		{
			name:         "stream idle",
			tr:           &stallTransport{sse: true, head: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"},
			opts:         toolrun.Options{Stream: true, Timeouts: toolrun.Timeouts{StreamIdle: 10 * time.Second}, StreamRetry: toolrun.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Second}},
			wantElapsed:  21 * time.Second, // 10 s idle, a 1 s backoff (less jitter), 10 s idle
			wantRequests: 2,
			wantIdle:     true,
		},
		{
			name:         "stream stalled before any event",
			tr:           &stallTransport{sse: true},
			opts:         toolrun.Options{Stream: true, Timeouts: toolrun.Timeouts{StreamIdle: 5 * time.Second}, StreamRetry: toolrun.RetryPolicy{MaxAttempts: 1}},
			wantElapsed:  5 * time.Second,
			wantRequests: 1,
			wantIdle:     true,
		},
		{
			name:         "unstreamed",
			tr:           &stallTransport{head: `{"id":"m",`},
			opts:         toolrun.Options{Timeouts: toolrun.Timeouts{Request: 30 * time.Second}},
			wantElapsed:  30 * time.Second,
			wantRequests: 1,
			wantIdle:     true, // a *TimeoutError with Request set
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := tt.opts
				opts.Logger = discard()
				start := time.Now()
				res, err := toolrun.New(stallClient(tt.tr), userParams("go"), nil, &opts).Run(t.Context())
				elapsed := time.Since(start)
				var te *toolrun.TurnError
				if !errors.As(err, &te) || res.StopReason != toolrun.StopError {
					t.Fatalf("Run = %v, %v; want StopError with a *TurnError", res.StopReason, err)
				}
				var idle *toolrun.TimeoutError
				if got := errors.As(err, &idle) && idle.Tool == ""; got != tt.wantIdle {
					t.Errorf("error %v wraps the stream's *TimeoutError: %v, want %v", err, got, tt.wantIdle)
				}
				if elapsed > tt.wantElapsed || elapsed < tt.wantElapsed-time.Second {
					t.Errorf("the run took %s of the bubble's time, want about %s", elapsed, tt.wantElapsed)
				}
				if tt.tr.requests != tt.wantRequests {
					t.Errorf("%d requests, want %d", tt.tr.requests, tt.wantRequests)
				}
			})
		})
	}
}

// TestCancelReturnsWhenAToolIgnoresItsContext checks that a cancelled run
// returns after Options.Timeouts.CancelGrace even while a tool ignores its context,
// that the call stays journaled as started, so that it is answered as
// interrupted and never run again, and that it is logged at Error.
func TestCancelReturnsWhenAToolIgnoresItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		var runs counter
		stubborn := toolrun.NewTool("wait", "", func(ctx context.Context, in struct{}) (string, error) {
			runs.inc("wait")
			<-release // ignores ctx
			return "late", nil
		})
		log, logs := newLogger()
		opts := &toolrun.Options{Logger: log, Timeouts: toolrun.Timeouts{CancelGrace: 3 * time.Second}}
		client := anthropic.NewClient(option.WithAPIKey("unused"), option.WithBaseURL("http://127.0.0.1:1"))
		r, err := toolrun.Resume(client, pendingState(t, "wait"), []toolrun.Tool{stubborn}, opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		start := time.Now()
		_, err = driver.ExecuteCall(ctx, r, "t1")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("ExecuteCall = %v, want context.Canceled", err)
		}
		if got := time.Since(start); got != 4*time.Second {
			t.Errorf("ExecuteCall returned after %s, want 4s: 1s to the cancel and 3s of grace", got)
		}
		if rec := logs.find(t, "toolrun: tool ignored its cancellation; abandoned, and answered as interrupted unless idempotent"); rec["level"] != "ERROR" {
			t.Errorf("abandoned call logged as %v, want ERROR", rec["level"])
		}
		st := roundTrip(t, r.State())
		if got := toolrun.PhaseOf(st, st.Calls()[0].ID); got != "started" {
			t.Fatalf("phase = %q, want started", got)
		}
		r, err = toolrun.Resume(client, st, []toolrun.Tool{stubborn}, opts)
		if err != nil {
			t.Fatal(err)
		}
		res, err := driver.ExecuteCall(t.Context(), r, "t1")
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(res.Err, toolrun.ErrInterrupted) || runs.get("wait") != 1 {
			t.Errorf("after resume: %v with %d runs, want ErrInterrupted and 1 run", res.Err, runs.get("wait"))
		}
	})
}

// TestWallTimeIsADeadline checks that Budget.WallTime ends a tool call in
// flight, not only the next step.
func TestWallTimeIsADeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := toolrun.NewTool("wait", "", func(ctx context.Context, in struct{}) (string, error) {
			select {
			case <-time.After(time.Hour):
				return "done", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
		opts := &toolrun.Options{Logger: discard(), Budget: toolrun.Budget{WallTime: 2 * time.Second}}
		client := anthropic.NewClient(option.WithAPIKey("unused"), option.WithBaseURL("http://127.0.0.1:1"))
		r, err := toolrun.Resume(client, pendingState(t, "wait"), []toolrun.Tool{slow}, opts)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = driver.ExecuteCall(t.Context(), r, "t1")
		if !errors.Is(err, toolrun.ErrBudget) {
			t.Fatalf("ExecuteCall = %v, want ErrBudget", err)
		}
		if got := time.Since(start); got != 2*time.Second {
			t.Errorf("the call was ended after %s, want 2s", got)
		}
		if res := r.Result(); res == nil || res.StopReason != toolrun.StopBudget || res.Budget != toolrun.BudgetWallTime {
			t.Errorf("Result = %+v, want a wall_time budget stop", res)
		}
	})
}

// TestRepeatedToolUseIDs checks that a response whose tool_use blocks share
// an id is asked for again, and a second one stops the run with a typed
// reason, leaving a valid history and running nothing.
func TestRepeatedToolUseIDs(t *testing.T) {
	dup := toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Rome"}),
		toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"}))
	tests := []struct {
		name     string
		script   []toolruntest.Reply
		wantStop toolrun.StopReason
		wantRuns int
	}{
		{"once, then a good response", []toolruntest.Reply{dup, toolruntest.Message(toolruntest.ToolUse("t2", "get_weather", map[string]any{"city": "Rome"})), toolruntest.Message(toolruntest.Text("ok"))}, toolrun.StopEndTurn, 1},
		{"twice", []toolruntest.Reply{dup, dup}, toolrun.StopError, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				s := toolruntest.New(t, toolruntest.Script(tt.script...))
				var calls counter
				log, logs := newLogger()
				res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: log, Stream: stream}).Run(t.Context())
				if res.StopReason != tt.wantStop {
					t.Errorf("stream %v: StopReason = %q (%v), want %q", stream, res.StopReason, err, tt.wantStop)
				}
				if got := errors.Is(err, toolrun.ErrMalformedResponse); got != (tt.wantStop == toolrun.StopError) {
					t.Errorf("stream %v: error %v wraps ErrMalformedResponse: %v", stream, err, got)
				}
				if got := calls.get("get_weather"); got != tt.wantRuns {
					t.Errorf("stream %v: the tool ran %d times, want %d", stream, got, tt.wantRuns)
				}
				checkHistory(t, res.Messages)
				if tt.wantStop == toolrun.StopError {
					logs.find(t, "toolrun: malformed response twice; the run stops")
				}
			}
		})
	}
}

// TestHookPanicsNeverCrash checks that a panic in any hook, on any
// goroutine, stops the run with a *HookError and leaves the process up.
func TestHookPanicsNeverCrash(t *testing.T) {
	two := func() []toolruntest.Reply {
		return []toolruntest.Reply{toolruntest.Message(
			toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Rome"}),
			toolruntest.ToolUse("t2", "get_weather", map[string]any{"city": "Oslo"})),
			toolruntest.Message(toolruntest.Text("ok"))}
	}
	boom := func() { panic("hook bug") }
	tests := []struct {
		name string
		hook string
		opts toolrun.Options
	}{
		{"AfterTool on two parallel calls", "AfterTool", toolrun.Options{AfterTool: func(context.Context, *toolrun.ToolResult) error { boom(); return nil }}},
		{"BeforeRequest", "BeforeRequest", toolrun.Options{BeforeRequest: func(context.Context, int, *anthropic.BetaMessageNewParams) error { boom(); return nil }}},
		{"AfterResponse", "AfterResponse", toolrun.Options{AfterResponse: func(context.Context, int, *anthropic.BetaMessage) error { boom(); return nil }}},
		{"Policy", "Policy", toolrun.Options{Policy: func(context.Context, toolrun.PolicyCall) toolrun.Decision { boom(); return toolrun.Decision{} }}},
		{"OnEvent", "OnEvent", toolrun.Options{OnEvent: func(context.Context, toolrun.Event) { boom() }}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, events := range []bool{false, true} {
				s := toolruntest.New(t, toolruntest.Script(two()...))
				var calls counter
				opts := tt.opts
				opts.Logger = discard()
				r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&calls)}, &opts)
				var err error
				if events {
					for _, e := range r.Events(t.Context()) {
						if e != nil {
							err = e
						}
					}
				} else {
					_, err = r.Run(t.Context())
				}
				var he *toolrun.HookError
				var pe *toolrun.PanicError
				if !errors.As(err, &he) || he.Hook != tt.hook || !errors.As(err, &pe) {
					t.Errorf("events %v: error = %v, want a *HookError of %s wrapping a *PanicError", events, err, tt.hook)
				}
				if res := r.Result(); res == nil || res.StopReason != toolrun.StopError {
					t.Errorf("events %v: Result = %+v, want StopError", events, res)
				}
			}
		})
	}
}

// TestCostIsNeverSilentlyZero checks that a model with no price fails a
// cost budget with a clear error, that Result says when its cost is
// incomplete, and that today's model names price on every platform.
func TestCostIsNeverSilentlyZero(t *testing.T) {
	t.Run("budget", func(t *testing.T) {
		s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("ok"))))
		params := userParams("go")
		params.Model = "claude-unknown-9"
		res, err := toolrun.New(client(s), params, nil, &toolrun.Options{Logger: discard(), Budget: toolrun.Budget{CostUSD: 1}}).Run(t.Context())
		if err == nil || !strings.Contains(err.Error(), `no price for the model "claude-unknown-9"`) || !strings.Contains(err.Error(), "Budget.Prices") {
			t.Errorf("Run = %v, want an error naming the unpriced model and Budget.Prices", err)
		}
		if len(s.Requests()) != 0 {
			t.Errorf("%d requests sent, want none", len(s.Requests()))
		}
		_ = res
	})
	t.Run("result", func(t *testing.T) {
		s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("ok"))))
		log, logs := newLogger()
		res, err := toolrun.New(client(s), userParams("go"), nil, &toolrun.Options{Logger: log}).Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if res.CostComplete || res.CostUSD != 0 {
			t.Errorf("CostComplete = %v, CostUSD = %v; want an incomplete $0", res.CostComplete, res.CostUSD)
		}
		if rec := logs.find(t, noPrice); rec["level"] != "WARN" || rec["model"] != "claude-test" {
			t.Errorf("no-price record = %v, want a WARN naming claude-test", rec)
		}
	})
	for _, model := range []string{
		"claude-sonnet-4-5-20250929", "claude-3-7-sonnet-latest", "claude-3-5-haiku-latest",
		"anthropic.claude-sonnet-4-5-20250929-v1:0", "us.anthropic.claude-opus-4-1-20250805-v1:0",
		"global.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-sonnet-4-5@20250929", "claude-opus-4-1@20250805",
		"arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0",
		string(anthropic.ModelClaudeSonnet5_5), string(anthropic.ModelClaudeOpus4_8), string(anthropic.ModelClaudeMythos5_2),
	} {
		t.Run(model, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("ok"))))
			params := userParams("go")
			params.Model = anthropic.Model(model)
			res, err := toolrun.New(client(s), params, nil, &toolrun.Options{Logger: discard(), Budget: toolrun.Budget{CostUSD: 10}}).Run(t.Context())
			if err != nil || !res.CostComplete || res.CostUSD <= 0 {
				t.Errorf("Run = %v; CostComplete %v, CostUSD %v; want a priced run", err, res.CostComplete, res.CostUSD)
			}
		})
	}
}

// TestInputEstimateIsAnUpperBound checks that an input-token budget holds
// for text of any script: the estimate never counts fewer tokens than
// bytes could make.
func TestInputEstimateIsAnUpperBound(t *testing.T) {
	text := strings.Repeat("東京の天気は晴れです。", 100) // 3 bytes a rune
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("ok"))))
	budget := int64(len(text)) // fewer than the request's bytes
	res, err := toolrun.New(client(s), userParams(text), nil, &toolrun.Options{Logger: discard(), Budget: toolrun.Budget{InputTokens: budget}}).Run(t.Context())
	if !errors.Is(err, toolrun.ErrBudget) || res.Budget != toolrun.BudgetInputTokens {
		t.Errorf("Run = %v (%q), want an input_tokens budget stop before the request", err, res.Budget)
	}
}

// TestStateSignature checks that a signed State that was changed is
// refused, and that an unchanged one resumes.
func TestStateSignature(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "deploy", map[string]any{})), toolruntest.Message(toolruntest.Text("ok"))))
	var runs counter
	deploy := toolrun.NewTool("deploy", "", func(ctx context.Context, in struct{}) (string, error) { runs.inc("deploy"); return "ok", nil })
	deploy.Policy = policy.RequireApproval("deploys")
	key := []byte("0123456789abcdef0123456789abcdef")
	opts := &toolrun.Options{Logger: discard(), StateKey: key}
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{deploy}, opts)
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(r.State())
	if err != nil {
		t.Fatal(err)
	}
	tampered := strings.Replace(string(data), `"decided_by":"policy"`, `"decided_by":"approval"`, 1)
	tampered = strings.Replace(tampered, `"kind":"defer"`, `"kind":"allow"`, 1)
	if tampered == string(data) {
		t.Fatal("the tampering changed nothing")
	}
	for _, tc := range []struct {
		name    string
		data    string
		opts    *toolrun.Options
		wantErr bool
	}{
		{"unchanged", string(data), opts, false},
		{"tampered", tampered, opts, true},
		{"another key", string(data), &toolrun.Options{Logger: discard(), StateKey: []byte("another key of 32 bytes, exactly")}, true},
		{"tampered, no key set: trusted as is", tampered, &toolrun.Options{Logger: discard()}, false},
	} {
		var st toolrun.State
		if err := json.Unmarshal([]byte(tc.data), &st); err != nil {
			t.Fatal(err)
		}
		_, err := toolrun.Resume(client(s), &st, []toolrun.Tool{deploy}, tc.opts)
		if got := errors.Is(err, toolrun.ErrStateSignature); got != tc.wantErr {
			t.Errorf("%s: Resume = %v, want ErrStateSignature: %v", tc.name, err, tc.wantErr)
		}
	}
}

// TestPolicyFuncReadsInputAsTheToolDoes checks that a key differing only in
// case from a field cannot make the policy see one value and the tool
// another.
func TestPolicyFuncReadsInputAsTheToolDoes(t *testing.T) {
	type readIn struct {
		Path string `json:"path"`
	}
	pol := policy.Func(func(ctx context.Context, in readIn) toolrun.Decision {
		if !strings.HasPrefix(in.Path, "/sandbox/") {
			return policy.Deny("outside the sandbox")
		}
		return toolrun.Decision{}
	})
	for _, tc := range []struct {
		input string
		want  toolrun.DecisionKind
	}{
		{`{"path":"/sandbox/notes.txt"}`, toolrun.Allow},
		{`{"path":"/etc/shadow"}`, toolrun.Deny},
		{`{"path":"/etc/shadow","PATH":"/sandbox/notes.txt"}`, toolrun.Deny},
		{`{"Path":"/sandbox/notes.txt"}`, toolrun.Deny},
	} {
		if got := pol(t.Context(), toolrun.PolicyCall{ToolCall: toolrun.ToolCall{ID: "t1", Name: "read", Input: json.RawMessage(tc.input)}}); got.Kind != tc.want {
			t.Errorf("policy(%s) = %v (%s), want %v", tc.input, got.Kind, got.Reason, tc.want)
		}
	}
}

// TestCacheControlOnAToolResult checks that AfterTool can put a cache
// breakpoint on a tool_result block, as the API's docs show.
func TestCacheControlOnAToolResult(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Rome"})),
		toolruntest.Message(toolruntest.Text("ok"))))
	var calls counter
	_, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
		Logger: discard(),
		AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
			r.CacheControl = anthropic.NewBetaCacheControlEphemeralParam()
			return nil
		},
	}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	body := string(s.Requests()[1].Body)
	if !strings.Contains(body, `"tool_use_id":"t1"`) || !strings.Contains(body, `"cache_control":{"type":"ephemeral"}`) {
		t.Errorf("second request lacks a cache breakpoint on the tool_result: %s", body)
	}
}
