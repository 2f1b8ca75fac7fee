package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
)

// A run's body, and the thread's history in it.
//
// AG-UI clients (@ag-ui/client's HttpAgent, CopilotKit) send a thread's
// whole history with every run, so a run's body grows with its thread.
// The server holds that history already; the limit that matters is on
// what a body brings beyond it. So a run's body is read as a stream, one
// member and one message at a time, never held whole as bytes, and
// counted in two parts:
//
//   - the thread's history: the messages at the start of messages that
//     the thread has, each under an id the thread has, each user message
//     with the content the thread recorded for it at its place. The first
//     message that is not so ends it: one the thread has not, a user
//     message whose content differs (an edit) or that stands where
//     another did (one dropped before it), an id given twice. The
//     client's history is authoritative: from there on it is a branch the
//     run takes, and it counts as new, however much of it the thread had;
//   - what is new: every other byte of the body (the messages from the
//     first that is not the thread's, tools, context, state, resume,
//     forwardedProps).
//
// What is new may be [Config.MaxBodyBytes], and the body as a whole
// MaxBodyBytes plus [Config.MaxHistoryBytes]. The history's allowance is
// a number the operator sets rather than the thread's own size, so that
// the memory one request may take is known before it arrives: a thread
// whose history (as its client sends it) passes MaxHistoryBytes is
// refused 413 too_large, like any body past its bound, and its client
// must start a new thread or send only the messages since its last run.
// Both parts are read under the body's one deadline
// ([Config.BodyReadTimeout]); a body that brings more than MaxBodyBytes
// of new content is refused as soon as it has, once the thread is known
// (threadId before messages, as AG-UI's clients send it), without reading
// the rest.
//
// A body within MaxBodyBytes whole is never compared with the thread: it
// asks nothing of the database.
//
// A message of the thread's history is still read, and kept for the run
// (the server compares the client's copy with its own, and names the
// messages of a MESSAGES_SNAPSHOT after it), so a run's body is held once,
// as its messages, and never as bytes beside them: the decoder holds one
// message's bytes at a time.

// runBodyLimit is the most bytes a run's body may have: MaxBodyBytes of
// new content beside MaxHistoryBytes of the thread's history.
func (h *Handler) runBodyLimit() int64 {
	if h.cfg.MaxHistoryBytes > math.MaxInt64-h.cfg.MaxBodyBytes {
		return math.MaxInt64
	}
	return h.cfg.MaxBodyBytes + h.cfg.MaxHistoryBytes
}

// bodyLimit returns the most bytes r's body may have: a run's may carry
// the thread's history beside its own limit.
func (h *Handler) bodyLimit(r *http.Request) int64 {
	if r.Method == http.MethodPost && (r.URL.Path == "/" || r.URL.Path == "/agui") {
		return h.runBodyLimit()
	}
	return h.cfg.MaxBodyBytes
}

// countingReader counts the bytes read through it, and keeps the first
// error of the reader under it other than io.EOF, which tells a body that
// failed (too large, too slow) from one that is not JSON.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// historyMatch tells the messages of a body that are the thread's history
// from those it brings, in order: see "A run's body" above.
type historyMatch struct {
	known map[string]bool // the message ids the thread has
	recs  []userRec       // the thread's user messages, in order
	user  int             // the user messages matched so far
	seen  map[string]bool // the ids matched so far
	ended bool            // a message was not the thread's: none after it is
}

// take reports whether m, the next message of the body, is the thread's.
func (hm *historyMatch) take(m *message) bool {
	if hm.ended {
		return false
	}
	ok := hm.known[m.ID] && !hm.seen[m.ID]
	if ok && m.Role == "user" {
		ok = hm.user < len(hm.recs) && hm.recs[hm.user] == userRec{ID: m.ID, Digest: contentDigest(m.Content)}
		hm.user++
	}
	if !ok {
		hm.ended = true
		return false
	}
	hm.seen[m.ID] = true
	return true
}

// loadHistory returns the match of thread's history, for a request of
// id: a thread that is not id's own (another token's, or none) has none,
// so that a body cannot borrow another's history for room, nor learn its
// message ids from the limit.
func (h *Handler) loadHistory(ctx context.Context, thread string, id identity) (*historyMatch, error) {
	none := &historyMatch{ended: true}
	if !validID(thread) {
		return none, nil
	}
	owner, err := h.threadOwner(ctx, thread)
	if err != nil || owner != id.name {
		return none, err
	}
	known, err := messageIDs(ctx, h.db, thread)
	if err != nil {
		return nil, err
	}
	recs, err := userRecords(ctx, h.db, thread)
	if err != nil {
		return nil, err
	}
	return &historyMatch{known: known, recs: recs, seen: map[string]bool{}}, nil
}

// readInput reads a RunAgentInput from body, the one way it can be read:
// a key given twice anywhere, or a value after the object, is refused
// (the decoder would keep the last key, so an approval followed by
// "resume":[] would silently drop it); then [checkAGUIInput] checks it. A
// body that brings more than MaxBodyBytes the thread does not have is
// refused 413 too_large; so is one past MaxBodyBytes plus
// MaxHistoryBytes, and one that does not arrive in time 408
// body_timeout. Every refusal is a *requestError.
func (h *Handler) readInput(ctx context.Context, body io.Reader, id identity) (*runInput, []string, error) {
	cr := &countingReader{r: body}
	dec := json.NewDecoder(cr)
	fail := func(err error) (*runInput, []string, error) {
		if cr.err != nil {
			return nil, nil, h.runBodyRefusal(cr.err)
		}
		if strings.Contains(err.Error(), " in $.resume[") {
			return nil, nil, refuse(http.StatusBadRequest, "bad_resume", "a resume entry could be read two ways: %v", err)
		}
		return nil, nil, badInput("the body is not one RunAgentInput: %v", err)
	}
	tok, err := dec.Token()
	if err != nil {
		return fail(err)
	}
	if tok != json.Delim('{') {
		return nil, nil, badInput("the body is not a RunAgentInput object")
	}
	var (
		top         = map[string]json.RawMessage{}
		msgs        []message
		sizes       []int64 // of msgs
		hasMessages bool
		thread      string
		threadKnown bool          // thread is the body's threadId (or the body has none)
		hm          *historyMatch // nil until it is needed
		told        int           // the messages told apart so far: msgs[:told]
		untold      int64         // the bytes of msgs[told:]
		history     int64         // the bytes of the messages of the thread's history
		fresh       int64         // the bytes of the values of what is new so far
	)
	// tell tells the messages read so far apart, once the thread is
	// known. A body within MaxBodyBytes whole never needs to: it asks
	// nothing of the database.
	tell := func() error {
		if !threadKnown {
			return nil
		}
		if hm == nil {
			var err error
			if hm, err = h.loadHistory(ctx, thread, id); err != nil {
				return err
			}
		}
		for ; told < len(msgs); told++ {
			if hm.take(&msgs[told]) {
				history += sizes[told]
			} else {
				fresh += sizes[told]
			}
		}
		untold = 0
		return nil
	}
	tooNew := func() error {
		return refuse(http.StatusRequestEntityTooLarge, "too_large", "the request body brings more than %d bytes the thread does not have, its limit (the thread's own history, sent again, does not count)", h.cfg.MaxBodyBytes)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		key, _ := k.(string)
		if _, dup := top[key]; dup || key == "messages" && hasMessages {
			return fail(fmt.Errorf("the key %q is given twice in $", key))
		}
		if key != "messages" {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return fail(err)
			}
			if err := oneReading(raw, "$."+key); err != nil {
				return fail(err)
			}
			top[key] = raw
			if fresh += int64(len(raw)); fresh > h.cfg.MaxBodyBytes {
				return nil, nil, tooNew()
			}
			if key == "threadId" {
				json.Unmarshal(raw, &thread)
				threadKnown = true
			}
			continue
		}
		hasMessages = true
		tok, err := dec.Token()
		switch {
		case err != nil:
			return fail(err)
		case tok == nil:
			return nil, nil, badInput("messages is required: the conversation as the client has it ([] for none)")
		case tok != json.Delim('['):
			return nil, nil, badInput("messages is not an array of messages")
		}
		for i := 0; dec.More(); i++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return fail(err)
			}
			if err := oneReading(raw, fmt.Sprintf("$.messages[%d]", i)); err != nil {
				return fail(err)
			}
			var m message
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, nil, badInput("the body is not a RunAgentInput: messages[%d]: %v", i, err)
			}
			msgs, sizes = append(msgs, m), append(sizes, int64(len(raw)))
			if untold += int64(len(raw)); fresh+untold > h.cfg.MaxBodyBytes {
				if err := tell(); err != nil {
					return nil, nil, err
				}
				if fresh > h.cfg.MaxBodyBytes {
					return nil, nil, tooNew()
				}
			}
		}
		if _, err := dec.Token(); err != nil {
			return fail(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return fail(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if cr.err != nil {
			return nil, nil, h.runBodyRefusal(cr.err)
		}
		return nil, nil, badInput("the body is not one RunAgentInput: more than one JSON value")
	}
	if cr.n > h.cfg.MaxBodyBytes {
		threadKnown = true // the body's, or none
		if err := tell(); err != nil {
			return nil, nil, err
		}
		if cr.n-history > h.cfg.MaxBodyBytes {
			return nil, nil, refuse(http.StatusRequestEntityTooLarge, "too_large", "the request body brings %d bytes the thread does not have, past its limit of %d (the thread's own history, %d bytes of it, does not count)", cr.n-history, h.cfg.MaxBodyBytes, history)
		}
	}
	return checkAGUIInput(top, msgs, hasMessages)
}

// runBodyRefusal is the refusal of a run's body whose reading failed.
func (h *Handler) runBodyRefusal(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return refuse(http.StatusRequestEntityTooLarge, "too_large", "the request body is larger than %d bytes: a run's body may bring %d bytes the thread does not have, beside up to %d bytes of the thread's own history sent again", tooBig.Limit, h.cfg.MaxBodyBytes, h.cfg.MaxHistoryBytes)
	}
	return h.bodyRefusal(err, "bad_input", "a RunAgentInput")
}
