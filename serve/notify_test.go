package serve_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// delivery is one POST a webhook receiver got.
type delivery struct {
	at     time.Time
	path   string
	header http.Header
	body   []byte
}

// receiver is a webhook receiver that answers each POST with the next of
// its answers (the last one over and over) and keeps what it got.
type receiver struct {
	mu      sync.Mutex
	answers []func(http.ResponseWriter)
	got     []delivery
	arrived chan delivery
}

func newReceiver(answers ...func(http.ResponseWriter)) *receiver {
	return &receiver{answers: answers, arrived: make(chan delivery, 16)}
}

func status(code int, header ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
	}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d := delivery{at: time.Now(), path: r.URL.Path, header: r.Header.Clone(), body: body}
	rc.mu.Lock()
	answer := rc.answers[min(len(rc.got), len(rc.answers)-1)]
	rc.got = append(rc.got, d)
	rc.mu.Unlock()
	answer(w)
	select {
	case rc.arrived <- d:
	default:
	}
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// signed reports whether d carries the signature of its body with secret.
func signed(d delivery, secret string) bool {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(d.body)
	want := "sha256=" + hex.EncodeToString(m.Sum(nil))
	return hmac.Equal([]byte(d.header.Get("X-Toolrun-Signature")), []byte(want))
}

// TestNotifyWhenACallWaits runs a thread to a call that waits for a
// person, with a webhook receiver on a real HTTP server: it gets one
// signed POST naming the call, its thread, its tool and the links to
// decide it, and no input unless asked for.
func TestNotifyWhenACallWaits(t *testing.T) {
	const secret = "webhook-secret-for-tests"
	tests := []struct {
		name      string
		input     bool
		wantInput string
	}{
		{"without the input", false, ""},
		{"with the input", true, `{"amount":5,"to":"acme"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := newReceiver(status(http.StatusNoContent))
			srv := httptest.NewServer(rc)
			defer srv.Close()
			e := newInboxEnv(t, map[string][]toolruntest.Reply{"pay 5": payScene(5)})
			e.cfg.Notify = serve.Notify{URL: srv.URL + "/hook", Secret: secret, PublicURL: "https://approvals.example.com/", Input: tt.input}
			e.restart(t)
			id := e.start(t, "thread/5?x#y", "pay 5")[0]
			var d delivery
			select {
			case d = <-rc.arrived:
			case <-t.Context().Done():
				t.Fatal("no delivery arrived")
			}
			if d.path != "/hook" || d.header.Get("Content-Type") != "application/json" || d.header.Get("X-Toolrun-Event") != "call.waiting" {
				t.Errorf("the delivery: path %s, headers %v", d.path, d.header)
			}
			if !signed(d, secret) {
				t.Errorf("the signature %q is not the HMAC-SHA256 of the body", d.header.Get("X-Toolrun-Signature"))
			}
			var ev serve.NotifyEvent
			if err := json.Unmarshal(d.body, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Delivery == "" || ev.Delivery != d.header.Get("X-Toolrun-Delivery") {
				t.Errorf("the delivery id is %q in the body and %q in the header", ev.Delivery, d.header.Get("X-Toolrun-Delivery"))
			}
			got := map[string]string{"event": ev.Event, "id": ev.ID, "thread": ev.ThreadID, "tool": ev.ToolName, "call": ev.ToolCallID, "reason": ev.Reason, "owner": ev.Owner,
				"inbox": ev.Links.Inbox, "page": ev.Links.Thread, "decision": ev.Links.Decision, "text": ev.Text, "input": string(ev.Input)}
			want := map[string]string{"event": "call.waiting", "id": id, "thread": "thread/5?x#y", "tool": "pay", "call": "toolu_pay5", "reason": "payments need a person", "owner": "client",
				"inbox":    "https://approvals.example.com/inbox#call=" + id,
				"page":     "https://approvals.example.com/inbox/runs/thread%2F5%3Fx%23y",
				"decision": "https://approvals.example.com/api/interrupts/" + id + "/decision",
				"text":     "pay waits for a person's decision: https://approvals.example.com/inbox#call=" + id,
				"input":    tt.wantInput}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the delivery (-want +got):\n%s", diff)
			}
			if !tt.input && bytes.Contains(d.body, []byte("acme")) {
				t.Errorf("the delivery carries the input: %s", d.body)
			}
			// The decision the link names takes the call.
			if s, body := e.bearer(t, http.MethodPost, strings.TrimPrefix(ev.Links.Decision, "https://approvals.example.com"), aliceToken, `{"decision":"deny","reason":"no"}`); s != http.StatusOK {
				t.Errorf("deciding by the link: %d %s", s, body)
			}
			if n := len(rc.deliveries()); n != 1 {
				t.Errorf("%d deliveries, want 1", n)
			}
		})
	}
}

// pipeListener is an in-memory listener for a server in a synctest
// bubble, whose clock waits on its connections as on any channel.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestNotifyRetries sends one delivery to receivers that fail in each
// way, on synctest's clock: failures worth a retry are retried after 1,
// 2, 4… seconds (or the Retry-After asked for) up to MaxAttempts tries,
// each with the same delivery id and a valid signature; a refusal or a
// redirect ends the delivery at once.
func TestNotifyRetries(t *testing.T) {
	const secret = "s3cret"
	tests := []struct {
		name    string
		answers []func(http.ResponseWriter)
		// wantAt are the tries' times after the first.
		wantAt  []time.Duration
		wantErr bool
		wantLog string
	}{
		{"taken at once", []func(http.ResponseWriter){status(200)}, []time.Duration{0}, false, ""},
		{"taken after two failures", []func(http.ResponseWriter){status(503), status(500), status(202)}, []time.Duration{0, time.Second, 3 * time.Second}, false, "trying again"},
		{"a 429's Retry-After", []func(http.ResponseWriter){status(429, "Retry-After", "7"), status(200)}, []time.Duration{0, 7 * time.Second}, false, "trying again"},
		{"a Retry-After past a minute waits a minute", []func(http.ResponseWriter){status(503, "Retry-After", "3600"), status(200)}, []time.Duration{0, time.Minute}, false, "trying again"},
		{"a timeout is retried", []func(http.ResponseWriter){status(408), status(200)}, []time.Duration{0, time.Second}, false, "trying again"},
		{"bounded", []func(http.ResponseWriter){status(502)}, []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second}, true, "was not delivered"},
		{"a refusal is final", []func(http.ResponseWriter){status(400), status(200)}, []time.Duration{0}, true, "was not delivered"},
		{"a redirect is not followed", []func(http.ResponseWriter){status(302, "Location", "/elsewhere"), status(200)}, []time.Duration{0}, true, "302"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rc := newReceiver(tt.answers...)
				ln := newPipeListener()
				srv := httptest.NewUnstartedServer(rc)
				srv.Listener.Close()
				srv.Listener = ln
				srv.Start()
				tr := &http.Transport{DialContext: ln.dial}
				defer func() {
					tr.CloseIdleConnections()
					srv.Close()
				}()
				var logs bytes.Buffer
				log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				start := time.Now()
				err := serve.DeliverNotification(t.Context(), serve.Notify{URL: "http://hooks.test/hook", Secret: secret, MaxAttempts: 4, Client: &http.Client{Transport: tr}}, log, "int_1", "thread-1", "pay")
				if (err != nil) != tt.wantErr {
					t.Errorf("the delivery ended with %v, want an error: %v", err, tt.wantErr)
				}
				ds := rc.deliveries()
				var at []time.Duration
				for _, d := range ds {
					at = append(at, d.at.Sub(start))
					if d.path != "/hook" {
						t.Errorf("a try went to %s", d.path)
					}
					if !signed(d, secret) {
						t.Errorf("a try's signature %q is not its body's", d.header.Get("X-Toolrun-Signature"))
					}
					if id := d.header.Get("X-Toolrun-Delivery"); id != ds[0].header.Get("X-Toolrun-Delivery") || !bytes.Equal(d.body, ds[0].body) {
						t.Errorf("a retry is delivery %s with body %s, want the first's, %s with %s", id, d.body, ds[0].header.Get("X-Toolrun-Delivery"), ds[0].body)
					}
				}
				if diff := cmp.Diff(tt.wantAt, at); diff != "" {
					t.Errorf("the tries' times (-want +got):\n%s", diff)
				}
				if !strings.Contains(logs.String(), tt.wantLog) {
					t.Errorf("the log says %q, want %q in it", logs.String(), tt.wantLog)
				}
			})
		})
	}
}
