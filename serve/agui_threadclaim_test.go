package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// signalHandler is a slog.Handler that closes ch at the first record
// whose message is msg: how a test learns that the server reached a
// point it logs, without waiting for a time.
type signalHandler struct {
	msg  string
	ch   chan struct{}
	once *sync.Once
}

func (s signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (s signalHandler) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s signalHandler) WithGroup(string) slog.Handler            { return s }
func (s signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == s.msg {
		s.once.Do(func() { close(s.ch) })
	}
	return nil
}

// held holds a scripted model's reply back: reached is closed when the
// reply is asked for, and the reply waits until release is closed, so
// that a run's turn is in flight for as long as the test wants.
type held struct {
	reached, release chan struct{}
	reachOnce, once  sync.Once
}

func newHeld() *held { return &held{reached: make(chan struct{}), release: make(chan struct{})} }

func (hm *held) hold() {
	hm.reachOnce.Do(func() { close(hm.reached) })
	<-hm.release
}

func (hm *held) free() { hm.once.Do(func() { close(hm.release) }) }

// postResult is what a POST of a run came back with.
type postResult struct {
	status int
	evs    []map[string]any
	body   string
	err    error
}

// postAsync posts in as post does, from a goroutine of its own.
func postAsync(t *testing.T, url string, in any) <-chan postResult {
	out := make(chan postResult, 1)
	b, _ := json.Marshal(in)
	go func() {
		resp, err := http.Post(url, "application/json", bytes.NewReader(b))
		if err != nil {
			out <- postResult{err: err}
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			out <- postResult{status: resp.StatusCode, body: string(body)}
			return
		}
		var evs []map[string]any
		for _, line := range strings.Split(readAll(resp.Body), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var e map[string]any
				if err := json.Unmarshal([]byte(data), &e); err != nil {
					out <- postResult{err: err}
					return
				}
				evs = append(evs, e)
			}
		}
		out <- postResult{status: resp.StatusCode, evs: evs}
	}()
	return out
}

func readAll(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}

// A chat whose interrupt was decided over the JSON API sends its next
// message at once, while the run the decision started still takes its
// turn: the message waits for that run and is taken, rather than refused
// with 409 thread_busy (CopilotKit does not retry it). A run a client
// started is not waited for: a second run on its thread is refused at
// once.
func TestNextMessageWaitsForTheRunADecisionStarted(t *testing.T) {
	// The second reply of each scene, the one after the approved call,
	// is held.
	holds := map[string]*held{"decided": newHeld(), "resumed": newHeld()}
	script := func(scene string) []toolruntest.Reply {
		switch scene {
		case "more":
			return []toolruntest.Reply{toolruntest.Message(toolruntest.Text("more done"))}
		default:
			return []toolruntest.Reply{toolruntest.Message(toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 10})), toolruntest.Message(toolruntest.Text("paid"))}
		}
	}
	model := toolruntest.New(t, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		scene, k := "", 0
		for _, m := range r.Conversation {
			if m.Role == "assistant" {
				k++
				continue
			}
			for _, b := range m.Content {
				if b.Type == "text" {
					scene, k = b.Text, 0
				}
			}
		}
		if hm := holds[scene]; hm != nil && k == 1 {
			hm.hold()
		}
		replies := script(scene)
		if k >= len(replies) {
			return toolruntest.Message(toolruntest.Text("script: no reply"))
		}
		return replies[k]
	}})
	waiting := make(chan struct{})
	c := &counter{}
	h, err := serve.New(context.Background(), serve.Config{
		Client:  model.Client(),
		Params:  anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024},
		Tools:   []toolrun.Tool{c.tool(t, "pay")},
		Options: toolrun.Options{Policy: policy.RequireApproval("payments need a person")},
		DB:      openDB(t, filepath.Join(t.TempDir(), "serve.db")),
		Logger:  slog.New(signalHandler{msg: "serve: a run waits for the run a decision started on its thread", ch: waiting, once: &sync.Once{}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Shutdown(context.Background())
		srv.Close()
	})
	t.Cleanup(func() { // first: a failed test leaves no run held
		for _, hm := range holds {
			hm.free()
		}
	})

	t.Run("decided over the JSON API: waited for", func(t *testing.T) {
		u1 := user("u1", "decided")
		_, evs, body := post(t, srv.URL, input("t1", "r1", []map[string]any{u1}, nil))
		if evs == nil {
			t.Fatal(body)
		}
		id := interrupts(t, evs)[0]["id"].(string)
		status, body := postJSON(t, srv.URL+"/api/interrupts/"+id+"/decision", map[string]any{"decision": "approve"}, "POST")
		var dec struct{ NextRun string }
		json.Unmarshal([]byte(body), &dec)
		if status != 200 || dec.NextRun == "" {
			t.Fatalf("deciding: %d %s", status, body)
		}
		<-holds["decided"].reached
		// The decided run is in flight, its model request held: the
		// chat's next message comes now.
		next := postAsync(t, srv.URL, input("t1", "r3", []map[string]any{u1, user("u2", "more")}, nil))
		select {
		case <-waiting:
		case got := <-next:
			t.Fatalf("the next message while the decided run is in flight: %d %s %v, want it to wait for that run", got.status, got.body, got.err)
		}
		holds["decided"].free()
		got := <-next
		if got.err != nil || got.status != 200 {
			t.Fatalf("the next message: %d %s %v, want 200 once the decided run ended", got.status, got.body, got.err)
		}
		if r := last(got.evs)["result"]; r != "more done" {
			t.Errorf("the next message's run: result %v (events %v), want more done", r, types(got.evs))
		}
	})

	t.Run("a client's run: refused at once", func(t *testing.T) {
		u1 := user("u1", "resumed")
		_, evs, body := post(t, srv.URL, input("t2", "t2r1", []map[string]any{u1}, nil))
		if evs == nil {
			t.Fatal(body)
		}
		id := interrupts(t, evs)[0]["id"].(string)
		resumed := postAsync(t, srv.URL, input("t2", "t2r2", []map[string]any{u1}, map[string]any{"resume": []any{resume(id, map[string]any{"decision": "approve"})}}))
		<-holds["resumed"].reached
		status, _, body := post(t, srv.URL, input("t2", "t2r3", []map[string]any{u1, user("u2", "more")}, nil))
		if status != http.StatusConflict || !strings.Contains(body, "thread_busy") || !strings.Contains(body, "t2r2") {
			t.Errorf("a message while the client's own run is in flight: %d %s, want 409 thread_busy naming run t2r2", status, body)
		}
		holds["resumed"].free()
		if got := <-resumed; got.status != 200 || last(got.evs)["result"] != "paid" {
			t.Errorf("the resumed run: %d %s %v", got.status, got.body, got.err)
		}
	})
}
