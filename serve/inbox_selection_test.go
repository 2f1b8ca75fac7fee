package serve_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/toolruntest"
)

// TestInboxSelectionNeverMoves: alice reads a call in the inbox while bob
// decides it over the JSON API. Her page keeps it selected and in place,
// marked with who decided it, when and what; her next "a" acts on what is
// on screen (a decided call: nothing is sent), not on the call the list
// would have moved to. A decision on a call whose content changed since
// it was shown is refused with 409 changed_since_shown, and said so.
func TestInboxSelectionNeverMoves(t *testing.T) {
	b := browser(t)

	t.Run("decided elsewhere", func(t *testing.T) {
		e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5), "pay 6": payScene(6)})
		older := e.start(t, "thread-5", "pay 5")[0]
		newer := e.start(t, "thread-6", "pay 6")[0]
		alice := e.person(t, b, aliceToken)
		waitJS(t, alice, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q`, newer))

		if s, body := e.bearer(t, http.MethodPost, "/api/interrupts/"+newer+"/decision", bobToken, `{"decision":"deny","reason":"not this month"}`); s != http.StatusOK {
			t.Fatalf("bob's decision: %d %s", s, body)
		}
		waitJS(t, alice, fmt.Sprintf(`!document.querySelector('#list li[data-id=%q]:not(.gone)')`, newer))
		if got := eval[string](t, alice, `document.getElementById("detail").dataset.id`); got != newer {
			t.Fatalf("alice's page moved to %s, want it on %s, the call she was reading", got, newer)
		}
		waitJS(t, alice, `document.getElementById("d-state").textContent.includes(" at ")`)
		if got := text(t, alice, "#d-state"); !strings.Contains(got, "Decided by bob at ") || !strings.Contains(got, "deny: not this month") {
			t.Errorf("the decided call reads %q, want by whom, when and what", got)
		}
		if got := text(t, alice, "#list li.selected .age"); !strings.Contains(got, "deny") || !strings.Contains(got, "bob") {
			t.Errorf("the list's row reads %q, want bob's denial", got)
		}
		screenshot(t, alice, "inbox-decided-elsewhere.png")
		do(t, alice, chromedp.KeyEvent("a"))
		if got := text(t, alice, "#flash"); !strings.Contains(got, "already decided by bob") || !strings.Contains(got, "nothing was sent") {
			t.Errorf("after a, the flash reads %q, want that nothing was sent", got)
		}
		if diff := cmp.Diff([]string{older}, e.pendingIDs(t)); diff != "" {
			t.Errorf("pending after alice's a (-want +got):\n%s", diff)
		}
		// j moves on, and the decided row leaves the list.
		do(t, alice, chromedp.KeyEvent("j"))
		waitJS(t, alice, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q && document.querySelectorAll("#list li").length === 1`, older))
	})

	t.Run("changed since shown", func(t *testing.T) {
		e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5)})
		id := e.start(t, "thread-5", "pay 5")[0]
		alice := e.person(t, b, aliceToken)
		waitJS(t, alice, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q`, id))
		// Another writer of the database changes the call under the page.
		db, err := sql.Open("sqlite", "file:"+e.dbPath+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`UPDATE serve_interrupts SET input = ? WHERE id = ?`, `{"amount":99,"to":"mallory"}`, id); err != nil {
			t.Fatal(err)
		}
		do(t, alice, chromedp.KeyEvent("a"))
		waitJS(t, alice, `document.getElementById("flash").textContent !== ""`)
		if got := text(t, alice, "#flash"); !strings.Contains(got, "Not decided: the call changed since it was shown") {
			t.Errorf("the flash reads %q, want the refusal", got)
		}
		if got := text(t, alice, "#d-input"); !strings.Contains(got, "mallory") {
			t.Errorf("the page shows %q, want the call as it is now", got)
		}
		if diff := cmp.Diff([]string{id}, e.pendingIDs(t)); diff != "" {
			t.Errorf("pending after the refusal (-want +got):\n%s", diff)
		}
		if got := e.calls.got(); len(got) != 0 {
			t.Errorf("the tool ran: %v", got)
		}
		// Over the JSON API, a decision that names the version it saw is
		// refused the same way.
		if s, body := e.bearer(t, http.MethodPost, "/api/interrupts/"+id+"/decision", bobToken, `{"decision":"approve","version":"0000000000000000"}`); s != http.StatusConflict || !strings.Contains(body, `"changed_since_shown"`) {
			t.Errorf("a stale version over the JSON API: %d %s, want 409 changed_since_shown", s, body)
		}
	})
}
