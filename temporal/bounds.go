package temporal

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
)

// The bounds on the decisions a run takes, so that no input a client can
// send grows the workflow's state, its continue-as-new input or its
// history past what the server takes: a decision beyond them is refused
// (an update fails with the reason, a signal is dropped with a warning in
// the worker's log) and the run goes on.
const (
	// MaxDecisionBytes bounds one decision as its JSON: the tool_use id,
	// the reason of a Deny, the input of an Allow, the result of a Skip,
	// as the workflow receives it (with a value in the Store, the mark
	// that stands for it: see [ClientOptions].Store).
	MaxDecisionBytes = 64 << 10
	// MaxEarlyDecisions bounds the decisions a run keeps for calls that do
	// not exist yet (a signal sent before the model asked for the call).
	MaxEarlyDecisions = 100
	// MaxEarlyDecisionBytes bounds the JSON of all of them together.
	MaxEarlyDecisionBytes = 256 << 10
)

// ErrDecisionTooLarge is wrapped by the refusal of a decision over
// [MaxDecisionBytes]: its reason, edited input or Skip result would travel
// through the workflow's history, which the server bounds. Such a decision
// is refused whole (nothing of it is applied), the call still awaits a
// decision, and the run goes on; [Decide] returns the refusal, and
// errors.Is(err, ErrDecisionTooLarge) holds on the client. Give the client
// the workers' Store with [ClientOptions].Store, and a decision of any size goes
// through: its large values travel through the Store (see
// [RunOptions.ClaimThreshold]), and Decide and DecideBySignal refuse it
// only if what is left is over the limit still.
var ErrDecisionTooLarge = errors.New("toolrun: decision too large")

// decisionSize is the size of a's JSON.
func decisionSize(a Approval) int {
	b, err := json.Marshal(a)
	if err != nil {
		return MaxDecisionBytes + 1
	}
	return len(b)
}

// decisionTooLarge returns why decision a is refused for its size, or nil.
func (w *run) decisionTooLarge(a Approval) error {
	if !w.bounded {
		return nil
	}
	return w.sizeTooLarge(a, decisionSize(a))
}

// sizeTooLarge is decisionTooLarge for a decision whose JSON is n bytes.
func (w *run) sizeTooLarge(a Approval, n int) error {
	if !w.bounded {
		return nil
	}
	if n > MaxDecisionBytes {
		return fmt.Errorf("%w: the decision for call %q is %d bytes, over the limit of %d (temporal.MaxDecisionBytes): give a shorter reason, input or result", ErrDecisionTooLarge, truncID(a.ToolUseID), n, MaxDecisionBytes)
	}
	return nil
}

// roomForEarly returns why a, a decision for a call the run has not seen
// whose JSON is n bytes, cannot be kept, or nil.
func (w *run) roomForEarly(a Approval, n int) error {
	count, size := 0, n
	sizes := w.sizes()
	for i, b := range w.buffered {
		if !driver.HasCall(w.state, b.ToolUseID) {
			count++
			size += sizes[i]
		}
	}
	switch {
	case count >= MaxEarlyDecisions:
		return fmt.Errorf("%w: no call %q yet, and %d decisions already wait for calls that do not exist (temporal.MaxEarlyDecisions)", toolrun.ErrNotAwaitingApproval, truncID(a.ToolUseID), count)
	case size > MaxEarlyDecisionBytes:
		return fmt.Errorf("%w: no call %q yet, and the decisions waiting for calls that do not exist would be %d bytes (temporal.MaxEarlyDecisionBytes is %d)", toolrun.ErrNotAwaitingApproval, truncID(a.ToolUseID), size, MaxEarlyDecisionBytes)
	}
	return nil
}

// truncID returns id cut to 100 bytes, for a message.
func truncID(id string) string {
	if len(id) > 100 {
		return id[:100] + "…"
	}
	return id
}

// sizes returns the size of each decision of w.buffered, each measured
// once: a flood of signals delivered in one workflow task would otherwise
// encode every decision kept for each one received, and hold the task
// past the SDK's deadlock detector.
func (w *run) sizes() []int {
	if len(w.bufSizes) != len(w.buffered) {
		w.bufSizes = make([]int, len(w.buffered), len(w.buffered)+1)
		for i, b := range w.buffered {
			w.bufSizes[i] = decisionSize(b)
		}
	}
	return w.bufSizes
}
