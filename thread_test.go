package toolrun_test

import (
	"testing"

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
				Logger: discard(), Thread: true, Stream: stream,
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
	s := toolruntest.New(nil, toolruntest.Options{ThreadUnsupported: []string{"tools"}, Replies: threadScript()})
	t.Cleanup(s.Close)
	var calls counter
	res, err := toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
		Logger: discard(), Thread: true,
	}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != toolrun.StopEndTurn || calls.get("get_weather") != 2 {
		t.Fatalf("stop %q with %d tool runs, want end_turn with 2", res.StopReason, calls.get("get_weather"))
	}
	reqs := s.Requests()
	last := reqs[len(reqs)-1]
	if last.Params.Thread != nil || len(last.Params.Messages) != 5 {
		t.Errorf("last request: thread %v with %d messages, want the whole history without a thread", last.Params.Thread, len(last.Params.Messages))
	}
	checkHistory(t, res.Messages)
}

// TestThreadToolsChanged: changing the tools mid-run, which a thread cannot
// take, still works: the run goes on.
func TestThreadToolsChanged(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(threadScript()...))
	var calls, writes counter
	r := toolrun.New(client(s), userParams("weather"), []toolrun.Tool{weatherTool(&calls), writeTool(&writes)}, &toolrun.Options{
		Logger: discard(), Thread: true,
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
