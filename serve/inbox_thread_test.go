package serve_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/toolruntest"
)

// clock is a time a test moves by hand, so that a wait for a person
// lasts minutes without the test waiting them.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// twoPayments is a response with two parallel calls of pay, and the
// answer once both are decided.
func twoPayments() []toolruntest.Reply {
	return []toolruntest.Reply{
		toolruntest.Message(toolruntest.Text("Two invoices: paying both."),
			toolruntest.ToolUse("toolu_pay5", "pay", map[string]any{"amount": 5, "to": "acme"}),
			toolruntest.ToolUse("toolu_pay70", "pay", map[string]any{"amount": 70, "to": "globex"})),
		toolruntest.Message(toolruntest.Text("Paid acme 5; the payment to globex was refused.")),
	}
}

// TestInboxThreadStoryInChromium opens the story of a thread whose first
// run stopped for two calls, one approved by alice and one denied by bob
// minutes later, after which a second run went on: the page shows both
// runs in order, each decision beside its call with the decider's name,
// the deny as a decision (not a failed tool), the waits on the time axis,
// each run's end and the cost in dollars.
func TestInboxThreadStoryInChromium(t *testing.T) {
	b := browser(t)
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay both": twoPayments()})
	clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	e.cfg.Now = clk.now
	e.restart(t)

	ids := e.start(t, "thread-story", "pay both")
	if len(ids) != 2 {
		t.Fatalf("the run stopped for %d calls, want 2", len(ids))
	}
	alice, aliceKey := e.login(t, aliceToken)
	bob, bobKey := e.login(t, bobToken)
	clk.advance(95 * time.Second)
	if status, body := e.decideWith(t, alice, ids[0], aliceKey, `{"decision":"approve"}`); status != 200 {
		t.Fatalf("alice's approval: %d %s", status, body)
	}
	clk.advance(3 * time.Minute)
	status, body := e.decideWith(t, bob, ids[1], bobKey, `{"decision":"deny","reason":"globex is not a supplier"}`)
	if status != 200 {
		t.Fatalf("bob's denial: %d %s", status, body)
	}
	var d struct{ NextRun string }
	json.Unmarshal([]byte(body), &d)
	evs := e.follow(t, d.NextRun)
	if o := outcome(evs); o["type"] != "success" {
		t.Fatalf("the second run ended with %v", last(evs))
	}

	page := e.person(t, b, aliceToken)
	do(t, page, chromedp.Navigate(e.url+"/inbox/threads/thread-story"), chromedp.WaitReady("body[data-loaded]"))
	if got := eval[[]string](t, page, `Array.from(document.querySelectorAll("#runs > li")).map(li => li.dataset.run)`); !cmp.Equal(got, []string{"run-thread-story", d.NextRun}) {
		t.Fatalf("the runs, in order: got %q, want the client's run, then %s", got, d.NextRun)
	}
	type call struct{ Run, Decision, Text string }
	got := eval[map[string]call](t, page, `Object.fromEntries(Array.from(document.querySelectorAll("li.call")).map(li => [li.dataset.call, {
		run: li.closest("#runs > li").dataset.run,
		decision: (li.querySelector(".decision") || {}).className || "",
		text: li.textContent}]))`)
	approved, denied := got["toolu_pay5"], got["toolu_pay70"]
	for _, c := range []struct {
		name string
		c    call
		want []string
	}{
		{"the approved call", approved, []string{"approved by alice", "after a wait of 1 min 35 s", "paid {"}},
		{"the denied call", denied, []string{"denied by bob", "after a wait of 4 min 35 s", "Reason: globex is not a supplier", "The model was told (in run 2)"}},
	} {
		if c.c.Run != "run-thread-story" {
			t.Errorf("%s is shown under run %q, want the run that made it", c.name, c.c.Run)
		}
		for _, w := range c.want {
			if !strings.Contains(c.c.Text, w) {
				t.Errorf("%s reads %q, want %q in it", c.name, c.c.Text, w)
			}
		}
	}
	if denied.Decision != "decision deny" || strings.Contains(strings.ToLower(denied.Text), "fail") {
		t.Errorf("the denied call is drawn as %q and reads %q, want a deny decision and no failure", denied.Decision, denied.Text)
	}
	if approved.Decision != "decision approve" {
		t.Errorf("the approved call is drawn as %q", approved.Decision)
	}
	// The waits on the time axis: bob's, the longer, ends where his
	// decision was taken, 4 min 35 s into the thread's 4 min 35 s and a
	// little more.
	waits := eval[[]string](t, page, `Array.from(document.querySelectorAll("#axis .track .bar.wait")).map(b => b.dataset.call + " " + b.title + " " + Math.round(b.getBoundingClientRect().width))`)
	if len(waits) != 2 || !strings.HasPrefix(waits[0], "toolu_pay5 waited 1 min 35 s for a person; approved by alice") || !strings.HasPrefix(waits[1], "toolu_pay70 waited 4 min 35 s for a person; denied by bob") {
		t.Errorf("the waits on the axis: %q", waits)
	}
	ratio := eval[float64](t, page, `(function(){ var w = document.querySelectorAll("#axis .track .bar.wait"); return w[1].getBoundingClientRect().width / w[0].getBoundingClientRect().width; })()`)
	if ratio < 2.5 || ratio > 3.2 {
		t.Errorf("bob's wait is drawn %.2f times alice's, want about 275/95", ratio)
	}
	// Ends and costs.
	states := eval[[]string](t, page, `Array.from(document.querySelectorAll("#runs > li h3 .end")).map(s => s.textContent)`)
	if diff := cmp.Diff([]string{"stopped: waiting for a person", "finished"}, states); diff != "" {
		t.Errorf("the runs' ends (-want +got):\n%s", diff)
	}
	costs := eval[[]string](t, page, `Array.from(document.querySelectorAll("#runs > li .facts .cost")).map(s => s.textContent)`)
	for i, c := range costs {
		if !strings.HasPrefix(c, "$0.0") || c == "$0.0000" {
			t.Errorf("run %d costs %q, want dollars", i+1, c)
		}
	}
	if c := text(t, page, "#cost"); !strings.HasPrefix(c, "$0.0") || c == "$0.0000" {
		t.Errorf("the thread costs %q, want dollars", c)
	}
	if got, want := text(t, page, "#decisions"), "2 (1 denied)"; got != want {
		t.Errorf("the decisions read %q, want %q", got, want)
	}
	screenshot(t, page, "inbox-thread.png")

	// The pending call's detail and the run page link to the story.
	do(t, page, chromedp.Navigate(e.url+"/inbox/runs/thread-story"), chromedp.WaitReady("body[data-loaded]"))
	if got := eval[string](t, page, `document.getElementById("to-story").href`); got != e.url+"/inbox/threads/thread-story" {
		t.Errorf("the run page links to %q", got)
	}
}

// TestInboxThreadStoryScopes checks that the story is read as the run's
// page is: with a session of the read scope, and another tenant's thread
// as one that does not exist.
func TestInboxThreadStoryScopes(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5)})
	e.start(t, "thread-5", "pay 5")
	c, key := e.login(t, aliceToken)
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/inbox/api/threads/thread-5", 200},
		{"/inbox/api/threads/" + url.PathEscape("no such thread"), 404},
	} {
		if got, body := e.inboxGet(t, c, key, tc.path); got != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.path, got, body, tc.want)
		}
	}
	if got, _ := e.inboxGet(t, c, "", "/inbox/api/threads/thread-5"); got != 401 {
		t.Errorf("without the session's key: %d, want 401", got)
	}
	_, body := e.inboxGet(t, c, key, "/inbox/api/threads/thread-5")
	var st struct {
		Runs []struct {
			Outcome string
			Calls   []struct {
				ToolName string
				Input    json.RawMessage
				Decision *struct{ Status string }
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%d %s %s %s %s", len(st.Runs), st.Runs[0].Outcome, st.Runs[0].Calls[0].ToolName, string(st.Runs[0].Calls[0].Input), st.Runs[0].Calls[0].Decision.Status)
	if want := `1 interrupt pay {"amount":5,"to":"acme"} pending`; got != want {
		t.Errorf("the story of a waiting call: got %s, want %s", got, want)
	}
}
