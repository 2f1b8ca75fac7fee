package serve_test

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// eventLog is a database/sql driver over modernc.org/sqlite that records,
// for every commit that writes serve_events, the types of the events it
// wrote and whether it saved a run's State too, and can make such a write
// fail: it shows how the server groups its events into transactions, as
// SQLite sees them.
type eventLog struct {
	sqlite driver.Driver

	mu      sync.Mutex          // guards commits, failing
	commits [][]string          // the event types of each commit, in order
	states  []bool              // for each commit, whether it saved a State
	failing func([]string) bool // if non-nil, called with a write's event types; true makes it fail
	// failingState, if non-nil, is called with the bytes of a State's
	// save; true makes the save fail.
	failingState func([]byte) bool
	changed      *sync.Cond // on mu; broadcast at every commit
}

var (
	eventLogs    sync.Map // DSN prefix → *eventLog
	eventLogID   atomic.Int64
	registerOnce sync.Once
	errInjected  = errors.New("injected: the disk is full")
)

// openEventLog opens a database at path through an eventLog.
func openEventLog(t testing.TB, path string) (*sql.DB, *eventLog) {
	t.Helper()
	registerOnce.Do(func() {
		db, _ := sql.Open("sqlite", "")
		sql.Register("sqlite-eventlog", eventLogDriver{})
		eventLogs.Store("", &eventLog{sqlite: db.Driver()})
		db.Close()
	})
	base, _ := eventLogs.Load("")
	l := &eventLog{sqlite: base.(*eventLog).sqlite}
	l.changed = sync.NewCond(&l.mu)
	key := fmt.Sprint(eventLogID.Add(1))
	eventLogs.Store(key, l)
	db, err := sql.Open("sqlite-eventlog", key+"|file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db, l
}

// committed records a commit of events of the types given, with a
// State's save if state.
func (l *eventLog) committed(types []string, state bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.commits = append(l.commits, types)
	l.states = append(l.states, state)
	l.changed.Broadcast()
}

// waitFor waits until an event of type ty is committed.
func (l *eventLog) waitFor(ty string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		for _, c := range l.commits {
			if slices.Contains(c, ty) {
				return
			}
		}
		l.changed.Wait()
	}
}

func (l *eventLog) got() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]string(nil), l.commits...)
}

// gotStates returns the commits as got does, each that saved a State
// too with "State" before its events.
func (l *eventLog) gotStates() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][]string
	for i, c := range l.commits {
		if l.states[i] {
			c = append([]string{"State"}, c...)
		}
		out = append(out, c)
	}
	return out
}

type eventLogDriver struct{}

func (eventLogDriver) Open(name string) (driver.Conn, error) {
	key, dsn, _ := strings.Cut(name, "|")
	v, ok := eventLogs.Load(key)
	if !ok {
		return nil, fmt.Errorf("no event log %q", key)
	}
	l := v.(*eventLog)
	c, err := l.sqlite.Open(dsn)
	if err != nil {
		return nil, err
	}
	return &eventConn{Conn: c, log: l}, nil
}

// eventConn is a connection whose writes to serve_events are recorded.
type eventConn struct {
	driver.Conn
	log     *eventLog
	inTx    bool
	pending []string // the event types the open transaction wrote
	state   bool     // the open transaction saved a State
}

func (c *eventConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.exec(ctx, query, args, func() (driver.Result, error) {
		return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	})
}

// exec runs a write by run, recording the events it writes to
// serve_events, or failing it as l.failing says.
func (c *eventConn) exec(ctx context.Context, query string, args []driver.NamedValue, run func() (driver.Result, error)) (driver.Result, error) {
	if savesState(query) {
		c.log.mu.Lock()
		fail := false
		for _, a := range args {
			if b, ok := a.Value.([]byte); ok && c.log.failingState != nil && c.log.failingState(b) {
				fail = true
			}
		}
		c.log.mu.Unlock()
		if fail {
			return nil, errInjected
		}
		res, err := run()
		if err == nil && c.inTx {
			c.state = true
		}
		return res, err
	}
	var types []string
	if strings.Contains(query, "INSERT INTO serve_events") {
		for _, a := range args {
			if b, ok := a.Value.([]byte); ok {
				var e struct{ Type string }
				json.Unmarshal(b, &e)
				types = append(types, e.Type)
			}
		}
		c.log.mu.Lock()
		fail := c.log.failing != nil && c.log.failing(types)
		c.log.mu.Unlock()
		if fail {
			return nil, errInjected
		}
	}
	res, err := run()
	if err != nil || types == nil {
		return res, err
	}
	if c.inTx {
		c.pending = append(c.pending, types...)
	} else {
		c.log.committed(types, false)
	}
	return res, nil
}

func (c *eventConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *eventConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil || !(strings.Contains(query, "serve_events") || savesState(query)) || strings.HasPrefix(strings.TrimSpace(query), "SELECT") {
		return st, err
	}
	return &eventStmt{Stmt: st, c: c, query: query}, nil
}

// savesState reports whether query writes a run's State.
func savesState(query string) bool {
	q := strings.TrimSpace(query)
	return (strings.HasPrefix(q, "INSERT INTO serve_states") || strings.HasPrefix(q, "UPDATE serve_states") || strings.HasPrefix(q, "INSERT INTO serve_state_skeletons")) && !strings.HasPrefix(q, "SELECT")
}

// eventStmt is a prepared write to serve_events, recorded as the
// connection's writes are.
type eventStmt struct {
	driver.Stmt
	c     *eventConn
	query string
}

func (s *eventStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.c.exec(ctx, s.query, args, func() (driver.Result, error) {
		return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	})
}

func (c *eventConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.inTx, c.pending, c.state = true, nil, false
	return &eventTx{Tx: tx, c: c}, nil
}

func (c *eventConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

type eventTx struct {
	driver.Tx
	c *eventConn
}

func (t *eventTx) Commit() error {
	err := t.Tx.Commit()
	if err == nil && t.c.pending != nil {
		t.c.log.committed(t.c.pending, t.c.state)
	}
	t.c.inTx, t.c.pending, t.c.state = false, nil, false
	return err
}

func (t *eventTx) Rollback() error {
	t.c.inTx, t.c.pending, t.c.state = false, nil, false
	return t.Tx.Rollback()
}

// eventFixture is a server whose database is an eventLog's.
func eventFixture(t *testing.T, s map[string][]toolruntest.Reply, policy toolrun.Policy) (*fixture, *eventLog) {
	t.Helper()
	db, l := openEventLog(t, filepath.Join(t.TempDir(), "serve.db"))
	f := newFixture(t, s, policy, func(c *serve.Config) { c.DB = db })
	return f, l
}

// textAndCalls makes the model say something and call pay and refund in
// one response, then answer.
func textAndCalls() map[string][]toolruntest.Reply {
	return map[string][]toolruntest.Reply{
		"pay both": {
			toolruntest.Message(toolruntest.Text("paying"), toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 10}), toolruntest.ToolUse("call_refund", "refund", map[string]any{"amount": 20})),
			toolruntest.Message(toolruntest.Text("done")),
		},
	}
}

// The events one toolrun event makes (a response's text and tool calls,
// a tool's result) are written in one commit, not one commit each, a
// step's end with what the run writes after it, and the streams get them
// all, in order.
func TestEventsOfAResponseInOneCommit(t *testing.T) {
	f, l := eventFixture(t, textAndCalls(), nil)
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil))
	if evs == nil {
		t.Fatal(body)
	}
	var flat []string
	for _, c := range l.got() {
		flat = append(flat, c...)
	}
	if diff := cmp.Diff(types(evs), flat); diff != "" {
		t.Fatalf("the events written (-sent +written):\n%s", diff)
	}
	// The two calls run at once: each result is written with the State
	// that has it, or with the other's, or at the other call's start.
	var got [][]string
	results := 0
	for _, c := range l.got() {
		if c[0] == "TOOL_CALL_RESULT" && slices.Equal(slices.Compact(slices.Clone(c)), []string{"TOOL_CALL_RESULT"}) {
			results += len(c)
			if results < 2 {
				continue
			}
			c = []string{"TOOL_CALL_RESULT", "TOOL_CALL_RESULT"}
		}
		got = append(got, c)
	}
	want := [][]string{
		{"RUN_STARTED"},
		{"STEP_STARTED"},
		{"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"},
		{"TOOL_CALL_RESULT", "TOOL_CALL_RESULT"},
		{"STEP_FINISHED"},
		{"STEP_STARTED"},
		{"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"},
		{"STEP_FINISHED"},
		{"RUN_FINISHED"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the commits' events (-want +got):\n%s", diff)
	}
	// The message ids the thread has are known: sent back, they add no
	// message to the thread.
	var result map[string]any
	for _, e := range evs {
		if e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == "call_pay" {
			result = e
		}
	}
	msgs := []map[string]any{
		user("u1", "pay both"),
		{"id": evs[2]["messageId"], "role": "assistant", "content": "paying"},
		{"id": result["messageId"], "role": "tool", "toolCallId": "call_pay", "content": result["content"]},
		user("u2", "thanks"),
	}
	if _, evs, body := post(t, f.url, input("t1", "r2", msgs, nil)); evs == nil || outcome(evs)["type"] != "success" {
		t.Fatalf("the thread again with its own messages: %s %v", body, types(evs))
	}
	if got := f.calls.got(); len(got) != 2 {
		t.Errorf("calls %v, want pay and refund once each", got)
	}
}

// A response's events and a tool result's are recorded in the
// transaction that saves the State that has them, not in one of their
// own before it: a turn costs the run two commits fewer, and what a
// stream sends of a response or a result is in the State as it does. A
// step's end goes with the State that ends its turn.
func TestEventsCommittedWithTheirState(t *testing.T) {
	f, l := eventFixture(t, map[string][]toolruntest.Reply{
		"pay then refund": {
			toolruntest.Message(toolruntest.Text("paying"), toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 10})),
			toolruntest.Message(toolruntest.ToolUse("call_refund", "refund", map[string]any{"amount": 20})),
			toolruntest.Message(toolruntest.Text("done")),
		},
	}, nil)
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay then refund")}, nil))
	if evs == nil || outcome(evs)["type"] != "success" {
		t.Fatalf("%s %v", body, types(evs))
	}
	want := [][]string{
		{"RUN_STARTED"},
		{"STEP_STARTED"},
		{"State", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"},
		{"State", "TOOL_CALL_RESULT"},
		{"State", "STEP_FINISHED"},
		{"STEP_STARTED"},
		{"State", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"},
		{"State", "TOOL_CALL_RESULT"},
		{"State", "STEP_FINISHED"},
		{"STEP_STARTED"},
		{"State", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"},
		{"State", "STEP_FINISHED"},
		{"RUN_FINISHED"},
	}
	if diff := cmp.Diff(want, l.gotStates()); diff != "" {
		t.Errorf("the commits' events, State for one that saved the run's State (-want +got):\n%s", diff)
	}
}

// A State's save that fails takes its events with it no further: they
// are recorded on their own, and the run ends with its error, which its
// stream sends.
func TestEventsOfAFailedSaveRecorded(t *testing.T) {
	f, l := eventFixture(t, map[string][]toolruntest.Reply{
		"pay": {
			toolruntest.Message(toolruntest.Text("paying"), toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 10})),
			toolruntest.Message(toolruntest.Text("done")),
		},
	}, nil)
	l.mu.Lock()
	l.failingState = func(state []byte) bool { return bytes.Contains(state, []byte("paid ")) }
	l.mu.Unlock()
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay")}, nil))
	if body != "" {
		t.Fatal(body)
	}
	want := []string{"RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "STEP_FINISHED", "RUN_ERROR"}
	if diff := cmp.Diff(want, types(evs)); diff != "" {
		t.Errorf("the run's stream (-want +got):\n%s", diff)
	}
}

// An event that cannot be recorded leaves a gap that every stream stops
// at: no stream sends an event after it, none sends one twice, and the
// run itself goes on to its end.
func TestUnrecordedEventsLeaveAGap(t *testing.T) {
	f, l := eventFixture(t, textAndCalls(), nil)
	l.mu.Lock()
	l.failing = func(types []string) bool {
		for _, ty := range types {
			if ty == "TOOL_CALL_START" {
				return true
			}
		}
		return false
	}
	l.mu.Unlock()
	_, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil))
	if body != "" {
		t.Fatal(body)
	}
	want := []string{"RUN_STARTED", "STEP_STARTED"}
	if diff := cmp.Diff(want, types(evs)); diff != "" {
		t.Fatalf("the run's stream (-want +got):\n%s", diff)
	}
	// The run went on: its tools ran, and the rest of its events were
	// recorded after the gap.
	l.waitFor("RUN_FINISHED")
	if got := f.calls.got(); len(got) != 2 {
		t.Errorf("calls %v, want pay and refund once each", got)
	}
	var written []string
	for _, c := range l.got() {
		written = append(written, c...)
	}
	if len(written) == 0 || written[len(written)-1] != "RUN_FINISHED" {
		t.Errorf("events written %v, want the run's end recorded", written)
	}
	// A stream from the start, or from the last event sent, stops at the
	// gap too.
	for _, after := range []string{"", "1", "2"} {
		req, _ := http.NewRequest("GET", f.url+"/runs/r1/events", nil)
		if after != "" {
			req.Header.Set("Last-Event-ID", after)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, ids := readSSE(t, resp.Body)
		resp.Body.Close()
		n := 0
		if after != "" {
			fmt.Sscan(after, &n)
		}
		if diff := cmp.Diff(want[n:], types(got), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("after %q (-want +got):\n%s", after, diff)
		}
		for i, id := range ids {
			if id != fmt.Sprint(n+i+1) {
				t.Errorf("after %q: ids %v, want %d on, one by one", after, ids, n+1)
				break
			}
		}
	}
	// The thread goes on in a new run, whose events are whole.
	l.mu.Lock()
	l.failing = nil
	l.mu.Unlock()
	_, evs, body = post(t, f.url, input("t1", "r2", []map[string]any{user("u2", "hi")}, nil))
	if evs == nil || last(evs)["type"] != "RUN_FINISHED" {
		t.Fatalf("the next run: %s %v", body, types(evs))
	}
}

// A run whose last event cannot be recorded has no terminal event for
// its streams to end at: a stream woken by that failed write finds
// nothing new and, the run being still in flight, waits again. The run's
// end wakes it once more when it is let go, so that it ends at the gap
// instead of waiting for ever; here the POST's own stream and a GET
// stream opened while the run is ended and not yet let go.
func TestStreamEndsWhenTheLastEventIsNotRecorded(t *testing.T) {
	f, l := eventFixture(t, textAndCalls(), nil)
	l.mu.Lock()
	l.failing = func(types []string) bool { return slices.Contains(types, "RUN_FINISHED") }
	l.mu.Unlock()
	ended, letGo := make(chan string, 1), make(chan struct{})
	serve.SetBeforeRelease(f.h, func(run string) {
		ended <- run
		<-letGo
	})
	// A hang is this test's failure: bound it rather than wait for the
	// test binary's timeout.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	read := func(resp *http.Response) <-chan []string {
		done := make(chan []string, 1)
		go func() {
			defer resp.Body.Close()
			evs, _ := readSSE(t, resp.Body)
			if ctx.Err() != nil {
				done <- []string{"error: the stream did not end; it was cut after " + fmt.Sprint(types(evs))}
				return
			}
			done <- types(evs)
		}()
		return done
	}
	posted := make(chan []string, 1)
	go func() {
		b, _ := json.Marshal(input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			posted <- []string{"error: " + err.Error()}
			return
		}
		posted <- <-read(resp)
	}()
	if run := <-ended; run != "r1" {
		t.Fatalf("run %q ended, want r1", run)
	}
	// Its headers come with the events recorded so far, once the stream
	// has taken the run in flight to wait on.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url+"/runs/r1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got := read(resp)
	close(letGo)
	for name, ch := range map[string]<-chan []string{"the POST's stream": posted, "a GET stream": got} {
		evs := <-ch
		if len(evs) == 0 || slices.Contains(evs, "RUN_FINISHED") || slices.ContainsFunc(evs, func(s string) bool { return strings.HasPrefix(s, "error: ") }) {
			t.Errorf("%s: %v, want the recorded events, ended at the unrecorded RUN_FINISHED", name, evs)
		}
	}
}

// BenchmarkServeRun measures a run through the server: a response with
// text and two tool calls, their results, and the answer, on a database
// that syncs every commit, as `toolrun serve` opens it.
func BenchmarkServeRun(b *testing.B) {
	model := toolruntest.New(b, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		if r.Conversation[len(r.Conversation)-1].Role == "user" && len(r.Conversation) == 1 {
			return textAndCalls()["pay both"][0]
		}
		return textAndCalls()["pay both"][1]
	}})
	db, _ := openEventLog(b, filepath.Join(b.TempDir(), "serve.db"))
	pay, _ := toolrun.NewRawTool("pay", "pays", []byte(`{"type":"object"}`), func(context.Context, json.RawMessage) (string, error) { return "paid", nil })
	refund, _ := toolrun.NewRawTool("refund", "refunds", []byte(`{"type":"object"}`), func(context.Context, json.RawMessage) (string, error) { return "refunded", nil })
	h, err := serve.New(context.Background(), serve.Config{
		Client: model.Client(),
		Params: anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024},
		Tools:  []toolrun.Tool{pay, refund},
		DB:     db,
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer func() {
		h.Shutdown(context.Background())
		srv.Close()
	}()
	b.ResetTimer()
	for i := range b.N {
		body, _ := json.Marshal(input(fmt.Sprint("t", i), fmt.Sprint("r", i), []map[string]any{user("u1", "pay both")}, nil))
		resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n == 0 {
			b.Fatalf("run %d: status %d", i, resp.StatusCode)
		}
	}
}
