package serve

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// pendingCall is a call awaiting a person's decision, as the JSON API
// lists it.
type pendingCall struct {
	ID         string          `json:"id"`
	ThreadID   string          `json:"threadId"`
	RunID      string          `json:"runId"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
	Reason     string          `json:"reason"`
	CreatedAt  time.Time       `json:"createdAt"`
	ExpiresAt  time.Time       `json:"expiresAt"`
}

// handlePending lists the calls awaiting a person's decision, newest
// first; ?thread= keeps one thread's.
func (h *Handler) handlePending(w http.ResponseWriter, r *http.Request, _ identity) {
	its, err := h.be.pending(r.Context(), r.URL.Query().Get("thread"))
	if err != nil {
		h.writeError(w, err)
		return
	}
	out := []pendingCall{}
	for i := len(its) - 1; i >= 0; i-- {
		it := its[i]
		out = append(out, pendingCall{ID: it.ID, ThreadID: it.Thread, RunID: it.Run, ToolCallID: it.ToolCallID, ToolName: it.ToolName, Input: orEmpty(it.Input), Reason: it.Reason, CreatedAt: it.CreatedAt, ExpiresAt: it.ExpiresAt})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"pending": out})
}

// handleDecision decides one pending call: the body is a decision as an
// interrupt's responseSchema describes it. The first decision wins. Once
// the thread has no call left waiting, its run goes on at once, as after a
// decision in the inbox: the answer's nextRun names the run, whose events
// GET /runs/{run}/events streams.
func (h *Handler) handleDecision(w http.ResponseWriter, r *http.Request, id identity) {
	var dp decisionPayload
	var body []byte
	err := h.readBody(w, func() (err error) {
		body, err = io.ReadAll(r.Body)
		return err
	})
	if err == nil {
		err = strictJSON(body, &dp)
	}
	if err != nil {
		h.refuseBody(w, err, "bad_decision", "a decision")
		return
	}
	it, err := h.be.interrupt(r.Context(), r.PathValue("id"))
	if err != nil {
		h.writeError(w, err)
		return
	}
	if it == nil {
		httpError(w, http.StatusNotFound, "not_pending", "no such interrupt")
		return
	}
	now := h.cfg.Now()
	if err := h.checkDecidable(it, ""); err != nil {
		h.writeError(w, err)
		return
	}
	if !now.Before(it.ExpiresAt) && dp.Decision != "deny" {
		httpError(w, http.StatusConflict, "expired", "the interrupt expired; it can only be denied")
		return
	}
	d, err := h.decision(it, dp)
	if err != nil {
		h.writeError(w, err)
		return
	}
	if err := h.be.decide(r.Context(), it, d, id.name, now); err != nil {
		h.writeError(w, err)
		return
	}
	h.inbox.notify()
	next := h.be.goOn(it.Thread)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": it.ID, "status": statusDecided, "decidedBy": id.name, "decidedAt": timestamp(now), "nextRun": next})
}
