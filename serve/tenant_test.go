package serve_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// The tokens of two tenants: acme's approver and client, globex's.
const (
	acmeApprover   = "acme-approver-0123456789"
	acmeClient     = "acme-client-0123456789ab"
	globexApprover = "globex-approver-01234567"
	globexClient   = "globex-client-0123456789"
)

func tenantEnv(t *testing.T) *inboxEnv {
	t.Helper()
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5)})
	e.cfg.Tokens = nil
	e.withTokens(t,
		serve.Token{Name: "ann", Secret: acmeApprover, Scopes: []string{serve.ScopeApprove, serve.ScopeRead}, Tenant: "acme"},
		serve.Token{Name: "acme-app", Secret: acmeClient, Scopes: []string{serve.ScopeRun}, Tenant: "acme"},
		serve.Token{Name: "gus", Secret: globexApprover, Scopes: []string{serve.ScopeApprove, serve.ScopeRead}, Tenant: "globex"},
		serve.Token{Name: "globex-app", Secret: globexClient, Scopes: []string{serve.ScopeRun}, Tenant: "globex"},
	)
	return e
}

// TestTenantsSeeAndDecideTheirOwn: with tokens of two tenants, a call of
// acme's thread is listed, read and decided by acme's tokens only; every
// request of globex's for it, over the JSON API, the AG-UI endpoint and
// the inbox, is answered as one for a thread or call that does not exist,
// word for word, so nothing says the thread is there.
func TestTenantsSeeAndDecideTheirOwn(t *testing.T) {
	e := tenantEnv(t)
	ids, status, body := e.startAs(t, acmeClient, "thread-5", "pay 5", nil)
	if status != http.StatusOK || len(ids) != 1 {
		t.Fatalf("starting acme's thread: %d %s", status, body)
	}
	id := ids[0]
	pending := func(token string) []string {
		t.Helper()
		_, body := e.bearer(t, http.MethodGet, "/api/pending", token, "")
		var b struct{ Pending []struct{ ID string } }
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		out := []string{}
		for _, p := range b.Pending {
			out = append(out, p.ID)
		}
		return out
	}
	if diff := cmp.Diff([]string{id}, pending(acmeApprover)); diff != "" {
		t.Errorf("acme's pending list (-want +got):\n%s", diff)
	}
	if got := pending(globexApprover); len(got) != 0 {
		t.Errorf("globex's pending list holds acme's calls: %v", got)
	}

	type answer struct {
		Status int
		Body   string
	}
	ask := func(method, path, token, body string) answer {
		s, b := e.bearer(t, method, path, token, body)
		return answer{s, b}
	}
	gc, gkey := e.login(t, globexApprover)
	inbox := func(path string) answer {
		s, b := e.inboxGet(t, gc, gkey, path)
		return answer{s, b}
	}
	tests := []struct {
		name          string
		foreign, none func() answer
		status        int
	}{
		{"a decision over the JSON API",
			func() answer {
				return ask(http.MethodPost, "/api/interrupts/"+id+"/decision", globexApprover, `{"decision":"approve"}`)
			},
			func() answer {
				return ask(http.MethodPost, "/api/interrupts/int_nope/decision", globexApprover, `{"decision":"approve"}`)
			},
			http.StatusNotFound},
		{"the inbox's decision",
			func() answer {
				s, b := e.decideWith(t, gc, id, gkey, `{"decision":"approve","version":"v"}`)
				return answer{s, b}
			},
			func() answer {
				s, b := e.decideWith(t, gc, "int_nope", gkey, `{"decision":"approve","version":"v"}`)
				return answer{s, b}
			},
			http.StatusNotFound},
		{"the inbox's call", func() answer { return inbox("/inbox/api/interrupts/" + id) }, func() answer { return inbox("/inbox/api/interrupts/int_nope") }, http.StatusNotFound},
		{"the inbox's run page",
			func() answer {
				a := inbox("/inbox/api/runs/thread-5")
				a.Body = strings.ReplaceAll(a.Body, "thread-5", "X")
				return a
			},
			func() answer {
				a := inbox("/inbox/api/runs/thread-0")
				a.Body = strings.ReplaceAll(a.Body, "thread-0", "X")
				return a
			},
			http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, want := tt.foreign(), tt.none()
			if got.Status != tt.status {
				t.Errorf("got %d %s, want %d", got.Status, got.Body, tt.status)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("another tenant's thread is told apart from none (-none +foreign):\n%s", diff)
			}
		})
	}
	// A run on acme's thread with globex's token: 404, not "another
	// token's thread".
	if _, s, b := e.startAs(t, globexClient, "thread-5", "pay 5", nil); s != http.StatusNotFound || !strings.Contains(b, `"not_found"`) {
		t.Errorf("globex running acme's thread: %d %s, want 404 not_found", s, b)
	}
	if s, b := e.inboxGet(t, gc, gkey, "/inbox/api/pending"); s != http.StatusOK || strings.Contains(b, id) {
		t.Errorf("globex's inbox lists %d %s, want none of acme's calls", s, b)
	}
	run := "run-thread-5"
	if s, b := e.bearer(t, http.MethodGet, "/runs/"+run+"/events", globexApprover, ""); s != http.StatusNotFound {
		t.Errorf("globex reading acme's run: %d %s, want 404", s, b)
	}
	if s, _ := e.bearer(t, http.MethodGet, "/runs/"+run+"/events", acmeApprover, ""); s != http.StatusOK {
		t.Errorf("acme's reader reading acme's run: %d, want 200", s)
	}
	if diff := cmp.Diff([]string{id}, pending(acmeApprover)); diff != "" {
		t.Errorf("acme's call after globex's attempts (-want +got):\n%s", diff)
	}

	// The inbox of each tenant, in Chromium.
	b := browser(t)
	gus := e.person(t, b, globexApprover)
	waitJS(t, gus, `!document.getElementById("empty").hidden`)
	if got := text(t, gus, "#you"); got != "gus (globex)" {
		t.Errorf("globex's inbox is signed in as %q", got)
	}
	screenshot(t, gus, "inbox-tenant-other.png")
	ann := e.person(t, b, acmeApprover)
	waitJS(t, ann, `document.querySelectorAll("#list li").length === 1`)
	do(t, ann, chromedp.KeyEvent("a"))
	waitJS(t, ann, `document.body.dataset.nextRun`)
	if got := text(t, ann, "#flash"); !strings.Contains(got, "by ann at ") {
		t.Errorf("acme's approval reads %q", got)
	}
}

// TestTenantNamesAreOneTenantEach: a token name in two tenants is
// refused at the start, since decisions and threads are recorded by name.
func TestTenantNamesAreOneTenantEach(t *testing.T) {
	e := newInboxEnv(t, nil)
	cfg := e.cfg
	cfg.Tokens = []serve.Token{
		{Name: "ann", Secret: acmeApprover, Scopes: []string{serve.ScopeRead}, Tenant: "acme"},
		{Name: "ann", Secret: globexApprover, Scopes: []string{serve.ScopeRead}, Tenant: "globex"},
	}
	if _, err := serve.New(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), `token "ann": named in tenants "acme" and "globex"`) {
		t.Errorf("New = %v, want the name refused", err)
	}
}
