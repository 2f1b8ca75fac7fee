package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/tidwall/gjson"
)

// This file sends a run's requests on a message thread (on unless
// Options.NoThread),
// with the runner's own incremental encoding (encode.go) rather than the
// SDK's BetaMessageThread. The SDK's thread re-encodes its whole stored
// history every turn to see whether the caller edited it, which costs more
// client CPU than a thread saves in bytes (BENCHMARKS.md has the profile).
// The runner knows without encoding: a message is known by its pointer
// (encode.go), so the history the API holds is a list of keys, and an
// edit shows as a key that moved. A thread turn so costs O(new messages)
// in bytes and encoding, and O(history) only in comparing pointers.
//
// The protocol is the one the SDK's thread speaks (betamessagethread.go):
// a request with thread {"type":"create"} carries the whole history, the
// system prompt and the tools, and the API keeps it with the reply; a
// request with thread {"type":"continue","previous_message_id": reply's id}
// carries only the messages after that reply, and neither system nor
// tools, which stay the thread's. A refused turn, a turn a fallback model
// wrote, a reply the runner did not keep as it came (sanitized, retried,
// edited) and any failed request make the next request create a new
// thread. An API that cannot take a thread request
// (thread_unsupported_request) gets the turn again without a thread, and
// every later one: the fallback to the whole history.

// threadMode is what the next request of a run's thread does.
type threadMode uint8

const (
	threadCreate   threadMode = iota // create a new thread with the whole history
	threadContinue                   // continue from prevID, sending what follows held
	threadNone                       // no thread, for good: the API cannot take one
)

// threadLink is what the API holds of a run's history on its thread. It
// lives in the wire cache: a stopped run drops it, and a resumed run starts
// with none, so either starts a new thread.
//
// The thread is known by content: what the API holds is the request JSON
// of each of its messages, and a request continues the thread only if its
// own messages begin with exactly those, and its model, system prompt and
// other params (head) and its tools are the thread's. A message the cache
// knows (encode.go) has the very bytes the thread holds, so the comparison
// costs a pointer per message.
type threadLink struct {
	mode   threadMode
	prevID string // the reply the next request continues from
	// held are the encodings of the history's messages the API holds, the
	// reply last (replyOK says whether it is known).
	held    [][]byte
	replyOK bool
	head    string     // the params' JSON (model, system prompt, ...) the thread was created with
	tools   *toolsJSON // the tool list the thread was created with, nil for none
	// sent are the encodings of the messages of the request in flight;
	// created whether it created the thread, with head and tools as below.
	sent        [][]byte
	sentHead    string
	sentTools   *toolsJSON
	sentCreated bool
	// worked says that a reply arrived on a thread of this link, so that
	// the platform takes threads; until then, a 400 to a create is tried
	// again without the thread (probe).
	worked bool
	// probe is the 400 the first thread request got, while the same
	// request goes without a thread to see whether the thread was why.
	probe error
	// recovered says that a recovery was logged (threadRecovered).
	recovered bool
}

// withField returns the JSON object obj with the member key: value added.
func withField(obj []byte, key string, value []byte) []byte {
	b := make([]byte, 0, len(obj)+len(key)+len(value)+4)
	b = append(b, obj[:len(obj)-1]...)
	if len(obj) > 2 {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	b = append(b, value...)
	return append(b, '}')
}

// sameJSON reports whether a and b are the same encoding, at once when
// they are the same bytes.
func sameJSON(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || string(a) == string(b)
}

// platformWithoutThreads reports whether model names a model of a platform
// without message threads: Bedrock ("anthropic.…" or an ARN) or Vertex
// ("…@version").
func platformWithoutThreads(model anthropic.Model) bool {
	m := string(model)
	return strings.HasPrefix(m, "anthropic.") || strings.HasPrefix(m, "arn:") || strings.Contains(m, "@")
}

// threaded reports whether the run's next request goes on a thread, as far
// as the options and what the run learned of the API say.
func (r *Runner) threaded() bool {
	return !r.opts.NoThread && !r.threadOff
}

// threadBetas are params.Betas with the message-threads beta.
func threadBetas(b []anthropic.AnthropicBeta) []anthropic.AnthropicBeta {
	if slices.Contains(b, anthropic.AnthropicBetaMessageThreads2026_08_12) {
		return b
	}
	return append(slices.Clip(b), anthropic.AnthropicBetaMessageThreads2026_08_12)
}

// threadRequest returns the params and options of the next request of
// params on the run's thread, its body encoded with only what the thread
// does not hold; or false when the client must marshal params itself
// (overrides, extra fields), without a thread.
func (r *Runner) threadRequest(params *anthropic.BetaMessageNewParams, stream bool, opts []option.RequestOption) (anthropic.BetaMessageNewParams, []option.RequestOption, bool) {
	w := r.wireCache()
	l := &w.link
	if l.mode != threadNone && platformWithoutThreads(params.Model) {
		l.mode = threadNone
	}
	if l.mode == threadNone || l.probe != nil {
		body, ok := w.body(params, stream)
		if !ok {
			l.probe = nil
			return anthropic.BetaMessageNewParams{}, nil, false
		}
		p, o := wireRequest(params, body, opts)
		return p, o, true
	}
	// The params without system prompt and thread, encoded once; the
	// system prompt on its own: the thread's fingerprint is both, and a
	// continue leaves the system prompt out.
	bare := *params
	bare.Thread, bare.System = anthropic.BetaMessageThreadParamUnion{}, nil
	base, ok := headOf(&bare)
	if !ok {
		return anthropic.BetaMessageNewParams{}, nil, false
	}
	var system []byte
	if params.System != nil {
		var err error
		if system, err = json.Marshal(params.System); err != nil {
			return anthropic.BetaMessageNewParams{}, nil, false
		}
	}
	head := string(base) + "\x00" + string(system)
	var tools *toolsJSON
	if len(params.Tools) > 0 {
		if _, err := w.toolsBody(params.Tools); err != nil {
			return anthropic.BetaMessageNewParams{}, nil, false
		}
		tools = w.tools
	}
	encs, ok := w.encode(params.Messages)
	if !ok {
		return anthropic.BetaMessageNewParams{}, nil, false
	}
	l.sent = append(l.sent[:0], encs...)
	// After a pause_turn the history ends with the reply the thread holds:
	// the continue then sends no message (messages: []), and the API goes
	// on with the paused turn, as the official runner's thread does.
	cont := l.mode == threadContinue && l.replyOK && head == l.head && sameTools(tools, l.tools) &&
		len(l.held) <= len(encs) && slices.EqualFunc(l.held, encs[:len(l.held)], sameJSON)
	var bodyHead []byte
	from := 0
	if cont {
		id, _ := json.Marshal(l.prevID) // a string always encodes
		bodyHead = withField(base, "thread", []byte(`{"type":"continue","previous_message_id":`+string(id)+`}`))
		from = len(l.held)
	} else {
		bodyHead = withField(base, "thread", []byte(`{"type":"create"}`))
		if system != nil {
			bodyHead = withField(bodyHead, "system", system)
		}
	}
	l.sentCreated, l.sentHead, l.sentTools = !cont, head, tools
	b, ok := w.assemble(params, bodyHead, stream, encs, from, cont)
	if !ok {
		return anthropic.BetaMessageNewParams{}, nil, false
	}
	// Until a reply arrives whole, nothing is known of what the API holds.
	l.mode = threadCreate
	p, o := wireRequest(params, b, opts)
	p.Betas = threadBetas(p.Betas)
	return p, o, true
}

// sameTools reports whether the tools of a request (encoded as t) are the
// thread's (created with c).
func sameTools(t, c *toolsJSON) bool {
	if t == nil || c == nil {
		return t == c // nil: a request without tools
	}
	return t == c || sameJSON(t.json, c.json)
}

// threadReplied records m, the reply to the request in flight, valid and
// whole: the next request continues from it, unless the API did not keep
// it on the thread.
func (r *Runner) threadReplied(m *anthropic.BetaMessage) {
	if !r.threaded() || r.wire == nil {
		return
	}
	l := &r.wire.link
	if l.mode == threadNone || l.probe != nil || m.StopReason == anthropic.BetaStopReasonRefusal {
		return
	}
	for _, it := range m.Usage.Iterations {
		if it.Type == "fallback_message" {
			return // a thread keeps one model: the API did not store this turn
		}
	}
	if l.sentCreated {
		l.head, l.tools = l.sentHead, l.sentTools
	}
	l.held = append(l.held[:0], l.sent...)
	l.mode, l.prevID, l.replyOK, l.worked = threadContinue, m.ID, false, true
}

// threadReply records the message the runner will put in the history for
// the reply recorded last (p, its pending turn's), so that the next request
// can tell that the history holds it as the API does.
func (r *Runner) threadReply(p *turnState) {
	if !r.threaded() || r.wire == nil {
		return
	}
	l := &r.wire.link
	if l.mode != threadContinue || len(l.held) != len(l.sent) {
		return
	}
	// A reply that appendTurn sanitizes goes into the history as another
	// message, whose JSON is not this one: the next request sees a history
	// that is not the thread's, and creates a new thread.
	if enc, ok := r.wire.learn(&p.Message); ok {
		l.held = append(l.held, enc)
		l.replyOK = true
	}
}

// threadRetry reports whether err is the API's refusal of the thread field
// that the run's thread now adjusts for, so that the request is to be sent
// again: a thread the API no longer holds is created anew, and a request
// the API cannot take on a thread goes without one from then on.
func (r *Runner) threadRetry(err error) bool {
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || r.wire == nil {
		return false
	}
	l := &r.wire.link
	switch gjson.Get(apiErr.RawJSON(), "error.details.error_code").String() {
	case "thread_not_found", "thread_already_continued", "thread_continue_in_flight":
		return !l.sentCreated // mode is threadCreate already
	case "thread_unsupported_request":
		l.mode = threadNone
		return true
	}
	if apiErr.StatusCode == http.StatusBadRequest && l.sentCreated && !l.worked && l.probe == nil &&
		gjson.Get(apiErr.RawJSON(), "error.type").String() == "invalid_request_error" {
		l.probe = err // the next attempt goes without a thread
		return true
	}
	return false
}

// threadRecovered logs, at Info and once per run, that the API refused the
// run's thread (err: it no longer holds it, or cannot take the request on
// one) and that the request goes again: the run loses nothing, but an
// operator who sees the bytes sent grow should be able to tell why.
func (r *Runner) threadRecovered(ctx context.Context, err error) {
	l := &r.wireCache().link
	if l.recovered {
		return
	}
	l.recovered = true
	var apiErr *anthropic.Error
	errors.As(err, &apiErr)
	code := gjson.Get(apiErr.RawJSON(), "error.details.error_code").String()
	r.log.InfoContext(ctx, "toolrun: the API refused the run's message thread; the request goes again with the whole history (logged once per run)",
		"error_code", code, "error", err.Error())
}

// threadProbed settles a request sent without a thread because its thread
// create got a 400 (threadRetry): if it succeeded (err is nil) the thread
// was the problem, and the rest of the run goes without one; if not, the
// 400 was about something else, and a later request may create a thread.
func (r *Runner) threadProbed(ctx context.Context, err error) {
	l := &r.wireCache().link
	if l.probe == nil {
		return
	}
	first := l.probe
	l.probe = nil
	if err != nil {
		l.sentCreated = false // this request had no thread: no probe again
		return
	}
	l.mode = threadNone
	if !r.threadOff {
		r.threadOff = true
		r.log.WarnContext(ctx, "toolrun: the API refused a message thread; the run goes on without one, sending the whole history (set Options.NoThread for this platform)",
			"error", first.Error())
	}
}

// messageStream is what a streamed response is read from.
type messageStream interface {
	Next() bool
	Current() anthropic.BetaRawMessageStreamEventUnion
	Err() error
	Close() error
}

// openStream starts a streamed request, on the run's thread unless
// Options.NoThread or the API has none.
func (r *Runner) openStream(ctx context.Context, params *anthropic.BetaMessageNewParams, opts ...option.RequestOption) messageStream {
	if r.threaded() {
		s, ok, _ := onThread(r, ctx, params, true, opts,
			func(p anthropic.BetaMessageNewParams, o []option.RequestOption) (messageStream, error) {
				s := r.messages.NewStreaming(ctx, p, o...)
				return s, s.Err()
			},
			func(s messageStream) { s.Close() })
		if ok {
			return s
		}
	}
	// As in Runner.send: the body is encoded incrementally (encode.go).
	if body, ok := r.wireCache().body(params, true); ok {
		p, opts := wireRequest(params, body, opts)
		return r.messages.NewStreaming(ctx, p, opts...)
	}
	return r.messages.NewStreaming(ctx, *params, opts...)
}

// sendThread sends a request on the run's thread, as openStream does a
// streamed one; false when params cannot go on one.
func (r *Runner) sendThread(ctx context.Context, params *anthropic.BetaMessageNewParams, opts []option.RequestOption) (*anthropic.BetaMessage, bool, error) {
	return onThread(r, ctx, params, false, opts,
		func(p anthropic.BetaMessageNewParams, o []option.RequestOption) (*anthropic.BetaMessage, error) {
			return r.messages.New(ctx, p, o...)
		},
		func(*anthropic.BetaMessage) {})
}

// threadAttempts bounds the sends of one request on a thread: after a
// refusal the thread adjusts for ([Runner.threadRetry]: a thread the API
// no longer holds, a thread field it cannot take), it is sent again.
const threadAttempts = 3

// onThread sends a request on the run's thread with send, and again after
// a refusal the thread adjusts for, up to threadAttempts sends; discard
// releases a refused attempt's response. ok is false when params cannot
// go on a thread: the caller sends the whole history.
func onThread[T any](r *Runner, ctx context.Context, params *anthropic.BetaMessageNewParams, stream bool, opts []option.RequestOption,
	send func(anthropic.BetaMessageNewParams, []option.RequestOption) (T, error), discard func(T)) (res T, ok bool, err error) {
	for attempt := 1; ; attempt++ {
		p, o, ok := r.threadRequest(params, stream, opts)
		if !ok {
			return res, false, nil
		}
		res, err = send(p, o)
		r.threadProbed(ctx, err)
		if err == nil || attempt == threadAttempts || !r.threadRetry(err) {
			return res, true, err
		}
		r.threadRecovered(ctx, err)
		discard(res)
	}
}
