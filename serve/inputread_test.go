package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolrun/toolrun/serve"
)

// agentClient keeps a thread's messages as @ag-ui/client's HttpAgent does,
// and sends them all with every run.
type agentClient struct {
	t      *testing.T
	url    string
	token  string // the bearer token, if any
	thread string
	msgs   []map[string]any
	runs   int
}

// send posts msgs as the thread's run, and returns the status, the
// events of a run and the body of a refusal.
func (c *agentClient) send(thread string, msgs []map[string]any) (int, []map[string]any, string) {
	c.t.Helper()
	c.runs++
	b, _ := json.Marshal(input(thread, fmt.Sprintf("%s-r%d", c.thread, c.runs), msgs, nil))
	req, _ := http.NewRequest("POST", c.url, bytes.NewReader(b))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, nil, string(body)
	}
	evs, _ := readSSE(c.t, resp.Body)
	return resp.StatusCode, evs, ""
}

// say sends the thread's history with a new user message, and keeps the
// answer as an assistant message; it returns the status and the error
// body of a refusal.
func (c *agentClient) say(id, content string) (int, string) {
	c.t.Helper()
	msgs := append(c.msgs[:len(c.msgs):len(c.msgs)], user(id, content))
	status, evs, body := c.send(c.thread, msgs)
	if status != http.StatusOK {
		return status, body
	}
	if outcome(evs)["type"] != "success" {
		c.t.Fatalf("run %d ended %v", c.runs, last(evs))
	}
	answer := map[string]any{"role": "assistant"}
	var said strings.Builder
	for _, e := range evs {
		switch e["type"] {
		case "TEXT_MESSAGE_START":
			answer["id"] = e["messageId"]
		case "TEXT_MESSAGE_CONTENT":
			said.WriteString(e["delta"].(string))
		}
	}
	answer["content"] = said.String()
	c.msgs = append(msgs, answer)
	return status, ""
}

// errorCode returns the code of an error body.
func errorCode(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Error.Code
}

// A client that sends the thread's whole history with every run, as
// AG-UI's clients do, goes on past the body limit: the messages the
// thread has count against MaxHistoryBytes, not MaxBodyBytes.
func TestLongThreadGoesOnPastTheBodyLimit(t *testing.T) {
	f, model := modelFixture(t, nil, nil, func(c *serve.Config) { c.MaxBodyBytes = 8 << 10 })
	c := &agentClient{t: t, url: f.url, thread: "long"}
	for i := range 12 {
		// Each message is 3 KiB, and its answer (the scripted model's,
		// which quotes it) as much: the history passes 8 KiB by the
		// third run, and 60 KiB by the last.
		if status, body := c.say(fmt.Sprintf("u%d", i), fmt.Sprintf("%d:%s", i, strings.Repeat("x", 3<<10))); status != http.StatusOK {
			t.Fatalf("run %d: %d %s", i+1, status, body)
		}
	}
	b, _ := json.Marshal(c.msgs)
	if len(b) < 60<<10 {
		t.Fatalf("the history is %d bytes; the test wants it far past the 8 KiB limit", len(b))
	}
	if got, want := len(conversationTexts(lastRequest(t, model))), 23; got != want {
		t.Errorf("the last run's request has %d messages, want %d: the whole thread", got, want)
	}
}

// What a run's body brings beyond its thread's history is still bounded
// by MaxBodyBytes, and refused as any body past it (413 too_large): a new
// message past it, a history whose message the client edited (the client's
// history stands: from the edit on, it is new), one with a message
// dropped (what follows it stands where other messages were), and the
// same history sent to another token's thread.
func TestRunBodyLimitCountsWhatIsNew(t *testing.T) {
	f, model := modelFixture(t, nil, nil, func(c *serve.Config) {
		c.MaxBodyBytes = 8 << 10
		c.Tokens = []serve.Token{
			{Name: "ann", Secret: "ann-secret-0123456789", Scopes: []string{serve.ScopeRun}},
			{Name: "bob", Secret: "bob-secret-0123456789", Scopes: []string{serve.ScopeRun}},
		}
	})
	ann := &agentClient{t: t, url: f.url, token: "ann-secret-0123456789", thread: "t"}
	big := func(i int) string { return fmt.Sprintf("%d:%s", i, strings.Repeat("y", 3<<10)) }
	for i := range 4 {
		if status, body := ann.say(fmt.Sprintf("u%d", i), big(i)); status != http.StatusOK {
			t.Fatalf("run %d: %d %s", i+1, status, body)
		}
	}
	hist := ann.msgs
	bob := &agentClient{t: t, url: f.url, token: "bob-secret-0123456789", thread: "t"}
	with := func(msgs ...map[string]any) []map[string]any { return msgs }
	u := func(i int) map[string]any { return hist[2*i] }
	a := func(i int) map[string]any { return hist[2*i+1] }
	tests := []struct {
		name   string
		c      *agentClient
		thread string
		msgs   []map[string]any
		want   int
	}{
		{"the history and a small message", ann, "t", append(hist[:len(hist):len(hist)], user("u9", "small")), 200},
		{"the history and a message past the limit", ann, "t", append(hist[:len(hist):len(hist)], user("u9", strings.Repeat("z", 9<<10))), 413},
		{"a new thread past the limit", ann, "new", append(hist[:len(hist):len(hist)], user("u9", "small")), 413},
		{"the first message edited: all of it is new", ann, "t", append(with(user("u0", big(7)), a(0), u(1), a(1), u(2), a(2)), user("u9", "small")), 413},
		{"a message dropped: what follows it is new", ann, "t", append(with(u(0), a(0), u(2), a(2), u(3), a(3)), user("u9", "small")), 413},
		{"another token's thread", bob, "t", append(hist[:len(hist):len(hist)], user("u9", "small")), 413},
		{"an edit within the limit is a branch", ann, "t", with(user("u0", "edited")), 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := tt.c.send(tt.thread, tt.msgs)
			if status != tt.want {
				t.Fatalf("got %d %.300s, want %d", status, body, tt.want)
			}
			if status == 413 {
				if got := errorCode(t, body); got != "too_large" {
					t.Errorf("got the code %q, want too_large", got)
				}
			}
		})
	}
	// The branch's request is the client's history, not the thread's.
	got := conversationTexts(lastRequest(t, model))
	if len(got) != 1 || got[0] != "user: edited" {
		t.Errorf("the branch's request: got %q, want the edited message alone", got)
	}
}

// A thread's history sent again is bounded too, by MaxHistoryBytes: the
// memory a request may take is MaxBodyBytes plus MaxHistoryBytes,
// however long the thread.
func TestHistoryPastItsLimitRefused(t *testing.T) {
	f, _ := modelFixture(t, nil, nil, func(c *serve.Config) {
		c.MaxBodyBytes = 8 << 10
		c.MaxHistoryBytes = 16 << 10
	})
	c := &agentClient{t: t, url: f.url, thread: "t"}
	for i := range 8 {
		status, body := c.say(fmt.Sprintf("u%d", i), fmt.Sprintf("%d:%s", i, strings.Repeat("x", 3<<10)))
		if status == http.StatusOK {
			continue
		}
		if status != http.StatusRequestEntityTooLarge || errorCode(t, body) != "too_large" {
			t.Fatalf("run %d: got %d %s, want 413 too_large", i+1, status, body)
		}
		if i < 3 {
			t.Fatalf("run %d refused, with a history of less than 24 KiB: %s", i+1, body)
		}
		return
	}
	t.Fatal("a history of more than 40 KiB was taken past a limit of 8 + 16 KiB")
}

// A body that brings more new content than the limit is refused as soon
// as it has, without waiting for the rest of it.
func TestRunBodyRefusedBeforeItsEnd(t *testing.T) {
	f, _ := modelFixture(t, nil, nil, func(c *serve.Config) { c.MaxBodyBytes = 8 << 10 })
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		// threadId first, as AG-UI's clients send it; then 16 KiB of new
		// messages, and a body that never ends.
		io.WriteString(pw, `{"threadId":"t","runId":"r","messages":[`)
		for i := range 16 {
			fmt.Fprintf(pw, `{"id":"u%d","role":"user","content":%q},`, i, strings.Repeat("x", 1<<10))
		}
	}()
	resp, err := http.Post(f.url, "application/json", pr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || errorCode(t, string(body)) != "too_large" {
		t.Fatalf("got %d %s, want 413 too_large", resp.StatusCode, body)
	}
}

// FuzzReadInput feeds the run body's reader whatever a client may send:
// it never panics, refuses with 400 or 413 only, and takes only a body
// that is one JSON value, whose messages are all there.
func FuzzReadInput(f *testing.F) {
	for _, s := range []string{
		`{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":"hi"}]}`,
		`{"messages":[{"id":"u1","role":"user","content":"hi"}],"threadId":"t","runId":"r"}`,
		`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"i","status":"resolved"}],"resume":[]}`,
		`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"assistant","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]} {}`,
		`{"threadId":"t","messages":null}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	h, err := serve.New(context.Background(), serve.Config{DB: openDB(f, filepath.Join(f.TempDir(), "serve.db")), MaxBodyBytes: 1 << 10})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { h.Shutdown(context.Background()) })
	f.Fuzz(func(t *testing.T, body []byte) {
		n, status, code, err := serve.ReadInput(h, body)
		switch {
		case err != nil:
			t.Fatalf("got the error %v, want a refusal or the input", err)
		case status == 0:
			var v struct{ Messages []json.RawMessage }
			if !json.Valid(body) || json.Unmarshal(body, &v) != nil || len(v.Messages) < n {
				t.Fatalf("took %q, with %d messages", body, n)
			}
		case status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge:
			t.Fatalf("refused %q with %d %s, want 400 or 413", body, status, code)
		}
	})
}
