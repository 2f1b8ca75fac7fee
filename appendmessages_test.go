package toolrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestAppendMessagesAwaitingApproval: messages appended while a turn
// awaits approval keep the turn, and follow its tool results in the next
// request, whether they come before or after the decision and across a
// State's JSON; with no turn in progress they are appended at once.
func TestAppendMessagesAwaitingApproval(t *testing.T) {
	user := func(text string) anthropic.BetaMessageParam {
		return anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(text))
	}
	for _, tt := range []struct {
		name         string
		appendFirst  bool // append before the decision
		throughState bool // resume from the State's JSON between the two
	}{
		{name: "after the decision"},
		{name: "before the decision", appendFirst: true},
		{name: "before the decision, through the State", appendFirst: true, throughState: true},
		{name: "after the decision, through the State", throughState: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("c1", "echo", map[string]string{"s": "x"})),
				toolruntest.Message(toolruntest.Text("done")),
				toolruntest.Message(toolruntest.Text("again")),
			))
			echo := toolrun.NewTool("echo", "echoes", func(ctx context.Context, in struct {
				S string `json:"s"`
			}) (string, error) {
				return "echo " + in.S, nil
			})
			tools := []toolrun.Tool{echo}
			opts := &toolrun.Options{Policy: policy.RequireApproval("a person decides"), Logger: slog.New(slog.DiscardHandler)}
			params := anthropic.BetaMessageNewParams{Model: "claude-test", MaxTokens: 100, Messages: []anthropic.BetaMessageParam{user("go")}}
			r := toolrun.New(s.Client(), params, tools, opts)
			res, err := r.Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
				t.Fatalf("got %v, %v; want awaiting approval", res.StopReason, err)
			}
			first := func() {
				if tt.appendFirst {
					r.AppendMessages(user("and more"))
				} else if err := r.Decide("c1", toolrun.Decision{}); err != nil {
					t.Fatal(err)
				}
			}
			second := func() {
				if tt.appendFirst {
					if err := r.Decide("c1", toolrun.Decision{}); err != nil {
						t.Fatal(err)
					}
				} else {
					r.AppendMessages(user("and more"))
				}
			}
			first()
			if tt.throughState {
				b, err := json.Marshal(r.State())
				if err != nil {
					t.Fatal(err)
				}
				var st toolrun.State
				if err := json.Unmarshal(b, &st); err != nil {
					t.Fatal(err)
				}
				if r, err = toolrun.Resume(s.Client(), &st, tools, opts); err != nil {
					t.Fatal(err)
				}
			}
			second()
			if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("after the decision: got %v, %v; want end_turn", res.StopReason, err)
			}
			r.AppendMessages(user("once more"))
			if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("after a message with no turn in progress: got %v, %v; want end_turn", res.StopReason, err)
			}
			var got [][]string
			for _, req := range s.Requests() {
				var conv []string
				for _, m := range req.Conversation {
					for _, b := range m.Content {
						conv = append(conv, m.Role+" "+b.Type+" "+b.ResultText()+b.ID)
					}
				}
				got = append(got, conv)
			}
			want := [][]string{
				{"user text go"},
				{"user text go", "assistant tool_use c1", "user tool_result echo x", "user text and more"},
				{"user text go", "assistant tool_use c1", "user tool_result echo x", "user text and more", "assistant text done", "user text once more"},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAppendMessagesHandedOutTurn: messages appended in the loop body of
// Turns keep the turn handed out: its tools run, and the messages follow
// its response and results in the next request; after a final answer the
// run goes on with them. After SetMessages or RetryTurn took the turn
// over, they are appended to the history as the caller left it; those
// appended before the take-over follow that history, not lost with the
// turn.
func TestAppendMessagesHandedOutTurn(t *testing.T) {
	user := func(text string) anthropic.BetaMessageParam {
		return anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(text))
	}
	for _, tt := range []struct {
		name  string
		first toolruntest.Reply
		body  func(r *toolrun.Runner, turn *toolrun.Turn)
		want  [][]string
		calls int // times the tool ran
	}{{
		name:  "a tool turn",
		first: toolruntest.Message(toolruntest.ToolUse("c1", "echo", map[string]string{"s": "x"})),
		body:  func(r *toolrun.Runner, _ *toolrun.Turn) { r.AppendMessages(user("and more")) },
		want: [][]string{
			{"user text go"},
			{"user text go", "assistant tool_use c1", "user tool_result echo x", "user text and more"},
		},
		calls: 1,
	}, {
		name:  "the final answer",
		first: toolruntest.Message(toolruntest.Text("hello")),
		body:  func(r *toolrun.Runner, _ *toolrun.Turn) { r.AppendMessages(user("and more")) },
		want: [][]string{
			{"user text go"},
			{"user text go", "assistant text hello", "user text and more"},
		},
	}, {
		name:  "a tool turn taken over with SetMessages",
		first: toolruntest.Message(toolruntest.ToolUse("c1", "echo", map[string]string{"s": "x"})),
		body: func(r *toolrun.Runner, turn *toolrun.Turn) {
			r.SetMessages(append(r.Messages(), turn.Message.ToParam(), anthropic.NewBetaUserMessage(anthropic.NewBetaToolResultBlock("c1", "by hand", false))))
			r.AppendMessages(user("and more"))
		},
		want: [][]string{
			{"user text go"},
			{"user text go", "assistant tool_use c1", "user tool_result by hand", "user text and more"},
		},
	}, {
		name:  "a tool turn retried",
		first: toolruntest.Message(toolruntest.ToolUse("c1", "echo", map[string]string{"s": "x"})),
		body: func(r *toolrun.Runner, _ *toolrun.Turn) {
			r.RetryTurn()
			r.AppendMessages(user("and more"))
		},
		want: [][]string{
			{"user text go"},
			{"user text go", "user text and more"},
		},
	}, {
		// The messages are the caller's words, not the turn's: taking the
		// turn over after appending them leaves out its response, not them.
		name:  "a tool turn appended to, then retried",
		first: toolruntest.Message(toolruntest.ToolUse("c1", "echo", map[string]string{"s": "x"})),
		body: func(r *toolrun.Runner, _ *toolrun.Turn) {
			r.AppendMessages(user("and more"))
			r.RetryTurn()
			r.AppendMessages(user("and then"))
		},
		want: [][]string{
			{"user text go"},
			{"user text go", "user text and more", "user text and then"},
		},
	}, {
		name:  "a tool turn appended to, then taken over with SetMessages",
		first: toolruntest.Message(toolruntest.ToolUse("c1", "echo", map[string]string{"s": "x"})),
		body: func(r *toolrun.Runner, turn *toolrun.Turn) {
			r.AppendMessages(user("and more"))
			r.SetMessages(append(r.Messages(), turn.Message.ToParam(), anthropic.NewBetaUserMessage(anthropic.NewBetaToolResultBlock("c1", "by hand", false))))
		},
		want: [][]string{
			{"user text go"},
			{"user text go", "assistant tool_use c1", "user tool_result by hand", "user text and more"},
		},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(tt.first, toolruntest.Message(toolruntest.Text("done"))))
			ran := 0
			echo := toolrun.NewTool("echo", "echoes", func(ctx context.Context, in struct {
				S string `json:"s"`
			}) (string, error) {
				ran++
				return "echo " + in.S, nil
			})
			params := anthropic.BetaMessageNewParams{Model: "claude-test", MaxTokens: 100, Messages: []anthropic.BetaMessageParam{user("go")}}
			r := toolrun.New(s.Client(), params, []toolrun.Tool{echo}, &toolrun.Options{Logger: slog.New(slog.DiscardHandler)})
			n := 0
			for turn, err := range r.Turns(t.Context()) {
				if err != nil {
					t.Fatal(err)
				}
				if n++; n == 1 {
					tt.body(r, turn)
				}
			}
			if res := r.Result(); res.StopReason != toolrun.StopEndTurn || res.Text() != "done" {
				t.Fatalf("got %v %q; want end_turn with the answer to the message", res.StopReason, res.Text())
			}
			var got [][]string
			for _, req := range s.Requests() {
				var conv []string
				for _, m := range req.Conversation {
					for _, b := range m.Content {
						conv = append(conv, m.Role+" "+b.Type+" "+b.ResultText()+b.ID)
					}
				}
				got = append(got, conv)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("the requests (-want +got):\n%s", diff)
			}
			if ran != tt.calls {
				t.Errorf("the tool ran %d times, want %d", ran, tt.calls)
			}
		})
	}
}

// A person approves the call a run awaits, and the user says something
// more at once: AppendMessages puts the words after the call's result, so
// that the model gets both in its next request.
func ExampleRunner_AppendMessages() {
	s := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "refund", map[string]string{"order": "A-17"})),
		toolruntest.Message(toolruntest.Text("Refunded A-17. B-2 next?")),
	))
	defer s.Close()
	refund := toolrun.NewTool("refund", "Refund an order", func(ctx context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "refunded " + in.Order, nil
	})
	refund.Policy = policy.RequireApproval("refunds need a person")
	r := toolrun.New(s.Client(), anthropic.BetaMessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Refund order A-17."))},
	}, []toolrun.Tool{refund}, &toolrun.Options{Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	res, _ := r.Run(ctx)
	fmt.Println(res.StopReason)

	r.Decide("toolu_1", toolrun.Decision{})
	r.AppendMessages(anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("And B-2 too.")))
	res, _ = r.Run(ctx)
	conv := s.Requests()[1].Conversation
	for _, m := range conv[len(conv)-2:] {
		fmt.Println(m.Role, m.Content[0].Type, m.Content[0].ResultText())
	}
	fmt.Println(res.StopReason)
	// Output:
	// awaiting_approval
	// user tool_result refunded A-17
	// user text And B-2 too.
	// end_turn
}
