package serve_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestInboxSessionUselessOnAnotherPort: a page served on another port of
// the same host receives the session's cookie from a logged-in browser
// (cookies are not scoped by port), and with it, and anything it can
// fetch with it, it can neither read a call nor decide one.
func TestInboxSessionUselessOnAnotherPort(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5)})
	id := e.start(t, "thread-5", "pay 5")[0]
	b := browser(t)
	alice := e.person(t, b, aliceToken)
	waitJS(t, alice, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q`, id))

	var mu sync.Mutex
	var stolen string
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if r.URL.Path == "/inbox/steal" { // not the browser's /favicon.ico, which the cookie's path leaves out
			stolen = r.Header.Get("Cookie")
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>another server</title>")
	}))
	defer thief.Close()
	do(t, alice, chromedp.Navigate(thief.URL+"/inbox/steal"))
	if got := eval[bool](t, alice, `localStorage.getItem("toolrun-inbox-key") === null`); !got {
		t.Error("the other port's page reads the session's key from localStorage")
	}
	mu.Lock()
	cookie := stolen
	mu.Unlock()
	if !strings.Contains(cookie, "toolrun_inbox=") {
		t.Fatalf("the other port received the cookies %q; the test needs the session's cookie to reach it", cookie)
	}

	// The other server replays the cookie at the inbox, as the browser
	// would send it, and reads what it can.
	replay := func(method, path, body string, header map[string]string) (int, string) {
		req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
		req.Header.Set("Cookie", cookie)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return resp.StatusCode, "(a stream)" // it would not end
		}
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.String()
	}
	_, page := replay(http.MethodGet, "/inbox", "", nil)
	_, runPage := replay(http.MethodGet, "/inbox/runs/thread-5", "", nil)
	for name, p := range map[string]string{"/inbox": page, "/inbox/runs/thread-5": runPage} {
		for _, secret := range []string{"acme", "The invoice says 5", "csrf", "inbox-key"} {
			if strings.Contains(p, secret) {
				t.Errorf("%s answered to the cookie alone holds %q", name, secret)
			}
		}
	}
	var csrf string
	if _, after, ok := strings.Cut(page, `name="csrf-token" content="`); ok {
		csrf, _, _ = strings.Cut(after, `"`)
	}
	tests := []struct {
		name, method, path, body string
	}{
		{"the pending list", http.MethodGet, "/inbox/api/pending", ""},
		{"the run", http.MethodGet, "/inbox/api/runs/thread-5", ""},
		{"the change stream", http.MethodGet, "/inbox/api/events", ""},
		{"a decision", http.MethodPost, "/inbox/api/interrupts/" + id + "/decision", `{"decision":"approve","version":"` + e.version(t, id) + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := replay(tt.method, tt.path, tt.body, map[string]string{"X-CSRF-Token": csrf, "Content-Type": "application/json", "X-Inbox-Key": ""})
			if status != http.StatusUnauthorized {
				t.Errorf("got %d %.200s, want 401", status, body)
			}
		})
	}
	if diff := cmp.Diff([]string{id}, e.pendingIDs(t)); diff != "" {
		t.Errorf("pending after the replays (-want +got):\n%s", diff)
	}
	if got := e.calls.got(); len(got) != 0 {
		t.Errorf("the tool ran: %v", got)
	}
	// Back on the inbox's own origin the session works as before.
	do(t, alice, chromedp.Navigate(e.url+"/inbox"))
	waitJS(t, alice, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q`, id))
}

// TestInboxScopesAsTheAPI: a token of the approve scope alone, which the
// JSON API refuses the pending list, logs in to the inbox but reads no
// call, no input and no conversation there; one of the read scope alone
// reads them and cannot decide.
func TestInboxScopesAsTheAPI(t *testing.T) {
	const carolToken, daveToken = "carol-approves-only-0123", "dave-reads-only-01234567"
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5)})
	e.withTokens(t,
		serve.Token{Name: "carol", Secret: carolToken, Scopes: []string{serve.ScopeApprove}},
		serve.Token{Name: "dave", Secret: daveToken, Scopes: []string{serve.ScopeRead}},
	)
	id := e.start(t, "thread-5", "pay 5")[0]
	if s, _ := e.bearer(t, http.MethodGet, "/api/pending", carolToken, ""); s != http.StatusForbidden {
		t.Fatalf("the JSON API lists the calls to carol: %d, want 403", s)
	}
	c, key := e.login(t, carolToken)
	for _, path := range []string{"/inbox/api/pending", "/inbox/api/runs/thread-5", "/inbox/api/interrupts/" + id, "/inbox/api/events"} {
		if s, body := e.inboxGet(t, c, key, path); s != http.StatusForbidden || strings.Contains(body, "acme") {
			t.Errorf("carol's %s: %d %.200s, want 403 and no input", path, s, body)
		}
	}
	d, dkey := e.login(t, daveToken)
	if s, body := e.inboxGet(t, d, dkey, "/inbox/api/pending"); s != http.StatusOK || !strings.Contains(body, id) {
		t.Errorf("dave's list: %d %.200s, want the call", s, body)
	}
	if s, body := e.decideWith(t, d, id, dkey, `{"decision":"approve"}`); s != http.StatusForbidden {
		t.Errorf("dave's decision: %d %s, want 403", s, body)
	}

	b := browser(t)
	carol := e.person(t, b, carolToken)
	waitJS(t, carol, `!document.getElementById("scope-note").hidden`)
	if got := text(t, carol, "#scope-note"); !strings.Contains(got, "approve scope without read") {
		t.Errorf("carol's inbox says %q", got)
	}
	if got := text(t, carol, "body"); strings.Contains(got, "acme") || strings.Contains(got, "The invoice says") {
		t.Errorf("carol's inbox shows the call: %q", got)
	}
	screenshot(t, carol, "inbox-approve-only.png")
	dave := e.person(t, b, daveToken)
	waitJS(t, dave, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q`, id))
	if !eval[bool](t, dave, `document.getElementById("approve").disabled && document.getElementById("deny").disabled`) {
		t.Error("dave, who may only read, is offered Approve and Deny")
	}
	if diff := cmp.Diff([]string{id}, e.pendingIDs(t)); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) records(msg string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(s.b.String(), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// TestInboxLoginsThrottledAndLogged: after five failed logins from one
// address, a sixth, even with the right token, is refused with 429 until
// five minutes have passed since the first; every login and refusal is
// logged with its address, never with the token.
func TestInboxLoginsThrottledAndLogged(t *testing.T) {
	e := newInboxEnv(t, nil)
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC).UnixNano())
	e.cfg.Now = func() time.Time { return time.Unix(0, now.Load()) }
	logs := &syncBuffer{}
	e.cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	e.restart(t)

	try := func(token string) (int, string) {
		jar := newJar()
		resp := e.postLogin(t, &http.Client{Jar: jar}, token)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	for i := range 5 {
		if s, _ := try(fmt.Sprintf("wrong-token-%020d", i)); s != http.StatusUnauthorized {
			t.Fatalf("wrong login %d: %d, want 401", i, s)
		}
		now.Add(int64(time.Second))
	}
	if s, retry := try(aliceToken); s != http.StatusTooManyRequests || retry == "" {
		t.Errorf("a sixth login: %d (Retry-After %q), want 429 with Retry-After", s, retry)
	}
	now.Add(int64(5 * time.Minute))
	if s, _ := try(aliceToken); s != http.StatusOK {
		t.Errorf("a login once the window passed: %d, want 200", s)
	}
	refused := logs.records("serve: inbox login refused")
	if len(refused) != 6 || refused[0]["addr"] != "127.0.0.1" {
		t.Errorf("refusals logged: %v, want 6 with the address", refused)
	}
	if ok := logs.records("serve: inbox login"); len(ok) != 1 || ok[0]["name"] != "alice" {
		t.Errorf("logins logged: %v, want alice's", ok)
	}
	logs.mu.Lock()
	all := logs.b.String()
	logs.mu.Unlock()
	if strings.Contains(all, aliceToken) || strings.Contains(all, "wrong-token-") {
		t.Error("a token reached the log")
	}
}

func newJar() http.CookieJar {
	jar, _ := cookiejar.New(nil)
	return jar
}
