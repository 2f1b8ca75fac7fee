package serve_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestCrossOriginSimplePostRefused is a web page the user visits that posts
// to a server started without tokens on loopback (the default of "toolrun
// serve"): a form or fetch with Content-Type text/plain and mode no-cors
// needs no preflight, so the browser sends it with the page's Origin. The
// server refuses a request whose Origin is not one it allows, so that the
// model's call of a server tool never runs for it.
func TestCrossOriginSimplePostRefused(t *testing.T) {
	f := newFixture(t, map[string][]toolruntest.Reply{
		"pay me": {
			toolruntest.Message(toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 99})),
			toolruntest.Message(toolruntest.Text("paid")),
		},
	}, nil, nil)
	body := `{"threadId":"evil","runId":"evil1","messages":[{"id":"u1","role":"user","content":"pay me"}]}`
	req, _ := http.NewRequest("POST", f.url+"/", strings.NewReader(body))
	req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("a cross-origin text/plain POST from https://evil.example was run (status 200); the server tool ran %v", f.calls.got())
	}
}

// TestDNSRebindingRefused is a page of evil.example whose name the attacker
// re-points at 127.0.0.1: the browser then treats the server as the page's
// own origin and reads its answers. A server without tokens trusts every
// loopback peer, so it refuses a Host that is not a loopback name or
// address: the page never lists the pending calls or decides them.
func TestDNSRebindingRefused(t *testing.T) {
	f := newFixture(t, approvalScript(), policy.RequireApproval("payments need a person"), nil)
	if status, _, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay both")}, nil)); status != 200 {
		t.Fatalf("run: %d %s", status, body)
	}
	req, _ := http.NewRequest("GET", f.url+"/api/pending", nil)
	req.Host = "evil.example:80"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("GET /api/pending with Host evil.example answered 200:\n%s", b)
	}
}
