package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"

	"github.com/toolrun/toolrun/temporal"
)

// sseEvent is an event of a run's stream, with its id.
type sseEvent struct {
	id   string
	data map[string]any
}

// readStream reads the server-sent events of body until it ends, sending
// each to got, and closes got.
func readStream(body io.ReadCloser, got chan<- sseEvent) {
	defer close(got)
	defer body.Close()
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 16<<20)
	var id string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id = v
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var e map[string]any
			if json.Unmarshal([]byte(data), &e) == nil {
				got <- sseEvent{id: id, data: e}
			}
		}
	}
}

// kinds returns what a test compares of a run's events: each one's type,
// with the call of a TOOL_CALL_RESULT, the text of TEXT_MESSAGE_CONTENT,
// and the outcome of RUN_FINISHED or the code of RUN_ERROR.
func kinds(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		s, _ := e.data["type"].(string)
		switch s {
		case "TOOL_CALL_RESULT":
			s += " " + fmt.Sprint(e.data["toolCallId"])
		case "TEXT_MESSAGE_CONTENT":
			s += " " + fmt.Sprint(e.data["delta"])
		case "RUN_FINISHED":
			outcome, _ := e.data["outcome"].(map[string]any)
			s += " " + fmt.Sprint(outcome["type"])
		case "RUN_ERROR":
			s += " " + fmt.Sprint(e.data["code"])
		case "TEXT_MESSAGE_START", "TEXT_MESSAGE_END", "STEP_STARTED", "STEP_FINISHED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "RUN_STARTED":
		default:
			continue
		}
		out = append(out, s)
	}
	return out
}

// TestServeTemporalSIGKILLRunEnd kills "toolrun serve --temporal", the
// server and its worker in one process, with SIGKILL while two threads'
// tool calls run and a third thread's model response streams, starts it
// again on the same database, and checks that every thread's last run
// ends, from the client's view, with what its workflow did: a client
// that reconnects at once, while the workflows still run, reads each
// run's result, answer and RUN_FINISHED; one that comes back once the
// workflow has closed, and asks the thread again as an AG-UI client does
// (its history, nothing new), is shown the result and the answer in a
// MESSAGES_SNAPSHOT; and one that reconnects then reads the run's end
// too. The tool runs once: the workflow answers the call the kill cut
// "interrupted" rather than run it again.
func TestServeTemporalSIGKILLRunEnd(t *testing.T) {
	addr := temporalAddress(t)
	_, crash := binaries(t)
	name := uniqueName(t)
	dir := t.TempDir()
	script := writeScript(t, dir,
		`{"scene":"late","content":[{"type":"text","text":"Asking the tracker."},{"type":"tool_use","id":"call_late","name":"tracker__hang","input":{}}]}`,
		textReply("late: the tracker did not answer"),
		`{"scene":"early","content":[{"type":"tool_use","id":"call_early","name":"tracker__hang","input":{}}]}`,
		textReply("early: the tracker did not answer"),
		// A response whose events come 2 s apart: the kill cuts its stream.
		`{"scene":"stream","delay_ms":2000,"content":[{"type":"text","text":"stream: an answer that took its time"}]}`,
	)
	args := []string{"--db", filepath.Join(dir, "serve.db"), "--script", script, "--mcp", "tracker=" + crash, "--approve", "auto",
		"--temporal", addr, "--temporal-queue", name + "queue"}
	tc, err := client.Dial(client.Options{HostPort: addr, Logger: temporallog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	post := func(url string, body any) *http.Response {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/agui", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Fatalf("POST /agui: status %d: %s", resp.StatusCode, b)
		}
		return resp
	}
	// started waits until workflow id runs an activity of one of names,
	// started on a worker.
	started := func(id string, names ...string) {
		t.Helper()
		for {
			d, err := tc.DescribeWorkflowExecution(ctx, id, "")
			if err == nil {
				for _, pa := range d.GetPendingActivities() {
					for _, n := range names {
						if pa.GetActivityType().GetName() == n && pa.GetState() == enums.PENDING_ACTIVITY_STATE_STARTED {
							return
						}
					}
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("workflow %s never ran %v: %v", id, names, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}

	type thread struct {
		scene, id, run string
		got            chan sseEvent
		seen           []sseEvent // what the first server sent
	}
	threads := []*thread{{scene: "late"}, {scene: "early"}, {scene: "stream"}}
	p1 := startServe(t, args...)
	begin := func(th *thread) {
		th.id, th.run = name+th.scene, name+th.scene+"-run1"
		th.got = make(chan sseEvent, 64)
		go readStream(post(p1.url, map[string]any{
			"threadId": th.id, "runId": th.run, "protocolVersion": "1.1",
			"messages": []map[string]any{{"id": th.scene + "-u1", "role": "user", "content": th.scene}},
		}).Body, th.got)
	}
	// The tool threads: their client has seen the call, and the tool
	// runs. Then the stream thread, whose response is streaming when the
	// kill comes (it takes seconds, and the kill follows its step's start
	// at once).
	for _, th := range threads[:2] {
		begin(th)
	}
	for _, th := range threads[:2] {
		for e := range th.got {
			th.seen = append(th.seen, e)
			if e.data["type"] == "TOOL_CALL_END" {
				break
			}
		}
		started(th.id, temporal.ToolActivity)
	}
	begin(threads[2])
	started(threads[2].id, temporal.StepActivity, temporal.StepDeltaActivity)
	p1.cmd.Process.Signal(syscall.SIGKILL)
	p1.done <- <-p1.done
	for _, th := range threads {
		for e := range th.got {
			th.seen = append(th.seen, e)
		}
	}

	p2 := startServe(t, args...)
	get := func(th *thread) []sseEvent {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p2.url+"/runs/"+th.run+"/events", nil)
		if n := len(th.seen); n > 0 {
			req.Header.Set("Last-Event-ID", th.seen[n-1].id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("GET /runs/%s/events: status %d: %s", th.run, resp.StatusCode, b)
		}
		got := make(chan sseEvent, 64)
		go readStream(resp.Body, got)
		var evs []sseEvent
		for e := range got {
			evs = append(evs, e)
		}
		return evs
	}
	running := func(id string) bool {
		d, err := tc.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		return d.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	}

	// Early: the clients reconnect while the workflows still run (the
	// tool's activity waits out its heartbeat timeout, the step's too).
	for _, th := range threads[1:] {
		if !running(th.id) {
			t.Fatalf("workflow %s closed before its client reconnected", th.id)
		}
	}
	early := map[string][]string{
		"early":  {"TOOL_CALL_RESULT call_early", "STEP_FINISHED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT early: the tracker did not answer", "TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED success"},
		"stream": {"STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT stream: an answer that took its time", "TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED success"},
	}
	for _, th := range threads[1:] {
		evs := get(th)
		if diff := cmp.Diff(early[th.scene], kinds(evs)); diff != "" {
			t.Errorf("thread %s, reconnected while its workflow ran: events (-want +got):\n%s\nfirst server sent: %v", th.scene, diff, kinds(th.seen))
		}
		for _, e := range evs {
			if e.data["type"] == "TOOL_CALL_RESULT" && !strings.Contains(fmt.Sprint(e.data["content"]), "not run again") {
				t.Errorf("thread %s: the call's result is %q, want it answered interrupted, not run again", th.scene, e.data["content"])
			}
		}
	}

	// Late: the client comes back once the workflow has closed, and asks
	// the thread again with the history it has: its message, and the
	// assistant's call it saw.
	late := threads[0]
	if err := tc.GetWorkflow(ctx, late.id, "").Get(ctx, nil); err != nil {
		t.Fatalf("workflow %s: %v", late.id, err)
	}
	ch := make(chan sseEvent, 64)
	go readStream(post(p2.url, map[string]any{
		"threadId": late.id, "runId": late.id + "-run2", "protocolVersion": "1.1",
		"messages": []map[string]any{
			{"id": "late-u1", "role": "user", "content": "late"},
			{"id": late.run + "/turn_1", "role": "assistant", "content": "Asking the tracker.", "toolCalls": []map[string]any{{"id": "call_late", "type": "function", "function": map[string]any{"name": "tracker__hang", "arguments": "{}"}}}},
		},
	}).Body, ch)
	var again []sseEvent
	for e := range ch {
		again = append(again, e)
	}
	var snap []string
	for _, e := range again {
		if e.data["type"] != "MESSAGES_SNAPSHOT" {
			continue
		}
		msgs, _ := e.data["messages"].([]any)
		for _, m := range msgs {
			m, _ := m.(map[string]any)
			content := fmt.Sprint(m["content"])
			if m["role"] == "tool" {
				content = fmt.Sprint(strings.Contains(content, "not run again"))
			}
			snap = append(snap, fmt.Sprintf("%s %s", m["role"], content))
		}
	}
	want := []string{"user late", "assistant Asking the tracker.", "tool true", "assistant late: the tracker did not answer"}
	if diff := cmp.Diff(want, snap); diff != "" {
		t.Errorf("thread late, asked again after its workflow closed: the MESSAGES_SNAPSHOT (-want +got):\n%s\nevents: %v", diff, kinds(again))
	}
	if got := kinds(again); len(got) == 0 || got[len(got)-1] != "RUN_FINISHED success" {
		t.Errorf("thread late, asked again: events %v, want them to end with RUN_FINISHED success", got)
	}
	// And a late reconnect to the run the kill cut reads its end.
	wantLate := []string{"TOOL_CALL_RESULT call_late", "STEP_FINISHED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT late: the tracker did not answer", "TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED success"}
	if diff := cmp.Diff(wantLate, kinds(get(late))); diff != "" {
		t.Errorf("thread late, reconnected after its workflow closed: events (-want +got):\n%s\nfirst server sent: %v", diff, kinds(late.seen))
	}
}
