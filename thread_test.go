package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

func threadScript() []toolruntest.Reply {
	return []toolruntest.Reply{
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
		toolruntest.Message(toolruntest.ToolUse("t2", "get_weather", map[string]any{"city": "Bergen"})),
		toolruntest.Message(toolruntest.Text("done")),
	}
}

// TestThread: on a message thread each request sends only what is new, the
// server holds the rest, and the run ends as it would without a thread.
func TestThread(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(threadScript()...))
			var calls counter
			res, err := toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
				Logger: discard(), Stream: stream,
			}).Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != toolrun.StopEndTurn || calls.get("get_weather") != 2 {
				t.Fatalf("stop %q with %d tool runs, want end_turn with 2", res.StopReason, calls.get("get_weather"))
			}
			var sent, whole []int
			for _, r := range s.Requests() {
				sent = append(sent, len(r.Params.Messages))
				whole = append(whole, len(r.Conversation))
				if r.Params.Thread == nil {
					t.Errorf("request without a thread: %s", r.Body)
				}
			}
			// The first request creates the thread with the question; the
			// thread holds each reply, so each later request sends only the
			// tool results.
			if diff := cmp.Diff([]int{1, 1, 1}, sent); diff != "" {
				t.Errorf("messages sent per request (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]int{1, 3, 5}, whole); diff != "" {
				t.Errorf("conversation per request (-want +got):\n%s", diff)
			}
			checkHistory(t, res.Messages)
			if len(res.Messages) != 6 {
				t.Errorf("runner's history has %d messages, want all 6", len(res.Messages))
			}
		})
	}
}

// TestThreadUnsupportedFallsBack: a request the thread cannot take is sent
// again with the whole history, and the run goes on.
func TestThreadUnsupportedFallsBack(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			s := toolruntest.New(nil, toolruntest.Options{ThreadUnsupported: []string{"tools"}, Replies: threadScript()})
			t.Cleanup(s.Close)
			var calls counter
			res, err := toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
				Logger: discard(), Stream: stream,
			}).Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != toolrun.StopEndTurn || calls.get("get_weather") != 2 {
				t.Fatalf("stop %q with %d tool runs, want end_turn with 2", res.StopReason, calls.get("get_weather"))
			}
			reqs := s.Requests()
			// The first request, on a thread, is refused; it and every later
			// one go without a thread, with the whole history.
			var threaded []bool
			var sent []int
			for _, r := range reqs {
				threaded = append(threaded, r.Params.Thread != nil)
				sent = append(sent, len(r.Params.Messages))
			}
			if diff := cmp.Diff([]bool{true, false, false, false}, threaded); diff != "" {
				t.Errorf("requests on a thread (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]int{1, 1, 3, 5}, sent); diff != "" {
				t.Errorf("messages per request (-want +got):\n%s", diff)
			}
			checkHistory(t, res.Messages)
		})
	}
}

// TestThreadToolsChanged: changing the tools mid-run, which a thread cannot
// take, still works: the run goes on.
func TestThreadToolsChanged(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(threadScript()...))
	var calls, writes counter
	r := toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls), writeTool(&writes)}, &toolrun.Options{
		Logger: discard(),
	})
	for turn, err := range r.Turns(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if turn.Number == 1 {
			r.RemoveTools("write_file")
		}
	}
	res := r.Result()
	if res.StopReason != toolrun.StopEndTurn || calls.get("get_weather") != 2 {
		t.Fatalf("stop %q with %d tool runs, want end_turn with 2", res.StopReason, calls.get("get_weather"))
	}
	if got := len(s.Requests()[1].Params.Tools); got != 1 {
		t.Errorf("second request sent %d tools, want 1", got)
	}
	checkHistory(t, res.Messages)
}

// threadView is a message as the API sees it, for comparing the runner's
// history with the conversation the fake server puts together from a
// thread's held messages and a request's new ones.
func threadView(role string, blocks []toolruntest.Block) string {
	s := role + ":"
	for _, b := range blocks {
		s += " " + b.Type + "(" + b.Text + b.ID + b.ToolUseID + ")"
	}
	return s
}

// TestThreadConversationMatchesHistory: on a thread, every request stands
// for exactly the history the runner holds — the differential test of the
// thread encoding — through edits of one request (a BeforeRequest hook's
// extra message), edits of the history (a message replaced), a resume
// from State and streaming; and the requests after an edit create a new
// thread, while the others send only what is new.
func TestThreadConversationMatchesHistory(t *testing.T) {
	script := func() []toolruntest.Reply {
		var rs []toolruntest.Reply
		for i := range 7 {
			rs = append(rs, toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", i), "get_weather", map[string]any{"city": fmt.Sprintf("c%d", i)})))
		}
		return append(rs, toolruntest.Message(toolruntest.Text("done")))
	}
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(script()...))
			var calls counter
			var want [][]string // the runner's view of each request
			opts := &toolrun.Options{Logger: discard(), Stream: stream, MaxTurns: 5,
				OnEvent: func(ctx context.Context, e toolrun.Event) {
					if rs, ok := e.(toolrun.RequestSent); ok {
						b, _ := json.Marshal(rs.Params.Messages)
						var raw []struct {
							Role    string            `json:"role"`
							Content []json.RawMessage `json:"content"`
						}
						json.Unmarshal(b, &raw)
						var view []string
						for _, m := range raw {
							var blocks []toolruntest.Block
							for _, c := range m.Content {
								var b struct {
									Type, Text, ID string
									ToolUseID      string `json:"tool_use_id"`
								}
								json.Unmarshal(c, &b)
								blocks = append(blocks, toolruntest.Block{Type: b.Type, Text: b.Text, ID: b.ID, ToolUseID: b.ToolUseID})
							}
							view = append(view, threadView(m.Role, blocks))
						}
						want = append(want, view)
					}
				},
				BeforeRequest: func(ctx context.Context, turn int, p *anthropic.BetaMessageNewParams) error {
					switch turn {
					case 3: // this request only: a note the history does not keep
						p.Messages = append(p.Messages, anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("note")))
					}
					return nil
				},
			}
			r := toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls)}, opts)
			res, err := r.Run(t.Context())
			if err != nil && !errors.Is(err, toolrun.ErrMaxTurns) {
				t.Fatal(err)
			}
			// An edit of the history: the first message replaced by an equal
			// one (a new value, as compaction or SetMessages gives).
			msgs := r.Messages()
			msgs[0] = anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("weather"))
			r.SetMessages(msgs)
			r.SetMaxTurns(6)
			if _, err := r.Run(t.Context()); err != nil && !errors.Is(err, toolrun.ErrMaxTurns) {
				t.Fatal(err)
			}
			// A resume from State: a new thread.
			opts.MaxTurns = toolrun.Unlimited
			r2, err := toolrun.Resume(client(s), r.State(), []toolrun.Tool{weatherTool(&calls)}, opts)
			if err != nil {
				t.Fatal(err)
			}
			r2.SetMaxTurns(toolrun.Unlimited)
			if res, err = r2.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("resumed run = %v, %v; want end_turn", res.StopReason, err)
			}
			reqs := s.Requests()
			if len(reqs) != len(want) {
				t.Fatalf("%d requests reached the server, the runner sent %d", len(reqs), len(want))
			}
			var created []int
			for i, req := range reqs {
				var got []string
				for _, m := range req.Conversation {
					got = append(got, threadView(m.Role, m.Content))
				}
				if diff := cmp.Diff(want[i], got); diff != "" {
					t.Errorf("request %d: the conversation the API sees differs from the runner's (-runner +API):\n%s", i+1, diff)
				}
				if req.Params.Thread == nil {
					t.Errorf("request %d without a thread", i+1)
					continue
				}
				if req.Params.Thread.Type == "create" {
					created = append(created, i+1)
				} else if n, wantN := len(req.Params.Messages), map[bool]int{false: 1, true: 2}[i+1 == 3]; n != wantN {
					t.Errorf("request %d continues its thread with %d messages, want %d (the tool results, and the hook's note)", i+1, n, wantN)
				}
			}
			// 1: the first; 4: after the hook's note, which the API holds
			// and the history does not; 6: after the edit; 7: resumed.
			if diff := cmp.Diff([]int{1, 4, 6, 7}, created); diff != "" {
				t.Errorf("requests that created a thread (-want +got):\n%s", diff)
			}
			checkHistory(t, res.Messages)
		})
	}
}
