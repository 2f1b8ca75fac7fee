package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// recordThread runs one thread on a real server that records each run
// (serve's RecordDir): the first run stops for two parallel calls of pay,
// alice approves one and bob denies the other over the JSON API, and a
// second run goes on. It returns the record directory.
func recordThread(t *testing.T) string {
	t.Helper()
	model := toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		if len(r.Conversation) == 1 {
			return toolruntest.Message(toolruntest.Text("Two invoices: paying both."),
				toolruntest.ToolUse("toolu_pay5", "pay", map[string]any{"amount": 5, "to": "acme"}),
				toolruntest.ToolUse("toolu_pay70", "pay", map[string]any{"amount": 70, "to": "globex"}))
		}
		return toolruntest.Message(toolruntest.Text("Paid acme; globex was refused."))
	}})
	pay := toolrun.NewTool("pay", "sends a payment", func(ctx context.Context, in struct {
		Amount int    `json:"amount"`
		To     string `json:"to"`
	}) (string, error) {
		return "paid " + in.To, nil
	})
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "serve.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	dir := t.TempDir()
	const alice, bob, client = "alice-secret-0123456789", "bob-secret-0123456789ab", "client-secret-0123456789"
	h, err := serve.New(context.Background(), serve.Config{
		Client: model.Client(), Params: anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024},
		Tools: []toolrun.Tool{pay}, Options: toolrun.Options{Policy: policy.RequireApproval("payments need a person")},
		DB: db, RecordDir: dir,
		Tokens: []serve.Token{
			{Name: "alice", Secret: alice, Scopes: []string{serve.ScopeApprove, serve.ScopeRead}},
			{Name: "bob", Secret: bob, Scopes: []string{serve.ScopeApprove, serve.ScopeRead}},
			{Name: "client", Secret: client, Scopes: []string{serve.ScopeRun}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer func() {
		h.Shutdown(context.Background())
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
	evs := sseOf(t, as(client, http.MethodPost, "/agui", map[string]any{
		"threadId": "pay-thread", "runId": "pay-run-1",
		"messages": []map[string]any{{"id": "u1", "role": "user", "content": "pay both invoices"}},
	}))
	outcome, _ := evs[len(evs)-1]["outcome"].(map[string]any)
	its, _ := outcome["interrupts"].([]any)
	if len(its) != 2 {
		t.Fatalf("the first run ended with %v, want two interrupts", evs[len(evs)-1])
	}
	id := func(i int) string { return its[i].(map[string]any)["id"].(string) }
	decide := func(token, id string, body map[string]any) string {
		t.Helper()
		resp := as(token, http.MethodPost, "/api/interrupts/"+id+"/decision", body)
		defer resp.Body.Close()
		var out struct {
			NextRun string
			Error   any
		}
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("deciding %s: %d %v", id, resp.StatusCode, out.Error)
		}
		return out.NextRun
	}
	decide(alice, id(0), map[string]any{"decision": "approve"})
	next := decide(bob, id(1), map[string]any{"decision": "deny", "reason": "globex is not a supplier"})
	if next == "" {
		t.Fatal("bob's denial, the last, started no run")
	}
	evs = sseOf(t, as(client, http.MethodGet, "/runs/"+next+"/events", nil))
	if o, _ := evs[len(evs)-1]["outcome"].(map[string]any); o["type"] != "success" {
		t.Fatalf("the second run ended with %v", evs[len(evs)-1])
	}
	return dir
}

// TestViewThread writes the report of a thread of two runs from serve's
// record directory: the runs in order, each decision beside its call
// with the name of the person who took it, the deny as a decision and
// not a failure, the waits on the time axis, and the cost in dollars.
func TestViewThread(t *testing.T) {
	dir := recordThread(t)
	res := runCLI(t, noEnv, "", "view", "--thread", "pay-thread", "-o", "-", dir)
	if res.code != exitOK {
		t.Fatalf("view --thread: exit %d: %s", res.code, res.stderr)
	}
	page := res.stdout
	runs := regexp.MustCompile(`<section class="box run" id="run-(\d)" data-run="([^"]+)">`).FindAllStringSubmatch(page, -1)
	if len(runs) != 2 || runs[0][2] != "pay-run-1" || !strings.HasPrefix(runs[1][2], "run_") {
		t.Fatalf("the runs, in order: %q", runs)
	}
	first := page[strings.Index(page, runs[0][0]):strings.Index(page, runs[1][0])]
	for _, want := range []string{
		`stopped: awaiting_approval`,
		`<div class="decision approve"><b>approved</b> by <span class="by">alice</span>`,
		`<div class="decision deny"><b>denied</b> by <span class="by">bob</span>`,
		`Reason: globex is not a supplier`,
		`The model was told (in run 2)`,
		`Result (in run 2)`,
	} {
		if !strings.Contains(first, want) {
			t.Errorf("the first run's section lacks %q:\n%s", want, first)
		}
	}
	for _, want := range []string{
		`stopped: end_turn`,
		`Gave the result of pay (toolu_pay70) of run 1, denied by bob.`,
		`<dd id="decisions">2 (1 denied)</dd>`,
		`<dd id="failures">0</dd>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(first, "Failed") {
		t.Errorf("the report draws a call as failed:\n%s", first)
	}
	waits := regexp.MustCompile(`<span class="bar wait" style="left:[0-9.]+%;width:[0-9.]+%" title="waited [^"]+ for a person; (approved by alice|denied by bob)">`).FindAllStringSubmatch(page, -1)
	if len(waits) != 2 || waits[0][1] != "approved by alice" || waits[1][1] != "denied by bob" {
		t.Errorf("the waits on the time axis: %q", waits)
	}
	costs := regexp.MustCompile(`<span class="cost">([^<]+)</span>`).FindAllStringSubmatch(page, -1)
	if len(costs) != 2 {
		t.Fatalf("the runs' costs: %q", costs)
	}
	for i, c := range costs {
		if !strings.HasPrefix(c[1], "$0.00") || c[1] == "$0.0000" {
			t.Errorf("run %d costs %q, want dollars", i+1, c[1])
		}
	}
	if m := regexp.MustCompile(`<dd id="cost">(\$[0-9.]+)</dd>`).FindStringSubmatch(page); m == nil || m[1] == "$0.0000" {
		t.Errorf("the thread's cost: %q", m)
	}

	// Without -o the report is written beside the transcripts.
	res = runCLI(t, noEnv, "", "view", "--thread", "pay-thread", dir)
	if res.code != exitOK || !strings.Contains(res.stdout, filepath.Join(dir, "thread-")) || !strings.Contains(res.stdout, "(2 runs)") {
		t.Errorf("view --thread without -o: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
}

// TestViewThreadRefusals checks the errors of view --thread: no
// transcript of the thread, and no directory or file at all.
func TestViewThreadRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no run of the thread", []string{"view", "--thread", "nope", dir}, exitError, `toolrun view: no transcript records a run of the thread "nope"`},
		{"nothing to read", []string{"view", "--thread", "nope"}, exitUsage, "--thread wants the record directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runCLI(t, noEnv, "", tc.args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", res.code, res.stderr, tc.code, tc.want)
			}
		})
	}
}
