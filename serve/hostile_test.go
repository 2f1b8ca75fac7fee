package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// stuckWriter is the response of a client that stops reading: each Write
// says it has begun on entered, then waits for release (or, with fail,
// fails at once as a write past its deadline does). It keeps the write
// deadlines set, as a connection does.
type stuckWriter struct {
	header  http.Header
	entered chan struct{}
	release chan struct{}
	fail    bool

	mu        sync.Mutex // guards the fields below
	writes    int
	deadlines []time.Time // every SetWriteDeadline, in order
	wrote     []bool      // for each write, whether a deadline was set before it
}

func newStuckWriter(fail bool) *stuckWriter {
	return &stuckWriter{header: http.Header{}, entered: make(chan struct{}, 100), release: make(chan struct{}), fail: fail}
}

func (w *stuckWriter) Header() http.Header { return w.header }
func (w *stuckWriter) WriteHeader(int)     {}
func (w *stuckWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.writes++
	set := len(w.deadlines) > 0 && !w.deadlines[len(w.deadlines)-1].IsZero()
	w.wrote = append(w.wrote, set)
	w.mu.Unlock()
	w.entered <- struct{}{}
	if w.fail {
		return 0, os.ErrDeadlineExceeded
	}
	<-w.release
	return len(p), nil
}
func (w *stuckWriter) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadlines = append(w.deadlines, t)
	return nil
}

// loopback makes req look like it came from this machine, as a server
// without tokens wants.
func loopback(req *http.Request) *http.Request {
	req.RemoteAddr = "127.0.0.1:40000"
	req.Host = "127.0.0.1:8080"
	return req
}

// finishedRun returns a fixture whose run r1 has ended, and its database.
func finishedRun(t *testing.T) (*fixture, *sql.DB) {
	t.Helper()
	var db *sql.DB
	f := newFixture(t, map[string][]toolruntest.Reply{
		"hi": {toolruntest.Message(toolruntest.Text("hello there"))},
	}, nil, func(c *serve.Config) { db = c.DB })
	if status, _, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "hi")}, nil)); status != 200 {
		t.Fatalf("run: %d %s", status, body)
	}
	return f, db
}

// TestSlowReaderHoldsNoConnection: a client that stops reading its event
// stream holds no connection of the database while its write waits. The
// CLI's pool has one connection, so a stream that wrote inside its query,
// as it did, stopped every run and request of the server.
func TestSlowReaderHoldsNoConnection(t *testing.T) {
	f, db := finishedRun(t)
	w := newStuckWriter(false)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.h.ServeHTTP(w, loopback(httptest.NewRequest("GET", "/runs/r1/events", nil)))
	}()
	<-w.entered
	if inUse := db.Stats().InUse; inUse != 0 {
		t.Errorf("while the stream's write waits, %d connections of the database are in use, want 0", inUse)
	} else {
		// Another request goes through meanwhile.
		resp, err := http.Get(f.url + "/api/pending")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("another request while the stream waits: %d", resp.StatusCode)
		}
	}
	close(w.release)
	<-done
}

// TestStreamWriteDeadline: each write of an event stream has a deadline,
// and the first write that fails (a client that did not read in time) ends
// the stream; the deadline is lifted when the stream ends, since the
// connection may serve another request. Before, a stream had no deadline
// and went on writing after a failed write.
func TestStreamWriteDeadline(t *testing.T) {
	f, _ := finishedRun(t)
	w := newStuckWriter(true)
	before := time.Now()
	f.h.ServeHTTP(w, loopback(httptest.NewRequest("GET", "/runs/r1/events", nil)))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.writes != 1 {
		t.Errorf("the stream wrote %d times, want it to end at its first failed write", w.writes)
	}
	if len(w.wrote) == 0 || !w.wrote[0] {
		t.Errorf("the stream wrote without a write deadline")
	}
	if len(w.deadlines) == 0 {
		t.Fatal("no write deadline set")
	}
	if d := w.deadlines[0]; !d.After(before) {
		t.Errorf("the first write deadline %v is not after the stream began (%v)", d, before)
	}
	if last := w.deadlines[len(w.deadlines)-1]; !last.IsZero() {
		t.Errorf("the stream left a write deadline of %v on the connection, want it lifted", last)
	}
}

// slowBody is the body of a client that sends its headers and then nothing:
// a read returns what a read past its deadline does, or, if the handler set
// no deadline, an error that says so.
type slowBody struct{ w *deadlineWriter }

func (b slowBody) Read([]byte) (int, error) {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	if len(b.w.deadlines) == 0 || b.w.deadlines[len(b.w.deadlines)-1].IsZero() {
		b.w.unbounded = true
		return 0, errors.New("a read with no deadline: a slow client holds it for ever")
	}
	return 0, os.ErrDeadlineExceeded
}

// deadlineWriter records the read deadlines a handler sets, as a
// connection keeps them.
type deadlineWriter struct {
	*httptest.ResponseRecorder
	mu        sync.Mutex // guards deadlines, unbounded
	deadlines []time.Time
	unbounded bool
}

func (w *deadlineWriter) SetReadDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadlines = append(w.deadlines, t)
	return nil
}

// TestSlowBodyTimesOut: a client that sends a request's headers and then
// its body a byte at a time, or never, is answered 408 once the body's read
// deadline passes, and the connection is closed with the deadline left in
// the past, so that net/http does not read the rest of the body before it
// answers (TestStalledBodiesReleased has it on real connections).
func TestSlowBodyTimesOut(t *testing.T) {
	f, _ := finishedRun(t)
	for path, typ := range map[string]string{"/": "application/json", "/api/interrupts/x/decision": "application/json", "/inbox/login": "application/x-www-form-urlencoded"} {
		t.Run(path, func(t *testing.T) {
			w := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
			req := loopback(httptest.NewRequest("POST", path, nil))
			req.Body = io.NopCloser(slowBody{w})
			req.Header.Set("Content-Type", typ)
			f.h.ServeHTTP(w, req)
			if w.unbounded {
				t.Errorf("the body was read with no deadline")
			}
			if w.Code != http.StatusRequestTimeout || !strings.Contains(w.Body.String(), "body_timeout") {
				t.Errorf("got %d %s, want 408 body_timeout", w.Code, w.Body.String())
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if n := len(w.deadlines); n == 0 || w.deadlines[n-1].IsZero() || w.deadlines[n-1].After(time.Now()) {
				t.Errorf("read deadlines %v: want one set, and left in the past once the body failed", w.deadlines)
			}
			if got := w.Header().Get("Connection"); got != "close" {
				t.Errorf("Connection: %q, want close: what is left of the body must not be read", got)
			}
		})
	}
}

// TestManyToolsAndMessagesOnePass: a request with hundreds of thousands
// of client tools or messages, each with its own name or id, is read in
// one pass. Each tool used to be merged into the thread's by a search of
// those before it, and each message checked against the ones before it,
// inside the request's transaction: one request of 8 MiB of tools took
// minutes of CPU while the pool's one connection was held, and every other
// request and run waited (without the fix this test runs past go test's
// timeout). Both requests here are refused at their end, so what they cost
// is the reading.
func TestManyToolsAndMessagesOnePass(t *testing.T) {
	f := newFixture(t, map[string][]toolruntest.Reply{
		"hi": {toolruntest.Message(toolruntest.Text("hello there"))},
	}, nil, func(c *serve.Config) { c.MaxBodyBytes = 32 << 20 })
	if status, _, body := post(t, f.url, input("t0", "r0", []map[string]any{user("u1", "hi")}, nil)); status != 200 {
		t.Fatalf("first run: %d %s", status, body)
	}
	// Tools past MaxClientTools are refused before anything is read into
	// the thread.
	var b bytes.Buffer
	b.WriteString(`{"threadId":"t1","runId":"r0","messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[`)
	for i := range 400_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"t%d","description":""}`, i)
	}
	b.WriteString(`]}`)
	if status, _, body := post(t, f.url, json.RawMessage(b.Bytes())); status != http.StatusBadRequest || !strings.Contains(body, "too_many_tools") {
		t.Errorf("400,000 tools: %d %.200s, want 400 too_many_tools", status, body)
	}
	// Up to the bound, they are merged in one pass, and refused at the end
	// here because the run id is taken.
	b.Reset()
	b.WriteString(`{"threadId":"t1","runId":"r0","messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[`)
	for i := range serve.MaxClientTools {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"t%d","description":""}`, i)
	}
	b.WriteString(`]}`)
	if status, _, body := post(t, f.url, json.RawMessage(b.Bytes())); status != http.StatusConflict || !strings.Contains(body, "run_exists") {
		t.Errorf("%d tools and a run id taken: %d %.200s, want 409 run_exists", serve.MaxClientTools, status, body)
	}
	// Messages, refused at the end because the last has no id.
	b.Reset()
	b.WriteString(`{"threadId":"t2","runId":"r2","messages":[`)
	for i := range 600_000 {
		fmt.Fprintf(&b, `{"id":"m%d","role":"assistant"},`, i)
	}
	b.WriteString(`{"role":"user","content":"hi"}]}`)
	if status, _, body := post(t, f.url, json.RawMessage(b.Bytes())); status != http.StatusBadRequest || !strings.Contains(body, "has no id") {
		t.Errorf("600,000 messages, the last without an id: %d %.200s, want 400", status, body)
	}
}

// TestAmbiguousDecisionRefused: a decision that could be read two ways (a
// key given twice, or a second value after the first) is refused, over the
// JSON API and in a resume entry, and decides nothing. encoding/json took
// the last key and ignored what followed, so {"decision":"deny",
// "decision":"approve"} approved a call that a reader of its first key
// (a log, a proxy, a person) saw denied.
func TestAmbiguousDecisionRefused(t *testing.T) {
	f := newFixture(t, approvalScript(), policy.RequireApproval("payments need a person"), nil)
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil))
	if evs == nil {
		t.Fatal(body)
	}
	its := interrupts(t, evs)
	if len(its) != 2 {
		t.Fatalf("interrupts %v, want 2", its)
	}
	id := its[0]["id"].(string)
	for _, payload := range []string{
		`{"decision":"deny","decision":"approve"}`,
		`{"decision":"deny"} {"decision":"approve"}`,
		`{"decision":"approve","reason":"x","reason":"y"}`,
	} {
		req, _ := http.NewRequest("POST", f.url+"/api/interrupts/"+id+"/decision", strings.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("JSON API decision %s: %d %s, want 400", payload, resp.StatusCode, b)
		}
		if !json.Valid([]byte(payload)) {
			continue // two values cannot be one field of a RunAgentInput
		}
		in := fmt.Sprintf(`{"threadId":"t1","runId":"r-%d","messages":[],"resume":[{"interruptId":%q,"status":"resolved","payload":%s}]}`, len(payload), id, payload)
		if status, _, body := post(t, f.url, json.RawMessage(in)); status != http.StatusBadRequest || !strings.Contains(body, "bad_resume") {
			t.Errorf("resume entry %s: %d %s, want 400 bad_resume", payload, status, body)
		}
	}
	status, body := postJSON(t, f.url+"/api/pending", nil, "GET")
	if status != 200 || !strings.Contains(body, id) {
		t.Errorf("pending after the refusals: %d %s, want %s still pending", status, body, id)
	}
	if got := f.calls.got(); len(got) != 0 {
		t.Errorf("calls ran: %v", got)
	}
	// The same decision written once is taken.
	if status, body := postJSON(t, f.url+"/api/interrupts/"+id+"/decision", map[string]any{"decision": "deny", "reason": "no"}, "POST"); status != 200 {
		t.Errorf("a plain decision: %d %s", status, body)
	}
}

// TestStreamPages: a stream reads a run's events a page at a time (by
// count and by bytes); across the pages, from the start and from any
// Last-Event-ID, it sends every event once, in order.
func TestStreamPages(t *testing.T) {
	big := toolrun.NewTool("big", "", func(_ context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		return strings.Repeat("x", 400<<10) + fmt.Sprint(in.N), nil
	})
	var calls []toolruntest.Block
	for i := range 150 {
		calls = append(calls, toolruntest.ToolUse(fmt.Sprintf("call_%d", i), "pay", map[string]any{"amount": i % 100}))
	}
	for i := range 6 {
		calls = append(calls, toolruntest.ToolUse(fmt.Sprintf("big_%d", i), "big", map[string]any{"n": i}))
	}
	f := newFixture(t, map[string][]toolruntest.Reply{
		"many": {toolruntest.Message(calls...), toolruntest.Message(toolruntest.Text("done"))},
	}, nil, func(c *serve.Config) { c.Tools = append(c.Tools, big) })
	status, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "many")}, nil))
	if status != 200 || outcome(evs)["type"] != "success" {
		t.Fatalf("run: %d %s %v", status, body, last(evs))
	}
	size := 0
	for _, e := range evs {
		b, _ := json.Marshal(e)
		size += len(b)
	}
	if len(evs) < 600 || size < 2<<20 {
		t.Fatalf("%d events of %d bytes, want more than two pages of each bound", len(evs), size)
	}
	for _, from := range []int{0, 1, 255, 256, 257, 300, len(evs) - 1, len(evs)} {
		req, _ := http.NewRequest("GET", f.url+"/runs/r1/events", nil)
		if from > 0 {
			req.Header.Set("Last-Event-ID", fmt.Sprint(from))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, ids := readSSE(t, resp.Body)
		resp.Body.Close()
		if len(got) != len(evs)-from {
			t.Errorf("after %d: %d events, want %d", from, len(got), len(evs)-from)
			continue
		}
		for i, id := range ids {
			if id != fmt.Sprint(from+i+1) {
				t.Errorf("after %d: event %d has id %s, want %d", from, i, id, from+i+1)
				break
			}
		}
	}
}

// TestTokenOnlyFromTheHeader: a bearer token is taken from the
// Authorization header, with its scheme in any case, and never from the
// URL (access_token=, token=), where proxies' logs and browser histories
// keep it.
func TestTokenOnlyFromTheHeader(t *testing.T) {
	const secret = "secret-secret-secret"
	f := newFixture(t, nil, nil, func(c *serve.Config) {
		c.Tokens = []serve.Token{{Name: "a", Secret: secret, Scopes: []string{"read"}}}
	})
	tests := []struct {
		name, query, auth string
		want              int
	}{
		{"Bearer", "", "Bearer " + secret, 200},
		{"bearer", "", "bearer " + secret, 200},
		{"BEARER", "", "BEARER " + secret, 200},
		{"Basic", "", "Basic " + secret, 401},
		{"no scheme", "", secret, 401},
		{"access_token in the query", "?access_token=" + secret, "", 401},
		{"token in the query", "?token=" + secret, "", 401},
		{"bearer in the query", "?authorization=Bearer+" + secret, "", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", f.url+"/api/pending"+tt.query, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("got %d %s, want %d", resp.StatusCode, b, tt.want)
			}
			if strings.Contains(string(b), secret) {
				t.Errorf("the answer shows the token: %s", b)
			}
		})
	}
}

// TestStreamsPerTokenCapped: a token may have 64 event streams open at
// once; the next is refused with 429 until one ends. Each holds a
// connection, a goroutine and up to a page of events, so a client opening
// them by the thousand held the server's memory. A Last-Event-ID as long
// as the header limit is refused without being echoed whole.
func TestStreamsPerTokenCapped(t *testing.T) {
	f := newFixture(t, map[string][]toolruntest.Reply{
		"hold": {{Content: []toolruntest.Block{toolruntest.Text("late")}, Fault: toolruntest.Fault{EventDelay: time.Hour}}},
	}, nil, nil)
	b, _ := json.Marshal(input("t1", "r1", []map[string]any{user("u1", "hold")}, nil))
	run, err := http.Post(f.url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer run.Body.Close()
	get := func(hdr map[string]string) *http.Response {
		req, _ := http.NewRequest("GET", f.url+"/runs/r1/events", nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i := range 64 {
		resp := get(nil)
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("stream %d: %d", i, resp.StatusCode)
		}
	}
	resp := get(nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "too_many_streams") {
		t.Errorf("the 65th stream: %d %s, want 429 too_many_streams", resp.StatusCode, body)
	}
	resp = get(map[string]string{"Last-Event-ID": strings.Repeat("9", 100_000)})
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || len(body) > 1000 {
		t.Errorf("a 100 kB Last-Event-ID: %d, %d bytes of answer, want 400 and a short one", resp.StatusCode, len(body))
	}
	if status, body := postJSON(t, f.url+"/runs/r1/cancel", nil, "POST"); status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", status, body)
	}
}

// TestResumeRepeated: a resume entry repeated 10,000 times, or 10,000
// entries for interrupts that do not exist, are refused whole, and decide
// nothing: the call still waits, and its tool has not run.
func TestResumeRepeated(t *testing.T) {
	f := newFixture(t, approvalScript(), policy.RequireApproval("payments need a person"), nil)
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil))
	if evs == nil {
		t.Fatal(body)
	}
	id := interrupts(t, evs)[0]["id"].(string)
	same := make([]any, 10_000)
	for i := range same {
		same[i] = resume(id, map[string]any{"decision": "approve"})
	}
	if status, _, body := post(t, f.url, input("t1", "r2", nil, map[string]any{"resume": same})); status != http.StatusBadRequest || !strings.Contains(body, "answered twice") {
		t.Errorf("one entry 10,000 times: %d %.200s, want 400 answered twice", status, body)
	}
	unknown := []any{resume(id, map[string]any{"decision": "approve"})}
	for i := range 10_000 {
		unknown = append(unknown, resume(fmt.Sprintf("int_%d", i), map[string]any{"decision": "approve"}))
	}
	// Entries for interrupts the server never raised are ignored, with
	// one warning for them all (interrupt-resume.mdx, "An unrecognised
	// entry"); the one it raised is taken.
	status, evs, body := post(t, f.url, input("t1", "r3", nil, map[string]any{"resume": unknown}))
	if status != 200 {
		t.Fatalf("10,000 unknown interrupts and a known one: %d %.200s, want the run", status, body)
	}
	if w := customs(evs, "toolrun.warning"); len(w) != 1 || !strings.Contains(fmt.Sprint(w[0]["message"]), "10000") {
		t.Errorf("warnings %.300v, want one for the 10000 unknown entries", w)
	}
	if its := interrupts(t, evs); len(its) != 1 || its[0]["id"] == id {
		t.Errorf("interrupts %v, want the other call's alone", its)
	}
}

// TestInboxAmbiguousDecisionRefused: the inbox refuses a decision with a
// key given twice, as the JSON API does, and the call still waits.
func TestInboxAmbiguousDecisionRefused(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5)})
	id := e.start(t, "thread-5", "pay 5")[0]
	c, csrf := e.login(t, aliceToken)
	for _, body := range []string{`{"decision":"deny","decision":"approve"}`, `{"decision":"deny"} {"decision":"approve"}`} {
		if status, got := e.decideWith(t, c, id, csrf, body); status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", body, status, got)
		}
	}
	if got := e.pendingIDs(t); len(got) != 1 || got[0] != id {
		t.Errorf("pending after the refusals: %v, want [%s]", got, id)
	}
}

// callLog is a response that records, in order, its writes ("W"), flushes
// ("F") and write deadlines ("D+" set, "D0" lifted), and says on wrote when
// it has written.
type callLog struct {
	header http.Header
	wrote  chan struct{}
	mu     sync.Mutex // guards calls
	calls  []string
}

func (l *callLog) Header() http.Header { return l.header }
func (l *callLog) WriteHeader(int)     {}
func (l *callLog) add(c string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}
func (l *callLog) Write(p []byte) (int, error) {
	l.add("W")
	l.wrote <- struct{}{}
	return len(p), nil
}
func (l *callLog) Flush() { l.add("F") }
func (l *callLog) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		l.add("D0")
	} else {
		l.add("D+")
	}
	return nil
}

// TestStreamIdleHasNoDeadline: a stream that has written what the run has
// and waits for more lifts its write deadline, and sets one again for the
// next write. A deadline left on while waiting ends a quiet stream: an
// HTTP/2 stream is reset when its deadline passes, written to or not, and
// a run may be quiet for minutes (a slow tool, a person's approval).
func TestStreamIdleHasNoDeadline(t *testing.T) {
	f := newFixture(t, map[string][]toolruntest.Reply{
		"hold": {{Content: []toolruntest.Block{toolruntest.Text("late")}, Fault: toolruntest.Fault{EventDelay: time.Hour}}},
	}, nil, nil)
	b, _ := json.Marshal(input("t1", "r1", []map[string]any{user("u1", "hold")}, nil))
	run, err := http.Post(f.url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer run.Body.Close()
	// The run's events before its model answers: RUN_STARTED, STEP_STARTED.
	sc := bufio.NewScanner(run.Body)
	before := 0
	for sc.Scan() && before < 2 {
		if strings.HasPrefix(sc.Text(), "data: ") {
			before++
		}
	}
	l := &callLog{header: http.Header{}, wrote: make(chan struct{}, 100)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.h.ServeHTTP(l, loopback(httptest.NewRequest("GET", "/runs/r1/events", nil)))
	}()
	for range before {
		<-l.wrote
	}
	if status, body := postJSON(t, f.url+"/runs/r1/cancel", nil, "POST"); status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", status, body)
	}
	<-done
	l.mu.Lock()
	defer l.mu.Unlock()
	got := strings.Join(l.calls, " ")
	// The first events, a flush, the wait without a deadline, then the
	// cancellation's events under a deadline again.
	first := strings.Repeat(" D+ W", before)
	if !strings.HasPrefix(got, "D+"+first+" D+ F D0 D+ W") {
		t.Errorf("calls %s: want D+%s D+ F D0, then a deadline before the next write", got, first)
	}
	if !strings.HasSuffix(got, "D0") {
		t.Errorf("calls %s: want the deadline lifted at the end", got)
	}
}

// TestInboxEventsWriteDeadline: the inbox's change stream writes under a
// deadline and ends at the first write that fails, as a run's stream does:
// a page that stopped reading held its goroutine for as long as the
// server ran.
func TestInboxEventsWriteDeadline(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5)})
	e.start(t, "thread-5", "pay 5")
	c, key := e.login(t, aliceToken)
	h, err := serve.New(t.Context(), e.cfg) // the same database: the session is there
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	u, _ := url.Parse(e.url + "/inbox/")
	req := httptest.NewRequest("GET", "/inbox/api/events", nil)
	req.Header.Set("X-Inbox-Key", key)
	for _, ck := range c.Jar.Cookies(u) {
		req.AddCookie(ck)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := newStuckWriter(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, req.WithContext(ctx))
	}()
	<-w.entered
	w.mu.Lock()
	withDeadline := w.wrote[0]
	w.mu.Unlock()
	if !withDeadline {
		cancel() // the old stream goes on after a failed write
		<-done
		t.Fatal("the inbox's change stream wrote without a write deadline")
	}
	<-done // it ends at the failed write, with no cancellation
	w.mu.Lock()
	defer w.mu.Unlock()
	if last := w.deadlines[len(w.deadlines)-1]; !last.IsZero() {
		t.Errorf("the stream left a write deadline of %v, want it lifted", last)
	}
}

// TestClientToolsPerThreadBounded: a thread's client tools are those of
// its runs, merged by name; a run that would take the thread past
// MaxClientTools is refused whole, and a run that replaces tools by name
// stays within it.
func TestClientToolsPerThreadBounded(t *testing.T) {
	f := newFixture(t, map[string][]toolruntest.Reply{
		"hi": {toolruntest.Message(toolruntest.Text("hello there"))},
	}, nil, func(c *serve.Config) { c.MaxBodyBytes = 32 << 20 })
	tools := func(from, n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"name": fmt.Sprintf("t%d", from+i), "description": "", "parameters": map[string]any{"type": "object"}}
		}
		return out
	}
	half := serve.MaxClientTools/2 + 1
	if status, _, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "hi")}, map[string]any{"tools": tools(0, half)})); status != 200 {
		t.Fatalf("first run: %d %.300s", status, body)
	}
	if status, _, body := post(t, f.url, input("t1", "r2", []map[string]any{user("u1", "hi"), user("u2", "hi")}, map[string]any{"tools": tools(half, half)})); status != http.StatusBadRequest || !strings.Contains(body, "too_many_tools") {
		t.Errorf("a second run adding %d tools to %d: %d %.300s, want 400 too_many_tools", half, half, status, body)
	}
	// The same names again replace the thread's tools: within the bound.
	if status, _, body := post(t, f.url, input("t1", "r2", []map[string]any{user("u1", "hi"), user("u2", "hi")}, map[string]any{"tools": tools(0, half)})); status != 200 {
		t.Errorf("a second run replacing its tools: %d %.300s, want 200 (the refused run changed nothing)", status, body)
	}
}
