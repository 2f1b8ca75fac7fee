//go:build hunt

package toolrun_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestHuntServerSideCompactionIsAccounted: Result.Usage "adds up every
// response of the run, compactions included", and every budget is checked
// against that sum. The default (server-side) compaction's response
// carries its usage in usage.iterations, with a top-level usage of 0 (the
// compaction request is answered by the API itself); the runner reads only
// the top-level usage (result.go usageOf, request.go account,
// compaction.go compact), so a compaction (the whole history as input,
// the summary as output) adds nothing to Result.Usage, Result.CostUSD or
// Compacted.Usage, and Budget.InputTokens/OutputTokens/CostUSD go on
// from a total that leaves it out: a run can spend past its budget. What
// should hold: the runner's usage equals what the API billed
// (usage.iterations summed when present), and Compacted.Usage is the
// compaction's cost.
func TestHuntServerSideCompactionIsAccounted(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	var calls counter
	var compacted []toolrun.Compacted
	p := userParams("weather in Oslo, please, and keep a long note of it for later")
	p.Model = "claude-sonnet-4-5"
	res, err := toolrun.New(client(s), p, []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
		Logger:     discard(),
		Compaction: toolrun.Compaction{Threshold: 1},
		OnEvent: func(ctx context.Context, e toolrun.Event) {
			if c, ok := e.(toolrun.Compacted); ok {
				compacted = append(compacted, c)
			}
		},
	}).Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
	}
	if len(compacted) != 1 || compacted[0].ClientSide {
		t.Fatalf("compactions %+v, want one server-side", compacted)
	}
	billed := s.Usage()
	want := toolrun.Usage{
		InputTokens:              billed.InputTokens,
		OutputTokens:             billed.OutputTokens,
		CacheCreationInputTokens: billed.CacheCreationInputTokens,
		CacheReadInputTokens:     billed.CacheReadInputTokens,
	}
	if diff := cmp.Diff(want, res.Usage); diff != "" {
		t.Errorf("Result.Usage differs from what the API billed, compaction included (-billed +counted):\n%s", diff)
	}
	if got := compacted[0].Usage; got == (toolrun.Usage{}) {
		t.Errorf("Compacted.Usage = %+v, want the compaction request's cost (usage.iterations)", got)
	}
}

// TestHuntCompactionWithLargeMaxTokens: with max_tokens above 21,333 (a
// common setting: 32k or 64k for today's models) every compaction fails
// and the run stops with an error, client-side or server-side. The
// compaction's request goes through r.messages.New with no request
// option (compaction.go, compact and summarise), so the SDK computes its
// own non-streaming timeout from max_tokens and refuses the request
// before sending it: "streaming is required for operations that may take
// longer than 10 minutes". The turns' own requests pass
// option.WithRequestTimeout(Timeouts.Request) (request.go, send), which
// is why they do not hit it. What should hold: a compaction request is
// sent as the turns' are (with Timeouts.Request, so also bounded by the
// caller's timeout, or streamed), and the run compacts and goes on.
func TestHuntCompactionWithLargeMaxTokens(t *testing.T) {
	for _, clientSide := range []bool{false, true} {
		t.Run(map[bool]string{false: "server-side", true: "client-side"}[clientSide], func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
				msgs := req.Conversation
				last := msgs[len(msgs)-1]
				switch {
				case msgs[0].Role == "assistant" || len(msgs) == 1 && strings.HasPrefix(msgs[0].Content[0].Text, "This conversation was compacted"):
					return toolruntest.Message(toolruntest.Text("done"))
				case last.Role == "user" && len(last.Content) == 1 && strings.HasPrefix(last.Content[0].Text, "Summarize the conversation"):
					return toolruntest.Message(toolruntest.Text("Checked Oslo."))
				}
				return toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", len(msgs)), "get_weather", map[string]any{"city": "Oslo"}))
			}})
			var calls counter
			p := userParams("weather")
			p.MaxTokens = 64000
			res, err := toolrun.New(client(s), p, []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
				Logger:     discard(),
				Compaction: toolrun.Compaction{Threshold: 1, ClientSide: clientSide},
			}).Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run = %q, %v; want end_turn after one compaction", res.StopReason, err)
			}
		})
	}
}

// TestHuntCompactionRequestSkipsBeforeRequest: Options.BeforeRequest is
// "called before each request with the params about to be sent", the one
// hook that may change a request (to take a secret out of the history, to
// set metadata). The compaction's request, which carries the whole
// history, is built and sent in compaction.go (compact, summarise) without
// it, and without the RequestSent and ResponseReceived events that
// observers (transcripts, OpenTelemetry) record every request by. Here
// BeforeRequest redacts a secret from every request; the compaction
// request sends it to the API all the same. What should hold: every
// request the runner sends, the compaction's included, goes through
// BeforeRequest (turn as for the turn it precedes) and is announced by
// RequestSent.
func TestHuntCompactionRequestSkipsBeforeRequest(t *testing.T) {
	const secret = "hunter2-SECRET"
	for _, clientSide := range []bool{false, true} {
		t.Run(map[bool]string{false: "server-side", true: "client-side"}[clientSide], func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
				msgs := req.Conversation
				last := msgs[len(msgs)-1]
				switch {
				case msgs[0].Role == "assistant" || strings.HasPrefix(msgs[0].Content[0].Text, "This conversation was compacted"):
					return toolruntest.Message(toolruntest.Text("done"))
				case last.Role == "user" && len(last.Content) == 1 && strings.HasPrefix(last.Content[0].Text, "Summarize the conversation"):
					return toolruntest.Message(toolruntest.Text("Checked Oslo."))
				}
				return toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", len(msgs)), "get_weather", map[string]any{"city": "Oslo"}))
			}})
			var calls counter
			redact := func(ctx context.Context, turn int, p *anthropic.BetaMessageNewParams) error {
				for i, m := range p.Messages {
					if m.OfUser == nil {
						continue
					}
					var blocks []anthropic.BetaContentBlockParamUnion
					for _, b := range m.OfUser.Content {
						if b.OfText != nil && strings.Contains(b.OfText.Text, secret) {
							b = anthropic.NewBetaTextBlock(strings.ReplaceAll(b.OfText.Text, secret, "[redacted]"))
						}
						blocks = append(blocks, b)
					}
					p.Messages[i] = anthropic.NewBetaUserMessage(blocks...)
				}
				return nil
			}
			sent := 0
			res, err := toolrun.New(client(s), userParams("weather in Oslo; my password is "+secret), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
				Logger:        discard(),
				Compaction:    toolrun.Compaction{Threshold: 1, ClientSide: clientSide},
				BeforeRequest: redact,
				OnEvent: func(ctx context.Context, e toolrun.Event) {
					if _, ok := e.(toolrun.RequestSent); ok {
						sent++
					}
				},
			}).Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
			}
			for i, req := range s.Requests() {
				_, compaction := req.Params.Raw["compaction"]
				compaction = compaction || strings.Contains(string(req.Body), "Summarize the conversation")
				if compaction && strings.Contains(string(req.Body), secret) {
					t.Errorf("request %d of %d, the compaction's, sent the secret that BeforeRequest redacts from every request", i+1, len(s.Requests()))
				}
			}
			if sent != len(s.Requests()) {
				t.Errorf("RequestSent announced %d requests, the server got %d", sent, len(s.Requests()))
			}
		})
	}
}
