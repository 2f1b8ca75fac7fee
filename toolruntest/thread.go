package toolruntest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
)

// threadTTL is how long the server keeps a thread after its last stored
// turn, as the API does.
const threadTTL = 5 * time.Minute

// ThreadParam is the thread field of a request.
type ThreadParam struct {
	Type              string `json:"type"` // "create" or "continue"
	PreviousMessageID string `json:"previous_message_id,omitempty"`
}

// threadTurn is a thread as the server stored it under the id of a reply:
// the fields it was created with and the whole conversation, that reply
// last.
type threadTurn struct {
	model         string
	system, tools json.RawMessage
	history       [][]byte // the messages, cache_control taken out
	stored        time.Time
	// continued is set once a request that continues from the turn has been
	// answered in full, and inFlight while one is being answered.
	continued, inFlight bool
}

// threadError returns a rejection of a thread request with code.
func threadError(status int, code, msg string) *apiError {
	errorType := "invalid_request_error"
	if status == http.StatusNotFound {
		errorType = "not_found_error"
	}
	return &apiError{status: status, errorType: errorType, message: msg, code: code}
}

// lookupThread returns the turn that a request continuing from id, with
// params p, continues, or the API's error. s.mu must be held.
func (s *Server) lookupThread(id string, p Params) (*threadTurn, error) {
	t := s.threads[id]
	if t == nil || !s.opts.Now().Before(t.stored.Add(threadTTL)) {
		e := threadError(http.StatusNotFound, "thread_not_found", "thread.previous_message_id: no thread holds "+id+": it has expired or was never stored; send the whole conversation with a thread of type create")
		e.expected = true
		return nil, e
	}
	if t.continued {
		return nil, threadError(http.StatusBadRequest, "thread_already_continued", "thread.previous_message_id: "+id+" has already been continued")
	}
	if t.inFlight {
		return nil, threadError(http.StatusBadRequest, "thread_continue_in_flight", "thread.previous_message_id: a request that continues "+id+" is in progress")
	}
	same := func(sent, kept json.RawMessage) bool {
		return len(sent) == 0 || isNull(sent) || bytes.Equal(canonical(sent), canonical(kept))
	}
	switch {
	case p.Model != t.model:
		return nil, threadError(http.StatusBadRequest, "thread_fingerprint_mismatch", "model: differs from the model the thread was created with")
	case !same(p.Raw["system"], t.system):
		return nil, threadError(http.StatusBadRequest, "thread_fingerprint_mismatch", "system: differs from the system prompt the thread was created with; leave it out of a request that continues a thread")
	case !same(p.Raw["tools"], t.tools):
		return nil, threadError(http.StatusBadRequest, "thread_fingerprint_mismatch", "tools: differ from the tools the thread was created with; leave them out of a request that continues a thread")
	}
	return t, nil
}

// continued returns p as the request continuing t stands for: the thread's
// system, tools and history, followed by the messages of p.
func continued(t *threadTurn, p Params) (Params, error) {
	var conv []byte
	conv = append(conv, '[')
	for i, m := range t.history {
		if i > 0 {
			conv = append(conv, ',')
		}
		conv = append(conv, m...)
	}
	raw := p.Raw["messages"]
	for _, sp := range elements(raw) {
		if len(conv) > 1 {
			conv = append(conv, ',')
		}
		conv = append(conv, raw[sp.start:sp.end]...)
	}
	conv = append(conv, ']')

	full := p
	full.Raw = make(map[string]json.RawMessage, len(p.Raw)+2)
	for k, v := range p.Raw {
		full.Raw[k] = v
	}
	full.Raw["messages"] = conv
	delete(full.Raw, "system")
	delete(full.Raw, "tools")
	full.System = nil
	full.Tools = nil
	if t.system != nil {
		full.Raw["system"], full.System = t.system, t.system
	}
	if t.tools != nil {
		full.Raw["tools"] = t.tools
		if err := decodeTools(&full); err != nil {
			return full, err
		}
	}
	return full, decodeMessages(&full)
}

// storedMessages returns the messages of the JSON array raw without their
// cache_control members, as a thread keeps them.
func storedMessages(raw []byte) [][]byte {
	var out [][]byte
	for _, sp := range elements(raw) {
		m, _, err := stripCacheControl("", raw[sp.start:sp.end])
		if err != nil {
			m = raw[sp.start:sp.end]
		}
		out = append(out, m)
	}
	return out
}

// replyMessage returns m as the assistant message that a client sends back.
func replyMessage(m message) []byte {
	var b []byte
	b = append(b, `{"content":[`...)
	for i, c := range m.content {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, blockJSON(c, true)...)
	}
	return append(b, `],"role":"assistant"}`...)
}
