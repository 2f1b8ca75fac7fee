package toolruntest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// TestAPIKey is the API key that the clients of [Server.Client] send; the
// SDK sends it in the Authorization header, as a bearer token. It is not a
// real key, so a test can look for it where it must never appear, such as in
// logs or errors.
const TestAPIKey = "sk-ant-toolruntest-0000"

// MaxRequestBytes is the largest request body the server accepts, as the
// Messages API's 32 MB limit: a larger POST /v1/messages is refused with
// HTTP 413 and a request_too_large error, before it is decoded.
const MaxRequestBytes = 32_000_000

// ErrScriptEnded is recorded in [Server.Errors] for each request that a
// scripted server (one whose [Options].Func is nil) receives after it has
// sent every reply of its script.
var ErrScriptEnded = errors.New("toolruntest: script ran out of replies")

// Request is one request as the server received it.
type Request struct {
	Header http.Header
	Body   []byte // the raw JSON body
	// Params is the decoded body. For a request that failed validation it
	// holds whatever was decoded before the problem was found.
	Params Params
	Stream bool
	// Attempt is 1 the first time the server sees this exact body, and 2 or
	// more when it sees the same bytes again, as it does when the SDK retries
	// a request. Two runs that send the same conversation also count as
	// attempts of one body.
	Attempt int
	// Status is the HTTP status the server answered with: 200 for a message,
	// even one that a fault cut short. It is 0 while the server has not yet
	// decided, and stays 0 if the client went away before it answered.
	Status int
	// Conversation is the whole conversation the request stands for: for a
	// request that continues a message thread, the thread's history
	// followed by Params.Messages; for any other, Params.Messages.
	Conversation []MessageParam
	// System and Tools are the system prompt and the tool list the request
	// stands for, as JSON: for a request that continues a message thread,
	// the thread's; for any other, the request's own. Each is nil when
	// there is none.
	System, Tools json.RawMessage
	// Usage is the usage the server billed the request: that of the message
	// it answered with, or for a compaction, that of its iterations. It is
	// nil for a request answered with an error.
	Usage *Usage
	// DroppedThinking holds the paths (messages.i.content.j) of the
	// thinking blocks the server left out of the request, with
	// [Options].BindThinking set and thinking.block_binding's
	// prefix_mismatch_behavior "drop_block", because what came before
	// them had changed since the server sent them.
	DroppedThinking []string

	// conversation is the raw conversation of a request that continues a
	// thread, or nil; system and tools are the thread's.
	conversation, system, tools json.RawMessage
}

// seenBody counts the requests with one body.
type seenBody struct {
	body []byte
	n    int
}

// Server is a fake Messages API listening on loopback, in the manner of
// [httptest.Server]. Its methods are safe for concurrent use, so one server
// can serve parallel tests and concurrent runs.
type Server struct {
	// URL is the base URL of the server, such as http://127.0.0.1:1234, for
	// option.WithBaseURL.
	URL string

	ts      *httptest.Server
	client  *http.Client         // shared by the clients of Client, for connection reuse
	opts    Options              // with its defaults filled in
	respond func(*Request) Reply // nil for a scripted server
	closing chan struct{}        // closed when Close starts
	close   sync.Once            // guards closing
	serving sync.WaitGroup       // counts running handlers, which a dropped connection no longer ties to the httptest.Server
	seed    maphash.Seed         // hashes bodies for Attempt
	aux     atomic.Int64         // numbers the requests that are not recorded
	script  []Reply              // the replies of a scripted server

	mu       sync.Mutex // guards next, requests, bodies, errs, cache, threads, thinking, usage and the records' Status, Usage, DroppedThinking and conversation
	next     int        // index of the next reply of script
	requests []*Request
	bodies   map[uint64][]seenBody // by the hash of the body
	errs     []error
	cache    promptCache
	writes   int                    // counts cache writes, to prune expired entries now and then
	threads  map[string]*threadTurn // by the id of the reply they end with
	thinking map[string]prefixHash  // what came before each thinking block sent, by its signature
	usage    Usage
}

// newServer starts a server with its options and its script or responder
// set before it serves its first request.
func newServer(opts Options) *Server {
	s := &Server{
		opts:    withDefaults(opts),
		script:  slices.Clone(opts.Replies),
		respond: opts.Func,
		closing: make(chan struct{}),
		seed:    maphash.MakeSeed(),
		bodies:  make(map[uint64][]seenBody),
		cache:   make(promptCache),
		threads: make(map[string]*threadTurn),
	}
	s.ts = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.ts.URL
	t, ok := http.DefaultTransport.(*http.Transport)
	if ok {
		t = t.Clone()
	} else {
		t = new(http.Transport) // DefaultTransport has been wrapped, by a tracer say
	}
	t.Proxy = nil
	// Concurrent runs each hold a connection; keeping them idle instead of
	// closing all but two spares the loopback a storm of fresh dials.
	t.MaxIdleConns = 0 // no limit
	t.MaxIdleConnsPerHost = 1024
	s.client = &http.Client{Transport: t}
	return s
}

// Close shuts the server down and blocks until every request it is handling
// has been answered. It ends the waits of EventDelay first, dropping the
// connections of those slowed streams, so that it never waits for them.
func (s *Server) Close() {
	s.close.Do(func() { close(s.closing) })
	s.ts.Close()
	s.serving.Wait()
	s.client.CloseIdleConnections()
}

// Client returns a client for the server: anthropic.NewClient with a base URL
// of s.URL, the API key [TestAPIKey], an HTTP client that s.Close cleans up,
// and then opts, which can override any of these. Being given an API key, the
// client reads no credentials from the environment. The client retries as the
// SDK does by default, twice; pass option.WithMaxRetries to change that.
func (s *Server) Client(opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(slices.Concat([]option.RequestOption{
		option.WithHTTPClient(s.client),
		option.WithBaseURL(s.URL),
		option.WithAPIKey(TestAPIKey),
	}, opts)...)
}

// Requests returns every POST /v1/messages the server has received, in the
// order they arrived, including those it rejected or answered with a fault.
// Each call returns new copies of the Requests, which the caller may keep;
// their Header and Body share memory with the server's record and must not be
// modified.
//
// The server keeps only the headers and the raw body of each request, so that
// thousands of recorded requests cost the garbage collector little; Requests
// decodes Params afresh on each call.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	out := make([]*Request, len(s.requests))
	for i, r := range s.requests {
		c := *r
		c.DroppedThinking = slices.Clone(r.DroppedThinking)
		if r.Usage != nil {
			u := *r.Usage
			c.Usage = &u
		}
		out[i] = &c
	}
	s.mu.Unlock()
	for _, r := range out {
		r.Params, _ = decodeParams(r.Body, false)
		r.Conversation = r.Params.Messages
		r.System, r.Tools = r.Params.Raw["system"], r.Params.Raw["tools"]
		if r.conversation != nil {
			r.System, r.Tools = r.system, r.tools
			full := Params{Raw: map[string]json.RawMessage{"messages": r.conversation}}
			decodeMessages(&full)
			r.Conversation = full.Messages
		}
	}
	return out
}

// Usage returns the usage the server has billed so far: the sum of the
// Usage of [Server.Requests]. Pass it to [BilledInputTokens] to weigh cache
// reads and writes as the API prices them.
func (s *Server) Usage() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage
}

// Errors returns what went wrong on the server's side, in order: one error
// for each request that failed validation (the HTTP 400s it sent), each
// request past the end of a script, each panic of a responder, and each
// request for a path the server does not serve. The thread_not_found and
// thread_unsupported_request answers to thread requests are not errors: a
// client meets them in the normal course.
func (s *Server) Errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.errs)
}

func (s *Server) recordError(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

// setStatus records the status that req is answered with.
func (s *Server) setStatus(req *Request, status int) {
	s.mu.Lock()
	req.Status = status
	s.mu.Unlock()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.serving.Add(1)
	defer s.serving.Done()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		s.serveMessages(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		s.serveCountTokens(w, r)
	default:
		s.recordError(fmt.Errorf("toolruntest: unexpected request %s %s", r.Method, r.URL.Path))
		writeError(w, http.StatusNotFound, "not_found_error", "Not found", s.auxRequestID(), nil)
	}
}

func (s *Server) auxRequestID() string {
	return "req_toolruntest_aux_" + strconv.FormatInt(s.aux.Add(1), 10)
}

func (s *Server) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	id := s.auxRequestID()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // The client has gone.
	}
	p, err := decodeParams(body, true)
	if err == nil {
		err = checkConversation(p)
	}
	if err != nil {
		s.recordError(fmt.Errorf("toolruntest: count_tokens request: %w", err))
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error(), id, nil)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", id)
	w.Write(mustMarshal(struct {
		InputTokens int64 `json:"input_tokens"`
	}{inputTokens(p)}))
}

func (s *Server) serveMessages(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // The client has gone.
	}
	var p Params
	var rejected error
	if len(body) > MaxRequestBytes {
		// The API's edge refuses it before reading it.
		rejected = &apiError{status: http.StatusRequestEntityTooLarge, errorType: "request_too_large",
			message: fmt.Sprintf("Request exceeds the maximum allowed number of bytes: %d, past the limit of %d.", len(body), MaxRequestBytes)}
	} else {
		p, rejected = decodeParams(body, false)
	}
	var f features
	if rejected == nil {
		f, rejected = parseFeatures(r.Header, p, &s.opts)
	}
	// The record leaves out Params, which Requests decodes again when asked.
	req := &Request{Header: r.Header.Clone(), Body: body, Stream: p.Stream}

	s.mu.Lock()
	n := len(s.requests) + 1
	req.Attempt = s.attempt(body)
	s.requests = append(s.requests, req)
	var prev *threadTurn // the thread turn that the request continues
	if rejected == nil && f.thread != nil && f.thread.Type == "continue" {
		prev, rejected = s.lookupThread(f.thread.PreviousMessageID, p)
	}
	s.mu.Unlock()

	// full is the request as the API sees it, with a thread's history.
	full := p
	if rejected == nil && prev != nil {
		full, rejected = continued(prev, p)
		s.mu.Lock()
		req.conversation = full.Raw["messages"]
		req.system, req.tools = full.Raw["system"], full.Raw["tools"]
		s.mu.Unlock()
	}
	if rejected == nil {
		rejected = checkConversation(full)
	}
	if rejected == nil {
		rejected = checkToolChanges(f, full)
	}
	sent := full.Messages // the conversation as the client sent it
	if rejected == nil && s.opts.BindThinking {
		s.mu.Lock()
		bad := s.checkThinking(full, full.Messages)
		if len(bad) > 0 && blockBinding(p) == "drop_block" {
			full.Messages = dropThinking(full.Messages, bad)
			for _, b := range bad {
				req.DroppedThinking = append(req.DroppedThinking, b.path())
			}
		}
		s.mu.Unlock()
		if len(bad) > 0 && req.DroppedThinking == nil {
			rejected = invalid(bad[0].path(), "thinking block failed the prefix binding check: the conversation before it (system, tools and messages) differs from the one it was created in. Send earlier turns back unchanged, or set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\"")
		}
	}
	var pl *plan
	if rejected == nil {
		pl, rejected = s.plan(full, f)
	}
	id := "req_toolruntest_" + strconv.Itoa(n)
	if rejected != nil {
		s.reject(w, req, n, id, rejected)
		return
	}

	// The server answers a compaction itself.
	compacts := f.compaction != nil || (pl.compactEdit != nil && pl.compactEdit.pause)
	var (
		reply    Reply
		scripted bool
		ended    bool
	)
	s.mu.Lock()
	if prev != nil {
		// Another request may have continued the thread meanwhile.
		if _, err := s.lookupThread(f.thread.PreviousMessageID, p); err != nil {
			s.mu.Unlock()
			s.reject(w, req, n, id, err)
			return
		}
		prev.inFlight = true
	}
	switch {
	case compacts:
	case s.respond != nil:
	case s.next < len(s.script):
		reply, scripted = s.script[s.next], true
		s.next++
	default:
		ended = true
		s.errs = append(s.errs, fmt.Errorf("request %d, past a script of %d replies: %w", n, len(s.script), ErrScriptEnded))
	}
	s.mu.Unlock()

	noRetry := http.Header{"X-Should-Retry": {"false"}}
	switch {
	case ended:
		s.finish(req, prev, http.StatusInternalServerError)
		msg := fmt.Sprintf("toolruntest: the script ran out: request %d has no reply (the script has %d)", n, len(s.script))
		writeError(w, http.StatusInternalServerError, "api_error", msg, id, noRetry)
		return
	case !compacts && !scripted:
		var panicked error
		reply, panicked = s.call(req, p, full.Messages)
		if panicked != nil {
			s.recordError(fmt.Errorf("toolruntest: request %d: %w", n, panicked))
			s.finish(req, prev, http.StatusInternalServerError)
			writeError(w, http.StatusInternalServerError, "api_error", panicked.Error(), id, noRetry)
			return
		}
	}

	f2 := reply.Fault
	if f2.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatFloat(f2.RetryAfter.Seconds(), 'f', -1, 64))
		w.Header().Set("Retry-After-Ms", strconv.FormatFloat(float64(f2.RetryAfter)/float64(time.Millisecond), 'f', -1, 64))
	}
	var m message
	if f2.Status == 0 {
		m = s.answer(req, n, p, full, f, pl, reply, prev)
		if s.opts.BindThinking {
			s.mu.Lock()
			s.recordThinking(full, sent, m)
			s.mu.Unlock()
		}
	}
	if !p.Stream || f2.Status != 0 {
		if !s.pause(r.Context(), f2.EventDelay) {
			if f2.Status != 0 {
				s.finish(req, prev, 0)
			}
			abort(w)
			return
		}
	}
	switch {
	case f2.Status != 0:
		errorType := f2.ErrorType
		if errorType == "" {
			errorType = errorTypeFor(f2.Status)
		}
		msg := f2.Message
		if msg == "" {
			msg = errorMessageFor(errorType)
		}
		s.finish(req, prev, f2.Status)
		writeError(w, f2.Status, errorType, msg, id, nil)
	case p.Stream:
		s.setStatus(req, http.StatusOK)
		s.stream(w, r, m, f2, id)
	default:
		s.setStatus(req, http.StatusOK)
		if f2.StallAfter > 0 {
			s.stallMessage(w, r, m, f2, id)
		} else {
			writeMessage(w, m, f2, id)
		}
	}
}

// reject answers req, the n-th request, with the error err.
func (s *Server) reject(w http.ResponseWriter, req *Request, n int, requestID string, err error) {
	ae, ok := err.(*apiError)
	if !ok {
		ae = &apiError{status: http.StatusBadRequest, errorType: "invalid_request_error", message: err.Error()}
	}
	s.mu.Lock()
	req.Status = ae.status
	if !ae.expected {
		s.errs = append(s.errs, fmt.Errorf("toolruntest: request %d: %w", n, err))
	}
	s.mu.Unlock()
	var details *wireErrorDetails
	if ae.code != "" {
		details = &wireErrorDetails{ErrorCode: ae.code, Unsupported: ae.unsupported}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", requestID)
	w.WriteHeader(ae.status)
	w.Write(mustMarshal(wireError{
		Type:      "error",
		Error:     wireErrorDetail{Type: ae.errorType, Message: ae.message, Details: details},
		RequestID: requestID,
	}))
}

// finish records that req, which continues the thread turn prev if non-nil,
// was answered with status and no message.
func (s *Server) finish(req *Request, prev *threadTurn, status int) {
	s.mu.Lock()
	req.Status = status
	if prev != nil {
		prev.inFlight = false
	}
	s.mu.Unlock()
}

// attempt counts body as seen once more and returns how many times it has
// been seen. s.mu must be held.
func (s *Server) attempt(body []byte) int {
	h := maphash.Bytes(s.seed, body)
	seen := s.bodies[h]
	for i := range seen {
		if bytes.Equal(seen[i].body, body) {
			seen[i].n++
			return seen[i].n
		}
	}
	s.bodies[h] = append(seen, seenBody{body: body, n: 1})
	return 1
}

// call calls the responder with a copy of req that holds p and the
// conversation conv, turning a panic into an error.
func (s *Server) call(req *Request, p Params, conv []MessageParam) (reply Reply, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("responder panicked: %v\n%s", v, debug.Stack())
		}
	}()
	s.mu.Lock()
	c := *req
	s.mu.Unlock()
	c.Params = p
	c.Conversation = conv
	c.System, c.Tools = p.Raw["system"], p.Raw["tools"]
	if c.conversation != nil {
		c.System, c.Tools = c.system, c.tools
	}
	return s.respond(&c), nil
}

// pause waits for d, and reports whether the handler should go on: false
// when the client has gone or the server is closing.
func (s *Server) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.closing:
	}
	return false
}

// writeError answers with the API's error body.
func writeError(w http.ResponseWriter, status int, errorType, msg, requestID string, extra http.Header) {
	for k, v := range extra {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", requestID)
	w.WriteHeader(status)
	w.Write(errorBody(errorType, msg, requestID))
}

// writeMessage answers with m as a JSON message object.
func writeMessage(w http.ResponseWriter, m message, f Fault, requestID string) {
	body := mustMarshal(m.wire(false))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", requestID)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if f.DropAfter <= 0 {
		w.Write(body)
		return
	}
	w.WriteHeader(http.StatusOK)
	w.Write(body[:min(f.DropAfter, len(body)-1)])
	abort(w)
}

// stallMessage sends the first f.StallAfter bytes of m as a JSON body, then
// nothing until the client leaves or the server closes.
func (s *Server) stallMessage(w http.ResponseWriter, r *http.Request, m message, f Fault, requestID string) {
	body := mustMarshal(m.wire(false))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", requestID)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body[:min(f.StallAfter, len(body)-1)])
	http.NewResponseController(w).Flush()
	s.pause(r.Context(), 24*time.Hour)
	abort(w)
}

// stream answers with m as server-sent events, as f shapes them.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, m message, f Fault, requestID string) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Request-Id", requestID)
	w.WriteHeader(http.StatusOK)
	if f.EventDelay > 0 {
		// Let the client see the response start before the first delay, as
		// it would with a slow model; otherwise the first event carries the
		// headers along.
		if rc.Flush() != nil {
			return
		}
	}

	evs := m.events()
	limit := len(evs)
	if f.StreamErrorAfter > 0 {
		limit = min(limit, f.StreamErrorAfter)
	}
	if f.DropAfter > 0 {
		limit = min(limit, f.DropAfter)
	}
	if f.StallAfter > 0 {
		limit = min(limit, f.StallAfter)
	}
	var buf []byte
	for _, ev := range evs[:limit] {
		if !s.pause(r.Context(), f.EventDelay) {
			abort(w)
			return
		}
		buf = appendEvent(buf[:0], ev)
		if _, err := w.Write(buf); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
	if f.StallAfter > 0 {
		s.pause(r.Context(), 24*time.Hour)
		abort(w)
		return
	}
	if f.DropAfter > 0 && (f.StreamErrorAfter <= 0 || f.DropAfter <= f.StreamErrorAfter) {
		abort(w)
		return
	}
	if f.StreamErrorAfter > 0 {
		errorType := f.ErrorType
		if errorType == "" {
			errorType = "overloaded_error"
		}
		msg := f.Message
		if msg == "" {
			msg = errorMessageFor(errorType)
		}
		if !s.pause(r.Context(), f.EventDelay) {
			abort(w)
			return
		}
		w.Write(appendEvent(nil, event{"error", errorBody(errorType, msg, requestID)}))
		rc.Flush()
	}
}

// abort drops the connection of w abruptly, so that the client sees the
// response end early: it hijacks the connection and closes it.
func abort(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	rc.Flush()
	conn, _, err := rc.Hijack()
	if err != nil {
		// Not HTTP/1: let net/http reset the stream instead.
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}
