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
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/redact"
)

// The approval inbox is a web page at /inbox where a person sees every
// call awaiting a decision, across threads, and approves, denies or edits
// it. It is plain HTML, CSS and JavaScript embedded in the binary, with no
// library and no build step: the page is a list, a detail pane and a
// form, which the DOM's own textContent and fetch do safely and in a few
// hundred lines, and every library would be one more thing to audit for
// the one property that matters here, that hostile model output is
// shown as text.
//
// Safety: a person logs in with a token of the approve scope (with no
// tokens configured, a loopback visitor logs in as "local"), through a
// form that carries a CSRF token of its own; the session lives in an
// HttpOnly, SameSite=Strict cookie scoped to /inbox, and in the server's
// database (under a hash of the cookie), so it outlives a restart; every
// state-changing request carries the session's CSRF token in the
// X-CSRF-Token header (or the csrf form field), compared in constant
// time; every page is sent with a Content-Security-Policy that allows
// scripts and styles from the server only, so no inline script and no
// eval run; the server renders with html/template and the page's script
// writes every string with textContent.

//go:embed inbox
var inboxFiles embed.FS

// inboxCookie names the session cookie.
const inboxCookie = "toolrun_inbox"

// inboxSessionTTL is how long a session lasts after its login.
const inboxSessionTTL = 12 * time.Hour

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

	mu   sync.Mutex    // guards wake, going
	wake chan struct{} // closed and replaced when the inbox decides
	// going holds the threads whose next run the inbox is starting.
	going map[string]bool
}

// inboxSession is a logged-in person.
type inboxSession struct {
	name    string
	csrf    string
	expires time.Time
}

// mountInbox adds the inbox's routes to mux.
func (h *Handler) mountInbox(mux *http.ServeMux) {
	ib := &inbox{
		h:     h,
		pages: template.Must(template.New("").Funcs(template.FuncMap{"json": prettyJSON, "when": when}).ParseFS(inboxFiles, "inbox/*.tmpl")),
		wake:  make(chan struct{}),
		going: map[string]bool{},
	}
	h.inbox = ib
	mux.HandleFunc("GET /inbox", ib.secure(ib.page))
	mux.HandleFunc("GET /inbox/{$}", ib.secure(ib.page))
	mux.HandleFunc("GET /inbox/login", ib.secure(ib.loginForm))
	mux.HandleFunc("POST /inbox/login", ib.secure(ib.login))
	mux.HandleFunc("POST /inbox/logout", ib.secure(ib.session(ib.logout)))
	mux.HandleFunc("GET /inbox/static/{file}", ib.secure(ib.static))
	mux.HandleFunc("GET /inbox/api/pending", ib.secure(ib.session(ib.pending)))
	mux.HandleFunc("GET /inbox/api/events", ib.secure(ib.session(ib.events)))
	mux.HandleFunc("POST /inbox/api/interrupts/{id}/decision", ib.secure(ib.session(ib.decide)))
	mux.HandleFunc("GET /inbox/runs/{thread}", ib.secure(ib.session(ib.runPage)))
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

// current returns the session of r's cookie, if it is live. Sessions are
// kept in the server's database, so a restart logs nobody out; the table
// holds a hash of each cookie, not the cookie, so whoever reads the
// database cannot take a session over.
func (ib *inbox) current(r *http.Request) (*inboxSession, bool) {
	c, err := r.Cookie(inboxCookie)
	if err != nil || c.Value == "" {
		return nil, false
	}
	key := sessionKey(c.Value)
	s := &inboxSession{}
	var expires int64
	err = ib.h.cfg.DB.QueryRowContext(r.Context(), `SELECT name, csrf, expires_at FROM serve_inbox_sessions WHERE id = ?`, key).Scan(&s.name, &s.csrf, &expires)
	if err != nil {
		if !errors.Is(err, sql.ErrNoRows) {
			ib.h.log.Error("serve: reading an inbox session", "err", err)
		}
		return nil, false
	}
	s.expires = time.Unix(0, expires)
	if !ib.h.cfg.Now().Before(s.expires) {
		ib.h.cfg.DB.ExecContext(r.Context(), `DELETE FROM serve_inbox_sessions WHERE id = ?`, key)
		return nil, false
	}
	return s, true
}

// sessionKey is the database's key of a session cookie's value.
func sessionKey(cookie string) string {
	sum := sha256.Sum256([]byte(cookie))
	return hex.EncodeToString(sum[:])
}

// session wraps a route that needs a session, and for a request that
// changes state, the session's CSRF token.
func (ib *inbox) session(next func(http.ResponseWriter, *http.Request, *inboxSession)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := ib.current(r)
		if !ok {
			ib.h.metrics.refused.Add(1)
			httpError(w, http.StatusUnauthorized, "no_session", "log in at /inbox/login first")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			got := r.Header.Get("X-CSRF-Token")
			if got == "" {
				if !ib.h.readForm(w, r) {
					return
				}
				got = r.FormValue("csrf")
			}
			if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
				ib.h.metrics.refused.Add(1)
				httpError(w, http.StatusForbidden, "bad_csrf", "the request lacks this session's CSRF token; reload the inbox")
				return
			}
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

// login starts a session for a token of the approve scope, or, on a
// server without tokens, for a loopback visitor as "local".
func (ib *inbox) login(w http.ResponseWriter, r *http.Request) {
	if !ib.h.readForm(w, r) {
		return
	}
	c, err := r.Cookie(inboxLoginCookie)
	got := r.FormValue("csrf")
	if err != nil || c.Value == "" || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(c.Value)) != 1 {
		ib.h.metrics.refused.Add(1)
		ib.renderLogin(w, r, http.StatusForbidden, "The login form expired or came from another page; log in again.")
		return
	}
	name, ok := "", false
	if len(ib.h.cfg.Tokens) == 0 {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			name, ok = "local", true
		}
	} else {
		got := sha256.Sum256([]byte(r.FormValue("token")))
		for _, t := range ib.h.cfg.Tokens {
			want := sha256.Sum256([]byte(t.Secret))
			if subtle.ConstantTimeCompare(got[:], want[:]) == 1 && slices.Contains(t.Scopes, ScopeApprove) {
				name, ok = t.Name, true
			}
		}
	}
	if !ok {
		ib.h.metrics.refused.Add(1)
		ib.renderLogin(w, r, http.StatusUnauthorized, "That is not a token of the approve scope.")
		return
	}
	id := randomHex(32)
	s := &inboxSession{name: name, csrf: randomHex(32), expires: ib.h.cfg.Now().Add(inboxSessionTTL)}
	now := ib.h.cfg.Now()
	db := ib.h.cfg.DB
	if _, err := db.ExecContext(r.Context(), `DELETE FROM serve_inbox_sessions WHERE expires_at <= ?`, now.UnixNano()); err != nil {
		ib.h.writeError(w, err)
		return
	}
	if _, err := db.ExecContext(r.Context(), `INSERT INTO serve_inbox_sessions (id, name, csrf, expires_at) VALUES (?, ?, ?, ?)`, sessionKey(id), s.name, s.csrf, s.expires.UnixNano()); err != nil {
		ib.h.writeError(w, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: inboxLoginCookie, Value: "", Path: "/inbox/login", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.SetCookie(w, &http.Cookie{Name: inboxCookie, Value: id, Path: "/inbox", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(inboxSessionTTL / time.Second)})
	http.Redirect(w, r, "/inbox", http.StatusSeeOther)
}

func (ib *inbox) logout(w http.ResponseWriter, r *http.Request, _ *inboxSession) {
	if c, err := r.Cookie(inboxCookie); err == nil {
		if _, err := ib.h.cfg.DB.ExecContext(r.Context(), `DELETE FROM serve_inbox_sessions WHERE id = ?`, sessionKey(c.Value)); err != nil {
			ib.h.writeError(w, err)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: inboxCookie, Value: "", Path: "/inbox", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/inbox/login", http.StatusSeeOther)
}

func (ib *inbox) page(w http.ResponseWriter, r *http.Request) {
	s, ok := ib.current(r)
	if !ok {
		http.Redirect(w, r, "/inbox/login", http.StatusSeeOther)
		return
	}
	ib.render(w, http.StatusOK, "index.tmpl", map[string]any{"Name": s.name, "CSRF": s.csrf})
}

// static serves the page's script and style sheet.
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
	w.Header().Set("Cache-Control", "no-cache")
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
	tv := &threadView{}
	var tools string
	err := ib.h.cfg.DB.QueryRowContext(ctx, `SELECT owner, client_tools FROM serve_threads WHERE id = ?`, thread).Scan(&tv.owner, &tools)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	json.Unmarshal([]byte(tools), &tv.clientTools)
	var data []byte
	if ex := ib.h.cfg.Executor; ex != nil {
		// The State is the executor's, if it can read it.
		sl, ok := ex.(StateLoader)
		if !ok {
			return tv, nil
		}
		st, err := sl.LoadState(ctx, thread)
		if errors.Is(err, fs.ErrNotExist) {
			return tv, nil
		}
		if err != nil {
			return nil, fmt.Errorf("thread %q: reading its state: %w", thread, err)
		}
		if data, err = json.Marshal(st); err != nil {
			return nil, fmt.Errorf("thread %q: reading its state: %w", thread, err)
		}
	} else {
		err = ib.h.cfg.DB.QueryRowContext(ctx, `SELECT data FROM serve_states WHERE id = ?`, thread).Scan(&data)
		if errors.Is(err, sql.ErrNoRows) {
			return tv, nil
		}
		if err != nil {
			return nil, err
		}
	}
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
		return nil, fmt.Errorf("thread %q: reading its state: %w", thread, err)
	}
	tv.messages = st.Params.Messages
	if st.Pending != nil {
		tv.messages = append(tv.messages, st.Pending.Message)
	}
	tv.turns, tv.cost, tv.costUnknown = st.Turns, st.CostUSD, st.CostIncomplete
	return tv, nil
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
		turns = append(turns, inboxTurn{Role: tv.messages[i].Role, Text: summarize(tv.messages[i])})
	}
	return strings.Join(text, "\n"), turns
}

// summarize returns a message as a few lines of text.
func summarize(m wireMessage) string {
	var lines []string
	for _, b := range m.blocks() {
		switch b.Type {
		case "text":
			lines = append(lines, b.Text)
		case "tool_use":
			lines = append(lines, "→ "+b.Name+" "+compact(b.Input))
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

// pendingCalls lists the calls awaiting a person, newest first, with
// what the inbox shows of each.
func (ib *inbox) pendingCalls(ctx context.Context) ([]inboxCall, error) {
	its, err := ib.h.be.pending(ctx, "")
	if err != nil {
		return nil, err
	}
	threads := map[string]*threadView{}
	out := []inboxCall{}
	for i := len(its) - 1; i >= 0; i-- {
		it := its[i]
		tv, ok := threads[it.Thread]
		if !ok {
			if tv, err = ib.loadThread(ctx, it.Thread); err != nil {
				return nil, err
			}
			threads[it.Thread] = tv
		}
		c := inboxCall{pendingCall: pendingCall{ID: it.ID, ThreadID: it.Thread, RunID: it.Run, ToolCallID: it.ToolCallID, ToolName: it.ToolName, Input: orEmpty(it.Input), Reason: it.Reason, CreatedAt: it.CreatedAt, ExpiresAt: it.ExpiresAt}}
		c.Owner = tv.owner
		c.Description, c.Schema = ib.tool(tv, it.ToolName)
		c.ModelText, c.Turns = tv.context(it.ToolCallID)
		c.CostUSD, c.CostUnknown, c.RunTurns = tv.cost, tv.costUnknown, tv.turns
		out = append(out, c)
	}
	return out, nil
}

func (ib *inbox) pending(w http.ResponseWriter, r *http.Request, s *inboxSession) {
	calls, err := ib.pendingCalls(r.Context())
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"pending": calls, "you": s.name, "now": ib.h.cfg.Now().UTC()})
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

// events is a server-sent event stream that says "changed" whenever the
// set of pending calls changes; the page then fetches the list again.
// It ends when the client goes away or the server shuts down, or when a
// write is not taken within Config.StreamWriteTimeout (a page that stopped
// reading); it has no write deadline while it waits, as [Handler.stream].
func (ib *inbox) events(w http.ResponseWriter, r *http.Request, _ *inboxSession) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	ticker := time.NewTicker(inboxPoll)
	defer ticker.Stop()
	last, n := "", 0
	for {
		wake := ib.woken()
		fp, err := ib.fingerprint(r.Context())
		if err != nil {
			return
		}
		if fp != last {
			n++
			_ = rc.SetWriteDeadline(time.Now().Add(ib.h.cfg.StreamWriteTimeout))
			if _, err := fmt.Fprintf(w, "id: %d\nevent: changed\ndata: {}\n\n", n); err != nil {
				return
			}
			if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
				return
			}
			_ = rc.SetWriteDeadline(time.Time{})
			last = fp
		}
		select {
		case <-wake:
		case <-ticker.C:
		case <-r.Context().Done():
			return
		case <-ib.h.base.Done():
			return
		}
	}
}

// inboxDecision is the body of a decision the inbox takes: a decision
// payload, and Always to allow the tool for the rest of the run.
type inboxDecision struct {
	decisionPayload
	Always bool `json:"always,omitempty"`
}

// decide takes a person's decision on one pending call. The first
// decision wins; a later one is refused with who took the first and
// when. Once the thread has no call left waiting, its run goes on.
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
	ctx := r.Context()
	it, err := ib.h.be.interrupt(ctx, r.PathValue("id"))
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	if it == nil || it.Kind != kindApproval {
		httpError(w, http.StatusNotFound, "not_pending", "no such pending call")
		return
	}
	if it.Status != statusPending {
		ib.alreadyDecided(w, it)
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
	if err := ib.h.be.decide(ctx, it, d, s.name, now); err != nil {
		var re *requestError
		if errors.As(err, &re) && re.code == "already_decided" {
			if it, err := ib.h.be.interrupt(ctx, it.ID); err == nil && it != nil {
				ib.alreadyDecided(w, it)
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
					ib.h.be.decide(ctx, o, toolrun.Decision{Kind: toolrun.Allow, Always: true}, s.name, now)
				}
			}
		}
	}
	ib.notify()
	next := ib.h.be.goOn(it.Thread)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": it.ID, "status": statusDecided, "decision": body.Decision, "always": d.Always, "decidedBy": s.name, "decidedAt": timestamp(now), "nextRun": next})
}

// alreadyDecided refuses a decision on a call decided before.
func (ib *inbox) alreadyDecided(w http.ResponseWriter, it *interrupt) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusConflict)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{
		"code":    "already_decided",
		"message": fmt.Sprintf("already decided by %s at %s", it.DecidedBy, it.DecidedAt),
	}, "decidedBy": it.DecidedBy, "decidedAt": it.DecidedAt})
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
	in := &runInput{ThreadID: thread, RunID: runID}
	if _, _, err := h.startRun(ctx, in, id); err != nil {
		h.log.Info("serve: a decision could not continue its thread", "thread", thread, "err", err)
		return ""
	}
	return runID
}

// trailEntry is one decision on a thread's call, as the run's page shows
// it.
type trailEntry struct {
	ID, ToolCallID, ToolName string
	Input                    json.RawMessage
	Decision                 string
	Reason                   string
	EditedInput              json.RawMessage
	Always                   bool
	DecidedBy, DecidedAt     string
	Status                   string
	CreatedAt                time.Time
}

// runPage shows a run (a thread: toolrun's run is the server's thread)
// with its conversation, cost, turns and the trail of its decisions.
func (ib *inbox) runPage(w http.ResponseWriter, r *http.Request, s *inboxSession) {
	thread := r.PathValue("thread")
	tv, err := ib.loadThread(r.Context(), thread)
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	its, err := queryInterrupts(r.Context(), ib.h.cfg.DB, `thread_id = ? AND kind = ?`, thread, kindApproval)
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	if tv.owner == "" && len(its) == 0 {
		ib.render(w, http.StatusNotFound, "run.tmpl", map[string]any{"Thread": thread, "Missing": true, "Name": s.name, "CSRF": s.csrf})
		return
	}
	var trail []trailEntry
	for _, it := range its {
		e := trailEntry{ID: it.ID, ToolCallID: it.ToolCallID, ToolName: it.ToolName, Input: orEmpty(it.Input), DecidedBy: it.DecidedBy, DecidedAt: it.DecidedAt, Status: it.Status, CreatedAt: it.CreatedAt}
		if len(it.Decision) > 0 {
			var d toolrun.Decision
			if json.Unmarshal(it.Decision, &d) == nil {
				switch {
				case d.Kind == toolrun.Allow && len(d.Input) > 0:
					e.Decision, e.EditedInput = "edit", d.Input
				case d.Kind == toolrun.Allow:
					e.Decision = "approve"
				default:
					e.Decision, e.Reason = "deny", d.Reason
				}
				e.Always = d.Always
			}
		}
		trail = append(trail, e)
	}
	var turns []inboxTurn
	for _, m := range tv.messages {
		turns = append(turns, inboxTurn{Role: m.Role, Text: summarize(m)})
	}
	ib.render(w, http.StatusOK, "run.tmpl", map[string]any{
		"Thread": thread, "Owner": tv.owner, "Turns": tv.turns, "Cost": fmt.Sprintf("$%.4f", tv.cost), "CostIncomplete": tv.costUnknown,
		"Messages": turns, "Trail": trail, "Name": s.name, "CSRF": s.csrf,
	})
}

// prettyJSON indents b for the run's page.
func prettyJSON(b json.RawMessage) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}

// when formats a time for the run's page.
func when(v any) string {
	switch t := v.(type) {
	case time.Time:
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	case string:
		if p, err := time.Parse(time.RFC3339Nano, t); err == nil {
			return p.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		return t
	}
	return fmt.Sprint(v)
}
