package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/temporal/servetemporal"
	"github.com/toolrun/toolrun/toolruntest"
)

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

// headless starts headless Chromium for the test and returns a browser
// context of its own.
func headless(t *testing.T) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("no-first-run", true), chromedp.Flag("disable-background-networking", true))
	tctx, cancelT := context.WithTimeout(alloc, 3*time.Minute)
	ctx, cancel := chromedp.NewContext(tctx)
	t.Cleanup(func() { cancel(); cancelT(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// waitPage waits until the expression is truthy in the page.
func waitPage(t *testing.T, ctx context.Context, js string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("waiting for %s: %v", js, err)
	}
}

// sseOf reads server-sent events to the end of the stream.
func sseOf(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, &b)
	}
	var evs []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e map[string]any
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			evs = append(evs, e)
		}
	}
	return evs
}

// TestServeTemporalInboxInChromium is the approval inbox over Temporal,
// in a real browser: a call that a real run (a workflow, run by a worker)
// stopped for is listed in /inbox while no worker runs, and approved
// there; the decision waits in the workflow until a worker starts, and
// then the tool runs once and the run finishes.
func TestServeTemporalInboxInChromium(t *testing.T) {
	addr := temporalAddress(t)
	chromiumPath(t)
	tc, err := client.Dial(client.Options{HostPort: addr, Logger: temporallog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	name := uniqueName(t)
	queue := name + "queue"

	model := toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		if n := len(r.Conversation); r.Conversation[n-1].Role == "user" && n == 1 {
			return toolruntest.Message(toolruntest.Text("The invoice says 30; paying it."), toolruntest.ToolUse("toolu_pay30", "pay", map[string]any{"amount": 30, "to": "acme"}))
		}
		return toolruntest.Message(toolruntest.Text("done: the payment went out"))
	}})
	var mu sync.Mutex
	var ran []string // pay's inputs, as it runs
	pay, err := toolrun.NewRawTool("pay", "sends a payment to the named account", []byte(`{"type":"object","properties":{"amount":{"type":"integer","minimum":1,"maximum":100},"to":{"type":"string"}},"required":["amount"]}`),
		func(ctx context.Context, in json.RawMessage) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, string(in))
			return "paid " + string(in), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	calls := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), ran...)
	}
	tools := []toolrun.Tool{pay}
	opts := toolrun.Options{Policy: policy.RequireApproval("payments need a person")}
	params := anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024}
	newWorker := func() worker.Worker {
		w := temporal.NewWorker(tc, queue, temporal.NewActivities(model.Client(), tools, &opts), worker.Options{})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		return w
	}

	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "serve.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	defer db.Close()
	const alice, runner = "alice-secret-0123456789", "client-secret-0123456789"
	h, err := serve.New(context.Background(), serve.Config{
		Client: model.Client(), Params: params, Tools: tools, Options: opts, DB: db,
		Tokens: []serve.Token{
			{Name: "alice", Secret: alice, Scopes: []string{serve.ScopeApprove, serve.ScopeRead}},
			{Name: "client", Secret: runner, Scopes: []string{serve.ScopeRun}},
		},
		Executor: servetemporal.New(servetemporal.Config{Client: tc, TaskQueue: queue, WorkflowIDPrefix: name}),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		srv.Close()
	}()
	as := func(token, method, path string, body any) *http.Response {
		t.Helper()
		var b bytes.Buffer
		if body != nil {
			json.NewEncoder(&b).Encode(body)
		}
		req, _ := http.NewRequest(method, srv.URL+path, &b)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// A real run over Temporal: a worker runs the workflow's step, and the
	// run stops for pay's call.
	w := newWorker()
	evs := sseOf(t, as(runner, http.MethodPost, "/agui", map[string]any{
		"threadId": "pay-thread", "runId": "pay-run-1",
		"messages": []map[string]any{{"id": "u1", "role": "user", "content": "pay the invoice"}},
	}))
	fin := evs[len(evs)-1]
	outcome, _ := fin["outcome"].(map[string]any)
	if outcome["type"] != "interrupt" {
		t.Fatalf("the run ended with %v, want an interrupt", fin)
	}
	its := outcome["interrupts"].([]any)
	if len(its) != 1 {
		t.Fatalf("interrupts %v, want pay's alone", its)
	}
	interruptID := its[0].(map[string]any)["id"].(string)
	w.Stop()

	// With no worker running, the call is in the inbox: login, see it,
	// approve it with the keyboard.
	page := headless(t)
	if err := chromedp.Do(page,
		chromedp.Navigate(srv.URL+"/inbox/login"),
		chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#token", alice),
		chromedp.Click("#login"),
		chromedp.WaitReady("body[data-loaded]"),
	); err != nil {
		t.Fatalf("logging in: %v", err)
	}
	waitPage(t, page, fmt.Sprintf(`document.querySelectorAll("#list li").length === 1 && document.getElementById("detail").dataset.id === %q`, interruptID))
	input, err := chromedp.Run(page, chromedp.TextContent("#d-input"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(input, `"amount": 30`) {
		t.Errorf("the call's input reads %q, want pay's amount", input)
	}
	// The call's context comes from the workflow's state, read with no
	// worker: the model's text and the conversation.
	for sel, want := range map[string]string{"#d-text": "The invoice says 30; paying it.", "#d-turns": "pay the invoice"} {
		got, err := chromedp.Run(page, chromedp.TextContent(sel))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got, want) {
			t.Errorf("%s reads %q, want %q in it", sel, got, want)
		}
	}
	if dir := os.Getenv("TOOLRUN_SCREENSHOTS"); dir != "" {
		png, err := chromedp.Run(page, chromedp.FullScreenshot(100))
		if err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "inbox-temporal.png"), png, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(page, chromedp.KeyEvent("a")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, page, `document.body.dataset.nextRun`)
	next, err := chromedp.Run(page, chromedp.Evaluate[string](`document.body.dataset.nextRun`))
	if err != nil {
		t.Fatal(err)
	}
	flash, _ := chromedp.Run(page, chromedp.TextContent("#flash"))
	if !strings.Contains(flash, "by alice at ") {
		t.Errorf("the flash says %q, want who decided and when", flash)
	}
	// The decided call stays in place, marked as decided, and nothing
	// waits any more, still with no worker.
	waitPage(t, page, `document.querySelector("#list li.selected.gone") !== null && document.querySelectorAll("#list li:not(.gone)").length === 0`)
	if got := calls(); len(got) != 0 {
		t.Fatalf("pay ran with no worker: %v", got)
	}

	// A worker starts: the tool runs once, with the approved input, and the
	// run the decision started finishes.
	w = newWorker()
	defer w.Stop()
	evs = sseOf(t, as(runner, http.MethodGet, "/runs/"+url.PathEscape(next)+"/events", nil))
	fin = evs[len(evs)-1]
	if outcome, _ := fin["outcome"].(map[string]any); fin["type"] != "RUN_FINISHED" || outcome["type"] != "success" || fin["result"] != "done: the payment went out" {
		t.Errorf("the run went on to %v, want success with the model's answer", fin)
	}
	if diff := cmp.Diff([]string{`{"amount":30,"to":"acme"}`}, calls()); diff != "" {
		t.Errorf("pay's runs (-want +got):\n%s", diff)
	}
}
