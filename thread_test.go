package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
			if _, err := r.Run(t.Context()); err != nil && !errors.Is(err, toolrun.ErrMaxTurns) {
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
			opts.MaxTurns = -1
			r2, err := toolrun.Resume(client(s), r.State(), []toolrun.Tool{weatherTool(&calls)}, opts)
			if err != nil {
				t.Fatal(err)
			}
			r2.SetMaxTurns(-1)
			res, err := r2.Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
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

// rejectThreads answers as Bedrock and Vertex do a request with a field
// they do not know: any request on a thread gets a 400
// invalid_request_error. Others are answered by the conversation's length,
// from threadScript.
func rejectThreads(r *toolruntest.Request) toolruntest.Reply {
	if r.Params.Thread != nil {
		return toolruntest.Reply{Fault: toolruntest.Fault{Status: 400, ErrorType: "invalid_request_error",
			Message: "thread: Extra inputs are not permitted"}}
	}
	script := threadScript()
	if i := len(r.Conversation) / 2; i < len(script) {
		return script[i]
	}
	return toolruntest.Message(toolruntest.Text("too long"))
}

const threadRefusedLog = "toolrun: the API refused a message thread; the run goes on without one, sending the whole history (set Options.NoThread for this platform)"

// TestThreadRejectedFallsBack: a platform that rejects the thread field with
// a plain 400 (no thread error code) gets the first request again without
// it, and the rest of the run goes without a thread, with one Warn record
// naming the error.
func TestThreadRejectedFallsBack(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Options{Func: rejectThreads})
			logger, logs := newLogger()
			var calls counter
			res, err := toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
				Logger: logger, Stream: stream,
			}).Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != toolrun.StopEndTurn || calls.get("get_weather") != 2 {
				t.Fatalf("stop %q with %d tool runs, want end_turn with 2", res.StopReason, calls.get("get_weather"))
			}
			var got []string
			for _, r := range s.Requests() {
				got = append(got, fmt.Sprintf("%d thread=%t messages=%d", r.Status, r.Params.Thread != nil, len(r.Params.Messages)))
			}
			want := []string{"400 thread=true messages=1", "200 thread=false messages=1", "200 thread=false messages=3", "200 thread=false messages=5"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			var warned []map[string]any
			for _, r := range logs.records(t) {
				if r["msg"] == threadRefusedLog {
					warned = append(warned, r)
				}
			}
			if len(warned) != 1 {
				t.Fatalf("got %d records %q, want 1", len(warned), threadRefusedLog)
			}
			if w := warned[0]; w["level"] != "WARN" || !strings.Contains(fmt.Sprint(w["error"]), "Extra inputs are not permitted") {
				t.Errorf("got record %v, want a WARN naming the API's error", w)
			}
			checkHistory(t, res.Messages)
		})
	}
}

// TestThreadRejected400NotTheThread: when the request without the thread
// fails with a 400 too, the thread was not the problem: the turn fails with
// that error, no record says the thread was refused, and nothing is sent a
// third time.
func TestThreadRejected400NotTheThread(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
				msg := "max_tokens: too large"
				if r.Params.Thread != nil {
					msg = "thread: " + msg
				}
				return toolruntest.Reply{Fault: toolruntest.Fault{Status: 400, ErrorType: "invalid_request_error", Message: msg}}
			}})
			logger, logs := newLogger()
			_, err := toolrun.New(client(s), userParams("weather"), nil, &toolrun.Options{Logger: logger, Stream: stream}).Run(t.Context())
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || strings.Contains(err.Error(), "thread: ") {
				t.Fatalf("got error %v, want the 400 of the request without a thread", err)
			}
			var got []bool
			for _, r := range s.Requests() {
				got = append(got, r.Params.Thread != nil)
			}
			if diff := cmp.Diff([]bool{true, false}, got); diff != "" {
				t.Errorf("requests on a thread (-want +got):\n%s", diff)
			}
			if r := logs.find(t, threadRefusedLog); r != nil {
				t.Errorf("got record %v, want none: the thread was not refused", r)
			}
		})
	}
}

// TestThreadNotForBedrockOrVertex: a model named as Bedrock's or Vertex's
// runs without a thread from its first request, against a server that would
// reject one; any other name goes on a thread.
func TestThreadNotForBedrockOrVertex(t *testing.T) {
	tests := []struct {
		name, model string
		thread      bool
	}{
		{name: "bedrock id", model: "anthropic.claude-sonnet-4-5-20250929-v1:0"},
		{name: "bedrock arn", model: "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0"},
		{name: "vertex", model: "claude-sonnet-4-5@20250929"},
		{name: "first party", model: "claude-sonnet-4-5", thread: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Options{Func: rejectThreads})
			params := userParams("weather")
			params.Model = anthropic.Model(tc.model)
			var calls counter
			res, err := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard()}).Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("got %v, %v; want end_turn", res.StopReason, err)
			}
			reqs := s.Requests()
			if got := reqs[0].Params.Thread != nil; got != tc.thread {
				t.Errorf("first request on a thread: got %t, want %t", got, tc.thread)
			}
			for i, r := range reqs[1:] {
				if r.Params.Thread != nil || r.Status != 200 {
					t.Errorf("request %d: status %d, on a thread %t; want 200 without one", i+2, r.Status, r.Params.Thread != nil)
				}
			}
			if want := 3 + map[bool]int{true: 1}[tc.thread]; len(reqs) != want {
				t.Errorf("got %d requests, want %d", len(reqs), want)
			}
		})
	}
}

// TestNoThread: with Options.NoThread every request carries the whole
// history and no thread.
func TestNoThread(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(threadScript()...))
	var calls counter
	if _, err := toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
		Logger: discard(), NoThread: true,
	}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.Requests() {
		got = append(got, fmt.Sprintf("thread=%t messages=%d beta=%t", r.Params.Thread != nil, len(r.Params.Messages), strings.Contains(r.Header.Get("anthropic-beta"), "thread")))
	}
	want := []string{"thread=false messages=1 beta=false", "thread=false messages=3 beta=false", "thread=false messages=5 beta=false"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// TestThreadSystemEditedInPlace: a BeforeRequest hook that writes the
// system prompt in place, a different text each turn, has each request
// carry its own turn's text on a new thread (the runner knows a system
// prompt by identity, and hands the hook a copy), and neither the
// runner's system prompt nor the caller's changes.
func TestThreadSystemEditedInPlace(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(threadScript()...))
	var calls counter
	params := userParams("weather")
	params.System = []anthropic.BetaTextBlockParam{{Text: "base"}}
	r := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
		Logger: discard(),
		BeforeRequest: func(_ context.Context, turn int, p *anthropic.BetaMessageNewParams) error {
			p.System[0].Text = fmt.Sprintf("turn %d", turn)
			return nil
		},
	})
	params.System[0].Text = "changed by the caller"
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("stopped with %q, want end_turn", res.StopReason)
	}
	var got []string
	for _, req := range s.Requests() {
		var body struct {
			System []struct{ Text string } `json:"system"`
			Thread struct{ Type string }   `json:"thread"`
		}
		if err := json.Unmarshal(req.Body, &body); err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, b := range body.System {
			texts = append(texts, b.Text)
		}
		got = append(got, body.Thread.Type+": "+strings.Join(texts, ","))
	}
	want := []string{"create: turn 1", "create: turn 2", "create: turn 3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests' thread and system (-want +got):\n%s", diff)
	}
	if got := r.State().Params.System[0].Text; got != "base" {
		t.Errorf("runner's system prompt is %q, want %q", got, "base")
	}
}
