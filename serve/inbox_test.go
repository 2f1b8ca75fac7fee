package serve_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// The tokens of the inbox tests: two people who decide and the client
// that runs.
const (
	aliceToken  = "alice-secret-0123456789"
	bobToken    = "bob-secret-0123456789ab"
	clientToken = "client-secret-0123456789"
)

// inboxEnv is a server with the inbox, a scripted model and a tool that
// counts its calls.
type inboxEnv struct {
	url    string
	cfg    serve.Config
	stop   func() // stops the server
	h      *serve.Handler
	calls  *counter
	dbPath string
	ran    chan string // each call of a tool, as it runs
}

// deferAll sends every call to a person.
func deferAll(context.Context, toolrun.PolicyCall) toolrun.Decision {
	return policy.Defer("payments need a person")
}

func newInboxEnv(t *testing.T, s map[string][]toolruntest.Reply, extra ...toolrun.Tool) *inboxEnv {
	t.Helper()
	model := scenes(t, s)
	e := &inboxEnv{calls: &counter{}, dbPath: filepath.Join(t.TempDir(), "serve.db"), ran: make(chan string, 100)}
	pay, err := toolrun.NewRawTool("pay", "sends a payment to the named account", []byte(`{"type":"object","properties":{"amount":{"type":"integer","minimum":1,"maximum":100},"to":{"type":"string","pattern":"^[a-z]+$"}},"required":["amount"]}`),
		func(ctx context.Context, in json.RawMessage) (string, error) {
			e.calls.mu.Lock()
			e.calls.calls = append(e.calls.calls, "pay"+string(in))
			e.calls.mu.Unlock()
			e.ran <- "pay" + string(in)
			return "paid " + string(in), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	cfg := serve.Config{
		Client:  model.Client(),
		Params:  anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024},
		Tools:   append([]toolrun.Tool{pay}, extra...),
		Options: toolrun.Options{Policy: deferAll},
		DB:      openDB(t, e.dbPath),
		Tokens: []serve.Token{
			{Name: "alice", Secret: aliceToken, Scopes: []string{serve.ScopeApprove, serve.ScopeRead}},
			{Name: "bob", Secret: bobToken, Scopes: []string{serve.ScopeApprove, serve.ScopeRead}},
			{Name: "client", Secret: clientToken, Scopes: []string{serve.ScopeRun}, MaxRuns: 64},
		},
	}
	e.cfg = cfg
	e.restart(t)
	return e
}

// restart stops the server, if it runs, and starts a new one on the same
// database, at a new address of the same host (so a cookie jar sends it
// the cookies of the old).
func (e *inboxEnv) restart(t *testing.T) {
	t.Helper()
	if e.stop != nil {
		e.stop()
	}
	h, err := serve.New(context.Background(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	e.h = h
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			h.Shutdown(context.Background())
			srv.Close()
		})
	}
	t.Cleanup(e.stop)
	e.url = srv.URL
}

// start runs thread with text as the client and returns the ids of the
// interrupts it stopped for.
func (e *inboxEnv) start(t *testing.T, thread, text string) []string {
	t.Helper()
	b, _ := json.Marshal(input(thread, "run-"+thread, []map[string]any{user("m-"+thread, text)}, nil))
	req, _ := http.NewRequest(http.MethodPost, e.url+"/agui", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+clientToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("starting %s: %d %s", thread, resp.StatusCode, body)
	}
	evs, _ := readSSE(t, resp.Body)
	var ids []string
	for _, it := range interrupts(t, evs) {
		ids = append(ids, it["id"].(string))
	}
	return ids
}

// follow reads a run's events to its end, as the client.
func (e *inboxEnv) follow(t *testing.T, run string) []map[string]any {
	t.Helper()
	if run == "" {
		t.Fatal("the decision started no run")
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/runs/"+url.PathEscape(run)+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+clientToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("following %s: %d %s", run, resp.StatusCode, body)
	}
	evs, _ := readSSE(t, resp.Body)
	return evs
}

// version returns the version of the pending call id, as the JSON API
// lists it to alice.
func (e *inboxEnv) version(t *testing.T, id string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.url+"/api/pending", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Pending []struct{ ID, Version string }
	}
	json.NewDecoder(resp.Body).Decode(&body)
	for _, p := range body.Pending {
		if p.ID == id {
			return p.Version
		}
	}
	return "none"
}

// inboxGet gets path of the inbox with c and the session's key.
func (e *inboxEnv) inboxGet(t *testing.T, c *http.Client, key, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
	if key != "" {
		req.Header.Set("X-Inbox-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, "(a stream)" // it would not end
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// pendingIDs lists the pending calls over the JSON API.
func (e *inboxEnv) pendingIDs(t *testing.T) []string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.url+"/api/pending", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Pending []struct{ ID string } }
	json.NewDecoder(resp.Body).Decode(&body)
	ids := []string{}
	for _, p := range body.Pending {
		ids = append(ids, p.ID)
	}
	return ids
}

// chromiumPath returns Chromium's path, or skips the test when it is not
// installed, unless CI is set: in CI the browser tests must run.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("missing component: Chromium, and CI is set; install it with: apt-get install -y --no-install-recommends chromium")
	}
	t.Skip("missing component: Chromium (apt-get install -y --no-install-recommends chromium); skipping the inbox's browser test")
	return ""
}

// browser starts headless Chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin := chromiumPath(t)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("no-first-run", true), chromedp.Flag("disable-background-networking", true))
	ctx, cancel := chromedp.NewContext(alloc)
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("starting Chromium: %v", err)
	}
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return ctx
}

// person opens a browser context of its own (its own cookies) and logs
// in to the inbox with token.
func (e *inboxEnv) person(t *testing.T, b context.Context, token string) context.Context {
	t.Helper()
	tctx, cancelT := context.WithTimeout(b, 2*time.Minute)
	ctx, cancel := chromedp.NewContext(tctx, chromedp.WithNewBrowserContext())
	t.Cleanup(func() { cancel(); cancelT() })
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.url+"/inbox/login"),
		chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#token", token),
		chromedp.Click("#login"),
		chromedp.WaitReady("body[data-loaded]"),
	); err != nil {
		t.Fatalf("logging in: %v", err)
	}
	return ctx
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.TextContent(sel))
	if err != nil {
		t.Fatalf("%s: %v", sel, err)
	}
	return v
}

// waitJS waits until the expression is truthy in the page.
func waitJS(t *testing.T, ctx context.Context, js string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatalf("waiting for %s: %v", js, err)
	}
}

// screenshot writes the page to $TOOLRUN_SCREENSHOTS (or a temporary
// folder) as name.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("TOOLRUN_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", p)
}

func payScene(amount int) []toolruntest.Reply {
	return []toolruntest.Reply{
		toolruntest.Message(toolruntest.Text(fmt.Sprintf("The invoice says %d; paying it.", amount)), toolruntest.ToolUse(fmt.Sprintf("toolu_pay%d", amount), "pay", map[string]any{"amount": amount, "to": "acme"})),
		toolruntest.Message(toolruntest.Text("done: the payment went out")),
	}
}

// TestInboxInChromium drives the inbox in a real browser against real
// runs: a call made by a run appears; approve runs the tool once and the
// run goes on; deny; edits checked in the page and on the server; and two
// people racing one decision.
func TestInboxInChromium(t *testing.T) {
	b := browser(t)

	t.Run("approve", func(t *testing.T) {
		e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5), "pay 6": payScene(6)})
		alice := e.person(t, b, aliceToken)
		waitJS(t, alice, `!document.getElementById("empty").hidden`)
		if got := text(t, alice, "#empty"); !strings.Contains(got, "Nothing is waiting") {
			t.Errorf("the empty inbox says %q, want that nothing is waiting", got)
		}
		screenshot(t, alice, "inbox-empty.png")

		first := e.start(t, "thread-5", "pay 5")[0]
		second := e.start(t, "thread-6", "pay 6")[0]
		// Both appear without a reload, newest first.
		waitJS(t, alice, `document.querySelectorAll("#list li").length === 2`)
		order := eval[[]string](t, alice, `Array.from(document.querySelectorAll("#list li")).map(li => li.dataset.id)`)
		if diff := cmp.Diff([]string{second, first}, order); diff != "" {
			t.Errorf("the list's order (-want +got):\n%s", diff)
		}
		// The selection stays where it was as calls arrive; k moves up to
		// the newest.
		do(t, alice, chromedp.KeyEvent("k"))
		waitJS(t, alice, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q`, second))
		if got := text(t, alice, "#d-text"); got != "The invoice says 6; paying it." {
			t.Errorf("the model's text is %q", got)
		}
		if got := text(t, alice, "#d-desc"); got != "sends a payment to the named account" {
			t.Errorf("the tool's description is %q", got)
		}
		if got := text(t, alice, "#d-input"); !strings.Contains(got, `"amount": 6`) {
			t.Errorf("the input is %q, want it pretty-printed", got)
		}
		if got := text(t, alice, "#d-run"); !strings.Contains(got, "1 turn,") || !strings.Contains(got, "$") {
			t.Errorf("the run's cost and turns read %q", got)
		}
		if got := text(t, alice, "#d-turns"); !strings.Contains(got, "pay 6") {
			t.Errorf("the last turns are %q, want the user's message", got)
		}
		screenshot(t, alice, "inbox-full.png")

		// j moves to the older call, a approves it.
		do(t, alice, chromedp.KeyEvent("j"))
		waitJS(t, alice, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q`, first))
		do(t, alice, chromedp.KeyEvent("a"))
		waitJS(t, alice, `document.body.dataset.nextRun`)
		if got := text(t, alice, "#flash"); !strings.Contains(got, "by alice at ") {
			t.Errorf("the flash says %q, want who decided and when", got)
		}
		if got, want := eval[string](t, alice, `document.getElementById("flash-story").getAttribute("href")`), "/inbox/threads/thread-5#run-"+eval[string](t, alice, `document.body.dataset.nextRun`); got != want {
			t.Errorf("the flash links to %q, want the thread's story at the run that went on, %q", got, want)
		}
		evs := e.follow(t, eval[string](t, alice, `document.body.dataset.nextRun`))
		if o := outcome(evs); o["type"] != "success" || last(evs)["result"] != "done: the payment went out" {
			t.Errorf("the run went on to %v", last(evs))
		}
		if diff := cmp.Diff([]string{`pay{"amount":5,"to":"acme"}`}, e.calls.got()); diff != "" {
			t.Errorf("the tool's calls (-want +got):\n%s", diff)
		}
		// The decided call stays in place, marked, until alice moves on.
		waitJS(t, alice, `document.querySelector("#list li.selected.gone") !== null`)
		if got := text(t, alice, "#d-state"); !strings.Contains(got, "Decided by alice at ") || !strings.Contains(got, "approve") {
			t.Errorf("the decided call reads %q, want who decided it and what", got)
		}
		do(t, alice, chromedp.KeyEvent("k"))
		waitJS(t, alice, `document.querySelectorAll("#list li").length === 1`)

		// The run's page shows the trail.
		do(t, alice, chromedp.Navigate(e.url+"/inbox/runs/thread-5"), chromedp.WaitVisible("#trail"))
		if got := text(t, alice, "#trail tbody"); !strings.Contains(got, "approve") || !strings.Contains(got, "alice") {
			t.Errorf("the trail reads %q, want alice's approval", got)
		}
		screenshot(t, alice, "inbox-run.png")
	})

	t.Run("deny", func(t *testing.T) {
		e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 9": payScene(9)})
		id := e.start(t, "thread-9", "pay 9")[0]
		bob := e.person(t, b, bobToken)
		waitJS(t, bob, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q`, id))
		do(t, bob, chromedp.KeyEvent("d"))
		waitJS(t, bob, `document.activeElement.id === "reason"`)
		// chromedp types a key as keydown and a separate char event, which
		// the page's preventDefault on keydown does not cancel as a
		// browser's own typing is; empty the box it typed the d into.
		eval[bool](t, bob, `(document.getElementById("reason").value = "", true)`)
		do(t, bob, chromedp.SendKeys("#reason", "the invoice is a duplicate\r"))
		waitJS(t, bob, `document.body.dataset.nextRun`)
		evs := e.follow(t, eval[string](t, bob, `document.body.dataset.nextRun`))
		var result string
		for _, ev := range evs {
			if ev["type"] == "TOOL_CALL_RESULT" {
				result, _ = ev["content"].(string)
			}
		}
		if !strings.Contains(result, "the invoice is a duplicate") {
			t.Errorf("the model was told %q, want the reason", result)
		}
		if got := e.calls.got(); len(got) != 0 {
			t.Errorf("a denied call ran: %v", got)
		}
		do(t, bob, chromedp.Navigate(e.url+"/inbox/runs/thread-9"), chromedp.WaitVisible("#trail"))
		if got := text(t, bob, "#trail .decision"); !strings.Contains(got, "deny: the invoice is a duplicate") {
			t.Errorf("the trail's decision reads %q", got)
		}
	})

	t.Run("edit", func(t *testing.T) {
		e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 8": payScene(8)})
		id := e.start(t, "thread-8", "pay 8")[0]
		alice := e.person(t, b, aliceToken)
		waitJS(t, alice, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q`, id))
		do(t, alice, chromedp.KeyEvent("e"))
		waitJS(t, alice, `!document.getElementById("editor").hidden`)
		setEdit := func(v string) {
			eval[bool](t, alice, fmt.Sprintf(`(() => { const x = document.getElementById("edit-input"); x.value = %q; x.dispatchEvent(new Event("input")); return true })()`, v))
		}
		setEdit(`{"amount": 500, "to": "Acme!"}`)
		if got := text(t, alice, "#edit-errors"); !strings.Contains(got, "/amount: expected a number ≤ 100, got 500 (integer)") || !strings.Contains(got, `/to: expected a string matching "^[a-z]+$"`) {
			t.Errorf("the page's errors read %q", got)
		}
		if !eval[bool](t, alice, `document.getElementById("edit-send").disabled`) {
			t.Error("an invalid edit can be sent")
		}
		setEdit(`{"to": "acme"}`)
		if got := text(t, alice, "#edit-errors"); got != `/amount: expected required property "amount", got missing` {
			t.Errorf("the page's error reads %q", got)
		}
		setEdit(`{"amount": 7, "to": "acme"}`)
		if got := text(t, alice, "#edit-errors"); got != "" {
			t.Errorf("a valid edit has errors %q", got)
		}
		diff := text(t, alice, "#edit-diff")
		if !strings.Contains(diff, `-   "amount": 8,`) || !strings.Contains(diff, `+   "amount": 7,`) {
			t.Errorf("the diff reads %q", diff)
		}
		screenshot(t, alice, "inbox-edit.png")
		do(t, alice, chromedp.Click("#edit-send"))
		waitJS(t, alice, `document.body.dataset.nextRun`)
		e.follow(t, eval[string](t, alice, `document.body.dataset.nextRun`))
		if diff := cmp.Diff([]string{`pay{"amount":7,"to":"acme"}`}, e.calls.got()); diff != "" {
			t.Errorf("the tool's calls (-want +got):\n%s", diff)
		}
	})

	t.Run("race", func(t *testing.T) {
		e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 3": payScene(3)})
		id := e.start(t, "thread-3", "pay 3")[0]
		people := []context.Context{e.person(t, b, aliceToken), e.person(t, b, bobToken)}
		for _, p := range people {
			waitJS(t, p, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q`, id))
			// Neither page may drop the call before its person decides:
			// the list is not fetched again.
			do(t, p, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
					return err
				}
				_, err := chromedp.Call(ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{URLPatterns: []*network.BlockPattern{{URLPattern: e.url + "/inbox/api/pending", Block: true}}})
				return err
			}))
		}
		var wg sync.WaitGroup
		for _, p := range people {
			wg.Go(func() {
				chromedp.Run(p, chromedp.Evaluate[bool](`document.getElementById("approve").click(), true`))
			})
		}
		wg.Wait()
		var flashes []string
		for _, p := range people {
			waitJS(t, p, `document.getElementById("flash").textContent !== ""`)
			flashes = append(flashes, text(t, p, "#flash"))
		}
		won, lost := 0, 0
		var winner string
		for _, f := range flashes {
			if m := regexp.MustCompile(`^Approved pay \(.*\) — by (\w+) at `).FindStringSubmatch(f); m != nil {
				won++
				winner = m[1]
			}
		}
		for _, f := range flashes {
			if strings.Contains(f, "Not decided: already decided by "+winner+" at ") {
				lost++
			}
		}
		if won != 1 || lost != 1 {
			t.Fatalf("the flashes are %q, want one approval and one %q", flashes, "already decided by …")
		}
		select {
		case <-e.ran:
		case <-t.Context().Done():
		}
		for _, p := range people {
			if run := eval[string](t, p, `document.body.dataset.nextRun || ""`); run != "" {
				e.follow(t, run)
			}
		}
		if got := e.calls.got(); len(got) != 1 {
			t.Errorf("the tool ran %d times, want once: %v", len(got), got)
		}
	})

	t.Run("always allow", func(t *testing.T) {
		twice := []toolruntest.Reply{
			toolruntest.Message(toolruntest.ToolUse("toolu_a", "pay", map[string]any{"amount": 1})),
			toolruntest.Message(toolruntest.ToolUse("toolu_b", "pay", map[string]any{"amount": 2})),
			toolruntest.Message(toolruntest.Text("both paid")),
		}
		e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay twice": twice})
		e.start(t, "thread-a", "pay twice")
		alice := e.person(t, b, aliceToken)
		waitJS(t, alice, `document.querySelectorAll("#list li").length === 1`)
		do(t, alice, chromedp.Click("#always"), chromedp.Click("#approve"))
		waitJS(t, alice, `document.body.dataset.nextRun`)
		evs := e.follow(t, eval[string](t, alice, `document.body.dataset.nextRun`))
		if last(evs)["result"] != "both paid" {
			t.Errorf("the run ended with %v, want the second call allowed without asking", last(evs))
		}
		if diff := cmp.Diff([]string{`pay{"amount":1}`, `pay{"amount":2}`}, e.calls.got()); diff != "" {
			t.Errorf("the tool's calls (-want +got):\n%s", diff)
		}
		if got := e.pendingIDs(t); len(got) != 0 {
			t.Errorf("calls still pending: %v", got)
		}
	})

	t.Run("no key from the page", func(t *testing.T) {
		e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 4": payScene(4)})
		id := e.start(t, "thread-4", "pay 4")[0]
		alice := e.person(t, b, aliceToken)
		got, err := chromedp.Run(alice, chromedp.Evaluate[float64](fmt.Sprintf(`fetch("/inbox/api/interrupts/%s/decision", {method: "POST", headers: {"Content-Type": "application/json"}, body: '{"decision":"approve"}'}).then(r => r.status)`, id), chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if got != http.StatusUnauthorized {
			t.Errorf("a decision without the session's key: status %v, want 401", got)
		}
		if diff := cmp.Diff([]string{id}, e.pendingIDs(t)); diff != "" {
			t.Errorf("pending after the refusal (-want +got):\n%s", diff)
		}
	})
}

// TestInboxServerChecksEdits sends edits straight to the server, as a page
// that skipped its own check would: toolrun's validator refuses them with
// its own message, and the call stays pending.
func TestInboxServerChecksEdits(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5)})
	id := e.start(t, "thread-5", "pay 5")[0]
	c, csrf := e.login(t, aliceToken)
	tests := []struct {
		name string
		body string
		want string
	}{
		{"above the maximum", `{"decision":"edit","input":{"amount":500}}`, "invalid input for tool \"pay\": 1 problem:\n- /amount: expected "},
		{"missing a required property", `{"decision":"edit","input":{"to":"acme"}}`, "- /amount: expected required property \"amount\", got missing"},
		{"not an object", `{"decision":"edit","input":[1]}`, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := e.decideWith(t, c, id, csrf, tt.body)
			if status != http.StatusUnprocessableEntity || !strings.Contains(body, strings.ReplaceAll(strings.ReplaceAll(tt.want, "\n", `\n`), `"`, `\"`)) {
				t.Errorf("got %d %s, want 422 with %q", status, body, tt.want)
			}
		})
	}
	if diff := cmp.Diff([]string{id}, e.pendingIDs(t)); diff != "" {
		t.Errorf("pending after the refusals (-want +got):\n%s", diff)
	}
}

// login logs in with token over HTTP and returns the client, holding the
// session's cookie, and the session's key, which the login's page hands
// to the inbox's script.
func (e *inboxEnv) login(t *testing.T, token string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp := e.postLogin(t, c, token)
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`<meta name="inbox-key" content="([0-9a-f]+)">`).FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("logging in: %d %s", resp.StatusCode, page)
	}
	return c, string(m[1])
}

// loginCSRF reads the login form with c, which keeps its cookie, and
// returns the form's CSRF token.
func (e *inboxEnv) loginCSRF(t *testing.T, c *http.Client) string {
	t.Helper()
	resp, err := c.Get(e.url + "/inbox/login")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`<input type="hidden" name="csrf" value="([0-9a-f]+)">`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("the login form has no CSRF token: %s", page)
	}
	return string(m[1])
}

// postLogin logs in with token as the login form does, with c.
func (e *inboxEnv) postLogin(t *testing.T, c *http.Client, token string) *http.Response {
	t.Helper()
	csrf := e.loginCSRF(t, c)
	resp, err := c.PostForm(e.url+"/inbox/login", url.Values{"token": {token}, "csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// decideWith posts body as a decision on id to the inbox's API with c
// and the session's key; a body that names no version is given the
// call's version, as the inbox lists it to e's first approver.
func (e *inboxEnv) decideWith(t *testing.T, c *http.Client, id, key, body string) (int, string) {
	t.Helper()
	if !strings.Contains(body, `"version"`) {
		body = `{"version":"` + e.version(t, id) + `",` + strings.TrimPrefix(body, "{")
	}
	return e.postAPI(t, c, "/inbox/api/interrupts/"+id+"/decision", key, body)
}

// postAPI posts body as JSON to the inbox's path with c (nil: the default
// client) and the session's key (none if empty), and returns the status
// and body of the answer.
func (e *inboxEnv) postAPI(t *testing.T, c *http.Client, path, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-Inbox-Key", key)
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestInboxRefusesWithoutSessionOrKey checks that a decision needs both
// halves of a session, its cookie and its key, that the cookie cannot be
// read by script nor sent cross-site, that only read and approve tokens
// log in, and that every page forbids inline script.
func TestInboxRefusesWithoutSessionOrKey(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5)})
	id := e.start(t, "thread-5", "pay 5")[0]
	c, csrf := e.login(t, aliceToken)
	approve := `{"decision":"approve"}`

	bearer, _ := http.NewRequest(http.MethodPost, e.url+"/inbox/api/interrupts/"+id+"/decision", strings.NewReader(approve))
	bearer.Header.Set("Authorization", "Bearer "+aliceToken)
	bearer.Header.Set("X-CSRF-Token", csrf)
	resp, err := http.DefaultClient.Do(bearer)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	tests := []struct {
		name   string
		status int
		run    func() int
	}{
		{"no session", http.StatusUnauthorized, func() int { s, _ := e.decideWith(t, nil, id, csrf, approve); return s }},
		{"a bearer token but no session", http.StatusUnauthorized, func() int { return resp.StatusCode }},
		{"no key", http.StatusUnauthorized, func() int { s, _ := e.decideWith(t, c, id, "", approve); return s }},
		{"another session's key", http.StatusUnauthorized, func() int {
			_, other := e.login(t, bobToken)
			s, _ := e.decideWith(t, c, id, other, approve)
			return s
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.run(); got != tt.status {
				t.Errorf("got status %d, want %d", got, tt.status)
			}
			if diff := cmp.Diff([]string{id}, e.pendingIDs(t)); diff != "" {
				t.Errorf("pending after the refusal (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("with both", func(t *testing.T) {
		if s, body := e.decideWith(t, c, id, csrf, approve); s != http.StatusOK {
			t.Errorf("got %d %s, want 200", s, body)
		}
		if s, body := e.decideWith(t, c, id, csrf, approve); s != http.StatusConflict || !strings.Contains(body, "already decided by alice at ") {
			t.Errorf("a second decision: got %d %s, want 409 already decided by alice", s, body)
		}
	})

	t.Run("the cookie", func(t *testing.T) {
		jar, _ := cookiejar.New(nil)
		noFollow := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp := e.postLogin(t, noFollow, aliceToken)
		resp.Body.Close()
		var ck string
		for _, v := range resp.Header.Values("Set-Cookie") {
			if strings.HasPrefix(v, "toolrun_inbox=") {
				ck = v
			}
		}
		for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/inbox"} {
			if !strings.Contains(ck, want) {
				t.Errorf("the cookie %q lacks %s", ck, want)
			}
		}
	})

	t.Run("only read and approve tokens log in", func(t *testing.T) {
		for _, tok := range []string{clientToken, "not-a-token-at-all-0000"} {
			jar, _ := cookiejar.New(nil)
			resp := e.postLogin(t, &http.Client{Jar: jar}, tok)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("logging in with %q: %d, want 401", tok, resp.StatusCode)
			}
		}
	})

	t.Run("a login needs its form's CSRF token", func(t *testing.T) {
		jar, _ := cookiejar.New(nil)
		mine := &http.Client{Jar: jar}
		csrf := e.loginCSRF(t, mine)
		otherJar, _ := cookiejar.New(nil)
		other := &http.Client{Jar: otherJar}
		e.loginCSRF(t, other) // another browser, with a login cookie of its own
		for _, tt := range []struct {
			name string
			c    *http.Client
			form url.Values
		}{
			{"no token, no cookie", http.DefaultClient, url.Values{"token": {aliceToken}}},
			{"a token, no cookie", http.DefaultClient, url.Values{"token": {aliceToken}, "csrf": {csrf}}},
			{"a cookie, no token", mine, url.Values{"token": {aliceToken}}},
			{"another form's token", other, url.Values{"token": {aliceToken}, "csrf": {csrf}}},
		} {
			resp, err := tt.c.PostForm(e.url+"/inbox/login", tt.form)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: %d, want 403", tt.name, resp.StatusCode)
			}
			for _, v := range resp.Header.Values("Set-Cookie") {
				if strings.HasPrefix(v, "toolrun_inbox=") {
					t.Errorf("%s: a session was set: %s", tt.name, v)
				}
			}
		}
	})

	t.Run("CSP and no inline script", func(t *testing.T) {
		for _, path := range []string{"/inbox", "/inbox/login", "/inbox/runs/thread-5", "/inbox/threads/thread-5", "/inbox/static/inbox.js", "/inbox/static/thread.js"} {
			resp, err := c.Get(e.url + path)
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			csp := resp.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") || !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("%s: CSP %q", path, csp)
			}
			for _, tag := range regexp.MustCompile(`(?i)<script[^>]*>`).FindAllString(string(page), -1) {
				if !strings.Contains(tag, `src="/inbox/static/`) {
					t.Errorf("%s: inline script %s", path, tag)
				}
			}
			if regexp.MustCompile(`(?i)\son[a-z]+\s*=`).Match(page) && !strings.HasSuffix(path, ".js") {
				t.Errorf("%s has an inline event handler", path)
			}
		}
	})
}

// hostilePayloads are texts a model, a tool, an MCP server or a client
// could send to attack the inbox. Each would set window.__pwned, fetch
// HIT (a server that counts its requests), or add an element, if it ran
// or were parsed as HTML.
var hostilePayloads = []string{
	`<script>window.__pwned=1</script>`,
	`<img src=x onerror="window.__pwned=2">`,
	`"><svg onload="window.__pwned=3">`,
	`</pre></div><iframe src="HIT/iframe">`,
	`<style>body{display:none}</style>`,
	`<script src="HIT/script.js"></script>`,
	`'><img src="HIT/img">`,
	`<a href="javascript:window.__pwned=8">click</a>`,
	`<body onload="window.__pwned=9">`,
	`<details open ontoggle="window.__pwned=10">`,
	`<input autofocus onfocus="window.__pwned=11">`,
	`<video><source onerror="window.__pwned=12"></video>`,
	`<math><mtext><table><mglyph><style><img src=x onerror="window.__pwned=13">`,
	`<object data="HIT/object"></object>`,
	`<embed src="HIT/embed">`,
	`<link rel=stylesheet href="HIT/css">`,
	`<meta http-equiv="refresh" content="0;url=HIT/meta">`,
	`<base href="HIT/">`,
	`{{constructor.constructor('window.__pwned=19')()}}`,
	"${window.__pwned=20}`",
	`javascript:window.__pwned=21`,
	`<form action="HIT/form"><button>go</button></form>`,
	`<noscript><p title="</noscript><img src=x onerror=window.__pwned=23>">`,
	"</script><script>window.__pwned=24</script><!--\u2028",
}

// TestInboxXSSInChromium puts each payload in a call's input, in the
// model's text, in a tool's name and description and in a thread's id,
// shows every call and a run's page in Chromium, and checks that each
// payload is shown as text and none ran.
func TestInboxXSSInChromium(t *testing.T) {
	b := browser(t)
	var hits atomic.Int64
	hit := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer hit.Close()
	payloads := make([]string, len(hostilePayloads))
	for i, p := range hostilePayloads {
		payloads[i] = strings.ReplaceAll(p, "HIT", hit.URL)
	}

	s := map[string][]toolruntest.Reply{}
	for i, p := range payloads {
		s[fmt.Sprintf("xss %d", i)] = []toolruntest.Reply{
			toolruntest.Message(toolruntest.Text(p), toolruntest.ToolUse(fmt.Sprintf("toolu_x%d", i), "note", map[string]any{"text": p})),
		}
	}
	note, err := toolrun.NewRawTool("note", "notes: "+strings.Join(payloads, " "), []byte(`{"type":"object","properties":{"text":{"type":"string"}}}`),
		func(context.Context, json.RawMessage) (string, error) { return "noted", nil })
	if err != nil {
		t.Fatal(err)
	}
	e := newInboxEnv(t, s, note)
	for i := range payloads {
		e.start(t, fmt.Sprintf("xss-%d", i), fmt.Sprintf("xss %d", i))
	}
	// A tool's name and a thread's id cannot carry most payloads through
	// a run (the API and the server refuse them), but an MCP server's
	// tool or another writer of the database could: write them there.
	db, err := sql.Open("sqlite", "file:"+e.dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UTC()
	for i, p := range payloads {
		in, _ := json.Marshal(map[string]string{"x": p})
		if _, err := db.Exec(`INSERT INTO serve_interrupts (id, thread_id, run_id, tool_call_id, tool_name, input, reason, kind, status, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'approval', 'pending', ?, ?)`,
			fmt.Sprintf("int_name%d", i), p, "run_x", fmt.Sprintf("toolu_n%d", i), p, in, p, now.Format(time.RFC3339Nano), now.Add(time.Hour).Format(time.RFC3339Nano)); err != nil {
			t.Fatal(err)
		}
	}

	alice := e.person(t, b, aliceToken)
	n := 2 * len(payloads)
	waitJS(t, alice, fmt.Sprintf(`document.querySelectorAll("#list li").length === %d`, n))
	// Show every call, as j would, and read what each showed.
	shown := eval[[]map[string]string](t, alice, `Array.from(document.querySelectorAll("#list li")).map(li => {
		li.click();
		return {tool: document.getElementById("d-tool").textContent, text: document.getElementById("d-text").textContent,
			input: document.getElementById("d-input").textContent, thread: document.getElementById("d-thread").textContent,
			reason: document.getElementById("d-reason").textContent, desc: document.getElementById("d-desc").textContent};
	})`)
	do(t, alice, chromedp.Click("#edit"))
	check := func(where string) {
		t.Helper()
		if got := eval[bool](t, alice, `window.__pwned !== undefined`); got {
			t.Errorf("%s: a payload ran: window.__pwned = %v", where, eval[any](t, alice, `window.__pwned`))
		}
		allowed := `["HTML","HEAD","META","TITLE","LINK","SCRIPT","BODY","HEADER","H1","H2","H3","SPAN","B","FORM","INPUT","BUTTON","NAV","LABEL","SELECT","OPTION","KBD","DIV","MAIN","UL","LI","P","SECTION","SMALL","A","DL","DT","DD","PRE","DETAILS","SUMMARY","OL","TEXTAREA","TABLE","THEAD","TBODY","TR","TH","TD","EM","CODE"]`
		if bad := eval[[]string](t, alice, `(() => { const ok = new Set(`+allowed+`); const bad = [];
			for (const el of document.querySelectorAll("*")) {
				if (!ok.has(el.tagName)) bad.push(el.tagName);
				for (const a of el.attributes) {
					if (el.tagName === "OPTION" && a.name === "value") continue; // data the script set, never parsed
					if (a.name.startsWith("on") || /^\s*javascript:/i.test(a.value) || a.value.includes("`+hit.URL+`")) bad.push(el.tagName + " " + a.name);
				}
				if (el.tagName === "SCRIPT" && !el.src.includes("/inbox/static/")) bad.push("inline script");
				if (el.tagName === "META" && el.httpEquiv) bad.push("meta http-equiv");
				if (el.tagName === "LINK" && !el.href.includes("/inbox/static/")) bad.push("link " + el.href);
				if (el.tagName === "STYLE") bad.push("style");
			}
			return bad; })()`); len(bad) > 0 {
			t.Errorf("%s: elements a payload made: %v", where, bad)
		}
	}
	check("the inbox")
	for i, p := range payloads {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(map[string]string{"text": p})
		// JSON.stringify writes U+2028 as itself; encoding/json escapes it.
		js := strings.ReplaceAll(strings.TrimSpace(buf.String()), `\u2028`, "\u2028")
		var inText, inInput, inName, inThread bool
		for _, sh := range shown {
			inText = inText || sh["text"] == p
			inInput = inInput || strings.Contains(strings.Join(strings.Fields(sh["input"]), ""), strings.Join(strings.Fields(js[1:len(js)-1]), ""))
			inName = inName || (sh["tool"] == p && sh["reason"] == p)
			inThread = inThread || sh["thread"] == p
		}
		if !inText || !inInput || !inName || !inThread {
			t.Errorf("payload %d %q: shown as the model's text %v, in the input %v, as the tool's name %v, as the thread %v; want all as text", i, p, inText, inInput, inName, inThread)
		}
		if !strings.Contains(shown[0]["desc"]+shown[1]["desc"]+shown[len(shown)-1]["desc"], p) {
			t.Errorf("payload %d: not in the tool's description as text", i)
		}
	}

	// A run's page, rendered by the server, and one whose id is a payload.
	do(t, alice, chromedp.Navigate(e.url+"/inbox/runs/xss-0"), chromedp.WaitVisible("#trail"))
	check("the run's page")
	if got := text(t, alice, ".turns"); !strings.Contains(got, payloads[0]) {
		t.Errorf("the run's page shows %q, want the payload as text", got)
	}
	do(t, alice, chromedp.Navigate(e.url+"/inbox/runs/"+url.PathEscape(payloads[2])), chromedp.WaitVisible("#trail"))
	check("a run whose id is a payload")
	if got := text(t, alice, "#thread"); got != payloads[2] {
		t.Errorf("the run's id shows as %q, want %q", got, payloads[2])
	}
	if got := eval[string](t, alice, `document.title`); !strings.HasPrefix(got, "toolrun inbox") {
		t.Errorf("the title is %q", got)
	}
	// The thread's story, of a thread with payloads and of one whose id
	// is a payload.
	do(t, alice, chromedp.Navigate(e.url+"/inbox/threads/xss-0"), chromedp.WaitVisible("#runs"))
	check("the thread's story")
	if got := text(t, alice, "#runs"); !strings.Contains(got, payloads[0]) {
		t.Errorf("the thread's story shows %q, want the payload as text", got)
	}
	do(t, alice, chromedp.Navigate(e.url+"/inbox/threads/"+url.PathEscape(payloads[2])), chromedp.WaitReady("body[data-loaded]"))
	check("a thread whose id is a payload")
	if got := text(t, alice, "#thread"); got != payloads[2] {
		t.Errorf("the thread's id shows as %q, want %q", got, payloads[2])
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("payloads fetched the counting server %d times", n)
	}
}

// An inbox session outlives the server: after a restart on the same
// database, the same cookie and CSRF token decide a call made before it;
// a logout ends the session for good.
func TestInboxSessionSurvivesRestart(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5)})
	id := e.start(t, "thread-5", "pay 5")[0]
	c, csrf := e.login(t, aliceToken)
	e.restart(t)
	status, body := e.decideWith(t, c, id, csrf, `{"decision":"approve"}`)
	if status != http.StatusOK || !strings.Contains(body, `"decidedBy":"alice"`) {
		t.Fatalf("deciding after the restart: %d %s, want 200 by alice", status, body)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/inbox/api/logout", nil)
	req.Header.Set("X-Inbox-Key", csrf)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	e.restart(t)
	if status, _ := e.inboxGet(t, c, csrf, "/inbox/api/pending"); status != http.StatusUnauthorized {
		t.Errorf("after logging out: %d, want 401", status)
	}
}

// TestInboxAlwaysAllowsTheToolsOtherWaitingCalls checks that "always
// allow" on one call allows the same tool's other calls waiting with it,
// and leaves another tool's call waiting for its own decision.
func TestInboxAlwaysAllowsTheToolsOtherWaitingCalls(t *testing.T) {
	note, err := toolrun.NewRawTool("note", "writes a note", []byte(`{"type":"object","properties":{"text":{"type":"string"}}}`),
		func(ctx context.Context, in json.RawMessage) (string, error) { return "noted", nil })
	if err != nil {
		t.Fatal(err)
	}
	three := []toolruntest.Reply{
		toolruntest.Message(
			toolruntest.ToolUse("toolu_pay1", "pay", map[string]any{"amount": 1}),
			toolruntest.ToolUse("toolu_pay2", "pay", map[string]any{"amount": 2}),
			toolruntest.ToolUse("toolu_note", "note", map[string]any{"text": "hi"}),
		),
		toolruntest.Message(toolruntest.Text("all done")),
	}
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"three calls": three}, note)
	e.start(t, "thread-three", "three calls")
	byCall := func() map[string]string {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/api/pending", nil)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Pending []struct{ ID, ToolCallID string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, p := range body.Pending {
			out[p.ToolCallID] = p.ID
		}
		return out
	}
	pending := byCall()
	if len(pending) != 3 {
		t.Fatalf("pending calls: got %v, want three", pending)
	}
	c, csrf := e.login(t, aliceToken)
	if s, body := e.decideWith(t, c, pending["toolu_pay1"], csrf, `{"decision":"approve","always":true}`); s != http.StatusOK {
		t.Fatalf("always allow: got %d %s, want 200", s, body)
	}
	if diff := cmp.Diff(map[string]string{"toolu_note": pending["toolu_note"]}, byCall()); diff != "" {
		t.Errorf("pending after always allowing pay (-want +got):\n%s", diff)
	}
}
