package serve_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/toolruntest"
)

// resultsSeen is a scripted model that asks to pay, and records each
// tool result it is sent, as the model reads it.
type resultsSeen struct {
	mu      sync.Mutex
	results []string // "text" or "error: text"
}

func (rs *resultsSeen) model(t *testing.T) *toolruntest.Server {
	return toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		last := r.Conversation[len(r.Conversation)-1]
		for _, b := range last.Content {
			if b.Type == "tool_result" {
				rs.mu.Lock()
				s := b.ResultText()
				if b.IsError {
					s = "error: " + s
				}
				rs.results = append(rs.results, s)
				rs.mu.Unlock()
				return toolruntest.Message(toolruntest.Text("noted"))
			}
		}
		return toolruntest.Message(toolruntest.Text("Paying the invoice."), toolruntest.ToolUse("toolu_pay5", "pay", map[string]any{"amount": 5, "to": "acme"}))
	}})
}

func (rs *resultsSeen) got() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]string(nil), rs.results...)
}

// respondEnv is an inbox whose model records the results it is sent.
func respondEnv(t *testing.T) (*inboxEnv, *resultsSeen) {
	t.Helper()
	e := newInboxEnv(t, nil)
	rs := &resultsSeen{}
	e.cfg.Client = rs.model(t).Client()
	e.restart(t)
	return e, rs
}

// TestRespondAnswersInTheToolsPlace answers a call with a person's text,
// over the JSON API and the inbox's: the tool does not run, the model
// reads the text as the tool's (not an error) result, and the decision is
// recorded as a respond, by whom, with its text, wherever decisions are
// shown.
func TestRespondAnswersInTheToolsPlace(t *testing.T) {
	const answer = `The account is acme-2 <not acme> & pay it "today"`
	body, _ := json.Marshal(map[string]string{"decision": "respond", "response": answer})
	tests := []struct {
		name   string
		decide func(t *testing.T, e *inboxEnv, id string) (int, string)
	}{
		{"the JSON API", func(t *testing.T, e *inboxEnv, id string) (int, string) {
			return e.bearer(t, http.MethodPost, "/api/interrupts/"+id+"/decision", aliceToken, string(body))
		}},
		{"the inbox", func(t *testing.T, e *inboxEnv, id string) (int, string) {
			c, key := e.login(t, aliceToken)
			return e.decideWith(t, c, id, key, string(body))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, rs := respondEnv(t)
			id := e.start(t, "thread-r", "pay")[0]
			status, got := tt.decide(t, e, id)
			if status != http.StatusOK {
				t.Fatalf("responding: %d %s, want 200", status, got)
			}
			var ans struct{ Decision, DecidedBy, NextRun string }
			json.Unmarshal([]byte(got), &ans)
			if ans.Decision != "respond" || ans.DecidedBy != "alice" {
				t.Errorf("the answer says %s by %q, want respond by alice", ans.Decision, ans.DecidedBy)
			}
			evs := e.follow(t, ans.NextRun)
			var shown string
			for _, ev := range evs {
				if ev["type"] == "TOOL_CALL_RESULT" {
					shown, _ = ev["content"].(string)
				}
			}
			if shown != answer {
				t.Errorf("the client was shown the result %q, want %q", shown, answer)
			}
			if diff := cmp.Diff([]string{answer}, rs.got()); diff != "" {
				t.Errorf("the results the model read (-want +got):\n%s", diff)
			}
			if got := e.calls.got(); len(got) != 0 {
				t.Errorf("the tool ran: %v", got)
			}
			// A second decision is refused with the first, text and all.
			status, again := e.bearer(t, http.MethodPost, "/api/interrupts/"+id+"/decision", bobToken, `{"decision":"approve"}`)
			if want := "already decided by alice at "; status != http.StatusConflict || !strings.Contains(again, want) || !strings.Contains(again, `"response":"The account is acme-2`) {
				t.Errorf("a second decision: %d %s, want 409 naming alice's respond and its text", status, again)
			}
			// The thread's trail, as the run's page reads it.
			c, key := e.login(t, bobToken)
			_, run := e.inboxGet(t, c, key, "/inbox/api/runs/thread-r")
			var page struct {
				Trail []struct{ Decision, Response, DecidedBy string }
			}
			json.Unmarshal([]byte(run), &page)
			want := []struct{ Decision, Response, DecidedBy string }{{"respond", answer, "alice"}}
			if diff := cmp.Diff(want, page.Trail); diff != "" {
				t.Errorf("the trail (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRespondRefusals sends responds the server must refuse: each
// changes nothing, and the call stays pending.
func TestRespondRefusals(t *testing.T) {
	e, _ := respondEnv(t)
	id := e.start(t, "thread-r", "pay")[0]
	tests := []struct {
		name, body, want string
	}{
		{"no text", `{"decision":"respond"}`, "a respond needs the text of the response"},
		{"only blanks", `{"decision":"respond","response":"  \n"}`, "a respond needs the text of the response"},
		{"a response on an approval", `{"decision":"approve","response":"paid"}`, "response goes with decision: respond"},
		{"a response with approved", `{"approved":true,"response":"paid"}`, "not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, got := e.bearer(t, http.MethodPost, "/api/interrupts/"+id+"/decision", aliceToken, tt.body)
			if status != http.StatusBadRequest || !strings.Contains(got, tt.want) {
				t.Errorf("got %d %s, want 400 with %q", status, got, tt.want)
			}
		})
	}
	if diff := cmp.Diff([]string{id}, e.pendingIDs(t)); diff != "" {
		t.Errorf("pending after the refusals (-want +got):\n%s", diff)
	}
}

// TestInboxRespondInChromium answers a call from the inbox with r, as a
// person would: the text reaches the model as the tool's result, the
// call is marked as answered, the focus is back on the list, and the
// thread's page shows the respond with its text.
func TestInboxRespondInChromium(t *testing.T) {
	b := browser(t)
	e, rs := respondEnv(t)
	id := e.start(t, "thread-r", "pay")[0]
	alice := e.person(t, b, aliceToken)
	waitJS(t, alice, fmt.Sprintf(`document.getElementById("detail").dataset.id === %q`, id))
	do(t, alice, chromedp.KeyEvent("r"))
	waitJS(t, alice, `!document.getElementById("responder").hidden && document.activeElement.id === "response"`)
	// chromedp's key event types the r into the box it opened: empty it.
	eval[bool](t, alice, `(document.getElementById("response").value = "", true)`)
	const answer = "Use the account acme-2 <not acme> & tell me."
	do(t, alice, chromedp.SendKeys("#response", answer))
	screenshot(t, alice, "inbox-respond.png")
	eval[bool](t, alice, `(document.getElementById("response").dispatchEvent(new KeyboardEvent("keydown", {key: "Enter", ctrlKey: true, bubbles: true})), true)`)
	waitJS(t, alice, `document.body.dataset.nextRun`)
	if got := text(t, alice, "#flash"); !strings.HasPrefix(got, "Answered in its place pay") || !strings.Contains(got, "by alice at ") {
		t.Errorf("the flash says %q", got)
	}
	if got := eval[string](t, alice, `document.activeElement.id`); got != "list" {
		t.Errorf("after the respond the focus is on %q, want the list", got)
	}
	e.follow(t, eval[string](t, alice, `document.body.dataset.nextRun`))
	if diff := cmp.Diff([]string{answer}, rs.got()); diff != "" {
		t.Errorf("the results the model read (-want +got):\n%s", diff)
	}
	if got := text(t, alice, "#d-state"); !strings.Contains(got, `respond: "Use the account acme-2 <not acme> & tell me."`) {
		t.Errorf("the answered call reads %q", got)
	}
	do(t, alice, chromedp.Navigate(e.url+"/inbox/runs/thread-r"), chromedp.WaitVisible("#trail"))
	if got := text(t, alice, "#trail .decision"); !strings.Contains(got, "respond") || !strings.Contains(got, answer) {
		t.Errorf("the trail's decision reads %q", got)
	}
	screenshot(t, alice, "inbox-run-respond.png")
	if got := e.calls.got(); len(got) != 0 {
		t.Errorf("the tool ran: %v", got)
	}
}
