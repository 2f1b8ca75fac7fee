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
	"github.com/toolrun/toolrun/toolruntest"
)

// TestAppendAfterTurn: messages appended with AppendAfterTurn while a
// turn awaits approval follow the turn's tool results in the next
// request, whether they come before or after the decision and across a
// State's JSON; with no turn in progress they are appended at once.
func TestAppendAfterTurn(t *testing.T) {
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
			opts := &toolrun.Options{Policy: toolrun.RequireApproval("a person decides"), Logger: slog.New(slog.DiscardHandler)}
			params := anthropic.BetaMessageNewParams{Model: "claude-test", MaxTokens: 100, Messages: []anthropic.BetaMessageParam{user("go")}}
			r := toolrun.New(s.Client(), params, tools, opts)
			res, err := r.Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
				t.Fatalf("got %v, %v; want awaiting approval", res.StopReason, err)
			}
			first := func() {
				if tt.appendFirst {
					r.AppendAfterTurn(user("and more"))
				} else if err := r.Decide("c1", toolrun.AllowCall()); err != nil {
					t.Fatal(err)
				}
			}
			second := func() {
				if tt.appendFirst {
					if err := r.Decide("c1", toolrun.AllowCall()); err != nil {
						t.Fatal(err)
					}
				} else {
					r.AppendAfterTurn(user("and more"))
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
			r.AppendAfterTurn(user("once more"))
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

// A person approves the call a run awaits, and the user says something
// more at once: AppendAfterTurn puts the words after the call's result, so
// that the model gets both in its next request.
func ExampleRunner_AppendAfterTurn() {
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
	refund.Policy = toolrun.RequireApproval("refunds need a person")
	r := toolrun.New(s.Client(), anthropic.BetaMessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Refund order A-17."))},
	}, []toolrun.Tool{refund}, &toolrun.Options{Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	res, _ := r.Run(ctx)
	fmt.Println(res.StopReason)

	r.Decide("toolu_1", toolrun.AllowCall())
	r.AppendAfterTurn(anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("And B-2 too.")))
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
