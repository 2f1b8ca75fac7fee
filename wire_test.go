package toolrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// wireCheck is the differential check of the runner's incremental request
// encoding: every request body that leaves the client must equal, as JSON,
// what marshalling the full params of the RequestSent before it gives (with
// "stream": true for a streamed request). It watches a run through its
// OnEvent (observe) and the client's middleware (middleware).
type wireCheck struct {
	mu       sync.Mutex // guards want, bodies, problems
	want     any        // the full params of the last RequestSent, decoded
	bodies   int
	problems []string
}

// observe records the params of a RequestSent.
func (w *wireCheck) observe(e toolrun.Event) {
	rs, ok := e.(toolrun.RequestSent)
	if !ok {
		return
	}
	b, err := json.Marshal(rs.Params)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.problems = append(w.problems, fmt.Sprintf("turn %d: marshalling the params: %v", rs.Turn, err))
		return
	}
	var want map[string]any
	if err := json.Unmarshal(b, &want); err != nil {
		w.problems = append(w.problems, fmt.Sprintf("turn %d: decoding the params: %v", rs.Turn, err))
		return
	}
	if rs.Streamed {
		want["stream"] = true
	}
	w.want = want
}

// middleware compares each request body, every retry included, with the
// params of the last RequestSent.
func (w *wireCheck) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	var got any
	problem := ""
	if req.GetBody == nil {
		problem = "a request body cannot be read again (no GetBody), so a retry could not send it"
	} else if body, err := req.GetBody(); err != nil {
		problem = fmt.Sprintf("reading a request body: %v", err)
	} else {
		b, _ := io.ReadAll(body)
		if err := json.Unmarshal(b, &got); err != nil {
			problem = fmt.Sprintf("a request body is not JSON: %v", err)
		}
	}
	if m, ok := got.(map[string]any); ok && isCompactionRequest(m) {
		return next(req)
	}
	// A request that creates a message thread is the full params and the
	// thread field; one that continues a thread sends only what the thread
	// does not hold, which TestThreadConversationMatchesHistory checks
	// through the conversation the server rebuilds.
	if m, ok := got.(map[string]any); ok {
		if th, ok := m["thread"].(map[string]any); ok {
			if th["type"] != "create" {
				return next(req)
			}
			delete(m, "thread")
		}
	}
	w.mu.Lock()
	w.bodies++
	if problem == "" {
		if diff := cmp.Diff(w.want, got); diff != "" {
			problem = fmt.Sprintf("request body %d differs from the marshalled params (-want +got):\n%s", w.bodies, diff)
		}
	}
	if problem != "" {
		w.problems = append(w.problems, problem)
	}
	w.mu.Unlock()
	return next(req)
}

// err returns the first problem found, or nil.
func (w *wireCheck) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s (and %d more)", w.problems[0], len(w.problems)-1)
}

// count returns the number of bodies checked.
func (w *wireCheck) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bodies
}

// isCompactionRequest reports whether body is a compaction's own request
// (the client-side summary, with tool_choice none, or the server-side one,
// with "compaction"), which the client marshals from params no RequestSent
// carries.
func isCompactionRequest(body map[string]any) bool {
	if _, ok := body["compaction"]; ok {
		return true
	}
	tc, _ := body["tool_choice"].(map[string]any)
	return tc["type"] == "none"
}

// TestWireMatchesParams: over runs that edit the history in every way a
// caller or the runner can (SetMessages, AppendMessages, RetryTurn, a
// BeforeRequest hook, compaction, a resume from State, RemoveTools), every
// body sent without a thread (Options.NoThread) equals the marshalled full
// params of its RequestSent.
func TestWireMatchesParams(t *testing.T) {
	tests := []struct {
		name   string
		opts   toolrun.Options
		body   func(r *toolrun.Runner, turn *toolrun.Turn)
		resume int // resume from State after this turn
	}{
		{name: "plain"},
		{name: "streamed", opts: toolrun.Options{Stream: true}},
		{name: "no cache breakpoint", opts: toolrun.Options{NoCache: true}},
		{name: "edits", body: func(r *toolrun.Runner, turn *toolrun.Turn) {
			msgs := r.Messages()
			switch turn.Number {
			case 2:
				msgs[1] = anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{anthropic.NewBetaTextBlock("rewritten")}}}
				msgs = msgs[:len(msgs)-1] // the results of turn 1 with them
				r.SetMessages(append(msgs, anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go on"))))
			case 3:
				r.SetMessages(append(msgs, turn.Message.ToParam(), anthropic.NewBetaUserMessage(anthropic.NewBetaToolResultBlock(turn.ToolCalls[0].ID, "by hand", false))))
			case 4:
				r.RetryTurn()
				r.AppendMessages(anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("and again")))
			case 5:
				r.SetMessages(append([]anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("start over"))}, msgs[3:]...))
			case 6:
				r.RemoveTools("get_weather")
			}
		}},
		{name: "BeforeRequest", opts: toolrun.Options{BeforeRequest: func(_ context.Context, turn int, p *anthropic.BetaMessageNewParams) error {
			if turn%2 == 0 {
				p.Messages = append(p.Messages, anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("hint <&>")))
				p.System = []anthropic.BetaTextBlockParam{{Text: fmt.Sprintf("turn %d", turn)}}
			}
			return nil
		}}},
		{name: "client-side compaction", opts: toolrun.Options{Compaction: toolrun.Compaction{Threshold: 4000, ClientSide: true}}},
		{name: "server-side compaction", opts: toolrun.Options{Compaction: toolrun.Compaction{Threshold: 4000}}},
		{name: "resumed", resume: 3},
		{name: "resumed, streamed", opts: toolrun.Options{Stream: true}, resume: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const turns = 8
			var replies atomic.Int64
			s := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
				msgs := req.Params.Messages
				last := msgs[len(msgs)-1]
				if last.Role == "user" && len(last.Content) == 1 && strings.HasPrefix(last.Content[0].Text, "Summarize") {
					return toolruntest.Message(toolruntest.Text("summary so far"))
				}
				n := replies.Add(1)
				if n > turns {
					return toolruntest.Message(toolruntest.Text("done"))
				}
				r := toolruntest.Message(toolruntest.Text("checking"), toolruntest.ToolUse(fmt.Sprintf("t%d", n), "get_weather", map[string]any{"city": "Oslo"}))
				r.Usage = &toolruntest.Usage{InputTokens: int64(1000 * len(msgs)), OutputTokens: 10}
				return r
			}})
			wire := &wireCheck{}
			var calls counter
			opts := tt.opts
			opts.Logger = discard()
			opts.MaxTurns = 3 * turns
			// The whole-history path: on a thread most bodies continue it
			// and are checked by the thread tests instead.
			opts.NoThread = true
			opts.OnEvent = func(_ context.Context, e toolrun.Event) { wire.observe(e) }
			c := s.Client(option.WithMiddleware(wire.middleware))
			tools := []toolrun.Tool{weatherTool(&calls)}
			r := toolrun.New(c, userParams("weather"), tools, &opts)
			for {
				turn, err := r.Next(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if turn == nil {
					break
				}
				if tt.body != nil {
					tt.body(r, turn)
				}
				if turn.Number == tt.resume {
					var err error
					if r, err = toolrun.Resume(c, r.State(), tools, &opts); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := wire.err(); err != nil {
				t.Error(err)
			}
			if n := wire.count(); n < 3 {
				t.Errorf("got %d bodies checked, want at least 3", n)
			}
		})
	}
}
