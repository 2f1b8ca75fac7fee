package toolrun_test

import (
	"context"
	"encoding/json"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/toolruntest"
)

// thinkingParams returns params for a conversation with thinking on, whose
// block binding (prefix_mismatch_behavior) is behavior, "" for the default.
func thinkingParams(behavior anthropic.BetaThinkingPrefixMismatchBehavior) anthropic.BetaMessageNewParams {
	p := userParams("Weather in Paris and Oslo?")
	p.MaxTokens = 4096
	p.System = []anthropic.BetaTextBlockParam{{Text: "Be brief."}}
	p.Thinking = anthropic.BetaThinkingConfigParamUnion{OfEnabled: &anthropic.BetaThinkingConfigEnabledParam{
		BudgetTokens: 1024,
		BlockBinding: anthropic.BetaThinkingBlockBindingParam{PrefixMismatchBehavior: behavior},
	}}
	return p
}

// weatherCall returns a tool_use of get_weather for city.
func weatherCall(id, city string) toolruntest.Block {
	return toolruntest.ToolUse(id, "get_weather", map[string]any{"city": city})
}

// TestThinkingBindingThroughRewrites runs a conversation with thinking on
// against a server that binds thinking blocks to what came before them, as
// the API does, through each place where toolrun could rewrite history: a
// compaction (server-side and client-side), a hook that edits each request
// and a policy that edits a call's input, a tool input that cannot be sent
// back as the model wrote it, and a resume from a Store. Every request must
// be accepted with the default binding (error), so no thinking block the
// API made is sent back behind another prefix.
func TestThinkingBindingThroughRewrites(t *testing.T) {
	tests := []struct {
		name    string
		replies []toolruntest.Reply
		opts    func(t *testing.T, o *toolrun.Options)
		// between, if set, is called after the first response, and
		// returns the runner that goes on.
		between func(t *testing.T, r *toolrun.Runner, c anthropic.Client, tools []toolrun.Tool, o *toolrun.Options) *toolrun.Runner
	}{
		{
			name: "plain",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.Thinking("Paris first.", "sig_1"), weatherCall("toolu_1", "Paris")),
				toolruntest.Message(toolruntest.Thinking("Now Oslo.", "sig_2"), toolruntest.Text("Then Oslo."), weatherCall("toolu_2", "Oslo")),
				toolruntest.Message(toolruntest.Thinking("Done.", "sig_3"), toolruntest.Text("Both sunny.")),
			},
		},
		{
			name: "compaction",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.Thinking("Paris first.", "sig_1"), weatherCall("toolu_1", "Paris")),
				toolruntest.Message(toolruntest.Thinking("Now Oslo.", "sig_2"), weatherCall("toolu_2", "Oslo")),
				toolruntest.Message(toolruntest.Thinking("Done.", "sig_3"), toolruntest.Text("Both sunny.")),
			},
			between: compactNext,
		},
		{
			name: "client-side compaction",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.Thinking("Paris first.", "sig_1"), weatherCall("toolu_1", "Paris")),
				toolruntest.Message(toolruntest.Thinking("Summing up.", "sig_s"), toolruntest.Text("Paris is sunny; Oslo is left.")),
				toolruntest.Message(toolruntest.Thinking("Now Oslo.", "sig_2"), weatherCall("toolu_2", "Oslo")),
				toolruntest.Message(toolruntest.Thinking("Done.", "sig_3"), toolruntest.Text("Both sunny.")),
			},
			opts:    func(t *testing.T, o *toolrun.Options) { o.Compaction.ClientSide = true },
			between: compactNext,
		},
		{
			name: "hook and policy edits",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.Thinking("Paris first.", "sig_1"), weatherCall("toolu_1", "Paris")),
				toolruntest.Message(toolruntest.Thinking("Now Oslo.", "sig_2"), weatherCall("toolu_2", "Oslo")),
				toolruntest.Message(toolruntest.Thinking("Done.", "sig_3"), toolruntest.Text("Both sunny.")),
			},
			opts: func(t *testing.T, o *toolrun.Options) {
				o.BeforeRequest = func(ctx context.Context, turn int, p *anthropic.BetaMessageNewParams) error {
					p.Metadata.UserID = anthropic.String("user_1")
					p.Messages[0] = anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Weather in Paris and Oslo, in celsius?"))
					return nil
				}
				o.Policy = func(ctx context.Context, c toolrun.PolicyCall) toolrun.Decision {
					return toolrun.Decision{Kind: toolrun.Allow, Input: json.RawMessage(`{"city":"Paris","units":"celsius"}`)}
				}
			},
		},
		{name: "input that cannot be sent", replies: unsendableInput(`{"city":"Paris","days":1e999}`)},
		{name: "input that is not an object", replies: unsendableInput(`"Paris"`)},
		{
			name: "resume from a store",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.Thinking("Paris first.", "sig_1"), weatherCall("toolu_1", "Paris")),
				toolruntest.Message(toolruntest.Thinking("Now Oslo.", "sig_2"), toolruntest.Text("Then Oslo."),
					toolruntest.ToolUse("toolu_2", "get_weather", json.RawMessage(`{"city":"Oslo","days":1.0,"units":"celsius\u00e9"}`))),
				toolruntest.Message(toolruntest.Thinking("Done.", "sig_3"), toolruntest.Text("Both sunny.")),
			},
			opts: func(t *testing.T, o *toolrun.Options) {
				o.Store, o.RunID = &filestore.Store{Dir: t.TempDir()}, "run-1"
			},
			between: func(t *testing.T, r *toolrun.Runner, c anthropic.Client, tools []toolrun.Tool, o *toolrun.Options) *toolrun.Runner {
				r2, err := toolrun.Open(t.Context(), c, thinkingParams(""), tools, o)
				if err != nil {
					t.Fatal(err)
				}
				return r2
			},
		},
	}
	for _, tc := range tests {
		for _, noThread := range []bool{false, true} {
			name := tc.name
			if noThread {
				// The whole history is sent each turn: what toolrun
				// keeps, not the thread the server keeps.
				name += ", no thread"
			}
			t.Run(name, func(t *testing.T) {
				opts := toolruntest.Script(tc.replies...)
				opts.BindThinking = true
				s := toolruntest.New(t, opts)
				var calls counter
				o := toolrun.Options{Logger: discard(), NoThread: noThread}
				if tc.opts != nil {
					tc.opts(t, &o)
				}
				tools := []toolrun.Tool{weatherTool(&calls)}
				r := toolrun.New(client(s), thinkingParams(""), tools, &o)
				ctx := bounded(t)
				if tc.between != nil {
					for _, err := range r.Turns(ctx) {
						if err != nil {
							t.Fatal(err)
						}
						break
					}
					r = tc.between(t, r, client(s), tools, &o)
				}
				res, err := r.Run(ctx)
				if err != nil {
					t.Fatalf("run failed: %v", err)
				}
				if res.StopReason != toolrun.StopEndTurn {
					t.Fatalf("got stop %q (%s), want end_turn; requests refused: %v", res.StopReason, res.Detail, s.Errors())
				}
				for i, req := range s.Requests() {
					if req.Status != 200 {
						t.Errorf("request %d: got status %d, want 200", i+1, req.Status)
					}
				}
			})
		}
	}
}

// compactNext asks r to compact before its next request.
func compactNext(t *testing.T, r *toolrun.Runner, c anthropic.Client, tools []toolrun.Tool, o *toolrun.Options) *toolrun.Runner {
	r.CompactBeforeNextTurn()
	return r
}

// TestThinkingBlockBindingSent checks that the params' thinking
// block_binding reaches every request of a run, the compaction's
// included, and that with drop_block the server drops no thinking block
// toolrun sends back.
func TestThinkingBlockBindingSent(t *testing.T) {
	opts := toolruntest.Script(
		toolruntest.Message(toolruntest.Thinking("Paris first.", "sig_1"), weatherCall("toolu_1", "Paris")),
		toolruntest.Message(toolruntest.Thinking("Now Oslo.", "sig_2"), weatherCall("toolu_2", "Oslo")),
		toolruntest.Message(toolruntest.Thinking("Done.", "sig_3"), toolruntest.Text("Both sunny.")),
	)
	opts.BindThinking = true
	s := toolruntest.New(t, opts)
	var calls counter
	r := toolrun.New(client(s), thinkingParams(anthropic.BetaThinkingPrefixMismatchBehaviorDropBlock),
		[]toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard(), NoThread: true})
	ctx := bounded(t)
	for _, err := range r.Turns(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		r.CompactBeforeNextTurn()
		break
	}
	if _, err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if len(reqs) != 4 {
		t.Fatalf("got %d requests, want 4 (3 turns and a compaction)", len(reqs))
	}
	for i, req := range reqs {
		var thinking struct {
			BlockBinding struct {
				PrefixMismatchBehavior string `json:"prefix_mismatch_behavior"`
			} `json:"block_binding"`
		}
		if err := json.Unmarshal(req.Params.Raw["thinking"], &thinking); err != nil {
			t.Fatalf("request %d: thinking: %v", i+1, err)
		}
		if got, want := thinking.BlockBinding.PrefixMismatchBehavior, "drop_block"; got != want {
			t.Errorf("request %d: got prefix_mismatch_behavior %q, want %q", i+1, got, want)
		}
		if req.DroppedThinking != nil {
			t.Errorf("request %d: the server dropped thinking blocks %v", i+1, req.DroppedThinking)
		}
	}
}

// unsendableInput is a conversation whose first response calls
// get_weather with input, which toolrun must replace with {} to send it,
// beside a thinking block and a second call, then retries and answers.
func unsendableInput(input string) []toolruntest.Reply {
	return []toolruntest.Reply{
		toolruntest.Message(
			toolruntest.Thinking("Paris first.", "sig_1"),
			toolruntest.Block{Type: "tool_use", Raw: json.RawMessage(`{"type":"tool_use","id":"toolu_1","name":"get_weather","input":` + input + `}`)},
			toolruntest.Thinking("And Oslo alongside.", "sig_2"),
			weatherCall("toolu_2", "Oslo"),
		),
		toolruntest.Message(toolruntest.Thinking("Retry Paris.", "sig_3"), weatherCall("toolu_3", "Paris")),
		toolruntest.Message(toolruntest.Thinking("Done.", "sig_4"), toolruntest.Text("Both sunny.")),
	}
}
