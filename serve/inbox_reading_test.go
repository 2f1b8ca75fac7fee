package serve_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// shellTool is a tool whose input is shell-like text, where <, > and &
// matter.
func shellTool(t *testing.T) toolrun.Tool {
	t.Helper()
	sh, err := toolrun.NewRawTool("shell", "runs a shell command", []byte(`{"type":"object","properties":{"cmd":{"type":"string"},"script":{"type":"string"},"dry_run":{"type":"boolean"}}}`),
		func(context.Context, json.RawMessage) (string, error) { return "ran", nil })
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// TestInboxReadsExactly: a person reads every call as it is and can act
// only as the call allows: <, > and & as typed in the list, "Last turns"
// and the run's page; every key of a large input and the buttons in
// sight; an expired call marked and not approvable before the click;
// Edit only on the server's own tools; and after each decision the focus
// back on the list, so that the next key moves.
func TestInboxReadsExactly(t *testing.T) {
	b := browser(t)
	const cmd = `grep -c '<tr>' a.html && echo "a & b" > out.txt`

	t.Run("<, > and & as typed", func(t *testing.T) {
		e := newInboxEnv(t, map[string][]toolruntest.Reply{"count <tr>": {
			toolruntest.Message(toolruntest.Text("counting <tr> & writing"), toolruntest.ToolUse("toolu_sh", "shell", map[string]any{"cmd": cmd})),
			toolruntest.Message(toolruntest.Text("done")),
		}}, shellTool(t))
		e.start(t, "thread-sh", "count <tr>")
		alice := e.person(t, b, aliceToken)
		waitJS(t, alice, `document.querySelectorAll("#list li").length === 1`)
		typed, _ := json.Marshal(cmd)
		typedJSON := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(typed))
		if got := text(t, alice, "#d-turns"); !strings.Contains(got, `→ shell {"cmd":`+typedJSON+`}`) {
			t.Errorf("the last turns read %q, want the call's input as typed, %s", got, typedJSON)
		}
		if got := text(t, alice, "#d-input"); !strings.Contains(got, `"cmd": `+typedJSON) {
			t.Errorf("the input reads %q", got)
		}
		do(t, alice, chromedp.KeyEvent("d"))
		eval[bool](t, alice, `(document.getElementById("reason").value = "", true)`)
		do(t, alice, chromedp.SendKeys("#reason", "not <tr> & not now\r"))
		waitJS(t, alice, `document.body.dataset.nextRun`)
		e.follow(t, eval[string](t, alice, `document.body.dataset.nextRun`))
		do(t, alice, chromedp.Navigate(e.url+"/inbox/runs/thread-sh"), chromedp.WaitVisible("#trail"))
		if got := text(t, alice, "#trail pre"); !strings.Contains(got, `"cmd": `+typedJSON) {
			t.Errorf("the run's trail shows %q, want the input as typed", got)
		}
		if got := text(t, alice, "#trail .decision"); got != "deny: not <tr> & not now" {
			t.Errorf("the run's decision reads %q", got)
		}
		turns := text(t, alice, ".turns")
		if !strings.Contains(turns, `→ shell {"cmd":`+typedJSON+`}`) || strings.Contains(turns, `\u00`) {
			t.Errorf("the run's conversation reads %q, want the input as typed", turns)
		}
		if got := eval[[]string](t, alice, `Array.from(document.querySelectorAll(".turns li > b")).map(b => b.textContent)`); !cmp.Equal(got, []string{"user", "assistant", "tool results", "assistant"}) {
			t.Errorf("the conversation's roles are %q, want the tool's result not labelled the user's", got)
		}
		screenshot(t, alice, "inbox-run-typed.png")
	})

	t.Run("a large input", func(t *testing.T) {
		script := strings.Repeat("echo 'a line of a long script' >> log.txt\n", 1100) // about 44 KB
		e := newInboxEnv(t, map[string][]toolruntest.Reply{"big": {
			toolruntest.Message(toolruntest.ToolUse("toolu_big", "shell", map[string]any{"script": script, "dry_run": false, "cmd": "sh"})),
		}}, shellTool(t))
		e.start(t, "thread-big", "big")
		alice := e.person(t, b, aliceToken)
		waitJS(t, alice, `document.querySelectorAll("#list li").length === 1`)
		eval[bool](t, alice, `(window.scrollTo(0, 0), true)`)
		// Each key's name is in the window, and not scrolled away in its box.
		keys := eval[[]string](t, alice, `Array.from(document.querySelectorAll("#d-input .member")).filter(m => {
			const k = m.querySelector(".key").getBoundingClientRect(), box = m.getBoundingClientRect();
			return k.top >= 0 && k.bottom <= innerHeight && k.top >= box.top && k.bottom <= box.bottom;
		}).map(m => m.dataset.key)`)
		if diff := cmp.Diff([]string{"cmd", "dry_run", "script"}, keys); diff != "" {
			t.Errorf("the keys in sight (-want +got):\n%s", diff)
		}
		for _, id := range []string{"approve", "deny"} {
			if !eval[bool](t, alice, fmt.Sprintf(`(() => { const r = document.getElementById(%q).getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; })()`, id)) {
				t.Errorf("%s is not in the window", id)
			}
		}
		if got := text(t, alice, "#d-input"); len(got) < len(script) {
			t.Errorf("the input shows %d bytes, want the script's %d whole", len(got), len(script))
		}
		screenshot(t, alice, "inbox-large-input.png")
	})

	t.Run("expiry", func(t *testing.T) {
		e := newInboxEnv(t, map[string][]toolruntest.Reply{})
		db, err := sql.Open("sqlite", "file:"+e.dbPath+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		now := time.Now().UTC()
		if _, err := db.Exec(`INSERT INTO serve_interrupts (id, thread_id, run_id, tool_call_id, tool_name, input, reason, kind, status, created_at, expires_at) VALUES ('int_old', 'thread-old', 'run_old', 'toolu_old', 'pay', '{"amount":1}', 'payments need a person', 'approval', 'pending', ?, ?)`,
			now.Add(-25*time.Hour).Format(time.RFC3339Nano), now.Add(-time.Hour).Format(time.RFC3339Nano)); err != nil {
			t.Fatal(err)
		}
		alice := e.person(t, b, aliceToken)
		waitJS(t, alice, `document.getElementById("detail").dataset.id === "int_old"`)
		if got := text(t, alice, "#d-expires"); !strings.Contains(got, "expired") || !strings.Contains(got, "can only be denied") {
			t.Errorf("the expiry reads %q, want it expired", got)
		}
		if !eval[bool](t, alice, `document.getElementById("approve").disabled && document.getElementById("edit").disabled && !document.getElementById("deny").disabled`) {
			t.Error("an expired call can be approved or edited, or not denied")
		}
		do(t, alice, chromedp.KeyEvent("a"))
		if got := text(t, alice, "#flash"); !strings.Contains(got, "expired") {
			t.Errorf("after a, the flash reads %q, want that the call expired", got)
		}
		if diff := cmp.Diff([]string{"int_old"}, e.pendingIDs(t)); diff != "" {
			t.Errorf("pending (-want +got):\n%s", diff)
		}
		screenshot(t, alice, "inbox-expired.png")
	})

	t.Run("edit only on the server's tools, focus back after deny", func(t *testing.T) {
		door := []any{map[string]any{"name": "open_door", "description": "opens a door of the user's house", "parameters": map[string]any{"type": "object", "properties": map[string]any{"door": map[string]any{"type": "string"}}}}}
		e := newInboxEnv(t, map[string][]toolruntest.Reply{
			"pay 5":      payScene(5),
			"front door": {toolruntest.Message(toolruntest.ToolUse("toolu_door", "open_door", map[string]any{"door": "front"}))},
		})
		payID := e.start(t, "thread-5", "pay 5")[0]
		ids, status, body := e.startAs(t, clientToken, "thread-door", "front door", map[string]any{"tools": door})
		if status != 200 || len(ids) != 1 {
			t.Fatalf("the client tool's run: %d %s", status, body)
		}
		doorID := ids[0]
		alice := e.person(t, b, aliceToken)
		waitJS(t, alice, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q`, doorID))
		if !eval[bool](t, alice, `document.getElementById("edit").hidden`) {
			t.Error("Edit is offered on a client tool's call")
		}
		do(t, alice, chromedp.KeyEvent("e"))
		if !eval[bool](t, alice, `document.getElementById("editor").hidden`) {
			t.Error("e opened the editor on a client tool's call")
		}
		do(t, alice, chromedp.KeyEvent("\x1b")) // Escape
		// Deny with the reason box and Enter; the focus returns to the
		// list, so j moves to the next call.
		do(t, alice, chromedp.KeyEvent("d"))
		waitJS(t, alice, `document.activeElement.id === "reason"`)
		eval[bool](t, alice, `(document.getElementById("reason").value = "", true)`)
		do(t, alice, chromedp.SendKeys("#reason", "keep it shut\r"))
		waitJS(t, alice, `document.getElementById("flash").className === "ok"`)
		if got := eval[string](t, alice, `document.activeElement.id`); got != "list" {
			t.Errorf("after the deny the focus is on %q, want the list", got)
		}
		do(t, alice, chromedp.KeyEvent("j"))
		waitJS(t, alice, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q`, payID))
		if got := eval[string](t, alice, `document.getElementById("reason").value`); got != "" {
			t.Errorf("the reason box holds %q after j", got)
		}
		if eval[bool](t, alice, `document.getElementById("edit").hidden`) {
			t.Error("Edit is hidden on the server's own tool")
		}
	})
}
