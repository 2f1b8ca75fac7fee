package serve

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/toolrun/toolrun"
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
	// Version names the call as it was listed; a decision that carries it
	// is refused if the call changed since.
	Version string `json:"version"`
}

// listed returns it as the JSON API lists it.
func listed(it *interrupt) pendingCall {
	return pendingCall{ID: it.ID, ThreadID: it.Thread, RunID: it.Run, ToolCallID: it.ToolCallID, ToolName: it.ToolName, Input: orEmpty(it.Input), Reason: it.Reason, CreatedAt: it.CreatedAt, ExpiresAt: it.ExpiresAt, Version: callVersion(it)}
}

// callVersion is a digest of everything a person reads of it and of its
// state: a decision made on what a person saw names it, and one on a call
// that changed since is refused rather than applied to what they did not
// read.
func callVersion(it *interrupt) string {
	// Each part as "len:part;", appended rather than printed: the list
	// of the inbox takes the version of every call waiting.
	b := make([]byte, 0, 256+len(it.Input)+len(it.Decision))
	for _, s := range [...]string{it.ID, it.Thread, it.ToolCallID, it.ToolName, string(it.Input), it.Reason, it.Status, timestamp(it.ExpiresAt), it.DecidedBy, it.DecidedAt, string(it.Decision)} {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
		b = append(b, ';')
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// handlePending lists the calls awaiting a person's decision in the
// token's tenant, newest first; ?thread= keeps one thread's.
func (h *Handler) handlePending(w http.ResponseWriter, r *http.Request, id identity) {
	its, err := h.be.pending(r.Context(), r.URL.Query().Get("thread"))
	if err == nil {
		its, err = h.visible(r.Context(), id.tenant, its)
	}
	if err != nil {
		h.writeError(w, err)
		return
	}
	out := []pendingCall{}
	for i := len(its) - 1; i >= 0; i-- {
		out = append(out, listed(its[i]))
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"pending": out})
}

// apiDecision is the body of a decision over the JSON API: a decision
// payload and, optionally, the version of the call it was made on.
type apiDecision struct {
	decisionPayload
	Version string `json:"version,omitempty"`
}

// handleDecision decides one pending call: the body is a decision as an
// interrupt's responseSchema describes it, with the call's version as
// listed if the client wants a call that changed since refused. The first
// decision wins. Once the thread has no call left waiting, its run goes
// on at once, as after a decision in the inbox: the answer's nextRun
// names the run, whose events GET /runs/{run}/events streams. A call of
// another tenant is answered as one that does not exist.
func (h *Handler) handleDecision(w http.ResponseWriter, r *http.Request, id identity) {
	var dp apiDecision
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
	if it != nil {
		ok, err := h.sees(r.Context(), id.tenant, it.Thread)
		if err != nil {
			h.writeError(w, err)
			return
		}
		if !ok {
			it = nil
		}
	}
	if it == nil {
		httpError(w, http.StatusNotFound, "not_pending", "no such interrupt")
		return
	}
	now := h.cfg.Now()
	if it.Kind == kindApproval && it.Status != statusPending {
		refuseDecided(w, it)
		return
	}
	if err := h.checkDecidable(it, ""); err != nil {
		h.writeError(w, err)
		return
	}
	if dp.Version != "" && dp.Version != callVersion(it) {
		refuseChanged(w, it)
		return
	}
	if !now.Before(it.ExpiresAt) && dp.Decision != "deny" {
		httpError(w, http.StatusConflict, "expired", "the interrupt expired; it can only be denied")
		return
	}
	d, err := h.decision(it, dp.decisionPayload)
	if err != nil {
		h.writeError(w, err)
		return
	}
	if err := h.be.decide(r.Context(), it, d, id.name, now); err != nil {
		h.writeError(w, err)
		return
	}
	// The thread goes on before the inbox's change streams are woken, as
	// after the inbox's own decision: on a database of one connection the
	// run's start, and so the answer, would wait behind their readings.
	next := h.be.goOn(it.Thread)
	h.inbox.notify()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": it.ID, "status": statusDecided, "decision": describe(d).Decision, "decidedBy": id.name, "decidedAt": timestamp(now), "nextRun": next})
}

// decided is what a person reads of a decision already taken.
type decided struct {
	Decision    string          `json:"decision"` // approve, deny, edit or respond
	Reason      string          `json:"reason,omitempty"`
	Response    string          `json:"response,omitempty"` // a respond's text
	EditedInput json.RawMessage `json:"editedInput,omitempty"`
	Always      bool            `json:"always,omitempty"`
}

// decisionOf reads the decision recorded on it.
func decisionOf(it *interrupt) decided {
	var d toolrun.Decision
	if len(it.Decision) == 0 || json.Unmarshal(it.Decision, &d) != nil {
		return decided{}
	}
	return describe(d)
}

// describe returns d as a person reads it.
func describe(d toolrun.Decision) decided {
	var out decided
	switch {
	case d.Kind == toolrun.Allow && len(d.Input) > 0:
		out.Decision, out.EditedInput = "edit", d.Input
	case d.Kind == toolrun.Allow:
		out.Decision = "approve"
	case d.Kind == toolrun.Skip:
		out.Decision, out.Response = "respond", responseText(d)
	default:
		out.Decision, out.Reason = "deny", d.Reason
	}
	out.Always = d.Always
	return out
}

// refuseDecided refuses a decision on a call decided before, with who
// decided it, when and what: 409 already_decided.
func refuseDecided(w http.ResponseWriter, it *interrupt) {
	d := decisionOf(it)
	what := d.Decision
	if d.Reason != "" {
		what += ": " + d.Reason
	}
	if d.Response != "" {
		what += ": " + strconv.Quote(d.Response)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusConflict)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{
		"code":    "already_decided",
		"message": fmt.Sprintf("already decided by %s at %s (%s)", it.DecidedBy, it.DecidedAt, what),
	}, "decidedBy": it.DecidedBy, "decidedAt": it.DecidedAt, "decision": d})
}

// refuseChanged refuses a decision made on a version of it that is not
// the call's now: 409 changed_since_shown, with the call as it is.
func refuseChanged(w http.ResponseWriter, it *interrupt) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusConflict)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{
		"code":    "changed_since_shown",
		"message": "the call changed since it was shown; nothing was decided: read it again",
	}, "call": listed(it)})
}
