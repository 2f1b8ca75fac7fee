package serve_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/toolruntest"
)

// fillPending writes n pending calls straight to e's database, as many
// runs would have: call i of thread-(i%100), of tool tool_(i%20), asked
// i minutes ago.
func fillPending(t *testing.T, e *inboxEnv, n int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UTC()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		at := now.Add(-time.Duration(i) * time.Minute)
		in, _ := json.Marshal(map[string]any{"amount": i % 100, "to": "acme", "memo": strings.Repeat("x", 80)})
		if _, err := tx.Exec(`INSERT INTO serve_interrupts (id, thread_id, run_id, tool_call_id, tool_name, input, reason, kind, status, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, 'payments need a person', 'approval', 'pending', ?, ?)`,
			fmt.Sprintf("int_%04d", i), fmt.Sprintf("thread-%03d", i%100), "run_1", fmt.Sprintf("toolu_%04d", i), fmt.Sprintf("tool_%d", i%20), in, at.Format(time.RFC3339Nano), at.Add(24*time.Hour).Format(time.RFC3339Nano)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// blockList makes the page's every further read of the pending list
// fail, so that only the change events can update it.
func blockList(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	do(t, ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := chromedp.Call(ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{URLPatterns: []*network.BlockPattern{{URLPattern: base + "/inbox/api/pending*", Block: true}}})
		return err
	}))
}

// TestInboxListPagedInChromium opens an inbox of 1,000 waiting calls: the
// first page of 100 shows, the rest a page at a time; the filters are
// the server's, and the counts say how many match.
func TestInboxListPagedInChromium(t *testing.T) {
	b := browser(t)
	e := newInboxEnv(t, map[string][]toolruntest.Reply{})
	fillPending(t, e, 1000)
	alice := e.person(t, b, aliceToken)
	waitJS(t, alice, `document.querySelectorAll("#list li").length === 100`)
	if got := text(t, alice, "#count"); got != "1000 calls waiting" {
		t.Errorf("the count reads %q", got)
	}
	first := eval[[]string](t, alice, `Array.from(document.querySelectorAll("#list li")).slice(0, 2).map(li => li.dataset.id)`)
	if diff := cmp.Diff([]string{"int_0000", "int_0001"}, first); diff != "" {
		t.Errorf("the first rows, newest first (-want +got):\n%s", diff)
	}
	do(t, alice, chromedp.Click("#more"))
	waitJS(t, alice, `document.querySelectorAll("#list li").length === 200`)
	if got := eval[string](t, alice, `document.querySelectorAll("#list li")[100].dataset.id`); got != "int_0100" {
		t.Errorf("the second page starts with %s, want int_0100", got)
	}
	filter := []struct {
		name, js   string
		rows       int
		count      string
		firstCalls string
	}{
		{"tool", `(() => { const s = document.getElementById("f-tool"); s.value = "tool_3"; s.dispatchEvent(new Event("change")); return true })()`, 50, "1000 calls waiting (50 match)", "int_0003"},
		{"tool and thread", `(() => { const s = document.getElementById("f-thread"); s.value = "thread-023"; s.dispatchEvent(new Event("input")); return true })()`, 10, "1000 calls waiting (10 match)", "int_0023"},
		// The calls asked in the last hour: 61, or 60 if a minute passed.
		{"age", `(() => { document.getElementById("f-tool").value = ""; document.getElementById("f-thread").value = ""; const s = document.getElementById("f-age"); s.value = "60"; s.dispatchEvent(new Event("change")); return true })()`, -1, "", "int_0000"},
	}
	for _, f := range filter {
		eval[bool](t, alice, f.js)
		if f.rows < 0 {
			waitJS(t, alice, `(n => n >= 60 && n <= 61 && document.getElementById("count").textContent === "1000 calls waiting (" + n + " match)")(document.querySelectorAll("#list li").length)`)
		} else {
			waitJS(t, alice, fmt.Sprintf(`document.getElementById("count").textContent === %q && document.querySelectorAll("#list li").length === %d`, f.count, f.rows))
		}
		if got := eval[string](t, alice, `document.querySelector("#list li").dataset.id`); got != f.firstCalls {
			t.Errorf("%s: the first row is %s, want %s", f.name, got, f.firstCalls)
		}
	}
}

// TestInboxListFollowsChangeEventsInChromium blocks the page's reads of
// the list once it is open: a call that starts waiting appears, and one
// decided elsewhere leaves, by the server's change events alone.
func TestInboxListFollowsChangeEventsInChromium(t *testing.T) {
	b := browser(t)
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5), "pay 6": payScene(6), "pay 7": payScene(7)})
	first := e.start(t, "thread-5", "pay 5")[0]
	second := e.start(t, "thread-6", "pay 6")[0]
	alice := e.person(t, b, aliceToken)
	waitJS(t, alice, `document.querySelectorAll("#list li").length === 2`)
	blockList(t, alice, e.url)
	third := e.start(t, "thread-7", "pay 7")[0]
	waitJS(t, alice, fmt.Sprintf(`document.querySelector("#list li").dataset.id === %q && document.getElementById("count").textContent === "3 calls waiting"`, third))
	// The selection stays on the call selected first.
	if got := eval[string](t, alice, `document.getElementById("detail").dataset.id`); got != second {
		t.Errorf("the selection moved to %s, want it on %s", got, second)
	}
	if s, body := e.bearer(t, http.MethodPost, "/api/interrupts/"+first+"/decision", bobToken, `{"decision":"approve"}`); s != http.StatusOK {
		t.Fatalf("bob's approval: %d %s", s, body)
	}
	waitJS(t, alice, `document.querySelectorAll("#list li").length === 2 && document.getElementById("count").textContent === "2 calls waiting"`)
	if got := eval[[]string](t, alice, `Array.from(document.querySelectorAll("#list li")).map(li => li.dataset.id)`); !cmp.Equal(got, []string{third, second}) {
		t.Errorf("the list is %v, want %v", got, []string{third, second})
	}
	if got := eval[bool](t, alice, `document.getElementById("load-error").textContent === ""`); !got {
		t.Errorf("the page tried to read the list again: %s", text(t, alice, "#load-error"))
	}
}

// TestInboxGroupsParallelCallsInChromium shows a response's parallel
// calls together, marked as one response's.
func TestInboxGroupsParallelCallsInChromium(t *testing.T) {
	b := browser(t)
	three := []toolruntest.Reply{
		toolruntest.Message(toolruntest.Text("Paying three invoices at once."),
			toolruntest.ToolUse("toolu_p1", "pay", map[string]any{"amount": 1}),
			toolruntest.ToolUse("toolu_p2", "pay", map[string]any{"amount": 2}),
			toolruntest.ToolUse("toolu_p3", "pay", map[string]any{"amount": 3})),
		toolruntest.Message(toolruntest.Text("done")),
	}
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"three": three, "pay 5": payScene(5)})
	e.start(t, "thread-5", "pay 5")
	e.start(t, "thread-3", "three")
	alice := e.person(t, b, aliceToken)
	waitJS(t, alice, `document.querySelectorAll("#list li").length === 4`)
	groups := eval[[]string](t, alice, `Array.from(document.querySelectorAll("#list li")).map(li => (li.dataset.group ? "g" : "-") + (li.querySelector(".group") ? ":" + li.querySelector(".group").textContent : ""))`)
	if diff := cmp.Diff([]string{"g:one response, 3 calls in parallel", "g", "g", "-"}, groups); diff != "" {
		t.Errorf("the rows' groups (-want +got):\n%s", diff)
	}
	screenshot(t, alice, "inbox-grouped.png")
}

// TestInboxBulkDecisionInChromium denies every call of a filtered set at
// once: the confirmation names how many, including those not listed,
// and the one reason reaches each; the other calls stay waiting.
func TestInboxBulkDecisionInChromium(t *testing.T) {
	b := browser(t)
	e := newInboxEnv(t, map[string][]toolruntest.Reply{})
	fillPending(t, e, 1000)
	alice := e.person(t, b, aliceToken)
	waitJS(t, alice, `document.querySelectorAll("#list li").length === 100`)
	eval[bool](t, alice, `(() => { const s = document.getElementById("f-thread"); s.value = "thread-00"; s.dispatchEvent(new Event("input")); return true })()`)
	waitJS(t, alice, `document.getElementById("count").textContent === "1000 calls waiting (100 match)" && !document.getElementById("bulk-deny").hidden`)
	do(t, alice, chromedp.Click("#bulk-deny"))
	waitJS(t, alice, `!document.getElementById("bulk").hidden`)
	if got := text(t, alice, "#bulk-text"); !strings.HasPrefix(got, "Deny all 100 calls in threads whose id contains “thread-00”?") {
		t.Errorf("the confirmation reads %q", got)
	}
	do(t, alice, chromedp.SendKeys("#bulk-reason", "these vendors are blocked"))
	screenshot(t, alice, "inbox-bulk.png")
	do(t, alice, chromedp.Click("#bulk-confirm"))
	waitJS(t, alice, `document.getElementById("flash").className === "ok"`)
	if got := text(t, alice, "#flash"); !strings.HasPrefix(got, "Denied 100 calls — by alice at ") {
		t.Errorf("the flash reads %q", got)
	}
	waitJS(t, alice, `document.getElementById("count").textContent === "900 calls waiting (0 match)"`)
	if got := len(e.pendingIDs(t)); got != 900 {
		t.Errorf("%d calls waiting, want 900", got)
	}
	c, key := e.login(t, bobToken)
	_, page := e.inboxGet(t, c, key, "/inbox/api/interrupts/int_0005")
	if !strings.Contains(page, `"reason":"these vendors are blocked"`) || !strings.Contains(page, `"decidedBy":"alice"`) {
		t.Errorf("a call of the set reads %s, want alice's denial with the reason", page)
	}
}

// TestInboxBulkRefusesAnotherSet sends bulk decisions straight to the
// server: one on a set other than the one confirmed (another count, or
// the same count of other calls) decides nothing.
func TestInboxBulkRefusesAnotherSet(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{})
	fillPending(t, e, 40)
	c, key := e.login(t, aliceToken)
	_, list := e.inboxGet(t, c, key, "/inbox/api/pending?tool=tool_1")
	var l struct {
		Matching   int
		SetVersion string
	}
	json.Unmarshal([]byte(list), &l)
	if l.Matching != 2 {
		t.Fatalf("tool_1 has %d calls waiting, want 2: %s", l.Matching, list)
	}
	post := func(body string) (int, string) { return e.postAPI(t, c, "/inbox/api/bulk", key, body) }
	tests := []struct {
		name, body string
		status     int
		want       string
	}{
		{"another count", fmt.Sprintf(`{"tool":"tool_1","decision":"approve","count":3,"setVersion":%q}`, l.SetVersion), http.StatusConflict, "changed_since_shown"},
		{"another set of the same count", fmt.Sprintf(`{"tool":"tool_2","decision":"approve","count":2,"setVersion":%q}`, l.SetVersion), http.StatusConflict, "changed_since_shown"},
		{"a denial without a reason", fmt.Sprintf(`{"tool":"tool_1","decision":"deny","count":2,"setVersion":%q}`, l.SetVersion), http.StatusBadRequest, "needs the reason"},
		{"an edit", fmt.Sprintf(`{"tool":"tool_1","decision":"edit","count":2,"setVersion":%q}`, l.SetVersion), http.StatusBadRequest, "approved or denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(tt.body)
			if status != tt.status || !strings.Contains(body, tt.want) {
				t.Errorf("got %d %s, want %d with %q", status, body, tt.status, tt.want)
			}
		})
	}
	if got := len(e.pendingIDs(t)); got != 40 {
		t.Errorf("%d calls waiting after the refusals, want 40", got)
	}
	status, body := post(fmt.Sprintf(`{"tool":"tool_1","decision":"approve","count":2,"setVersion":%q}`, l.SetVersion))
	if status != http.StatusOK || !strings.Contains(body, `"decided":2`) {
		t.Errorf("the set confirmed: %d %s, want 2 decided", status, body)
	}
	if got := len(e.pendingIDs(t)); got != 38 {
		t.Errorf("%d calls waiting, want 38", got)
	}
}

// TestInboxOpensTheLinkedCallInChromium opens the inbox at a
// notification's link: the one call it names is shown and selected,
// until the person asks for every call.
func TestInboxOpensTheLinkedCallInChromium(t *testing.T) {
	b := browser(t)
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5), "pay 6": payScene(6)})
	first := e.start(t, "thread-5", "pay 5")[0]
	e.start(t, "thread-6", "pay 6")
	alice := e.person(t, b, aliceToken)
	waitJS(t, alice, `document.querySelectorAll("#list li").length === 2`)
	do(t, alice, chromedp.Navigate(e.url+"/inbox#call="+first), chromedp.Reload())
	waitJS(t, alice, fmt.Sprintf(`document.querySelectorAll("#list li").length === 1 && document.getElementById("detail").dataset.id === %q && !document.getElementById("linked").hidden`, first))
	do(t, alice, chromedp.Click("#show-all"))
	waitJS(t, alice, `document.querySelectorAll("#list li").length === 2 && document.getElementById("linked").hidden`)
}
