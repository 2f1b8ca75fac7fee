package servetemporal_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/temporal/servetemporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	_ "modernc.org/sqlite"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// dialTemporal connects to the dev server at TEMPORAL_ADDRESS (default
// 127.0.0.1:7233), or skips the test if there is none, unless CI is set:
// CI starts one (temporal/ci.sh), so there it is a failure.
func dialTemporal(t *testing.T, dc converter.DataConverter) client.Client {
	t.Helper()
	addr := os.Getenv("TEMPORAL_ADDRESS")
	if addr == "" {
		addr = "127.0.0.1:7233"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: log.NewStructuredLogger(discard()), DataConverter: dc})
	if err == nil {
		if _, err = c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			c.Close()
		}
	}
	if err != nil {
		msg := fmt.Sprintf("missing component: Temporal dev server; none at %s (%v); start one as temporal/ci.sh does, or set TEMPORAL_ADDRESS", addr, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; skipped because CI is not set")
	}
	t.Cleanup(c.Close)
	return c
}

func newName(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// counter is a server tool that counts its calls.
type counter struct {
	mu    sync.Mutex
	calls []string
}

func (c *counter) tool(t *testing.T) toolrun.Tool {
	t.Helper()
	tool, err := toolrun.NewRawTool("pay", "sends a payment", []byte(`{"type":"object","properties":{"amount":{"type":"integer","maximum":100}},"required":["amount"]}`),
		func(ctx context.Context, in json.RawMessage) (string, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.calls = append(c.calls, string(in))
			return "paid " + string(in), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func (c *counter) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

// fixture is a server whose runs are workflows on the dev server, and
// the worker that runs them, which a test stops and starts.
type fixture struct {
	url   string
	c     client.Client
	queue string
	acts  *temporal.Activities
	calls *counter
	model *toolruntest.Server
	db    *sql.DB
	// records is the server's RecordDir.
	records string
	mu      sync.Mutex
	w       worker.Worker
}

// scenes is a scripted model: the reply is chosen by the conversation's
// last user text and the number of assistant messages after it.
func scenes(t *testing.T, s map[string][]toolruntest.Reply) *toolruntest.Server {
	return toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		scene, k := "", 0
		for _, m := range r.Conversation {
			if m.Role == "assistant" {
				k++
				continue
			}
			for _, b := range m.Content {
				if b.Type == "text" {
					scene, k = b.Text, 0
				}
			}
		}
		if k >= len(s[scene]) {
			return toolruntest.Message(toolruntest.Text(fmt.Sprintf("script: no reply %d for %q", k, scene)))
		}
		return s[scene][k]
	}})
}

var script = map[string][]toolruntest.Reply{
	"hi": {toolruntest.Message(toolruntest.Text("hello"))},
	"pay": {
		toolruntest.Message(toolruntest.Text("paying"), toolruntest.ToolUse("call_pay", "pay", map[string]int{"amount": 5})),
		toolruntest.Message(toolruntest.Text("paid")),
	},
	"where am i": {
		toolruntest.Message(toolruntest.ToolUse("call_loc", "get_location", map[string]bool{"precise": true})),
		toolruntest.Message(toolruntest.Text("you are in Paris")),
	},
	"slow": {slowReply()},
	// A call to approve whose run then takes its time: the run a decision
	// starts is still in flight when the chat's next message comes.
	"pay slowly": {
		toolruntest.Message(toolruntest.ToolUse("call_pay", "pay", map[string]int{"amount": 5})),
		slowReply(),
	},
}

// slowReply is a reply held back long enough for its run to be
// cancelled first.
func slowReply() toolruntest.Reply {
	r := toolruntest.Message(toolruntest.Text("too late"))
	r.Fault.EventDelay = 3 * time.Second
	return r
}

func newFixture(t *testing.T) *fixture { return newFixtureWith(t, nil) }

// newFixtureWith is newFixture with dc as the clients', the workers' and
// the executor's data converter (nil for the SDK's default).
func newFixtureWith(t *testing.T, dc converter.DataConverter, needPerson ...string) *fixture {
	t.Helper()
	return newFixtureConverters(t, dc, dc, needPerson...)
}

// newFixtureConverters is newFixture with dc as the clients' and the
// workers' data converter, and executorDC as the executor's
// Config.DataConverter (nil: none given).
func newFixtureConverters(t *testing.T, dc, executorDC converter.DataConverter, needPerson ...string) *fixture {
	t.Helper()
	c := dialTemporal(t, dc)
	model := scenes(t, script)
	f := &fixture{c: c, queue: newName("servetemporal"), calls: &counter{}, model: model, records: t.TempDir()}
	tools := []toolrun.Tool{f.calls.tool(t)}
	needPerson = append(needPerson, "pay")
	opts := toolrun.Options{Logger: discard(), Policy: func(_ context.Context, call toolrun.PolicyCall) toolrun.Decision {
		if slices.Contains(needPerson, call.Name) {
			return policy.Defer(call.Name + " needs a person")
		}
		return toolrun.Decision{}
	}}
	f.acts = temporal.NewActivities(model.Client(), tools, &opts).DeferClientTools()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "serve.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	h, err := serve.New(t.Context(), serve.Config{
		Client:  model.Client(),
		Params:  anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024},
		Tools:   tools,
		Options: opts,
		DB:      db,
		Logger:  discard(),
		// Transcripts are recorded from the events the executor reports.
		RecordDir: f.records,
		Executor:  servetemporal.New(servetemporal.Config{Client: c, TaskQueue: f.queue, WorkflowIDPrefix: f.queue + "/", DataConverter: executorDC}),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		srv.Close()
	})
	f.url, f.db = srv.URL, db
	f.startWorker(t)
	t.Cleanup(f.stopWorker)
	return f
}

func (f *fixture) startWorker(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.w = temporal.NewWorker(f.c, f.queue, f.acts, worker.Options{WorkerStopTimeout: 5 * time.Second})
	if err := f.w.Start(); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) stopWorker() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.w != nil {
		f.w.Stop()
		f.w = nil
	}
}

// request sends a request and returns its status and body.
func request(t *testing.T, method, url string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// events parses a server-sent event stream.
func events(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var evs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e map[string]any
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			evs = append(evs, e)
		}
	}
	return evs
}

// run posts a RunAgentInput and returns its events; a refusal fails the
// test.
func (f *fixture) run(t *testing.T, in map[string]any) []map[string]any {
	t.Helper()
	status, body := request(t, http.MethodPost, f.url+"/", in)
	if status != http.StatusOK {
		t.Fatalf("POST / = %d %s, want 200", status, body)
	}
	return events(t, body)
}

func types(evs []map[string]any) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e["type"].(string))
	}
	return out
}

func outcome(evs []map[string]any) map[string]any {
	o, _ := evs[len(evs)-1]["outcome"].(map[string]any)
	return o
}

func user(id, text string) map[string]any {
	return map[string]any{"id": id, "role": "user", "content": text}
}

// input is a RunAgentInput of a client that speaks serve's AG-UI version
// (as @ag-ui/client 1.x does), with messages [] when there are none.
func input(thread, run string, msgs []map[string]any, extra map[string]any) map[string]any {
	if msgs == nil {
		msgs = []map[string]any{} // AG-UI requires the member
	}
	in := map[string]any{"threadId": thread, "runId": run, "messages": msgs, "protocolVersion": serve.ProtocolVersion}
	for k, v := range extra {
		in[k] = v
	}
	return in
}

// interruptID returns the id of the one interrupt evs end with.
func interruptID(t *testing.T, evs []map[string]any) string {
	t.Helper()
	o := outcome(evs)
	its, _ := o["interrupts"].([]any)
	if o["type"] != "interrupt" || len(its) != 1 {
		t.Fatalf("outcome %v, want one interrupt", o)
	}
	return its[0].(map[string]any)["id"].(string)
}

var (
	plainEvents    = []string{"RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"}
	interruptEvent = []string{"RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "STEP_FINISHED", "RUN_FINISHED"}
	resumedEvents  = []string{"RUN_STARTED", "STEP_STARTED", "TOOL_CALL_RESULT", "STEP_FINISHED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"}
)

// TestServeOnTemporal: through the AG-UI endpoint, a thread's runs are
// workflows on the dev server: a plain run, then on the same thread a
// call that needs approval (an interrupt), approved with a resume entry:
// the tool runs once and the run finishes.
func TestServeOnTemporal(t *testing.T) {
	f := newFixture(t)
	thread := newName("thread")

	evs := f.run(t, input(thread, "r1", []map[string]any{user("m1", "hi")}, nil))
	if diff := cmp.Diff(plainEvents, types(evs)); diff != "" {
		t.Fatalf("plain run's events (-want +got):\n%s", diff)
	}
	if got := outcome(evs)["type"]; got != "success" {
		t.Fatalf("outcome %v, want success", got)
	}
	if got := evs[3]["delta"]; got != "hello" {
		t.Errorf("text %q, want %q", got, "hello")
	}

	evs = f.run(t, input(thread, "r2", []map[string]any{user("m1", "hi"), user("m2", "pay")}, nil))
	if diff := cmp.Diff(interruptEvent, types(evs)); diff != "" {
		t.Fatalf("the run to approve: events (-want +got):\n%s", diff)
	}
	if got := evs[3]["delta"]; got != "paying" {
		t.Errorf("text %q, want %q", got, "paying")
	}
	if got := evs[6]["delta"]; got != `{"amount":5}` {
		t.Errorf("the call's input %q, want %q", got, `{"amount":5}`)
	}
	id := interruptID(t, evs)
	if got := f.calls.got(); len(got) != 0 {
		t.Fatalf("the tool ran before its approval: %v", got)
	}

	evs = f.run(t, input(thread, "r3", nil, map[string]any{"resume": []map[string]any{{"interruptId": id, "status": "resolved", "payload": map[string]any{"decision": "approve"}}}}))
	if diff := cmp.Diff(resumedEvents, types(evs)); diff != "" {
		t.Fatalf("the approved run's events (-want +got):\n%s", diff)
	}
	if got := outcome(evs)["type"]; got != "success" {
		t.Fatalf("outcome %v, want success", got)
	}
	if diff := cmp.Diff([]string{`{"amount":5}`}, f.calls.got()); diff != "" {
		t.Errorf("the tool's calls (-want +got):\n%s", diff)
	}

	// The approval again, and one of another thread: refused, and nothing
	// runs.
	// A stale resume is told what was decided (a CUSTOM toolrun.decided
	// event), as in process, and runs nothing.
	status, body := request(t, http.MethodPost, f.url+"/", input(thread, "r4", nil, map[string]any{"resume": []map[string]any{{"interruptId": id, "status": "resolved", "payload": map[string]any{"decision": "approve"}}}}))
	if status != http.StatusOK || !strings.Contains(string(body), "toolrun.decided") {
		t.Errorf("a stale resume: %d %s, want 200 telling toolrun.decided", status, body)
	}
	status, body = request(t, http.MethodPost, f.url+"/", input(newName("other"), "r5", []map[string]any{user("m1", "hi")}, map[string]any{"resume": []map[string]any{{"interruptId": id, "status": "resolved", "payload": map[string]any{"decision": "approve"}}}}))
	if status != http.StatusConflict || !strings.Contains(string(body), "foreign_interrupt") {
		t.Errorf("a foreign resume: %d %s, want 409 foreign_interrupt", status, body)
	}
	if diff := cmp.Diff([]string{`{"amount":5}`}, f.calls.got()); diff != "" {
		t.Errorf("the tool's calls after the refused resumes (-want +got):\n%s", diff)
	}
	// Each run was recorded as a transcript, its responses and results
	// included: the three that ran and the stale resume's, which told the
	// client what was decided (over Temporal a run with nothing to do
	// still goes through the executor).
	files, _ := filepath.Glob(filepath.Join(f.records, "*.jsonl"))
	if len(files) != 4 {
		t.Fatalf("transcripts %v, want one for each of the 4 runs", files)
	}
	var all []byte
	for _, name := range files {
		b, _ := os.ReadFile(name)
		all = append(all, b...)
	}
	for _, want := range []string{`"type":"request"`, `"type":"response"`, `"type":"tool_finished"`, "paid {"} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("the transcripts lack %s:\n%s", want, all)
		}
	}
}

// pendingList is GET /api/pending's answer.
type pendingList struct {
	Pending []struct {
		ID, ThreadID, ToolCallID, ToolName string
		Input                              json.RawMessage
	}
}

// TestServeOnTemporalNoWorker: a call awaiting approval is listed and
// decided through the JSON API while no worker runs, from the workflows'
// search attributes and memo: here the server has lost its own record of
// the call, as one stopped before writing it would have. The run goes on
// once a worker starts, and the tool runs once.
func TestServeOnTemporalNoWorker(t *testing.T) {
	t.Run("default converter", func(t *testing.T) { testNoWorker(t, nil, nil) })
	// A codec on the clients and workers: the executor reads the memo and
	// the history with it.
	codec := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), converter.NewZlibCodec(converter.ZlibCodecOptions{AlwaysEncode: true}))
	t.Run("codec", func(t *testing.T) { testNoWorker(t, codec, codec) })
	// The codec given to the client alone, not to the executor's Config:
	// the executor's own reads decode with the client's converter.
	t.Run("codec on the client alone", func(t *testing.T) { testNoWorker(t, codec, nil) })
}

func testNoWorker(t *testing.T, dc, executorDC converter.DataConverter) {
	f := newFixtureConverters(t, dc, executorDC)
	thread := newName("thread")
	evs := f.run(t, input(thread, "r1", []map[string]any{user("m1", "pay")}, nil))
	lost := interruptID(t, evs)
	f.stopWorker()
	if _, err := f.db.ExecContext(t.Context(), `DELETE FROM serve_interrupts`); err != nil {
		t.Fatal(err)
	}

	// Every thread's list asks the visibility store, which lags a moment
	// behind the workflows.
	var list pendingList
	var body []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		var status int
		status, body = request(t, http.MethodGet, f.url+"/api/pending", nil)
		if status != http.StatusOK {
			t.Fatalf("GET /api/pending = %d %s", status, body)
		}
		list = pendingList{}
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Pending) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // polling the visibility store, not timing the code
	}
	if len(list.Pending) != 1 || list.Pending[0].ThreadID != thread || list.Pending[0].ToolCallID != "call_pay" || string(list.Pending[0].Input) != `{"amount":5}` || list.Pending[0].ID == lost {
		t.Fatalf("pending %s, want call_pay of %s with its input, under a new interrupt", body, thread)
	}
	id := list.Pending[0].ID
	status, body := request(t, http.MethodGet, f.url+"/api/pending?thread="+thread, nil)
	if status != http.StatusOK {
		t.Fatalf("GET /api/pending?thread = %d %s", status, body)
	}
	list = pendingList{}
	json.Unmarshal(body, &list)
	if len(list.Pending) != 1 || list.Pending[0].ID != id {
		t.Fatalf("the thread's pending %s, want interrupt %s alone", body, id)
	}

	status, body = request(t, http.MethodPost, f.url+"/api/interrupts/"+id+"/decision", map[string]any{"decision": "approve"})
	if status != http.StatusOK {
		t.Fatalf("the decision = %d %s, want 200", status, body)
	}
	var answer struct{ NextRun string }
	json.Unmarshal(body, &answer)
	if answer.NextRun == "" {
		t.Fatalf("the decision's answer %s names no next run", body)
	}
	status, body = request(t, http.MethodPost, f.url+"/api/interrupts/"+id+"/decision", map[string]any{"decision": "deny"})
	if status != http.StatusConflict {
		t.Errorf("a second decision = %d %s, want 409", status, body)
	}
	if got := f.calls.got(); len(got) != 0 {
		t.Fatalf("the tool ran with no worker: %v", got)
	}
	// The decision reached the workflow with no worker running: it is in
	// its history.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	signalled := false
	it := f.c.GetWorkflowHistory(ctx, f.queue+"/"+thread, "", false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == temporal.DecideSignal {
			signalled = true
		}
	}
	if !signalled {
		t.Fatal("the workflow's history has no decision signal")
	}

	f.startWorker(t)
	status, body = request(t, http.MethodGet, f.url+"/runs/"+answer.NextRun+"/events", nil)
	if status != http.StatusOK {
		t.Fatalf("the next run's events = %d %s", status, body)
	}
	evs = events(t, body)
	if diff := cmp.Diff(resumedEvents, types(evs)); diff != "" {
		t.Fatalf("the next run's events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`{"amount":5}`}, f.calls.got()); diff != "" {
		t.Errorf("the tool's calls (-want +got):\n%s", diff)
	}
	status, body = request(t, http.MethodGet, f.url+"/api/pending", nil)
	if status != http.StatusOK || strings.Contains(string(body), id) {
		t.Errorf("GET /api/pending after the run = %d %s, want %s gone", status, body, id)
	}
}

// TestInboxOnTemporal: the approval inbox lists a call of a thread whose
// run is a workflow, with the model's text and the run's turns read from
// the workflow's history, and decides it, all while no worker runs; the
// run finishes once a worker starts.
func TestInboxOnTemporal(t *testing.T) {
	f := newFixture(t)
	thread := newName("thread")
	evs := f.run(t, input(thread, "r1", []map[string]any{user("m1", "pay")}, nil))
	id := interruptID(t, evs)
	f.stopWorker()

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(f.url + "/inbox/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`<input type="hidden" name="csrf" value="([0-9a-f]+)">`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("the login form has no CSRF token: %s", page)
	}
	resp, err = c.PostForm(f.url+"/inbox/login", url.Values{"token": {""}, "csrf": {string(m[1])}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	m = regexp.MustCompile(`<meta name="inbox-key" content="([0-9a-f]+)">`).FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("logging in: %d %s", resp.StatusCode, page)
	}
	key := string(m[1])

	preq, _ := http.NewRequest(http.MethodGet, f.url+"/inbox/api/pending", nil)
	preq.Header.Set("X-Inbox-Key", key)
	resp, err = c.Do(preq)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var list struct {
		Pending []struct {
			ID, ToolName, ModelText, Version string
			RunTurns                         int
		}
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("the inbox's list %s: %v", body, err)
	}
	if len(list.Pending) != 1 || list.Pending[0].ID != id || list.Pending[0].ToolName != "pay" {
		t.Fatalf("the inbox lists %s, want interrupt %s of pay", body, id)
	}
	if got := list.Pending[0]; got.ModelText != "paying" || got.RunTurns != 1 {
		t.Errorf("the inbox shows the model's text %q and %d turns, want %q and 1", got.ModelText, got.RunTurns, "paying")
	}

	// The inbox's event stream says "ready" once at the start, and sends a
	// "delta" when the decision below takes the call off the list.
	evctx, stopEvents := context.WithCancel(t.Context())
	defer stopEvents()
	evreq, _ := http.NewRequestWithContext(evctx, http.MethodGet, f.url+"/inbox/api/events", nil)
	evreq.Header.Set("X-Inbox-Key", key)
	evresp, err := c.Do(evreq)
	if err != nil {
		t.Fatal(err)
	}
	defer evresp.Body.Close()
	changes := make(chan string, 8) // "event data" of each event
	go func() {
		sc := bufio.NewScanner(evresp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				event = name
			} else if data, ok := strings.CutPrefix(line, "data: "); ok {
				changes <- event + " " + data
			}
		}
		close(changes)
	}()
	if first, ok := <-changes; !ok || !strings.HasPrefix(first, "ready ") {
		t.Fatalf("the inbox's event stream began with %q, want a ready event", first)
	}

	req, _ := http.NewRequest(http.MethodPost, f.url+"/inbox/api/interrupts/"+id+"/decision", strings.NewReader(`{"decision":"approve","version":"`+list.Pending[0].Version+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Inbox-Key", key)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	var answer struct{ NextRun string }
	json.Unmarshal(body, &answer)
	if resp.StatusCode != http.StatusOK || answer.NextRun == "" {
		t.Fatalf("the inbox's decision = %d %s, want 200 with a next run", resp.StatusCode, body)
	}
	if got := f.calls.got(); len(got) != 0 {
		t.Fatalf("the tool ran with no worker: %v", got)
	}
	select {
	case change, ok := <-changes:
		if !ok {
			t.Fatal("the inbox's event stream ended before the decision's change")
		}
		if !strings.HasPrefix(change, "delta ") || !strings.Contains(change, `"removed":["`+id+`"]`) {
			t.Fatalf("the inbox's event stream said %q of the decision, want a delta removing %s", change, id)
		}
	case <-time.After(30 * time.Second): // a bound on a hang, not a timing
		t.Fatal("the inbox's event stream said nothing of the decision")
	}
	stopEvents()
	f.startWorker(t)
	status, body := request(t, http.MethodGet, f.url+"/runs/"+answer.NextRun+"/events", nil)
	if status != http.StatusOK {
		t.Fatalf("the next run's events = %d %s", status, body)
	}
	if got := outcome(events(t, body))["type"]; got != "success" {
		t.Fatalf("the next run's outcome %v, want success: %s", got, body)
	}
	if diff := cmp.Diff([]string{`{"amount":5}`}, f.calls.got()); diff != "" {
		t.Errorf("the tool's calls (-want +got):\n%s", diff)
	}
}

// TestClientToolOnTemporal: a tool the client declares is the client's to
// run over Temporal too: the run stops with success and the call in
// pendingToolCallIds, and the next run brings the client's result as a
// tool message, which the model answers from. A result for a call that is
// not pending, or answered already, is refused.
func TestClientToolOnTemporal(t *testing.T) {
	f := newFixture(t)
	thread := newName("thread")
	tools := []map[string]any{{"name": "get_location", "description": "where the user is", "parameters": map[string]any{"type": "object", "properties": map[string]any{"precise": map[string]any{"type": "boolean"}}}}}
	msgs := []map[string]any{user("u1", "where am i")}
	evs := f.run(t, input(thread, "r1", msgs, map[string]any{"tools": tools}))
	o := outcome(evs)
	if o["type"] != "success" || fmt.Sprint(o["pendingToolCallIds"]) != "[call_loc]" {
		t.Fatalf("outcome %v, want success with call_loc pending", o)
	}
	status, body := request(t, http.MethodGet, f.url+"/api/pending?thread="+thread, nil)
	if status != http.StatusOK || strings.Contains(string(body), "call_loc") {
		t.Errorf("GET /api/pending = %d %s, want no client call among the approvals", status, body)
	}

	wrong := append(msgs, map[string]any{"id": "t0", "role": "tool", "toolCallId": "call_nope", "content": "Rome"})
	status, body = request(t, http.MethodPost, f.url+"/", input(thread, "r2", wrong, map[string]any{"tools": tools}))
	if status != http.StatusConflict || !strings.Contains(string(body), "not_pending") {
		t.Errorf("a result for a call not pending: %d %s, want 409 not_pending", status, body)
	}

	msgs = append(msgs, map[string]any{"id": "t1", "role": "tool", "toolCallId": "call_loc", "content": "Paris"})
	evs = f.run(t, input(thread, "r3", msgs, map[string]any{"tools": tools}))
	if o := outcome(evs); o["type"] != "success" {
		t.Fatalf("the run with the client's result: outcome %v, want success: %v", o, types(evs))
	}
	if got := evs[len(evs)-1]["result"]; got != "you are in Paris" {
		t.Errorf("the answer %q, want %q", got, "you are in Paris")
	}
	again := append(msgs, map[string]any{"id": "t2", "role": "tool", "toolCallId": "call_loc", "content": "Rome"})
	status, body = request(t, http.MethodPost, f.url+"/", input(thread, "r4", again, map[string]any{"tools": tools}))
	// Over Temporal the call's answer is the workflow's: a second result
	// is ignored with a warning, and a snapshot shows the client the
	// result that stands (in process it is refused, 409 already_answered,
	// since there the answer is the thread's until a run takes it).
	if status != http.StatusOK || !strings.Contains(string(body), "the server's result stands") || !strings.Contains(string(body), `"MESSAGES_SNAPSHOT"`) || strings.Contains(string(body), "Rome") {
		t.Errorf("a second result for the call: %d %s, want 200 with the warning and a snapshot of the result that stands", status, body)
	}
}

// TestClientToolApprovedOnTemporal: a client tool under an approval
// policy is handed to the client only once a person approves its call, as
// in process: the approval ends the next run with pendingToolCallIds,
// nothing of the call runs on a worker, and the client's result answers
// it.
func TestClientToolApprovedOnTemporal(t *testing.T) {
	f := newFixtureWith(t, nil, "get_location")
	thread := newName("thread")
	tools := []map[string]any{{"name": "get_location", "description": "where the user is", "parameters": map[string]any{"type": "object", "properties": map[string]any{"precise": map[string]any{"type": "boolean"}}}}}
	msgs := []map[string]any{user("u1", "where am i")}
	evs := f.run(t, input(thread, "r1", msgs, map[string]any{"tools": tools}))
	o := outcome(evs)
	its, _ := o["interrupts"].([]any)
	if o["type"] != "interrupt" || len(its) != 1 {
		t.Fatalf("outcome %v, want one interrupt", o)
	}
	id := its[0].(map[string]any)["id"].(string)
	resume := []any{map[string]any{"interruptId": id, "status": "resolved", "payload": map[string]any{"decision": "approve"}}}
	evs = f.run(t, input(thread, "r2", msgs, map[string]any{"tools": tools, "resume": resume}))
	if o := outcome(evs); o["type"] != "success" || fmt.Sprint(o["pendingToolCallIds"]) != "[call_loc]" {
		t.Fatalf("after the approval: outcome %v, want success with call_loc pending: %v", o, types(evs))
	}
	for _, e := range evs {
		if e["type"] == "TOOL_CALL_RESULT" {
			t.Fatalf("a result %v: the client's call was answered on a worker", e)
		}
	}
	msgs = append(msgs, map[string]any{"id": "t1", "role": "tool", "toolCallId": "call_loc", "content": "Paris"})
	evs = f.run(t, input(thread, "r3", msgs, map[string]any{"tools": tools}))
	if o := outcome(evs); o["type"] != "success" || evs[len(evs)-1]["result"] != "you are in Paris" {
		t.Fatalf("the run with the client's result: outcome %v, %v", o, types(evs))
	}
}

// TestCancelOnTemporal: POST /runs/{run}/cancel ends the run with the
// outcome cancelled and cancels its workflow; the thread's next run
// starts a new workflow from the state the cancelled one had.
func TestCancelOnTemporal(t *testing.T) {
	f := newFixture(t)
	thread := newName("thread")
	b, _ := json.Marshal(input(thread, "r1", []map[string]any{user("u1", "slow")}, nil))
	resp, err := http.Post(f.url+"/", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var evs []map[string]any
	cancelled := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e map[string]any
		json.Unmarshal([]byte(data), &e)
		evs = append(evs, e)
		if !cancelled {
			cancelled = true
			// The run's workflow is started once its first event is out:
			// wait for it, so that the cancel meets a workflow.
			deadline := time.Now().Add(30 * time.Second)
			for {
				_, err := f.c.DescribeWorkflowExecution(t.Context(), f.queue+"/"+thread, "")
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run's workflow did not start: %v", err)
				}
				time.Sleep(50 * time.Millisecond) // polling the Temporal server, not timing the code
			}
			status, body := request(t, http.MethodPost, f.url+"/runs/r1/cancel", nil)
			if status != http.StatusAccepted {
				t.Fatalf("the cancel = %d %s, want 202", status, body)
			}
		}
	}
	if o := outcome(evs); o["type"] != "cancelled" {
		t.Fatalf("outcome %v, want cancelled: %v", o, types(evs))
	}
	run := f.c.GetWorkflow(t.Context(), f.queue+"/"+thread, "")
	if err := run.Get(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("the workflow ended with %v, want it cancelled", err)
	}

	evs = f.run(t, input(thread, "r2", []map[string]any{user("u1", "slow"), user("u2", "hi")}, nil))
	if o := outcome(evs); o["type"] != "success" {
		t.Fatalf("the next run: outcome %v, want success: %v", o, evs)
	}
	if got := evs[len(evs)-1]["result"]; got != "hello" {
		t.Errorf("the next run's answer %q, want %q", got, "hello")
	}
	// The new workflow went on from the cancelled one's state: its
	// request has the first message too.
	reqs := f.model.Requests()
	var texts []string
	for _, m := range reqs[len(reqs)-1].Conversation {
		for _, b := range m.Content {
			if m.Role == "user" && b.Type == "text" {
				texts = append(texts, b.Text)
			}
		}
	}
	if diff := cmp.Diff([]string{"slow", "hi"}, texts); diff != "" {
		t.Errorf("the next run's request's user texts (-want +got):\n%s", diff)
	}
}
