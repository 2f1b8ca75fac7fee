package serve

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/redact"
)

// Scopes a token may carry.
const (
	// ScopeRun lets a token start, continue, read and cancel its own runs.
	ScopeRun = "run"
	// ScopeApprove lets a token decide pending calls over the JSON API.
	ScopeApprove = "approve"
	// ScopeRead lets a token list pending calls, read any run's events and
	// the metrics.
	ScopeRead = "read"
)

// Token is one bearer token the server accepts.
type Token struct {
	// Name identifies the token's holder: decisions are recorded under it
	// and threads belong to it. It is never the secret.
	Name string `json:"name"`
	// Secret is the bearer token itself.
	Secret string `json:"token"`
	// Scopes lists what the token may do: [ScopeRun], [ScopeApprove],
	// [ScopeRead].
	Scopes []string `json:"scopes"`
	// MaxRuns caps the runs of this token that may be running at once.
	// Zero means 4.
	MaxRuns int `json:"max_runs,omitempty"`
	// Tenant names the tenant the token belongs to: its threads are the
	// tenant's, and its read and approve scopes reach only the tenant's
	// threads; another tenant's are answered 404. Empty is the default
	// tenant; a server whose tokens name no tenant is one tenant.
	Tenant string `json:"tenant,omitempty"`
}

// Config configures a [Handler]. Client and DB are required; the zero
// value of every other field has the default its doc gives.
type Config struct {
	// Client is how the runs reach the model.
	Client anthropic.Client
	// Params are the request params every thread starts with: model,
	// max_tokens, system prompt. Messages in it are ignored; a thread's
	// messages come from its client.
	Params anthropic.BetaMessageNewParams
	// Tools are the server's own tools (MCP servers, file tools), offered
	// on every thread beside the tools each client declares.
	Tools []toolrun.Tool
	// Options are the runner options of every run: Policy (the approval
	// policy), MaxTurns (per AG-UI run, not per thread), Budget (per
	// thread), Timeouts, Logger, OnEvent (called after the server's own
	// handling of each event, for metrics or tracing). Store and RunID
	// are the server's own and are ignored here.
	Options toolrun.Options
	// DB holds threads, runs, their states, pending calls, decisions and
	// events. Its dialect must be SQLite's (the CLI opens
	// modernc.org/sqlite); New creates the tables it lacks and sets the
	// connection's settings (see configureDB): open it with none.
	DB *sql.DB
	// Tokens are the bearer tokens accepted. With none, every request
	// from a loopback address may do everything, under the name "local",
	// and any other is refused: a server without tokens is for one
	// machine only.
	Tokens []Token
	// LocalMaxRuns caps the runs that may be running at once without
	// Tokens, under the name "local"; one more is answered 429 with the
	// code too_many_runs. Zero means 64.
	LocalMaxRuns int
	// MaxBodyBytes bounds a request body; one past it is answered 413
	// with the code too_large. A run's body is bounded in what it brings
	// beyond its thread's history: the messages the thread has already,
	// which AG-UI's clients send again with every run, count against
	// MaxHistoryBytes instead. Zero means 8 MiB.
	MaxBodyBytes int64
	// MaxHistoryBytes bounds the part of a run's body that is its
	// thread's history sent again: the messages at the start of the
	// client's history that the thread has, under their ids and, for a
	// user message, with the content it had. A run's body may be
	// MaxBodyBytes plus MaxHistoryBytes, of which at most MaxBodyBytes
	// new. A thread whose history passes it gets 413 too_large on every
	// run: its client must start a new thread, or send only the messages
	// since its last run. Zero means 64 MiB; a negative value means none
	// (every byte counts against MaxBodyBytes).
	MaxHistoryBytes int64
	// BodyReadTimeout bounds how long a client may take to send a
	// request's body, counted from the request's start, however it sends
	// it: one that stalls or sends a byte at a time is answered 408 with
	// the code body_timeout when it passes, and its connection closed.
	// Zero means 1 minute.
	BodyReadTimeout time.Duration
	// MaxConns bounds the connections a [Handler.Listener] keeps open at
	// once, from all clients; one more is answered 503. Zero means 4096.
	MaxConns int
	// MaxConnsPerClient bounds the connections of one client IP address
	// a [Handler.Listener] keeps open at once; one more is answered 503.
	// Zero means 256: a browser opens 6 to a host, and a program with a
	// connection pool a few dozen.
	MaxConnsPerClient int
	// StreamWriteTimeout bounds how long a client may take to read each
	// write of an event stream; one that stops reading is dropped (its run
	// goes on, and it may come back with Last-Event-ID). Zero means 1
	// minute.
	StreamWriteTimeout time.Duration
	// AllowedOrigins lists the origins a browser may call the server from
	// (CORS). Empty means none: no CORS header is ever sent.
	AllowedOrigins []string
	// ApprovalTTL is how long an interrupt may be answered. Zero means 24
	// hours.
	ApprovalTTL time.Duration
	// RecordDir, if set, is where each run is recorded as a JSON Lines
	// transcript (package transcript), for "toolrun view" and "toolrun
	// replay": one file a run, named THREAD-RUN.jsonl after hashes of the
	// two ids.
	RecordDir string
	// Logger receives the server's records, redacted. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Now returns the time; nil means time.Now. Tests set it.
	Now func() time.Time
	// UserApproves names the tools whose calls' approvals are the user's:
	// the client running the thread may answer them (resume entries), as
	// CopilotKit's in-chat approval does. "*" names every tool. Any other
	// approval is an approver's: only a token with the approve scope, or
	// a person in the inbox, may decide it, and a resume entry for it
	// from a token without that scope is refused with 403 approver_only
	// and changes nothing. Empty, the default, makes every approval an
	// approver's. Without Tokens the one loopback identity has every
	// scope, so it approves in either case.
	UserApproves []string
	// Executor, if set, runs the runs (see [Executor]): on the workers
	// of a Temporal task queue, with
	// github.com/toolrun/toolrun/temporal/servetemporal. Nil runs them in
	// this process, with their State in DB. Either way DB keeps the
	// threads, runs, events, interrupts and decisions.
	Executor Executor
	// Notify, if its URL is set, is a webhook POSTed when a call starts
	// waiting for a person (see [Notify]).
	Notify Notify
}

// Handler is the server: an http.Handler that offers the toolrun runner
// over AG-UI 1.0, with a JSON API for pending calls, /healthz and
// /metrics. Build it with [New]; it is safe for concurrent use.
type Handler struct {
	cfg    Config
	store  sqlStore
	writes *writeQueue // every write of the runs: events, States, ends
	db     preparedDB  // the database, its statements prepared once
	be     backend     // where the routes find runs, events and interrupts
	log    *slog.Logger
	mux    *http.ServeMux
	inbox  *inbox // the approval inbox, which also continues decided threads

	base   context.Context // the runs' context: ended by Shutdown
	cancel context.CancelFunc
	wg     sync.WaitGroup // the runs in flight

	mu sync.Mutex // guards the fields below
	// threads holds the threads with a run in flight.
	threads map[string]bool
	// runs holds the runs in flight, by run id.
	runs map[string]*liveRun
	// perToken counts the runs in flight of each token's name.
	perToken map[string]int
	// streams counts the GET /runs/{run}/events streams open of each
	// token's name.
	streams  map[string]int
	draining bool
	// beforeRelease, if not nil, is called as a run ended, before it is
	// let go: for a test that opens a stream there.
	beforeRelease func(run string)

	metrics metrics
}

// New returns the server for cfg. It creates the tables the server needs
// in cfg.DB, and closes the runs a killed process left running: their
// streams end with a RUN_ERROR whose code is "interrupted", and their
// threads go on from their saved State on the next run. With an
// Executor, whose runs go on while no server runs, such a run goes on
// instead, following its thread's run from where it stopped (see
// [ExecutorRun].Reattach), so that a client that reconnects to it reads
// what the run did meanwhile, and its end.
func New(ctx context.Context, cfg Config) (*Handler, error) {
	if cfg.DB == nil {
		return nil, errors.New("serve: Config.DB is nil")
	}
	tenants := map[string]string{}
	for _, t := range cfg.Tokens {
		if other, ok := tenants[t.Name]; ok && other != t.Tenant {
			return nil, fmt.Errorf("serve: token %q: named in tenants %q and %q; a name belongs to one tenant", t.Name, other, t.Tenant)
		}
		tenants[t.Name] = t.Tenant
		if t.Name == "" || len(t.Secret) < 16 {
			return nil, fmt.Errorf("serve: token %q: want a name and a secret of at least 16 characters", t.Name)
		}
		for _, s := range t.Scopes {
			if s != ScopeRun && s != ScopeApprove && s != ScopeRead {
				return nil, fmt.Errorf("serve: token %q: unknown scope %q; want run, approve or read", t.Name, s)
			}
		}
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	switch {
	case cfg.MaxHistoryBytes == 0:
		cfg.MaxHistoryBytes = 64 << 20
	case cfg.MaxHistoryBytes < 0:
		cfg.MaxHistoryBytes = 0
	}
	if cfg.ApprovalTTL <= 0 {
		cfg.ApprovalTTL = 24 * time.Hour
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = time.Minute
	}
	if cfg.LocalMaxRuns <= 0 {
		cfg.LocalMaxRuns = 64
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 4096
	}
	if cfg.MaxConnsPerClient <= 0 {
		cfg.MaxConnsPerClient = 256
	}
	if cfg.StreamWriteTimeout <= 0 {
		cfg.StreamWriteTimeout = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = slog.New(redact.NewHandler(log.Handler()))
	cfg.Tokens = slices.Clone(cfg.Tokens)
	cfg.Tools = slices.Clone(cfg.Tools)
	if err := configureDB(ctx, cfg.DB); err != nil {
		return nil, fmt.Errorf("serve: setting up the database: %w", err)
	}
	for _, q := range schema {
		if _, err := cfg.DB.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("serve: creating the tables: %w", err)
		}
	}
	stmts := &statements{db: cfg.DB}
	if err := stmts.prepare(ctx, inWrites...); err != nil {
		return nil, fmt.Errorf("serve: preparing the statements: %w", err)
	}
	writes := &writeQueue{db: cfg.DB, stmts: stmts, enc: encoders{jobs: make(chan *encodeJob)}}
	h := &Handler{
		cfg:      cfg,
		store:    sqlStore{w: writes, db: preparedDB{stmts}},
		writes:   writes,
		db:       preparedDB{stmts},
		log:      log,
		threads:  map[string]bool{},
		runs:     map[string]*liveRun{},
		perToken: map[string]int{},
		streams:  map[string]int{},
	}
	h.be = sqlBackend{h}
	if cfg.Executor != nil {
		h.be = execBackend{sqlBackend{h}, cfg.Executor}
	}
	h.base, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	orphans, err := h.closeOrphans(ctx)
	if err != nil {
		return nil, fmt.Errorf("serve: closing the runs of a stopped server: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{$}", h.auth(ScopeRun, h.handleRun))
	mux.HandleFunc("POST /agui", h.auth(ScopeRun, h.handleRun))
	mux.HandleFunc("GET /runs/{run}/events", h.auth(ScopeRun, h.handleEvents))
	mux.HandleFunc("POST /runs/{run}/cancel", h.auth(ScopeRun, h.handleCancel))
	mux.HandleFunc("GET /api/pending", h.auth(ScopeRead, h.handlePending))
	mux.HandleFunc("POST /api/interrupts/{id}/decision", h.auth(ScopeApprove, h.handleDecision))
	mux.HandleFunc("GET /metrics", h.auth(ScopeRead, h.handleMetrics))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	h.mountInbox(mux) // the approval inbox, serve/inbox.go
	h.mux = mux
	if err := h.reattach(ctx, orphans); err != nil {
		return nil, fmt.Errorf("serve: closing the runs of a stopped server: %w", err)
	}
	return h, nil
}

// configureDB sets db's pool and connection as the server needs them,
// whatever the caller opened it with: one connection, kept open, since
// SQLite has one writer and a pool of several turned concurrent saves into
// SQLITE_BUSY (the Store contract has ErrRunBusy for a lost
// compare-and-swap only); WAL, so readers of other processes (the inbox's
// tests, a backup) do not block it; synchronous FULL, so a committed step
// survives a power cut; and a busy timeout for other processes' writes.
// The pragmas are the connection's, which the pool keeps for ever.
func configureDB(ctx context.Context, db *sql.DB) error {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	for _, q := range []string{`PRAGMA busy_timeout = 10000`, `PRAGMA journal_mode = WAL`, `PRAGMA synchronous = FULL`} {
		rows, err := db.QueryContext(ctx, q) // journal_mode answers a row
		if err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		rows.Close()
	}
	return nil
}

// closeOrphans ends the runs a killed server left running. Those of an
// Executor, whose runs go on without the server, it returns instead, for
// [Handler.reattach].
func (h *Handler) closeOrphans(ctx context.Context) ([]string, error) {
	rows, err := h.cfg.DB.QueryContext(ctx, `SELECT id FROM serve_runs WHERE status = ?`, runRunning)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	var orphans []string
	for _, id := range ids {
		lr := &liveRun{id: id, h: h}
		if err := lr.loadSeq(ctx); err != nil {
			return nil, err
		}
		var last []byte
		err := h.cfg.DB.QueryRowContext(ctx, `SELECT data FROM serve_events WHERE run_id = ? AND seq = ?`, id, lr.seq).Scan(&last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		var t struct{ Type string }
		json.Unmarshal(last, &t)
		// A run killed after its terminal event was recorded has ended.
		if t.Type != "RUN_FINISHED" && t.Type != "RUN_ERROR" {
			if h.cfg.Executor != nil {
				orphans = append(orphans, id)
				continue
			}
			lr.emit(interruptedEvent())
		}
		if _, err := h.cfg.DB.ExecContext(ctx, `UPDATE serve_runs SET status = ? WHERE id = ?`, runInterrupted, id); err != nil {
			return nil, err
		}
	}
	return orphans, nil
}

// interruptedEvent is the terminal event of a run a killed server left
// running, which no one goes on with.
func interruptedEvent() event {
	return event{"type": "RUN_ERROR", "code": "interrupted", "message": "the server stopped during this run; run the thread again to continue it from where it was saved"}
}

// ServeHTTP serves the server's routes:
//
//   - POST / (or /agui): a RunAgentInput; the answer is the run's AG-UI
//     events as server-sent events;
//   - GET /runs/{run}/events: the events of a run, from after the one named
//     by the Last-Event-ID header, to its end;
//   - POST /runs/{run}/cancel: cancel a run in flight;
//   - GET /api/pending: the calls awaiting a person's decision;
//   - POST /api/interrupts/{id}/decision: decide one;
//   - GET /healthz and GET /metrics.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if msg := h.foreign(r); msg != "" {
		h.metrics.refused.Add(1)
		httpError(w, http.StatusForbidden, "forbidden", msg)
		return
	}
	if h.cors(w, r) {
		return
	}
	if r.Body == nil || r.Body == http.NoBody {
		h.mux.ServeHTTP(w, r)
		return
	}
	// One deadline for the whole body, from the request's start: a read
	// deadline set again for each read would let a client that sends a
	// byte a second hold the connection for as long as it likes.
	rc := http.NewResponseController(w)
	db := &deadlineBody{body: r.Body, rc: rc, header: w.Header()}
	if err := rc.SetReadDeadline(time.Now().Add(h.cfg.BodyReadTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		h.log.Warn("serve: a request's body has no deadline", "err", err)
	}
	r.Body = http.MaxBytesReader(w, db, h.bodyLimit(r))
	h.mux.ServeHTTP(w, r)
	db.finish()
}

// deadlineBody is a request body read under the connection's read
// deadline, which [Handler.ServeHTTP] sets from the request's start. It
// lifts the deadline once the body has arrived whole, since net/http sees
// a client that hangs up by reading its connection (a run's stream is
// cancelled that way). A body that failed (its deadline passed, or it was
// malformed), or that the handler answered without reading whole, leaves
// the deadline in the past and the connection marked to close: net/http
// would otherwise read what is left of the body, with no deadline, before
// it sends the answer, which held a stalled client's connection for ever
// and sent a dribbling one its 408 only after its last byte.
type deadlineBody struct {
	body   io.ReadCloser
	rc     *http.ResponseController
	header http.Header

	mu     sync.Mutex // guards the fields below: net/http may read the body after the handler
	done   bool       // the body arrived whole, and the deadline was lifted
	failed bool       // a read failed, and the deadline was left in the past
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err == nil {
		return n, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.done || b.failed:
	case errors.Is(err, io.EOF):
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	default:
		b.cut()
	}
	return n, err
}

func (b *deadlineBody) Close() error { return b.body.Close() }

// finish marks a body the handler did not read whole: what is left of it
// is never read, and the connection closes after the answer.
func (b *deadlineBody) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done && !b.failed {
		b.cut()
	}
}

// cut ends the body's connection after the answer; b.mu is held.
func (b *deadlineBody) cut() {
	b.failed = true
	b.header.Set("Connection", "close")
	b.rc.SetReadDeadline(time.Now().Add(-time.Second))
}

// foreign says why r comes from a web page the server must not serve, or
// returns "". Browsers send any page's requests to any address, loopback
// included, so two checks stand before everything else:
//   - an Origin header that is neither the server's own (scheme and Host)
//     nor one of [Config.AllowedOrigins] is refused: a page of another
//     site may post a "simple" request (text/plain, no preflight) and have
//     it run, and CORS alone only hides the answer;
//   - without tokens, where every loopback peer is trusted, the Host must
//     be a loopback name or address (localhost, 127.0.0.0/8, ::1): a page
//     whose own name an attacker re-points at 127.0.0.1 (DNS rebinding)
//     would otherwise be same-origin with the server and read its answers.
func (h *Handler) foreign(r *http.Request) string {
	host := r.Host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if len(h.cfg.Tokens) == 0 {
		ip := net.ParseIP(host)
		if !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
			return fmt.Sprintf("the Host %q is not a loopback name: a server without tokens answers only requests addressed to localhost, 127.0.0.1 or [::1]", r.Host)
		}
	}
	origin := r.Header.Get("Origin")
	if origin == "" || slices.Contains(h.cfg.AllowedOrigins, origin) {
		return ""
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if origin == scheme+"://"+r.Host {
		return ""
	}
	return fmt.Sprintf("requests from the web page origin %q are refused: name it in the server's allowed origins (--cors) to let it call the server", origin)
}

// cors sets the CORS headers for a named origin and answers a preflight;
// it reports whether the request was answered.
func (h *Handler) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || !slices.Contains(h.cfg.AllowedOrigins, origin) {
		return false
	}
	w.Header().Set("Access-Control-Allow-Origin", origin)
	w.Header().Set("Vary", "Origin")
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
		w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	return false
}

// identity is who made a request.
type identity struct {
	name    string
	scopes  []string
	maxRuns int
	tenant  string // the token's [Token.Tenant]
}

func (id identity) can(scope string) bool { return slices.Contains(id.scopes, scope) }

// auth wraps a route with the bearer-token check for scope.
func (h *Handler) auth(scope string, next func(http.ResponseWriter, *http.Request, identity)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := h.identify(r)
		if !ok {
			h.metrics.refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolrun"`)
			httpError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
			return
		}
		if !id.can(scope) && !(scope == ScopeRun && id.can(ScopeRead) && r.Method == http.MethodGet) {
			h.metrics.refused.Add(1)
			httpError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("the token %q lacks the %s scope", id.name, scope))
			return
		}
		next(w, r, id)
	}
}

// identify returns the identity of r's bearer token.
func (h *Handler) identify(r *http.Request) (identity, bool) {
	if len(h.cfg.Tokens) == 0 {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return identity{}, false
		}
		return identity{name: "local", scopes: []string{ScopeRun, ScopeApprove, ScopeRead}, maxRuns: h.cfg.LocalMaxRuns}, true
	}
	// The scheme's case does not matter (RFC 9110); the token is only
	// ever read from the header, never from the URL, where logs and
	// browser histories keep it.
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return identity{}, false
	}
	got := sha256.Sum256([]byte(secret))
	for _, t := range h.cfg.Tokens {
		want := sha256.Sum256([]byte(t.Secret))
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			n := t.MaxRuns
			if n <= 0 {
				n = 4
			}
			return identity{name: t.Name, scopes: t.Scopes, maxRuns: n, tenant: t.Tenant}, true
		}
	}
	return identity{}, false
}

// readBody runs read, which reads r's body. The body's deadline is
// [Handler.ServeHTTP]'s, BodyReadTimeout from the request's start, which
// holds however the body is read; readBody remains the one place where the
// routes read a body, should a route ever need more.
func (h *Handler) readBody(_ http.ResponseWriter, read func() error) error {
	return read()
}

// readForm parses r's form under [Handler.readBody]'s deadline, so that a
// form post (the inbox's login and its form decisions) cannot hold a
// connection by sending its body slowly. It answers the request and
// reports false if the body is too large, too slow or not a form.
func (h *Handler) readForm(w http.ResponseWriter, r *http.Request) bool {
	err := h.readBody(w, r.ParseForm)
	if err != nil {
		h.refuseBody(w, err, "bad_form", "a form")
	}
	return err == nil
}

// refuseBody answers a request whose body could not be read or decoded
// into what it should be, as [Handler.bodyRefusal] says.
func (h *Handler) refuseBody(w http.ResponseWriter, err error, code, what string) {
	h.writeError(w, h.bodyRefusal(err, code, what))
}

// bodyRefusal is the refusal of a body that could not be read or decoded
// into what it should be: 413 too_large past its limit, 408 body_timeout
// past BodyReadTimeout, else 400 with code.
func (h *Handler) bodyRefusal(err error, code, what string) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return refuse(http.StatusRequestEntityTooLarge, "too_large", "the request body is larger than %d bytes", tooBig.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return refuse(http.StatusRequestTimeout, "body_timeout", "the request body took longer than %v to arrive", h.cfg.BodyReadTimeout)
	default:
		return refuse(http.StatusBadRequest, code, "the body is not %s: %v", what, err)
	}
}

// httpError writes a JSON error {"error": {"code", "message"}}.
func httpError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": redact.String(msg)}})
}

// requestError is a refusal of a request, with its HTTP status.
type requestError struct {
	status int
	code   string
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func refuse(status int, code, format string, args ...any) error {
	return &requestError{status, code, fmt.Sprintf(format, args...)}
}

// writeError writes err: a *requestError as itself, anything else as a
// 500 whose text is logged, not sent.
func (h *Handler) writeError(w http.ResponseWriter, err error) {
	var re *requestError
	if errors.As(err, &re) {
		httpError(w, re.status, re.code, re.msg)
		return
	}
	h.log.Error("serve: request failed", "err", err)
	httpError(w, http.StatusInternalServerError, "internal", "the server failed; see its log")
}

// newID returns a random id with prefix.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// validID reports whether s may be a thread or run id.
func validID(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for _, r := range s {
		if r < 0x21 || r > 0x7e {
			return false
		}
	}
	return true
}

// Shutdown drains the server: no new run starts, and the runs in flight
// are waited for until ctx is done; those still running then are cancelled,
// which stops them at once with their State saved (a tool call in flight is
// journaled, so it never runs twice), and waited for again. It returns
// ctx's error if it had to cancel runs.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.draining = true
	h.mu.Unlock()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		h.cancel()
		return nil
	case <-ctx.Done():
		h.cancel()
		<-done
		return ctx.Err()
	}
}
