package serve_test

import (
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
)

// /metrics counts the calls awaiting a person by the tenant of their
// thread: a tenant's read token sees its own tenant's count, 0 included,
// and nothing of another tenant; a server without tenants counts every
// call under tenant "".
func TestMetricsPendingByTenant(t *testing.T) {
	tokens := []serve.Token{
		{Name: "acme-app", Secret: "acme-app-secret-0123", Scopes: []string{serve.ScopeRun}, Tenant: "acme"},
		{Name: "acme-ops", Secret: "acme-ops-secret-0123", Scopes: []string{serve.ScopeRead}, Tenant: "acme"},
		{Name: "globex-app", Secret: "globex-app-secret-01", Scopes: []string{serve.ScopeRun}, Tenant: "globex"},
		{Name: "globex-ops", Secret: "globex-ops-secret-01", Scopes: []string{serve.ScopeRead}, Tenant: "globex"},
		{Name: "initech-ops", Secret: "initech-ops-secret-0", Scopes: []string{serve.ScopeRead}, Tenant: "initech"},
	}
	f := newFixture(t, approvalScript(), policy.RequireApproval("payments"), func(c *serve.Config) { c.Tokens = tokens })
	// acme's two threads wait on two calls each, globex's one on two.
	for _, r := range []struct{ token, thread string }{{"acme-app-secret-0123", "a1"}, {"acme-app-secret-0123", "a2"}, {"globex-app-secret-01", "g1"}} {
		c := &agentClient{t: t, url: f.url, token: r.token, thread: r.thread}
		if status, _, body := c.send(r.thread, []map[string]any{user("u1", "pay both")}); status != http.StatusOK {
			t.Fatalf("%s: %d %s", r.thread, status, body)
		}
	}
	pending := regexp.MustCompile(`(?m)^toolrun_serve_pending_approvals.*$`)
	scrape := func(url, token string) []string {
		t.Helper()
		req, _ := http.NewRequest("GET", url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("metrics: %d %s", resp.StatusCode, b)
		}
		return pending.FindAllString(string(b), -1)
	}
	tests := []struct {
		name, token string
		want        []string
	}{
		{"acme", "acme-ops-secret-0123", []string{`toolrun_serve_pending_approvals{tenant="acme"} 4`}},
		{"globex", "globex-ops-secret-01", []string{`toolrun_serve_pending_approvals{tenant="globex"} 2`}},
		{"a tenant with none", "initech-ops-secret-0", []string{`toolrun_serve_pending_approvals{tenant="initech"} 0`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, scrape(f.url, tt.token)); diff != "" {
				t.Errorf("pending approvals (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("no tenants", func(t *testing.T) {
		f := newFixture(t, approvalScript(), policy.RequireApproval("payments"), func(c *serve.Config) {
			c.Tokens = []serve.Token{{Name: "app", Secret: "app-secret-0123456789", Scopes: []string{serve.ScopeRun, serve.ScopeRead}}}
		})
		c := &agentClient{t: t, url: f.url, token: "app-secret-0123456789", thread: "t"}
		if status, _, body := c.send("t", []map[string]any{user("u1", "pay both")}); status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
		if diff := cmp.Diff([]string{`toolrun_serve_pending_approvals{tenant=""} 2`}, scrape(f.url, "app-secret-0123456789")); diff != "" {
			t.Errorf("pending approvals (-want +got):\n%s", diff)
		}
	})
}
