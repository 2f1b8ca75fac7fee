package toolrun

import (
	"context"
	"log/slog"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun/toolruntest"
)

// These tests pin what a runner shares with other runners and what it
// keeps while a run is held (issue 15: live heap per held run), from
// inside: sharing is invisible to callers but for memory, and the tests in
// package toolrun_test check that behaviour stays as it was.

type heldIn struct {
	S string `json:"s"`
}

func heldTools() (echo, deploy *FuncTool) {
	echo = NewTool("echo", "echoes", func(ctx context.Context, in heldIn) (string, error) { return in.S, nil })
	deploy = NewTool("deploy", "deploys", func(ctx context.Context, in heldIn) (string, error) { return "deployed " + in.S, nil })
	deploy.Policy = func(context.Context, PolicyCall) Decision { return Decision{Kind: Defer, Reason: "deploys"} }
	return echo, deploy
}

func heldParams() anthropic.BetaMessageNewParams {
	return anthropic.BetaMessageNewParams{Model: anthropic.Model("claude-sonnet-4-5"), MaxTokens: 1024,
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))}}
}

func heldClient(s *toolruntest.Server) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(s.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

// TestRunnersShare: the runners of one Template share its copy of the
// client, tools and Options; runners of New each have their own, and a
// change to the caller's Options or tools after a Template was built
// changes none of its runners.
func TestRunnersShare(t *testing.T) {
	echo, deploy := heldTools()
	tools := []Tool{echo, deploy}
	c := anthropic.NewClient(option.WithAPIKey("test"))
	opts := &Options{Logger: slog.New(slog.DiscardHandler), MaxTurns: 7}
	tpl := newTemplate(c, tools, opts)
	r1, r2 := tpl.New(heldParams()), tpl.New(heldParams())
	if r1.opts != r2.opts || r1.log != r2.log || r1.messages != r2.messages {
		t.Errorf("two runners of one Template hold copies of their own, want one shared")
	}
	if r1.set != r2.set || &r1.tools[0] != &r2.tools[0] || &r1.toolDefs[0] != &r2.toolDefs[0] {
		t.Errorf("two runners of one Template hold definitions of their own, want one set shared")
	}
	if n1, n2 := New(c, heldParams(), tools, opts), New(c, heldParams(), tools, opts); n1.opts == n2.opts || n1.set == n2.set {
		t.Errorf("two runners of New share their Options (%v) or tools (%v), want copies of their own", n1.opts == n2.opts, n1.set == n2.set)
	}

	opts.MaxTurns = 8
	echo.Timeout = 5 * time.Second
	r3 := tpl.New(heldParams())
	if r3.opts.MaxTurns != 7 || r3.toolNamed("echo").config.Timeout != 0 {
		t.Errorf("after a change of the caller's Options and tool: got MaxTurns %d, Timeout %v; want the Template's 7 and 0", r3.opts.MaxTurns, r3.toolNamed("echo").config.Timeout)
	}
	if got := New(c, heldParams(), tools, opts).toolNamed("echo").config.Timeout; got != 5*time.Second {
		t.Errorf("a runner of New after a change of the tool's settings: Timeout %v, want 5s", got)
	}
	t.Setenv(logEnv, "info")
	if r4 := New(c, heldParams(), tools, opts); r4.log.routine != slog.LevelInfo {
		t.Errorf("after %s=info: got routine level %v, want INFO", logEnv, r4.log.routine)
	}

	r1.RemoveTools("echo")
	if r1.toolNamed("echo") != nil || r2.toolNamed("echo") == nil {
		t.Errorf("RemoveTools on one runner: got echo in it %v, in another %v; want false, true", r1.toolNamed("echo") != nil, r2.toolNamed("echo") != nil)
	}
	if diff := cmp.Diff([]string{"deploy", "echo"}, r2.toolNames()); diff != "" {
		t.Errorf("the other runner's tool names (-want +got):\n%s", diff)
	}
	if len(r1.toolDefs) != 1 || len(r2.toolDefs) != 2 {
		t.Errorf("tool definitions sent: got %d and %d, want 1 and 2", len(r1.toolDefs), len(r2.toolDefs))
	}
}

// TestHeldRunKeepsJSON: a run held awaiting approval keeps neither the
// decoded last response nor its encoded history, and gives the same
// result and events as before when asked and when it goes on.
func TestHeldRunKeepsJSON(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.Text("echo first"), toolruntest.ToolUse("e1", "echo", heldIn{S: "a"})),
		toolruntest.Message(toolruntest.Text("now deploy"), toolruntest.ToolUse("d1", "deploy", heldIn{S: "b"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	echo, deploy := heldTools()
	var finished []*anthropic.BetaMessage
	opts := &Options{Logger: slog.New(slog.DiscardHandler), OnEvent: func(ctx context.Context, e Event) {
		if f, ok := e.(TurnFinished); ok {
			finished = append(finished, f.Message)
		}
	}}
	r := New(heldClient(s), heldParams(), []Tool{echo, deploy}, opts)
	res, err := r.Run(t.Context())
	if err != nil || res.StopReason != StopAwaitingApproval {
		t.Fatalf("Run = %v, %v; want %s", res.StopReason, err, StopAwaitingApproval)
	}
	if res.Message == nil || res.Text() != "now deploy" {
		t.Fatalf("Result.Message = %v, want the response that asks to deploy", res.Message)
	}
	if r.last != nil || r.lastRaw == "" || r.wire != nil {
		t.Errorf("held run: decoded response kept %v, its JSON kept %v, wire cache kept %v; want false, true, false",
			r.last != nil, r.lastRaw != "", r.wire != nil)
	}
	again := r.Result()
	if again.Message == res.Message {
		t.Errorf("Result().Message is the handed-out value, want one decoded afresh")
	}
	if diff := cmp.Diff(res.Message.RawJSON(), again.Message.RawJSON()); diff != "" {
		t.Errorf("Result().Message (-Run's +Result's):\n%s", diff)
	}
	if again.Message.ID != res.Message.ID || again.Text() != res.Text() || len(again.Message.Content) != len(res.Message.Content) {
		t.Errorf("Result().Message = %q %q, want %q %q", again.Message.ID, again.Text(), res.Message.ID, res.Text())
	}
	if diff := cmp.Diff(len(res.Messages), len(again.Messages)); diff != "" || len(again.Pending) != 1 || again.StopReason != res.StopReason {
		t.Errorf("Result() = %d messages, %d pending, %s; want %d, 1, %s", len(again.Messages), len(again.Pending), again.StopReason, len(res.Messages), res.StopReason)
	}
	if err := r.Decide("d1", Decision{}); err != nil {
		t.Fatal(err)
	}
	res2, err := r.Run(t.Context())
	if err != nil || res2.StopReason != StopEndTurn || res2.Text() != "done" {
		t.Fatalf("Run after approval = %v, %q, %v; want end_turn, done", res2.StopReason, res2.Text(), err)
	}
	if len(finished) != 3 || finished[1] == nil || finished[1].ID != res.Message.ID {
		t.Fatalf("TurnFinished messages = %v, want the held turn's response (%s) second of 3", finished, res.Message.ID)
	}
	if messageText(finished[1]) != "now deploy" {
		t.Errorf("TurnFinished of the held turn: text %q, want %q", messageText(finished[1]), "now deploy")
	}
}
