package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/redact"
)

// The approval inbox is a web page at /inbox where a person sees every
// call awaiting a decision, across the threads of their tenant, and
// approves, denies or edits it. It is plain HTML, CSS and JavaScript
// embedded in the binary, with no library and no build step: the page is
// a list, a detail pane and a form, which the DOM's own textContent and
// fetch do safely and in a few hundred lines, and every library would be
// one more thing to audit for the one property that matters here, that
// hostile model output is shown as text.
//
// Sessions: a person logs in with a token of the read or approve scope
// (with no tokens configured, a loopback visitor logs in as "local"),
// through a form that carries a CSRF token of its own. A login gives the
// browser two halves of one credential: an HttpOnly, SameSite=Strict
// cookie scoped to /inbox, and a key that the login's answer hands to the
// page, which keeps it in the origin's localStorage and sends it in the
// X-Inbox-Key header of every request of the inbox's API. Cookies are not
// scoped by port, so a server on another port of the same host receives
// the cookie; it never receives the key, which localStorage keeps per
// origin (scheme, host and port), and no answer to the cookie alone holds
// anything: the pages are shells and every datum comes from the API. The
// key is a secret no other site can send either, so it is also the API's
// CSRF token. The server keeps a hash of the two halves with the hash of
// the token logged in with, so a session outlives a restart, whoever
// reads the database cannot take one over, and a session takes its
// scopes and tenant from the token as configured now: the pending list,
// a run's page and the change stream need read, a decision needs
// approve, as over the JSON API, and a token removed from the
// configuration ends its sessions. Logins are logged and, past
// [inboxLoginFailures] failures from one address in [inboxLoginWindow],
// refused with 429 until the window has passed.
//
// Every page is sent with a Content-Security-Policy that allows scripts
// and styles from the server only, so no inline script and no eval run;
// the server renders with html/template and the page's script writes
// every string with textContent.

//go:embed inbox
var inboxFiles embed.FS

// inboxCookie names the session cookie.
const inboxCookie = "toolrun_inbox"

// inboxKeyHeader carries the page's half of a session.
const inboxKeyHeader = "X-Inbox-Key"

// inboxSessionTTL is how long a session lasts after its login.
const inboxSessionTTL = 12 * time.Hour

// inboxLoginFailures failed logins from one address within
// inboxLoginWindow make it wait for the window to pass.
const (
	inboxLoginFailures = 5
	inboxLoginWindow   = 5 * time.Minute
)

// inboxPoll is how often the inbox's event stream looks for pending calls
// made or decided by runs it did not start; its own decisions wake it at
// once.
const inboxPoll = 750 * time.Millisecond

// inboxCSP is the Content-Security-Policy of every inbox response.
const inboxCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// inbox serves /inbox for one Handler.
type inbox struct {
	h     *Handler
	pages *template.Template

	mu   sync.Mutex    // guards wake, going, fails, afterReading
	wake chan struct{} // closed and replaced when the inbox decides
	// going holds the threads whose next run the inbox is starting.
	going map[string]bool
	// fails holds the times of each address's failed logins within
	// inboxLoginWindow.
	fails map[string][]time.Time

	// notifier sends Config.Notify's webhook; nil without one.
	notifier *notifier

	// afterReading, if not nil, is called by a change stream between its
	// first reading of the list and the first page's: a test lands a
	// change there.
	afterReading func()
}

// inboxSession is a logged-in person: the identity of the token they
// logged in with, as the server's tokens say now.
type inboxSession struct {
	id      identity
	expires time.Time
}

// mountInbox adds the inbox's routes to mux.
func (h *Handler) mountInbox(mux *http.ServeMux) {
	ib := &inbox{
		h:     h,
		pages: template.Must(template.New("").Funcs(template.FuncMap{"asset": assetPath}).ParseFS(inboxFiles, "inbox/*.tmpl")),
		wake:  make(chan struct{}),
		going: map[string]bool{},
		fails: map[string][]time.Time{},
	}
	h.inbox = ib
	if ib.notifier = newNotifier(h.cfg.Notify, h.log); ib.notifier != nil {
		ib.notifier.start(h.base)
	}
	mux.HandleFunc("GET /inbox", ib.secure(ib.page))
	mux.HandleFunc("GET /inbox/{$}", ib.secure(ib.page))
	mux.HandleFunc("GET /inbox/login", ib.secure(ib.loginForm))
	mux.HandleFunc("POST /inbox/login", ib.secure(ib.login))
	mux.HandleFunc("GET /inbox/static/{file}", ib.secure(ib.static))
	mux.HandleFunc("GET /inbox/runs/{thread}", ib.secure(ib.runPage))
	mux.HandleFunc("GET /inbox/threads/{thread}", ib.secure(ib.threadPage))
	mux.HandleFunc("POST /inbox/api/logout", ib.secure(ib.session("", ib.logout)))
	mux.HandleFunc("GET /inbox/api/me", ib.secure(ib.session("", ib.me)))
	mux.HandleFunc("GET /inbox/api/pending", ib.secure(ib.session(ScopeRead, ib.pending)))
	mux.HandleFunc("GET /inbox/api/events", ib.secure(ib.session(ScopeRead, ib.events)))
	mux.HandleFunc("GET /inbox/api/interrupts/{id}", ib.secure(ib.session(ScopeRead, ib.call)))
	mux.HandleFunc("GET /inbox/api/runs/{thread}", ib.secure(ib.session(ScopeRead, ib.run)))
	mux.HandleFunc("GET /inbox/api/threads/{thread}", ib.secure(ib.session(ScopeRead, ib.thread)))
	mux.HandleFunc("POST /inbox/api/interrupts/{id}/decision", ib.secure(ib.session(ScopeApprove, ib.decide)))
	mux.HandleFunc("POST /inbox/api/bulk", ib.secure(ib.session(ScopeApprove, ib.bulk)))
}

// secure sets the headers every inbox response carries.
func (ib *inbox) secure(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", inboxCSP)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cache-Control", "no-store")
		next(w, r)
	}
}

// sessionKey is the database's key of a session: a hash of its cookie
// and its key.
func sessionKey(cookie, key string) string {
	sum := sha256.Sum256([]byte(cookie + "." + key))
	return hex.EncodeToString(sum[:])
}

// tokenHash is how a session names the token it logged in with.
func tokenHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// tokenIdentity returns the identity of the token whose hash is hash, as
// the server's tokens say now; "" is the loopback visitor of a server
// without tokens.
func (h *Handler) tokenIdentity(hash string) (identity, bool) {
	if len(h.cfg.Tokens) == 0 {
		return identity{name: "local", scopes: []string{ScopeRun, ScopeApprove, ScopeRead}}, hash == ""
	}
	for _, t := range h.cfg.Tokens {
		if subtle.ConstantTimeCompare([]byte(tokenHash(t.Secret)), []byte(hash)) == 1 {
			return identity{name: t.Name, scopes: t.Scopes, tenant: t.Tenant}, true
		}
	}
	return identity{}, false
}

// current returns the session of r's cookie and key, if it is live.
func (ib *inbox) current(r *http.Request) (*inboxSession, bool) {
	c, err := r.Cookie(inboxCookie)
	key := r.Header.Get(inboxKeyHeader)
	if err != nil || c.Value == "" || key == "" {
		return nil, false
	}
	id := sessionKey(c.Value, key)
	var token string
	var expires int64
	err = ib.h.cfg.DB.QueryRowContext(r.Context(), `SELECT token, expires_at FROM serve_inbox_logins WHERE id = ?`, id).Scan(&token, &expires)
	if err != nil {
		if !errors.Is(err, sql.ErrNoRows) {
			ib.h.log.Error("serve: reading an inbox session", "err", err)
		}
		return nil, false
	}
	s := &inboxSession{expires: time.Unix(0, expires)}
	var ok bool
	s.id, ok = ib.h.tokenIdentity(token)
	if !ok || !ib.h.cfg.Now().Before(s.expires) {
		ib.h.cfg.DB.ExecContext(r.Context(), `DELETE FROM serve_inbox_logins WHERE id = ?`, id)
		return nil, false
	}
	return s, true
}

// session wraps a route of the inbox's API: it needs a session, whose
// token has scope unless scope is "".
func (ib *inbox) session(scope string, next func(http.ResponseWriter, *http.Request, *inboxSession)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := ib.current(r)
		if !ok {
			ib.h.metrics.refused.Add(1)
			httpError(w, http.StatusUnauthorized, "no_session", "log in at /inbox/login first")
			return
		}
		if scope != "" && !s.id.can(scope) {
			ib.h.metrics.refused.Add(1)
			what := map[string]string{ScopeRead: "see the calls and runs", ScopeApprove: "decide calls"}[scope]
			httpError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("the token %q lacks the %s scope: it may not %s, in the inbox as over the JSON API", s.id.name, scope, what))
			return
		}
		next(w, r, s)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// render writes the template name with data.
func (ib *inbox) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := ib.pages.ExecuteTemplate(&b, name, data); err != nil {
		ib.h.writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

func (ib *inbox) loginForm(w http.ResponseWriter, r *http.Request) {
	ib.renderLogin(w, r, http.StatusOK, "")
}

// inboxLoginCookie names the cookie that holds the login form's CSRF
// token until the form is posted.
const inboxLoginCookie = "toolrun_inbox_login"

// renderLogin writes the login form with a new CSRF token, also set in a
// cookie of the login path: a login posts both, so a page of another site
// cannot log a browser in under a token of its own (login CSRF), which
// would have the person decide as someone else.
func (ib *inbox) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	token := randomHex(32)
	http.SetCookie(w, &http.Cookie{Name: inboxLoginCookie, Value: token, Path: "/inbox/login", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: 3600})
	ib.render(w, status, "login.tmpl", map[string]any{"NoTokens": len(ib.h.cfg.Tokens) == 0, "Error": msg, "CSRF": token})
}

// remoteIP returns the address r came from, without its port.
func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// throttled reports how long addr must wait before it may try to log in
// again, or 0.
func (ib *inbox) throttled(addr string, now time.Time) time.Duration {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	fails := slices.DeleteFunc(ib.fails[addr], func(t time.Time) bool { return !now.Before(t.Add(inboxLoginWindow)) })
	if len(fails) == 0 {
		delete(ib.fails, addr)
		return 0
	}
	ib.fails[addr] = fails
	if len(fails) < inboxLoginFailures {
		return 0
	}
	return fails[0].Add(inboxLoginWindow).Sub(now)
}

// failed counts a failed login from addr.
func (ib *inbox) failed(addr string, now time.Time) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	if len(ib.fails) > 10000 { // many addresses: forget those whose window has passed
		for a, ts := range ib.fails {
			if !now.Before(ts[len(ts)-1].Add(inboxLoginWindow)) {
				delete(ib.fails, a)
			}
		}
	}
	ib.fails[addr] = append(ib.fails[addr], now)
}

// login starts a session for a token of the read or approve scope, or,
// on a server without tokens, for a loopback visitor as "local". Its
// answer is a page that hands the session's key to the page's script,
// which keeps it and goes on to the inbox.
func (ib *inbox) login(w http.ResponseWriter, r *http.Request) {
	addr := remoteIP(r)
	now := ib.h.cfg.Now()
	if wait := ib.throttled(addr, now); wait > 0 {
		ib.h.metrics.refused.Add(1)
		ib.h.log.Warn("serve: inbox login refused", "addr", addr, "why", "too many failed logins")
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Round(time.Second)/time.Second)+1))
		ib.renderLogin(w, r, http.StatusTooManyRequests, fmt.Sprintf("Too many failed logins from this address: try again in %v.", wait.Round(time.Second)))
		return
	}
	if !ib.h.readForm(w, r) {
		return
	}
	c, err := r.Cookie(inboxLoginCookie)
	got := r.FormValue("csrf")
	if err != nil || c.Value == "" || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(c.Value)) != 1 {
		ib.h.metrics.refused.Add(1)
		ib.h.log.Warn("serve: inbox login refused", "addr", addr, "why", "no login form's CSRF token")
		ib.renderLogin(w, r, http.StatusForbidden, "The login form expired or came from another page; log in again.")
		return
	}
	token, ok := "", false
	var who identity
	if len(ib.h.cfg.Tokens) == 0 {
		if ip := net.ParseIP(addr); ip != nil && ip.IsLoopback() {
			who, ok = ib.h.tokenIdentity("")
		}
	} else {
		token = tokenHash(r.FormValue("token"))
		if who, ok = ib.h.tokenIdentity(token); ok && !who.can(ScopeRead) && !who.can(ScopeApprove) {
			ok = false
		}
	}
	if !ok {
		ib.failed(addr, now)
		ib.h.metrics.refused.Add(1)
		ib.h.log.Warn("serve: inbox login refused", "addr", addr, "why", "not a token of the read or approve scope")
		ib.renderLogin(w, r, http.StatusUnauthorized, "That is not a token of the read or approve scope.")
		return
	}
	cookie, key := randomHex(32), randomHex(32)
	db := ib.h.cfg.DB
	if _, err := db.ExecContext(r.Context(), `DELETE FROM serve_inbox_logins WHERE expires_at <= ?`, now.UnixNano()); err != nil {
		ib.h.writeError(w, err)
		return
	}
	if _, err := db.ExecContext(r.Context(), `INSERT INTO serve_inbox_logins (id, token, expires_at) VALUES (?, ?, ?)`, sessionKey(cookie, key), token, now.Add(inboxSessionTTL).UnixNano()); err != nil {
		ib.h.writeError(w, err)
		return
	}
	ib.h.log.Info("serve: inbox login", "name", who.name, "tenant", who.tenant, "scopes", strings.Join(who.scopes, " "), "addr", addr)
	http.SetCookie(w, &http.Cookie{Name: inboxLoginCookie, Value: "", Path: "/inbox/login", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.SetCookie(w, &http.Cookie{Name: inboxCookie, Value: cookie, Path: "/inbox", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(inboxSessionTTL / time.Second)})
	ib.render(w, http.StatusOK, "login.tmpl", map[string]any{"Key": key, "Name": who.name})
}

func (ib *inbox) logout(w http.ResponseWriter, r *http.Request, s *inboxSession) {
	if c, err := r.Cookie(inboxCookie); err == nil {
		if _, err := ib.h.cfg.DB.ExecContext(r.Context(), `DELETE FROM serve_inbox_logins WHERE id = ?`, sessionKey(c.Value, r.Header.Get(inboxKeyHeader))); err != nil {
			ib.h.writeError(w, err)
			return
		}
	}
	ib.h.log.Info("serve: inbox logout", "name", s.id.name, "addr", remoteIP(r))
	http.SetCookie(w, &http.Cookie{Name: inboxCookie, Value: "", Path: "/inbox", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, "{\"loggedOut\":true}\n")
}

// me says who the session is and what it may do.
func (ib *inbox) me(w http.ResponseWriter, r *http.Request, s *inboxSession) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"name": s.id.name, "tenant": s.id.tenant, "scopes": orNone(s.id.scopes), "now": ib.h.cfg.Now().UTC()})
}

func orNone(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// page serves the inbox's page, a shell whose script fetches everything
// it shows; without a session cookie it sends the visitor to log in.
func (ib *inbox) page(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(inboxCookie); err != nil || c.Value == "" {
		http.Redirect(w, r, "/inbox/login", http.StatusSeeOther)
		return
	}
	ib.render(w, http.StatusOK, "index.tmpl", nil)
}

// assetVersions holds a digest of each script and style sheet of the
// inbox, by file name, for assetPath.
var assetVersions = func() map[string]string {
	out := map[string]string{}
	entries, _ := fs.ReadDir(inboxFiles, "inbox")
	for _, e := range entries {
		b, err := fs.ReadFile(inboxFiles, "inbox/"+e.Name())
		if err == nil {
			sum := sha256.Sum256(b)
			out[e.Name()] = hex.EncodeToString(sum[:6])
		}
	}
	return out
}()

// assetPath returns the URL of the inbox's file name, named by its
// digest: the browser keeps a file fetched under that URL (see static)
// and asks again only when a new build changes it, so a page opened again
// waits for no script or style sheet.
func assetPath(name string) string {
	return "/inbox/static/" + name + "?v=" + assetVersions[name]
}

// static serves the page's script and style sheet. Asked for as
// assetPath names it, the answer is kept by the browser for a year;
// otherwise it is checked again at each use.
func (ib *inbox) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	ct, ok := types[path.Ext(name)]
	if !ok {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(inboxFiles, "inbox/"+name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ct)
	if v := r.URL.Query().Get("v"); v != "" && v == assetVersions[name] {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.Write(b)
}

// inboxCall is a pending call as the inbox shows it: the call and what a
// person needs to judge it.
type inboxCall struct {
	pendingCall
	Owner       string          `json:"owner"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	ModelText   string          `json:"modelText"`
	Turns       []inboxTurn     `json:"turns"`
	CostUSD     float64         `json:"costUSD"`
	CostUnknown bool            `json:"costIncomplete,omitempty"`
	RunTurns    int             `json:"runTurns"`
	// Editable says whether the call's input may be edited: a server
	// tool's may, a client tool's (run by the client with the input it
	// was sent) may not.
	Editable bool `json:"editable"`
	// Group names the response that made the call, and GroupSize how
	// many of its calls wait, if more than one: a response's parallel
	// calls are shown together.
	Group     string `json:"group,omitempty"`
	GroupSize int    `json:"groupSize,omitempty"`
}

// inboxTurn is one message of a conversation, shortened for the inbox.
type inboxTurn struct {
	Role string `json:"role"`
	Text string `json:"text"`
}

// threadView is what the inbox reads of a thread's saved State.
type threadView struct {
	owner       string
	clientTools []clientTool
	messages    []wireMessage
	turns       int
	cost        float64
	costUnknown bool
}

// wireMessage is a message of a saved State, as its JSON has it.
type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// wireBlock is a content block of a wireMessage.
type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

func (m wireMessage) blocks() []wireBlock {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []wireBlock{{Type: "text", Text: s}}
	}
	var bs []wireBlock
	json.Unmarshal(m.Content, &bs)
	return bs
}

// loadThread reads thread's owner, client tools and saved State.
func (ib *inbox) loadThread(ctx context.Context, thread string) (*threadView, error) {
	tvs, err := ib.loadThreads(ctx, []string{thread})
	if err != nil {
		return nil, err
	}
	return tvs[thread], nil
}

// loadThreads reads the owner, client tools and saved State of each of
// threads, by thread: the owners and tools in one query, and the States
// in another where the server keeps them (under an [Executor] they are
// the executor's, read one by one), so a page of calls of a hundred
// threads is read in two queries rather than two hundred.
func (ib *inbox) loadThreads(ctx context.Context, threads []string) (map[string]*threadView, error) {
	out := make(map[string]*threadView, len(threads))
	for _, t := range threads {
		out[t] = &threadView{}
	}
	ids, err := json.Marshal(threads)
	if err != nil {
		return nil, err
	}
	db := ib.h.cfg.DB
	rows, err := db.QueryContext(ctx, `SELECT id, owner, client_tools FROM serve_threads WHERE id IN (SELECT value FROM json_each(?))`, string(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, owner, tools string
		if err := rows.Scan(&id, &owner, &tools); err != nil {
			return nil, err
		}
		if tv := out[id]; tv != nil {
			tv.owner = owner
			json.Unmarshal([]byte(tools), &tv.clientTools)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	if ex := ib.h.cfg.Executor; ex != nil {
		// The State is the executor's, if it can read it.
		sl, ok := ex.(StateLoader)
		if !ok {
			return out, nil
		}
		for _, thread := range threads {
			st, err := sl.LoadState(ctx, thread)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("thread %q: reading its state: %w", thread, err)
			}
			data, err := json.Marshal(st)
			if err != nil {
				return nil, fmt.Errorf("thread %q: reading its state: %w", thread, err)
			}
			if err := out[thread].read(thread, data); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	rows, err = db.QueryContext(ctx, `SELECT id, data FROM serve_states WHERE id IN (SELECT value FROM json_each(?))`, string(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var data []byte
		if err := rows.Scan(&id, &data); err != nil {
			return nil, err
		}
		if tv := out[id]; tv != nil {
			if err := tv.read(id, data); err != nil {
				return nil, err
			}
		}
	}
	return out, rows.Err()
}

// read takes the conversation, turns and cost of thread's saved State,
// data.
func (tv *threadView) read(thread string, data []byte) error {
	var st struct {
		Params struct {
			Messages []wireMessage `json:"messages"`
		} `json:"params"`
		Pending *struct {
			Message wireMessage `json:"message"`
		} `json:"pending"`
		Turns          int     `json:"turns"`
		CostUSD        float64 `json:"cost_usd"`
		CostIncomplete bool    `json:"cost_incomplete"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("thread %q: reading its state: %w", thread, err)
	}
	tv.messages = st.Params.Messages
	if st.Pending != nil {
		tv.messages = append(tv.messages, st.Pending.Message)
	}
	tv.turns, tv.cost, tv.costUnknown = st.Turns, st.CostUSD, st.CostIncomplete
	return nil
}

// tool returns the description and schema of the tool name on thread.
func (ib *inbox) tool(tv *threadView, name string) (string, json.RawMessage) {
	for _, t := range ib.h.cfg.Tools {
		if t.Name() == name {
			return t.Description(), t.InputSchema()
		}
	}
	for _, ct := range tv.clientTools {
		if ct.Name == name {
			return ct.Description, ct.Parameters
		}
	}
	return "", nil
}

// inboxTurns is how many of a conversation's last messages the inbox
// shows with a call.
const inboxTurns = 6

// context returns the text of the response that made call, and the
// conversation's last messages up to it.
func (tv *threadView) context(call string) (string, []inboxTurn) {
	at := len(tv.messages) - 1
	for i, m := range tv.messages {
		for _, b := range m.blocks() {
			if b.Type == "tool_use" && b.ID == call {
				at = i
			}
		}
	}
	var text []string
	if at >= 0 {
		for _, b := range tv.messages[at].blocks() {
			if b.Type == "text" {
				text = append(text, b.Text)
			}
		}
	}
	var turns []inboxTurn
	for i := max(0, at-inboxTurns+1); i <= at; i++ {
		turns = append(turns, inboxTurn{Role: roleOf(tv.messages[i]), Text: summarize(tv.messages[i])})
	}
	return strings.Join(text, "\n"), turns
}

// roleOf names who wrote m for a person: a user message that holds only
// tool results is the tools', not the user's.
func roleOf(m wireMessage) string {
	bs := m.blocks()
	if m.Role != "user" || len(bs) == 0 {
		return m.Role
	}
	for _, b := range bs {
		if b.Type != "tool_result" {
			return m.Role
		}
	}
	return "tool results"
}

// summarize returns a message as a few lines of text.
func summarize(m wireMessage) string {
	var lines []string
	for _, b := range m.blocks() {
		switch b.Type {
		case "text":
			lines = append(lines, b.Text)
		case "tool_use":
			lines = append(lines, "→ "+b.Name+" "+compact(asTyped(b.Input)))
		case "tool_result":
			var s string
			if json.Unmarshal(b.Content, &s) != nil {
				var parts []wireBlock
				json.Unmarshal(b.Content, &parts)
				for _, p := range parts {
					s += p.Text
				}
			}
			if len(s) > 300 {
				s = s[:300] + "…"
			}
			lines = append(lines, "← "+s)
		}
	}
	return redact.String(strings.Join(lines, "\n"))
}

// inboxPage is how many calls one page of the inbox's list holds.
const inboxPage = 100

// inboxDeltaMax bounds the calls one change event of the inbox's stream
// carries; past it the event says so and the page reads its first page
// again.
const inboxDeltaMax = 200

// listFilter is what the inbox's list keeps, from the query of its API:
// tool (a tool's name), thread (a part of the thread's id), age (in
// minutes: asked within age, or, negative, waiting longer than -age) and
// id (one call, which a notification links to). The zero value keeps
// every call.
type listFilter struct {
	tool, thread, id string
	age              int
}

// filterOf reads the filter of q.
func filterOf(q url.Values) listFilter {
	age, _ := strconv.Atoi(q.Get("age"))
	return listFilter{tool: q.Get("tool"), thread: strings.TrimSpace(q.Get("thread")), id: q.Get("id"), age: age}
}

// keeps reports whether f keeps it, at now.
func (f listFilter) keeps(it *interrupt, now time.Time) bool {
	switch {
	case f.id != "" && it.ID != f.id,
		f.tool != "" && it.ToolName != f.tool,
		f.thread != "" && !strings.Contains(it.Thread, f.thread):
		return false
	}
	waited := now.Sub(it.CreatedAt)
	if f.age > 0 && waited > time.Duration(f.age)*time.Minute {
		return false
	}
	if f.age < 0 && waited < time.Duration(-f.age)*time.Minute {
		return false
	}
	return true
}

// listing is the calls awaiting a person that a session sees, newest
// first, and those of them a filter keeps. Its calls are what the list's
// order, filters, counts and groups need (see listCalls): a call's input,
// reason and the rest are read for the calls shown (see fill).
type listing struct {
	all, kept []*interrupt
	// groups counts the calls of each response (see groupOf) in all.
	groups map[groupKey]int
}

// groupKey is groupOf as a map's key, which the list makes for every
// call waiting.
type groupKey struct {
	thread, run string
	at          int64
}

func keyOf(it *interrupt) groupKey {
	return groupKey{it.Thread, it.Run, it.CreatedAt.UnixNano()}
}

// groupOf names the response that made it: the calls of one response
// are recorded by one run at one instant.
func groupOf(it *interrupt) string {
	return it.Thread + "\x00" + it.Run + "\x00" + timestamp(it.CreatedAt)
}

// newestFirst orders calls newest first, the calls of one response
// together.
func newestFirst(a, b *interrupt) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	if c := strings.Compare(a.Thread, b.Thread); c != 0 {
		return c
	}
	return strings.Compare(a.ToolCallID, b.ToolCallID)
}

// listColumns are the columns of the calls waiting that the list reads
// for all of them: its order, filters, groups and counts need these, and
// no call's input, which is read only for the calls shown (see fill).
// An index holds them all (serve_interrupts_listed), so the reading walks
// it alone.
const listColumns = `id, thread_id, run_id, tool_call_id, tool_name, created_at`

// listCalls returns the calls awaiting a person, each with listColumns
// only (and its kind and status), in no order. Under an [Executor] the
// executor says which calls wait, and they come whole.
func (ib *inbox) listCalls(ctx context.Context) ([]*interrupt, error) {
	if _, ok := ib.h.be.(sqlBackend); !ok {
		return ib.h.be.pending(ctx, "")
	}
	rows, err := ib.h.cfg.DB.QueryContext(ctx, `SELECT `+listColumns+` FROM serve_interrupts WHERE status = ? AND kind = ?`, statusPending, kindApproval)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*interrupt
	for rows.Next() {
		it := interrupt{Kind: kindApproval, Status: statusPending}
		var created string
		if err := rows.Scan(&it.ID, &it.Thread, &it.Run, &it.ToolCallID, &it.ToolName, &created); err != nil {
			return nil, err
		}
		if it.CreatedAt, err = time.Parse(time.RFC3339Nano, created); err != nil {
			return nil, fmt.Errorf("interrupt %q: created_at: %w", it.ID, err)
		}
		out = append(out, &it)
	}
	return out, rows.Err()
}

// fill returns the calls of its whole (input, reason and all), in its
// order, reading those listCalls read in part in one query; a call no
// longer waiting is left out, as the next change event removes it.
func (ib *inbox) fill(ctx context.Context, its []*interrupt) ([]*interrupt, error) {
	if _, ok := ib.h.be.(sqlBackend); !ok || len(its) == 0 {
		return its, nil
	}
	ids := make([]string, len(its))
	for i, it := range its {
		ids[i] = it.ID
	}
	b, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	// By the primary key alone: with the status asked too, SQLite would
	// walk every call waiting by the index of the status.
	whole, err := queryInterrupts(ctx, ib.h.cfg.DB, `id IN (SELECT value FROM json_each(?))`, string(b))
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*interrupt, len(whole))
	for _, it := range whole {
		if it.Status == statusPending {
			byID[it.ID] = it
		}
	}
	out := make([]*interrupt, 0, len(its))
	for _, it := range its {
		if w, ok := byID[it.ID]; ok {
			out = append(out, w)
		}
	}
	return out, nil
}

// list returns the calls awaiting a person in tenant, and those f keeps,
// as listCalls reads them.
func (ib *inbox) list(ctx context.Context, tenant string, f listFilter) (*listing, error) {
	its, err := ib.listCalls(ctx)
	if err == nil {
		its, err = ib.h.visible(ctx, tenant, its)
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(its, newestFirst)
	now := ib.h.cfg.Now()
	l := &listing{all: its, groups: map[groupKey]int{}, kept: make([]*interrupt, 0, len(its))}
	for _, it := range its {
		l.groups[keyOf(it)]++
		if f.keeps(it, now) {
			l.kept = append(l.kept, it)
		}
	}
	return l, nil
}

// setVersion is a digest of the calls of l.kept: a decision on every
// call of a filtered set names the set the person confirmed, and is
// refused if the set is another by then. The calls' ids name it: a call
// is not changed while it waits (a decision is what changes it, and
// takes it off the list), so the same ids are the same calls as they
// were.
func (l *listing) setVersion() string {
	h := sha256.New()
	var b []byte
	for _, it := range l.kept {
		b = append(append(b[:0], it.ID...), ';')
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// counts is what the list's header says: the calls waiting, those the
// filter keeps, and the version of the filtered set.
func (l *listing) counts() map[string]any {
	return map[string]any{"waiting": len(l.all), "matching": len(l.kept), "setVersion": l.setVersion()}
}

// describe returns its as the inbox shows them, with what a person needs
// to judge each; groups counts the calls of each response.
func (ib *inbox) describe(ctx context.Context, its []*interrupt, groups map[groupKey]int) ([]inboxCall, error) {
	out := []inboxCall{}
	if len(its) == 0 {
		return out, nil
	}
	var names []string
	seen := map[string]bool{}
	for _, it := range its {
		if !seen[it.Thread] {
			seen[it.Thread] = true
			names = append(names, it.Thread)
		}
	}
	threads, err := ib.loadThreads(ctx, names)
	if err != nil {
		return nil, err
	}
	for _, it := range its {
		tv := threads[it.Thread]
		c := inboxCall{pendingCall: listed(it), Editable: ib.h.serverTool(it.ToolName)}
		c.Owner = tv.owner
		c.Description, c.Schema = ib.tool(tv, it.ToolName)
		c.ModelText, c.Turns = tv.context(it.ToolCallID)
		c.CostUSD, c.CostUnknown, c.RunTurns = tv.cost, tv.costUnknown, tv.turns
		if n := groups[keyOf(it)]; n > 1 {
			sum := sha256.Sum256([]byte(groupOf(it)))
			c.Group, c.GroupSize = hex.EncodeToString(sum[:6]), n
		}
		out = append(out, c)
	}
	return out, nil
}

// cursorOf names it's place in the list, for the page after it.
func cursorOf(it *interrupt) string {
	return strings.Join([]string{timestamp(it.CreatedAt), url.QueryEscape(it.Thread), url.QueryEscape(it.ToolCallID)}, " ")
}

// parseCursor reads a cursorOf as a key of the list's order.
func parseCursor(c string) (*interrupt, bool) {
	parts := strings.Split(c, " ")
	if len(parts) != 3 {
		return nil, false
	}
	t, err1 := time.Parse(time.RFC3339Nano, parts[0])
	thread, err2 := url.QueryUnescape(parts[1])
	call, err3 := url.QueryUnescape(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, false
	}
	return &interrupt{CreatedAt: t, Thread: thread, ToolCallID: call}, true
}

// pending answers one page of the calls awaiting a person that the
// query's filter keeps (see filterOf), newest first: limit calls (at
// most inboxPage, the default) after the cursor after (the "next" of
// the page before), with the counts of the whole list, the version of the
// filtered set, and the tools of the calls waiting with how many each
// has, for the page's filter.
func (ib *inbox) pending(w http.ResponseWriter, r *http.Request, s *inboxSession) {
	q := r.URL.Query()
	l, err := ib.list(r.Context(), s.id.tenant, filterOf(q))
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	out, err := ib.firstPage(r.Context(), s, l, q.Get("after"), limit)
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// firstPage returns the answer of the pending list (see pending) for l: limit
// calls (at most inboxPage, the default, where limit <= 0) after the
// cursor after ("" for the first page).
func (ib *inbox) firstPage(ctx context.Context, s *inboxSession, l *listing, after string, limit int) (map[string]any, error) {
	if limit <= 0 || limit > inboxPage {
		limit = inboxPage
	}
	page := l.kept
	if after != "" {
		// The calls after the one the cursor names, in the list's order,
		// whether or not it is still waiting.
		if c, ok := parseCursor(after); ok {
			i, found := slices.BinarySearchFunc(page, c, newestFirst)
			if found {
				i++
			}
			page = page[i:]
		}
	}
	more := len(page) > limit
	page = page[:min(limit, len(page))]
	next := ""
	if more {
		next = cursorOf(page[len(page)-1])
	}
	page, err := ib.fill(ctx, page)
	if err != nil {
		return nil, err
	}
	calls, err := ib.describe(ctx, page, l.groups)
	if err != nil {
		return nil, err
	}
	tools := map[string]int{}
	for _, it := range l.all {
		tools[it.ToolName]++
	}
	out := l.counts()
	out["pending"], out["more"], out["tools"], out["you"], out["now"] = calls, more, tools, s.id.name, ib.h.cfg.Now().UTC()
	if more {
		out["next"] = next
	}
	return out, nil
}

// visibleCall returns the interrupt id if the session's tenant may see
// it, or nil.
func (ib *inbox) visibleCall(ctx context.Context, s *inboxSession, id string) (*interrupt, error) {
	it, err := ib.h.be.interrupt(ctx, id)
	if err != nil || it == nil || it.Kind != kindApproval {
		return nil, err
	}
	if ok, err := ib.h.sees(ctx, s.id.tenant, it.Thread); err != nil || !ok {
		return nil, err
	}
	return it, nil
}

// call answers what became of one call: the page asks when a call it
// shows leaves the pending list, to mark it in place with who decided
// it, when and what.
func (ib *inbox) call(w http.ResponseWriter, r *http.Request, s *inboxSession) {
	it, err := ib.visibleCall(r.Context(), s, r.PathValue("id"))
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	if it == nil {
		httpError(w, http.StatusNotFound, "not_found", "no such call")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": it.ID, "status": it.Status, "version": callVersion(it), "decidedBy": it.DecidedBy, "decidedAt": it.DecidedAt, "decision": decisionOf(it)})
}

// notify wakes the event streams.
func (ib *inbox) notify() {
	ib.mu.Lock()
	close(ib.wake)
	ib.wake = make(chan struct{})
	ib.mu.Unlock()
}

func (ib *inbox) woken() <-chan struct{} {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return ib.wake
}

// fingerprint changes whenever a pending call is made or decided: the
// backend says, since under an [Executor] the calls waiting are the
// executor's to list.
func (ib *inbox) fingerprint(ctx context.Context) (string, error) {
	return ib.h.be.fingerprint(ctx)
}

// events is a server-sent event stream of the changes to the calls
// awaiting a person that the query's filter keeps (see filterOf), so that
// the page updates its list rather than reading it again: first "ready"
// with the list's first page, as the pending list answers it (counts,
// calls, cursor and tools), then "delta" whenever the
// list changes, with the calls added as the list shows them, the ids of
// the calls removed (decided, here or elsewhere, or gone), and the
// counts. A call waiting is not changed (a decision changes it, and
// takes it off the list), so the stream tells calls by their ids; one
// that another writer of the database rewrites in place is read as it is
// when it is shown, and a decision on the version shown before is
// refused. A delta with more than inboxDeltaMax calls
// added carries the newest of them and "truncated": the page reads its
// first page again. The server looks for changes when the inbox or the
// JSON API decides, when a call starts waiting, and every inboxPoll (for
// the runs of other processes).
//
// It ends when the client goes away or the server shuts down, or when a
// write is not taken within Config.StreamWriteTimeout (a page that stopped
// reading); it has no write deadline while it waits, as [Handler.stream].
func (ib *inbox) events(w http.ResponseWriter, r *http.Request, s *inboxSession) {
	f := filterOf(r.URL.Query())
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	ticker := time.NewTicker(inboxPoll)
	defer ticker.Stop()
	send := func(n int, event string, data any) bool {
		b, err := json.Marshal(data)
		if err != nil {
			return false
		}
		_ = rc.SetWriteDeadline(time.Now().Add(ib.h.cfg.StreamWriteTimeout))
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", n, event, b); err != nil {
			return false
		}
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		_ = rc.SetWriteDeadline(time.Time{})
		return true
	}
	ctx := r.Context()
	var known map[string]bool // the ids of the calls the filter kept
	last, n := "", 0
	for {
		wake := ib.woken()
		fp, err := ib.fingerprint(ctx)
		if err != nil {
			return
		}
		if fp != last {
			// One reading of the list (see listCalls) is both the page
			// sent and the baseline the next changes are told against;
			// the fingerprint is taken before it, so a change that lands
			// after the fingerprint, during the reading or after it,
			// makes the next fingerprint another and is told then.
			l, err := ib.list(ctx, s.id.tenant, f)
			if err != nil {
				return
			}
			now := make(map[string]bool, len(l.kept))
			var added []*interrupt
			for _, it := range l.kept {
				now[it.ID] = true
				if known != nil && !known[it.ID] {
					added = append(added, it)
				}
			}
			removed := []string{}
			for id := range known {
				if !now[id] {
					removed = append(removed, id)
				}
			}
			slices.Sort(removed)
			var data map[string]any
			event := "delta"
			switch {
			case known == nil:
				// The first page of the list comes with the stream's
				// start: the page draws its rows from the very listing
				// the changes that follow are told against, without a
				// second reading of the list, and the inputs read are
				// the first page's only.
				event = "ready"
				ib.mu.Lock()
				after := ib.afterReading
				ib.mu.Unlock()
				if after != nil {
					after()
				}
				if data, err = ib.firstPage(ctx, s, l, "", 0); err != nil {
					return
				}
			case len(added) == 0 && len(removed) == 0:
				event = ""
			default:
				data = l.counts()
				if len(added) > inboxDeltaMax {
					added, data["truncated"] = added[:inboxDeltaMax], true
				}
				if added, err = ib.fill(ctx, added); err != nil {
					return
				}
				calls, err := ib.describe(ctx, added, l.groups)
				if err != nil {
					return
				}
				data["added"], data["removed"] = calls, removed
			}
			if event != "" {
				n++
				if !send(n, event, data) {
					return
				}
			}
			known, last = now, fp
		}
		select {
		case <-wake:
		case <-ticker.C:
		case <-ctx.Done():
			return
		case <-ib.h.base.Done():
			return
		}
	}
}

// inboxDecision is the body of a decision the inbox takes: a decision
// payload, the version of the call the person saw, and Always to allow
// the tool for the rest of the run.
type inboxDecision struct {
	decisionPayload
	Version string `json:"version"`
	Always  bool   `json:"always,omitempty"`
}

// decide takes a person's decision on one pending call, as the version
// of it they saw. The first decision wins; a later one is refused with
// who took the first, when and what (409 already_decided), and one made
// on a version the call no longer has is refused (409
// changed_since_shown). A call of another tenant is answered as one that
// does not exist. Once the thread has no call left waiting, its run goes
// on.
func (ib *inbox) decide(w http.ResponseWriter, r *http.Request, s *inboxSession) {
	var body inboxDecision
	var raw []byte
	err := ib.h.readBody(w, func() (err error) {
		raw, err = io.ReadAll(r.Body)
		return err
	})
	if err == nil {
		err = strictJSON(raw, &body) // a key given twice is refused, as over the JSON API
	}
	if err != nil {
		ib.h.refuseBody(w, err, "bad_decision", "a decision")
		return
	}
	if body.Version == "" {
		httpError(w, http.StatusBadRequest, "bad_decision", "the decision does not name the version of the call it was made on")
		return
	}
	ctx := r.Context()
	it, err := ib.visibleCall(ctx, s, r.PathValue("id"))
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	if it == nil {
		httpError(w, http.StatusNotFound, "not_pending", "no such pending call")
		return
	}
	if it.Status != statusPending {
		refuseDecided(w, it)
		return
	}
	if body.Version != callVersion(it) {
		refuseChanged(w, it)
		return
	}
	now := ib.h.cfg.Now()
	if !now.Before(it.ExpiresAt) && body.Decision != "deny" {
		httpError(w, http.StatusConflict, "expired", "the call's approval expired; it can only be denied")
		return
	}
	if body.Decision == "edit" {
		tv, err := ib.loadThread(ctx, it.Thread)
		if err != nil {
			ib.h.writeError(w, err)
			return
		}
		_, sch := ib.tool(tv, it.ToolName)
		if err := checkInput(ctx, it.ToolName, sch, body.Input); err != nil {
			httpError(w, http.StatusUnprocessableEntity, "invalid_input", err.Error())
			return
		}
	}
	d, err := ib.h.decision(it, body.decisionPayload)
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	d.Always = body.Always && d.Kind == toolrun.Allow
	if err := ib.h.be.decide(ctx, it, d, s.id.name, now); err != nil {
		var re *requestError
		if errors.As(err, &re) && re.code == "already_decided" {
			if it, err := ib.h.be.interrupt(ctx, it.ID); err == nil && it != nil {
				refuseDecided(w, it)
				return
			}
		}
		ib.h.writeError(w, err)
		return
	}
	if d.Always {
		// The runner allows the tool's later calls; its other calls
		// waiting now are allowed here, so none is left asking.
		others, err := ib.h.be.pending(ctx, it.Thread)
		if err == nil {
			for _, o := range others {
				if o.ToolName == it.ToolName {
					ib.h.be.decide(ctx, o, toolrun.Decision{Kind: toolrun.Allow, Always: true}, s.id.name, now)
				}
			}
		}
	}
	// The thread goes on before the change streams are woken: each reads
	// the list again, and on a database of one connection the run's
	// start, and so the answer, would wait behind them.
	next := ib.h.be.goOn(it.Thread)
	ib.notify()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": it.ID, "status": statusDecided, "decision": describe(d).Decision, "always": d.Always, "decidedBy": s.id.name, "decidedAt": timestamp(now), "nextRun": next})
}

// inboxBulk is the body of a decision on every call of a filtered set:
// the filter (as the list's query has it), the decision (approve, or
// deny with one reason for all), and the set the person confirmed: how
// many calls, and its version (see setVersion).
type inboxBulk struct {
	Tool       string `json:"tool,omitempty"`
	Thread     string `json:"thread,omitempty"`
	Age        int    `json:"age,omitempty"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason,omitempty"`
	Count      int    `json:"count"`
	SetVersion string `json:"setVersion"`
}

// bulk decides every call the body's filter keeps, once the person has
// confirmed how many: the set must be the one they confirmed (the same
// calls, as they were), or nothing is decided and the answer, 409
// changed_since_shown, has the set as it is now. An approval leaves the
// expired calls waiting (they can only be denied) and says how many. A
// call decided meanwhile by someone else keeps that decision. Each
// thread left with no call waiting goes on, in the background. It needs
// the read scope besides approve: a person decides only a set they may
// list.
func (ib *inbox) bulk(w http.ResponseWriter, r *http.Request, s *inboxSession) {
	var body inboxBulk
	var raw []byte
	err := ib.h.readBody(w, func() (err error) {
		raw, err = io.ReadAll(r.Body)
		return err
	})
	if err == nil {
		err = strictJSON(raw, &body)
	}
	if err != nil {
		ib.h.refuseBody(w, err, "bad_decision", "a decision")
		return
	}
	if !s.id.can(ScopeRead) {
		httpError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("the token %q lacks the read scope: it may not decide a set of calls it cannot list", s.id.name))
		return
	}
	var d toolrun.Decision
	switch body.Decision {
	case "approve":
	case "deny":
		reason := strings.TrimSpace(body.Reason)
		if reason == "" {
			httpError(w, http.StatusBadRequest, "bad_decision", "a denial of a set of calls needs the reason the model is told")
			return
		}
		d = policy.Deny(reason)
	default:
		httpError(w, http.StatusBadRequest, "bad_decision", fmt.Sprintf("decision %q: a set of calls is approved or denied", body.Decision))
		return
	}
	ctx := r.Context()
	l, err := ib.list(ctx, s.id.tenant, listFilter{tool: body.Tool, thread: strings.TrimSpace(body.Thread), age: body.Age})
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	if len(l.kept) != body.Count || l.setVersion() != body.SetVersion {
		out := l.counts()
		out["error"] = map[string]string{"code": "changed_since_shown", "message": fmt.Sprintf("the set changed since it was confirmed: %d calls match now, not %d; nothing was decided: confirm again", len(l.kept), body.Count)}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(out)
		return
	}
	// The calls whole, for their expiry: one query by their ids.
	kept, err := ib.fill(ctx, l.kept)
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	taken := len(l.kept) - len(kept) // decided since the list was read
	now := ib.h.cfg.Now()
	decided, expired := 0, 0
	threads := map[string]bool{}
	for _, it := range kept {
		if body.Decision == "approve" && !now.Before(it.ExpiresAt) {
			expired++
			continue
		}
		if err := ib.h.be.decide(ctx, it, d, s.id.name, now); err != nil {
			var re *requestError
			if errors.As(err, &re) && re.code == "already_decided" {
				taken++
				continue
			}
			ib.h.writeError(w, err)
			return
		}
		decided++
		threads[it.Thread] = true
	}
	ib.h.log.Info("serve: inbox decided a set of calls", "name", s.id.name, "decision", body.Decision, "decided", decided, "expired", expired, "taken", taken)
	ib.notify()
	go func() {
		for t := range threads {
			ib.h.be.goOn(t)
		}
	}()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"decision": body.Decision, "decided": decided, "expired": expired, "decidedElsewhere": taken, "decidedBy": s.id.name, "decidedAt": timestamp(now)})
}

// checkInput checks an edited input against the tool's schema with
// toolrun's own validator, so a person reads the message the model
// would.
func checkInput(ctx context.Context, tool string, raw json.RawMessage, input json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(input, &obj); err != nil || obj == nil {
		return fmt.Errorf("invalid input for tool %q: the input is not a JSON object", tool)
	}
	if len(raw) == 0 {
		return nil
	}
	err := driver.CheckInput(ctx, tool, raw, input)
	if errors.Is(err, toolrun.ErrInvalidSchema) {
		return nil // the runner refuses such a tool at its start; nothing to check against
	}
	return err
}

// goOn starts the next run of thread, as its owner, once no call of it
// waits for an answer, its State awaits the decisions and no run of it is
// in flight; it returns the new run's id, or "" if it started none. The
// run is recorded when goOn returns, and its events are as every run's,
// for the client that follows the thread.
func (ib *inbox) goOn(thread string) string {
	h := ib.h
	ctx := h.base
	var open int
	if err := h.cfg.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM serve_interrupts WHERE thread_id = ? AND status = ?`, thread, statusPending).Scan(&open); err != nil || open > 0 {
		return ""
	}
	var owner string
	if err := h.cfg.DB.QueryRowContext(ctx, `SELECT owner FROM serve_threads WHERE id = ?`, thread).Scan(&owner); err != nil {
		return ""
	}
	ib.mu.Lock()
	if ib.going[thread] {
		ib.mu.Unlock()
		return ""
	}
	ib.going[thread] = true
	ib.mu.Unlock()
	release := func() {
		ib.mu.Lock()
		delete(ib.going, thread)
		ib.mu.Unlock()
	}
	h.mu.Lock()
	busy := h.threads[thread] || h.draining
	h.mu.Unlock()
	var err error
	if h.cfg.Executor == nil {
		// In process the State must await the decisions; under an
		// Executor the State is the executor's, and its run is given the
		// decisions by the run started here.
		var st *toolrun.State
		if st, err = h.store.Load(ctx, thread); err == nil && len(st.AwaitingApproval()) == 0 {
			busy = true
		}
	}
	if err != nil || busy {
		release()
		return ""
	}
	id := identity{name: owner, scopes: []string{ScopeRun}, maxRuns: 64}
	if len(h.cfg.Tokens) > 0 {
		id.maxRuns = 4
		for _, t := range h.cfg.Tokens {
			if t.Name == owner && t.MaxRuns > 0 {
				id.maxRuns = t.MaxRuns
			}
		}
	}
	runID := newID("run_")
	defer release()
	in := &runInput{ThreadID: thread, RunID: runID, byDecision: true}
	if _, _, err := h.startRun(ctx, in, id); err != nil {
		h.log.Info("serve: a decision could not continue its thread", "thread", thread, "err", err)
		return ""
	}
	return runID
}

// trailEntry is one call of a thread that asked for a decision, and the
// decision, as the run's page shows it.
type trailEntry struct {
	ID          string          `json:"id"`
	ToolCallID  string          `json:"toolCallId"`
	ToolName    string          `json:"toolName"`
	Input       json.RawMessage `json:"input"`
	Status      string          `json:"status"`
	CreatedAt   time.Time       `json:"createdAt"`
	ExpiresAt   time.Time       `json:"expiresAt"`
	DecidedBy   string          `json:"decidedBy,omitempty"`
	DecidedAt   string          `json:"decidedAt,omitempty"`
	Decision    string          `json:"decision,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Response    string          `json:"response,omitempty"`
	EditedInput json.RawMessage `json:"editedInput,omitempty"`
	Always      bool            `json:"always,omitempty"`
}

// runPage serves the page of a thread (toolrun's run is the server's
// thread), a shell whose script fetches the thread from the inbox's API:
// a page answered to the cookie alone holds nothing.
func (ib *inbox) runPage(w http.ResponseWriter, r *http.Request) {
	ib.render(w, http.StatusOK, "run.tmpl", map[string]any{"Thread": r.PathValue("thread")})
}

// run answers a thread's conversation, cost, turns and the trail of its
// decisions, for the run's page. A thread of another tenant is answered
// as one that does not exist.
func (ib *inbox) run(w http.ResponseWriter, r *http.Request, s *inboxSession) {
	ctx := r.Context()
	thread := r.PathValue("thread")
	missing := func() {
		httpError(w, http.StatusNotFound, "not_found", fmt.Sprintf("there is no run %s on this server", thread))
	}
	if ok, err := ib.h.sees(ctx, s.id.tenant, thread); err != nil {
		ib.h.writeError(w, err)
		return
	} else if !ok {
		missing()
		return
	}
	tv, err := ib.loadThread(ctx, thread)
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	its, err := queryInterrupts(ctx, ib.h.cfg.DB, `thread_id = ? AND kind = ?`, thread, kindApproval)
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	if tv.owner == "" && len(its) == 0 {
		missing()
		return
	}
	trail := []trailEntry{}
	for _, it := range its {
		d := decisionOf(it)
		trail = append(trail, trailEntry{ID: it.ID, ToolCallID: it.ToolCallID, ToolName: it.ToolName, Input: orEmpty(it.Input), Status: it.Status, CreatedAt: it.CreatedAt, ExpiresAt: it.ExpiresAt,
			DecidedBy: it.DecidedBy, DecidedAt: it.DecidedAt, Decision: d.Decision, Reason: d.Reason, Response: d.Response, EditedInput: d.EditedInput, Always: d.Always})
	}
	turns := []inboxTurn{}
	for _, m := range tv.messages {
		turns = append(turns, inboxTurn{Role: roleOf(m), Text: summarize(m)})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"thread": thread, "owner": tv.owner, "turns": tv.turns, "costUSD": tv.cost, "costIncomplete": tv.costUnknown,
		"messages": turns, "trail": trail,
	})
}

// asTyped returns the JSON b with the escapes of <, > and & that Go's
// encoding/json writes (\u003c, \u003e, \u0026) turned back into the
// characters, so that a person reads an input as it was typed; the text
// is escaped for HTML where it is shown. Every other byte, the order of
// the keys and the numbers as written, is kept.
func asTyped(b json.RawMessage) json.RawMessage {
	if !bytes.Contains(b, []byte(`\u00`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	in := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case !in:
			in = c == '"'
		case c == '"':
			in = false
		case c == '\\' && i+1 < len(b):
			if b[i+1] == 'u' && i+5 < len(b) {
				switch strings.ToLower(string(b[i+2 : i+6])) {
				case "003c":
					out, i = append(out, '<'), i+5
					continue
				case "003e":
					out, i = append(out, '>'), i+5
					continue
				case "0026":
					out, i = append(out, '&'), i+5
					continue
				}
			}
			out = append(out, c, b[i+1]) // an escape: its next byte is not the string's end
			i++
			continue
		}
		out = append(out, c)
	}
	return out
}
