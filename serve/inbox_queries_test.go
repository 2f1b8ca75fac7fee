package serve_test

import (
	"bufio"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// queryLog is a database/sql driver over modernc.org/sqlite that records
// every statement the server sends, in order, with the rows each query
// answered: it shows what the inbox reads, and when, as SQLite sees it.
type queryLog struct {
	sqlite driver.Driver

	mu      sync.Mutex
	entries []loggedQuery
}

// loggedQuery is one statement sent, and how many rows it answered.
type loggedQuery struct {
	text string
	rows int
}

var (
	queryLogs     sync.Map // DSN prefix → *queryLog
	queryLogID    atomic.Int64
	queryLogOnce  sync.Once
	querySQLite   driver.Driver
	errNoQueryLog = fmt.Errorf("no such query log")
)

// openQueryLog opens a database at path through a queryLog.
func openQueryLog(t testing.TB, path string) (*sql.DB, *queryLog) {
	t.Helper()
	queryLogOnce.Do(func() {
		db, _ := sql.Open("sqlite", "")
		querySQLite = db.Driver()
		db.Close()
		sql.Register("sqlite-querylog", queryLogDriver{})
	})
	l := &queryLog{sqlite: querySQLite}
	key := fmt.Sprint(queryLogID.Add(1))
	queryLogs.Store(key, l)
	db, err := sql.Open("sqlite-querylog", key+"|file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db, l
}

// add records a statement sent and returns its place in the log.
func (l *queryLog) add(text string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, loggedQuery{text: text})
	return len(l.entries) - 1
}

func (l *queryLog) row(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries[i].rows++
}

// since returns the statements sent from the log's place n on.
func (l *queryLog) since(n int) []loggedQuery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loggedQuery(nil), l.entries[min(n, len(l.entries)):]...)
}

func (l *queryLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

type queryLogDriver struct{}

func (queryLogDriver) Open(name string) (driver.Conn, error) {
	key, dsn, _ := strings.Cut(name, "|")
	v, ok := queryLogs.Load(key)
	if !ok {
		return nil, errNoQueryLog
	}
	l := v.(*queryLog)
	c, err := l.sqlite.Open(dsn)
	if err != nil {
		return nil, err
	}
	return &loggedConn{Conn: c, l: l}, nil
}

// loggedConn is a connection of a queryLog.
type loggedConn struct {
	driver.Conn
	l *queryLog
}

func (c *loggedConn) Prepare(q string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), q)
}

func (c *loggedConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	var s driver.Stmt
	var err error
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		s, err = p.PrepareContext(ctx, q)
	} else {
		s, err = c.Conn.Prepare(q)
	}
	if err != nil {
		return nil, err
	}
	return &loggedStmt{Stmt: s, l: c.l, text: q}, nil
}

func (c *loggedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return c.Conn.Begin() //nolint:staticcheck // the driver's own fallback
}

func (c *loggedConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	qc, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	i := c.l.add(q)
	rows, err := qc.QueryContext(ctx, q, args)
	if err != nil {
		return nil, err
	}
	return &loggedRows{Rows: rows, l: c.l, i: i}, nil
}

func (c *loggedConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	ec, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	c.l.add(q)
	return ec.ExecContext(ctx, q, args)
}

func (c *loggedConn) CheckNamedValue(nv *driver.NamedValue) error {
	if nc, ok := c.Conn.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c *loggedConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// loggedStmt is a prepared statement of a queryLog: each use is logged.
type loggedStmt struct {
	driver.Stmt
	l    *queryLog
	text string
}

func (s *loggedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.l.add(s.text)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *loggedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	i := s.l.add(s.text)
	rows, err := s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	return &loggedRows{Rows: rows, l: s.l, i: i}, nil
}

func (s *loggedStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if nc, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// loggedRows counts the rows a logged query answers.
type loggedRows struct {
	driver.Rows
	l *queryLog
	i int
}

func (r *loggedRows) Next(dest []driver.Value) error {
	err := r.Rows.Next(dest)
	if err == nil {
		r.l.row(r.i)
	}
	return err
}

// withQueryLog restarts e's server on its database opened through a
// queryLog, and returns the log.
func (e *inboxEnv) withQueryLog(t *testing.T) *queryLog {
	t.Helper()
	db, l := openQueryLog(t, e.dbPath)
	e.cfg.DB = db
	e.restart(t)
	return l
}

// inputsRead counts the rows of queries that read calls' inputs.
func inputsRead(qs []loggedQuery) int {
	n := 0
	for _, q := range qs {
		if strings.HasPrefix(strings.TrimSpace(q.text), "SELECT") && strings.Contains(q.text, "input") && strings.Contains(q.text, "serve_interrupts") {
			n += q.rows
		}
	}
	return n
}

// openStream opens the inbox's change stream with a session of token and
// returns a function that reads its next event.
func (e *inboxEnv) openStream(t *testing.T, token, query string) (next func() (string, map[string]any)) {
	t.Helper()
	c, key := e.login(t, token)
	req, _ := http.NewRequest(http.MethodGet, e.url+"/inbox/api/events"+query, nil)
	req.Header.Set("X-Inbox-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("the change stream: %d %s", resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	return func() (string, map[string]any) {
		t.Helper()
		var event, data string
		for event == "" || data == "" {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the change stream: %v", err)
			}
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				event = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = strings.TrimSpace(v)
			}
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatal(err)
		}
		return event, m
	}
}

// TestInboxOpensReadingTheFirstPageOnly: the change stream's first event,
// the list's first page, reads the inputs of that page's calls and no
// other, however many calls wait (the list's order, counts and tools
// come from the calls' other columns), and the threads of the page's
// calls in one query, their States in one more.
func TestInboxOpensReadingTheFirstPageOnly(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{})
	fillPending(t, e, 2500) // 125 of tool_3
	l := e.withQueryLog(t)
	for _, q := range []string{"", "?tool=tool_3"} {
		mark := l.len()
		next := e.openStream(t, aliceToken, q)
		event, data := next()
		if event != "ready" {
			t.Fatalf("%q: the first event is %q, want ready", q, event)
		}
		calls, _ := data["pending"].([]any)
		if len(calls) != 100 {
			t.Fatalf("%q: ready lists %d calls, want a page of 100", q, len(calls))
		}
		qs := l.since(mark)
		if got := inputsRead(qs); got > 100 {
			t.Errorf("%q: opening the stream read the inputs of %d calls, want the first page's 100 at most", q, got)
		}
		// The page's calls are of 100 threads: their owners and States
		// are read in a query each, not one per thread.
		threads, states := 0, 0
		for _, q := range qs {
			threads += strings.Count(q.text, "FROM serve_threads")
			states += strings.Count(q.text, "FROM serve_states")
		}
		if threads > 1 || states > 1 {
			t.Errorf("%q: opening the stream read the page's threads in %d queries and their States in %d, want 1 and 1", q, threads, states)
		}
	}
}

// TestInboxStreamTellsAChangeDuringItsFirstReading lands changes between
// the change stream's reading of the list and its first page: a call
// that starts waiting then and one decided then are both told, in the
// events that follow.
func TestInboxStreamTellsAChangeDuringItsFirstReading(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{})
	fillPending(t, e, 150)
	db, err := sql.Open("sqlite", "file:"+e.dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var once sync.Once
	serve.SetInboxAfterReading(e.h, func() {
		once.Do(func() {
			now := time.Now().UTC()
			if _, err := db.Exec(`INSERT INTO serve_interrupts (id, thread_id, run_id, tool_call_id, tool_name, input, reason, kind, status, created_at, expires_at) VALUES ('int_new', 'thread-new', 'run_1', 'toolu_new', 'pay', '{"amount":1}', 'payments need a person', 'approval', 'pending', ?, ?)`,
				now.Format(time.RFC3339Nano), now.Add(time.Hour).Format(time.RFC3339Nano)); err != nil {
				t.Error(err)
			}
			if _, err := db.Exec(`UPDATE serve_interrupts SET status = 'decided', decided_by = 'bob', decided_at = ? WHERE id = 'int_0000'`, now.Format(time.RFC3339Nano)); err != nil {
				t.Error(err)
			}
		})
	})
	next := e.openStream(t, aliceToken, "")
	event, ready := next()
	if event != "ready" {
		t.Fatalf("the first event is %q, want ready", event)
	}
	for _, c := range ready["pending"].([]any) {
		if id := c.(map[string]any)["id"]; id == "int_0000" {
			t.Errorf("the first page lists %s, decided before it was read", id)
		}
	}
	// A later change, after the first page: the deltas up to the one that
	// tells it must have told the changes before it.
	now := time.Now().UTC()
	if _, err := db.Exec(`INSERT INTO serve_interrupts (id, thread_id, run_id, tool_call_id, tool_name, input, reason, kind, status, created_at, expires_at) VALUES ('int_later', 'thread-later', 'run_1', 'toolu_later', 'pay', '{"amount":2}', 'payments need a person', 'approval', 'pending', ?, ?)`,
		now.Format(time.RFC3339Nano), now.Add(time.Hour).Format(time.RFC3339Nano)); err != nil {
		t.Fatal(err)
	}
	added, removed := map[string]bool{}, map[string]bool{}
	for !added["int_later"] {
		event, d := next()
		if event != "delta" {
			t.Fatalf("event %q, want delta", event)
		}
		for _, c := range d["added"].([]any) {
			added[c.(map[string]any)["id"].(string)] = true
		}
		for _, id := range d["removed"].([]any) {
			removed[id.(string)] = true
		}
	}
	delete(added, "int_later")
	if diff := cmp.Diff(map[string]bool{"int_new": true}, added); diff != "" {
		t.Errorf("added (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"int_0000": true}, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
}

// TestTenantVisibilityInOneQuery: the calls a tenant's token lists are
// kept by the owners of their threads, read in one query however many
// threads there are.
func TestTenantVisibilityInOneQuery(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{})
	fillPending(t, e, 300) // threads thread-000 to thread-099, three calls each
	db, err := sql.Open("sqlite", "file:"+e.dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 100 {
		owner := "acme-app"
		if i >= 50 {
			owner = "globex-app"
		}
		if _, err := db.Exec(`INSERT INTO serve_threads (id, owner, created_at) VALUES (?, ?, ?)`, fmt.Sprintf("thread-%03d", i), owner, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
			t.Fatal(err)
		}
	}
	e.cfg.Tokens = append(e.cfg.Tokens,
		serve.Token{Name: "acme-app", Secret: "acme-app-secret-0123", Scopes: []string{serve.ScopeRun}, Tenant: "acme"},
		serve.Token{Name: "acme-ops", Secret: "acme-ops-secret-0123", Scopes: []string{serve.ScopeRead}, Tenant: "acme"},
		serve.Token{Name: "globex-app", Secret: "globex-app-secret-01", Scopes: []string{serve.ScopeRun}, Tenant: "globex"},
	)
	l := e.withQueryLog(t)
	mark := l.len()
	status, body := e.bearer(t, http.MethodGet, "/api/pending", "acme-ops-secret-0123", "")
	if status != http.StatusOK {
		t.Fatalf("/api/pending: %d %s", status, body)
	}
	var got struct{ Pending []struct{ ThreadID string } }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Pending) != 150 {
		t.Errorf("acme-ops lists %d calls, want the 150 of acme's 50 threads", len(got.Pending))
	}
	for _, p := range got.Pending {
		if p.ThreadID >= "thread-050" {
			t.Errorf("acme-ops lists a call of %s, globex's", p.ThreadID)
			break
		}
	}
	var owners []string
	for _, q := range l.since(mark) {
		if strings.Contains(q.text, "serve_threads") {
			owners = append(owners, q.text)
		}
	}
	if len(owners) != 1 {
		t.Errorf("listing the calls of 100 threads read their owners in %d queries, want 1", len(owners))
	}
}

// TestAPIDecisionStartsTheRunBeforeWakingTheStreams: a decision over the
// JSON API starts the thread's next run before the inbox's change
// streams look for the change, as the inbox's own decision does: on the
// database's one connection, the run's start would otherwise wait behind
// their readings of the list.
func TestAPIDecisionStartsTheRunBeforeWakingTheStreams(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5)})
	l := e.withQueryLog(t)
	id := e.start(t, "thread-5", "pay 5")[0]
	next := e.openStream(t, aliceToken, "")
	if event, _ := next(); event != "ready" {
		t.Fatalf("the first event is %q, want ready", event)
	}
	mark := l.len()
	status, body := e.bearer(t, http.MethodPost, "/api/interrupts/"+id+"/decision", bobToken, `{"decision":"approve"}`)
	if status != http.StatusOK {
		t.Fatalf("the decision: %d %s", status, body)
	}
	var answer struct{ NextRun string }
	json.Unmarshal([]byte(body), &answer)
	e.follow(t, answer.NextRun)
	var order []string
	decided := false
	for _, q := range l.since(mark) {
		switch {
		case strings.HasPrefix(q.text, "UPDATE serve_interrupts SET status"):
			decided = true
			order = append(order, "decided")
		case !decided:
		case strings.HasPrefix(q.text, "INSERT INTO serve_runs"):
			order = append(order, "run started")
		case strings.Contains(q.text, "COALESCE(MAX(created_at)"):
			order = append(order, "stream looked")
		}
	}
	if len(order) < 3 {
		t.Fatalf("after the decision: %v, want it decided, the run started and a stream to look", order)
	}
	if diff := cmp.Diff([]string{"decided", "run started", "stream looked"}, order[:3]); diff != "" {
		t.Errorf("the order after a decision over the JSON API (-want +got):\n%s", diff)
	}
}

// TestInboxListWalksAnIndexOnly: the inbox's reading of every call
// waiting is answered from an index alone, not the table's rows with
// their inputs; a database made with the index it replaces opens
// without it.
func TestInboxListWalksAnIndexOnly(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{})
	fillPending(t, e, 300)
	db, err := sql.Open("sqlite", "file:"+e.dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The index of an older server's database.
	if _, err := db.Exec(`CREATE INDEX IF NOT EXISTS serve_interrupts_waiting ON serve_interrupts (status, kind, created_at, id)`); err != nil {
		t.Fatal(err)
	}
	l := e.withQueryLog(t)
	mark := l.len()
	next := e.openStream(t, aliceToken, "")
	if event, data := next(); event != "ready" || data["waiting"] != float64(300) {
		t.Fatalf("the first event is %q with %v waiting, want ready with 300", event, data["waiting"])
	}
	var listing string
	for _, q := range l.since(mark) {
		if q.rows == 300 && strings.Contains(q.text, "FROM serve_interrupts") {
			listing = q.text
		}
	}
	if listing == "" {
		t.Fatal("no query read the 300 calls waiting")
	}
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+listing, "pending", "approval")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if len(plan) != 1 || !strings.Contains(plan[0], "COVERING INDEX") {
		t.Errorf("the list's reading %q is planned as %q, want a covering index alone", listing, plan)
	}
	var old int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'serve_interrupts_waiting'`).Scan(&old); err != nil {
		t.Fatal(err)
	}
	if old != 0 {
		t.Error("the index the list's index replaces is still kept")
	}
}
