package serve

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolrun/toolrun/redact"
)

// Notify configures the webhook that tells a team when a call starts
// waiting for a person: a chat channel, a pager, a bot. Its zero value
// sends nothing.
//
// Each call that starts waiting is POSTed to URL once, as a JSON object
// (see [NotifyEvent]) with these headers:
//
//	Content-Type: application/json
//	X-Toolrun-Event: call.waiting
//	X-Toolrun-Delivery: the delivery's id, the same on each retry (deduplicate on it)
//	X-Toolrun-Signature: sha256=HEX, the hex HMAC-SHA256 of the body, keyed with Secret
//
// A receiver checks the signature by computing the HMAC of the body as
// received and comparing it in constant time (hmac.Equal in Go). A
// delivery that fails (no connection, a 5xx, 408 or 429, no answer
// within 10 seconds) is tried again after 1, 2, 4, 8… seconds (at most a
// minute; a 429's or 503's Retry-After, up to a minute, is honoured), up
// to MaxAttempts tries in all; any other status is the receiver's final
// word, and a redirect is not followed. Deliveries are not kept across a
// restart, and at most 1,024 wait to be sent: beyond that a delivery is
// dropped, and logged. The inbox, not the webhook, is the record of what
// waits.
type Notify struct {
	// URL receives the POSTs. Empty sends none.
	URL string
	// Secret keys the X-Toolrun-Signature header's HMAC. Empty sends
	// the deliveries unsigned, with no such header.
	Secret string
	// PublicURL is the server's address as the people notified reach it
	// (https://approvals.example.com, with any path prefix a proxy adds);
	// the deliveries' links start with it. Empty makes them paths
	// (/inbox#call=…), for a receiver that knows the server's address.
	PublicURL string
	// Input adds the call's input, redacted as the server's logs are, to
	// each delivery. False by default: a team's chat is read by more
	// people than may read the calls in the inbox.
	Input bool
	// MaxAttempts bounds the tries of one delivery. Zero means 6 (the
	// last about half a minute after the first).
	MaxAttempts int
	// Client sends the POSTs; its redirects are not followed either way.
	// Nil means a client of its own.
	Client *http.Client
}

// NotifyEvent is the body of a delivery of [Notify]: one call that started
// waiting for a person.
type NotifyEvent struct {
	// Event is "call.waiting".
	Event string `json:"event"`
	// Delivery identifies the delivery; its retries carry the same.
	Delivery string `json:"delivery"`
	// ID is the call's interrupt id, which the JSON API decides.
	ID         string `json:"id"`
	ThreadID   string `json:"threadId"`
	RunID      string `json:"runId"`
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	// Reason is why the call waits, as the policy that deferred it said.
	Reason string `json:"reason"`
	// Owner is the name of the token that runs the thread, and Tenant its
	// tenant, if the server has tenants.
	Owner     string    `json:"owner,omitempty"`
	Tenant    string    `json:"tenant,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Text is a line for a chat: the tool and the inbox's link to the
	// call ({"text": …} is what Slack's and Mattermost's incoming webhooks
	// read).
	Text string `json:"text"`
	// Links are where a person decides: the call in the inbox, the
	// thread's page, and the JSON API's decision route.
	Links NotifyLinks `json:"links"`
	// Input is the call's input, redacted, with [Notify].Input only.
	Input json.RawMessage `json:"input,omitempty"`
}

// NotifyLinks are the links of a [NotifyEvent].
type NotifyLinks struct {
	Inbox    string `json:"inbox"`
	Thread   string `json:"thread"`
	Decision string `json:"decision"`
}

// The headers of a delivery.
const (
	notifyEventHeader     = "X-Toolrun-Event"
	notifyDeliveryHeader  = "X-Toolrun-Delivery"
	notifySignatureHeader = "X-Toolrun-Signature"
)

const (
	// notifyQueue bounds the deliveries waiting to be sent.
	notifyQueue = 1024
	// notifyWorkers is how many deliveries are sent at once.
	notifyWorkers = 4
	// notifyAttemptTimeout bounds one try.
	notifyAttemptTimeout = 10 * time.Second
	// notifyMaxBackoff bounds the wait between two tries.
	notifyMaxBackoff = time.Minute
)

// notifier sends a Handler's deliveries, on notifyWorkers goroutines that
// end with the context given to start.
type notifier struct {
	cfg    Notify
	log    *slog.Logger
	client *http.Client
	queue  chan NotifyEvent
}

// newNotifier returns the notifier of cfg, or nil if cfg.URL is empty.
func newNotifier(cfg Notify, log *slog.Logger) *notifier {
	if cfg.URL == "" {
		return nil
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 6
	}
	c := &http.Client{}
	if cfg.Client != nil {
		*c = *cfg.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	return &notifier{cfg: cfg, log: log, client: c, queue: make(chan NotifyEvent, notifyQueue)}
}

// start runs the workers until ctx ends.
func (n *notifier) start(ctx context.Context) {
	for range notifyWorkers {
		go func() {
			for {
				select {
				case ev := <-n.queue:
					n.deliver(ctx, ev)
				case <-ctx.Done():
					return
				}
			}
		}()
	}
}

// event returns the delivery of it, a call of the thread owner runs in
// tenant.
func (n *notifier) event(it *interrupt, owner, tenant string) NotifyEvent {
	base := n.cfg.PublicURL
	ev := NotifyEvent{
		Event: "call.waiting", Delivery: newID("dlv_"),
		ID: it.ID, ThreadID: it.Thread, RunID: it.Run, ToolCallID: it.ToolCallID, ToolName: it.ToolName, Reason: it.Reason,
		Owner: owner, Tenant: tenant, CreatedAt: it.CreatedAt.UTC(), ExpiresAt: it.ExpiresAt.UTC(),
		Links: NotifyLinks{
			Inbox:    base + "/inbox#call=" + url.QueryEscape(it.ID),
			Thread:   base + "/inbox/runs/" + url.PathEscape(it.Thread),
			Decision: base + "/api/interrupts/" + url.PathEscape(it.ID) + "/decision",
		},
	}
	// The tool's name, which the Messages API restricts to letters,
	// digits, _ and -, and a link whose every character is escaped: no
	// text of the model's or the client's reaches a chat's markup.
	ev.Text = fmt.Sprintf("%s waits for a person's decision: %s", it.ToolName, ev.Links.Inbox)
	if n.cfg.Input {
		ev.Input = json.RawMessage(redact.String(string(orEmpty(it.Input))))
	}
	return ev
}

// enqueue queues ev, or drops it, and logs so, if notifyQueue deliveries
// wait already.
func (n *notifier) enqueue(ev NotifyEvent) {
	select {
	case n.queue <- ev:
	default:
		n.log.Warn("serve: a call waits, and its notification was dropped: too many are waiting to be sent", "interrupt", ev.ID, "thread", ev.ThreadID, "url", redact.String(n.cfg.URL))
	}
}

// errPermanent marks a delivery's failure that a retry would not mend.
var errPermanent = errors.New("the receiver refused it")

// deliver sends ev, trying again as [Notify] says, until it is taken, is
// refused for good, or ctx ends.
func (n *notifier) deliver(ctx context.Context, ev NotifyEvent) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		wait, err := n.post(ctx, ev, body)
		if err == nil {
			n.log.Debug("serve: notified", "interrupt", ev.ID, "delivery", ev.Delivery, "attempt", attempt)
			return nil
		}
		if errors.Is(err, errPermanent) || attempt >= n.cfg.MaxAttempts || ctx.Err() != nil {
			n.log.Error("serve: a notification was not delivered", "interrupt", ev.ID, "thread", ev.ThreadID, "delivery", ev.Delivery, "attempts", attempt, "err", err)
			return err
		}
		if wait <= 0 {
			wait = min(time.Second<<(attempt-1), notifyMaxBackoff)
		}
		n.log.Warn("serve: a notification failed; trying again", "interrupt", ev.ID, "delivery", ev.Delivery, "attempt", attempt, "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			n.log.Error("serve: a notification was not delivered: the server is shutting down", "interrupt", ev.ID, "delivery", ev.Delivery, "attempts", attempt)
			return ctx.Err()
		}
	}
}

// post makes one try at sending body; it returns nil once the receiver
// took it (2xx), or the failure and the wait the receiver asked for, if
// it did.
func (n *notifier) post(ctx context.Context, ev NotifyEvent, body []byte) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, notifyAttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errPermanent, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolrun-serve")
	req.Header.Set(notifyEventHeader, ev.Event)
	req.Header.Set(notifyDeliveryHeader, ev.Delivery)
	if n.cfg.Secret != "" {
		req.Header.Set(notifySignatureHeader, signature(n.cfg.Secret, body))
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return 0, errors.New(redact.String(err.Error()))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return 0, nil
	case s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable:
		return retryAfter(resp.Header.Get("Retry-After")), fmt.Errorf("the receiver answered %s", resp.Status)
	case s >= 500 || s == http.StatusRequestTimeout:
		return 0, fmt.Errorf("the receiver answered %s", resp.Status)
	default:
		return 0, fmt.Errorf("%w: it answered %s", errPermanent, resp.Status)
	}
}

// retryAfter reads a Retry-After header in seconds, up to
// notifyMaxBackoff; 0 if there is none.
func retryAfter(v string) time.Duration {
	s, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || s <= 0 {
		return 0
	}
	return min(time.Duration(s)*time.Second, notifyMaxBackoff)
}

// signature returns the X-Toolrun-Signature of body keyed with secret.
func signature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// callWaiting is called once a call has started waiting for a person
// (its interrupt recorded): it tells the inbox's pages and the webhook.
func (h *Handler) callWaiting(ctx context.Context, it *interrupt) {
	if it == nil || it.Kind != kindApproval {
		return
	}
	h.inbox.notify()
	n := h.inbox.notifier
	if n == nil {
		return
	}
	owner, _ := h.threadOwner(ctx, it.Thread)
	tenant, _ := h.tenantOf(owner)
	n.enqueue(n.event(it, owner, tenant))
}
