package serve

import (
	"bytes"
	"context"
	"errors"

	"github.com/toolrun/toolrun"
)

// StoreOf returns the Store h keeps its threads' states in, for the
// conformance test.
func StoreOf(h *Handler) toolrun.Store { return h.store }

// ReadInput reads body as a run's RunAgentInput of the local identity,
// for the parser's fuzz test: the messages it took, or the status and
// code of its refusal, and any other error.
func ReadInput(h *Handler, body []byte) (messages, status int, code string, err error) {
	in, _, err := h.readInput(context.Background(), bytes.NewReader(body), identity{name: "local"})
	var re *requestError
	switch {
	case errors.As(err, &re):
		return 0, re.status, re.code, nil
	case err != nil:
		return 0, 0, "", err
	}
	return len(in.Messages), 0, "", nil
}

// SetInboxAfterReading has h's inbox change streams call f between their
// first reading of the list and the first page's, for a test that lands
// a change there.
func SetInboxAfterReading(h *Handler, f func()) {
	h.inbox.mu.Lock()
	defer h.inbox.mu.Unlock()
	h.inbox.afterReading = f
}

// SetBeforeRelease has h call f as each run ends, before the run is let
// go, for a test that opens a stream of a run that has ended and is
// still in flight.
func SetBeforeRelease(h *Handler, f func(run string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.beforeRelease = f
}
