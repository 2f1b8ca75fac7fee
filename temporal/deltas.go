package temporal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"go.temporal.io/sdk/activity"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// This file holds the workflow as the store of a run's history when the
// workers keep no Store: a step's result carries only what the step
// added to the history (a delta), the workflow appends it to the whole
// state it holds in memory, and a step's input carries the state without
// its history and what identifies that history (its length and digest),
// which the worker's state cache holds; a worker whose cache misses asks
// the workflow for the history with [HistoryQuery].

const (
	// StepDeltaActivity is the name of [Activities.Step] when the
	// workflow holds the run's whole state itself (workers without a
	// Store) and takes a step's result as a delta ([StepResult.Base]). A
	// name of its own, so that a worker of a release without deltas, which
	// would take the state without its history for the whole state, never
	// runs such a step: it has no activity of that name, and the step is
	// retried until a worker that has one takes it.
	StepDeltaActivity = "toolrun.StepDelta"
	// HistoryQuery returns the run's whole state as the workflow holds
	// it, with what identifies its history, as a [HistoryAt]: what a step
	// whose worker does not hold the run asks for. Given a
	// [HistorySince] the workflow knows, it leaves out the messages the
	// asker holds. Its size is at most the whole state's, which the
	// payload guard keeps under [RunOptions.PayloadLimit] (the input of a
	// continue-as-new carries it too), below the 4 MiB a Temporal
	// server's gRPC answers take.
	HistoryQuery = "toolrun.history"
)

// versionDeltas guards the steps of a run without a Store that carry
// deltas ([StepDeltaActivity]): an execution recorded before them sends
// and takes the whole state with each step ([StepActivity]). It is asked
// when an execution starts without a Store key, so a run that was waiting
// when its workers were upgraded gets deltas from its next execution on.
const versionDeltas = "toolrun.step-deltas"

// HistoryAt is the result of [HistoryQuery]: the run's whole state, the
// number of messages of its history and the digest the workflow holds for
// it ([StepInput.Digest]), so that a step can check that it is the
// history it was given the skeleton of.
type HistoryAt struct {
	State    *toolrun.State `json:"state"`
	Messages int            `json:"messages"`
	Digest   string         `json:"digest,omitempty"`
	// From is the number of messages at the start of the history that
	// State leaves out, as the query's [HistorySince] allowed: the asker
	// holds them. Zero: State is whole.
	From int `json:"from,omitempty"`
}

// HistorySince is the argument of [HistoryQuery], which a worker that
// holds an earlier history of the run gives: its number of messages and
// its digest ([StepResult.Digest]). If the workflow's history began with
// that one (it knows the digests of its last few steps, and no step since
// replaced the history), the answer leaves those messages out
// ([HistoryAt.From]), so that a step on a worker whose cache is a step
// or two behind (another worker took the steps since) gets what those
// steps added, not the whole conversation. A query without it, as a
// worker of an earlier release sends, gets the whole state; a workflow
// of an earlier release ignores it and answers whole.
type HistorySince struct {
	Messages int    `json:"messages"`
	Digest   string `json:"digest"`
}

// knownDigests is how many of its last histories' digests the workflow
// keeps for [HistorySince].
const knownDigests = 16

// historyMark identifies a history the workflow held: its number of
// messages and its digest.
type historyMark struct {
	messages int
	digest   string
}

// mark records that the workflow's history is the one of digest d, with
// replaced if the history before is not its beginning (a step replaced
// it, or the workflow no longer knows its digest): the marks before are
// forgotten.
func (w *run) mark(d string, replaced bool) {
	if replaced || d == "" {
		w.known = w.known[:0]
	}
	if d == "" {
		return
	}
	if len(w.known) == knownDigests {
		w.known = append(w.known[:0], w.known[1:]...)
	}
	w.known = append(w.known, historyMark{messages: len(w.state.Params.Messages), digest: d})
}

// begins reports whether the workflow's history begins with the one
// since names.
func (w *run) begins(since HistorySince) bool {
	if since.Digest == "" || since.Messages <= 0 || since.Messages > len(w.state.Params.Messages) {
		return false
	}
	for _, m := range w.known {
		if m == (historyMark{messages: since.Messages, digest: since.Digest}) {
			return true
		}
	}
	return false
}

// ApplyStep returns the run's whole state after a step, from prev, the
// whole state the step began with, and res, its result: res.State itself
// if it is whole (Base 0) or the state without its history with a Store
// (Ref set), else res.State with the first res.Base messages of prev's
// history before its own. It is how the workflow keeps the whole state,
// and how a reader of the workflow's history with no worker (a serve
// backend, say) rebuilds it: from the execution's input, each step's
// result in turn. Neither prev nor res is changed.
func ApplyStep(prev *toolrun.State, res *StepResult) (*toolrun.State, error) {
	if res == nil || res.State == nil {
		return nil, errors.New("toolrun: apply step: the result has no state")
	}
	if res.Ref != "" || res.Base == 0 {
		return res.State, nil
	}
	if prev == nil || res.Base < 0 || res.Base > len(prev.Params.Messages) {
		n := 0
		if prev != nil {
			n = len(prev.Params.Messages)
		}
		return nil, fmt.Errorf("toolrun: apply step: the result follows %d messages of the history, which has %d", res.Base, n)
	}
	s := *res.State
	s.Params.Messages = append(slices.Clip(prev.Params.Messages[:res.Base]), res.State.Params.Messages...)
	return &s, nil
}

// applyOwned is [ApplyStep] for the workflow, which owns prev and drops
// it for the state returned: a result that follows the whole of prev's
// history is appended to it in place, so that a step costs the workflow
// task what the step added, not a copy of the whole history (a task
// does no work that grows with the run).
func applyOwned(prev *toolrun.State, res *StepResult) (*toolrun.State, error) {
	if prev == nil || res == nil || res.State == nil || res.Ref != "" || res.Base == 0 || res.Base != len(prev.Params.Messages) {
		return ApplyStep(prev, res)
	}
	s := *res.State
	s.Params.Messages = append(prev.Params.Messages, res.State.Params.Messages...)
	return &s, nil
}

// handleHistory registers [HistoryQuery].
func (w *run) handleHistory(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, HistoryQuery, func(since HistorySince) (HistoryAt, error) {
		h := HistoryAt{State: w.state, Messages: len(w.state.Params.Messages), Digest: w.digest}
		if w.begins(since) {
			s := *w.state
			s.Params.Messages = w.state.Params.Messages[since.Messages:]
			h.State, h.From = &s, since.Messages
		}
		return h, nil
	})
}

// stepInput returns the input of the next step: with deltas and a
// digest, the state without its history and what identifies it.
func (w *run) stepInput() StepInput {
	in := StepInput{State: w.state, Ref: w.ref, Superseded: w.superseded, PayloadLimit: w.opts.PayloadLimit,
		ClaimThreshold: w.opts.ClaimThreshold, Spent: w.spent}
	if w.deltas && w.ref == "" {
		in.Deltas = true
		if w.digest != "" {
			in.State, in.Messages, in.Digest, in.HistoryBytes = skeleton(w.state), len(w.state.Params.Messages), w.digest, w.histBytes
		}
	}
	return in
}

// takeStep makes res, the result of step in, the run's state.
func (w *run) takeStep(in StepInput, res *StepResult) error {
	if res.Ref != "" || !in.Deltas {
		w.state, w.ref, w.size = res.State, res.Ref, res.Size
		w.digest, w.histBytes = "", 0
		w.mark("", true)
		return nil
	}
	whole, err := applyOwned(w.state, res)
	if err != nil {
		return err
	}
	w.state, w.ref = whole, ""
	w.digest, w.histBytes = res.Digest, res.HistoryBytes
	w.mark(res.Digest, res.Base == 0)
	// The whole state is about the result and the history before it.
	w.size = res.Size + res.HistoryBytes
	return nil
}

// historyOf returns the whole state of the run whose step in is, given
// the state without its history: from the workflow, by [HistoryQuery],
// which must hold exactly the history in names (its length and digest);
// anything else (an attempt of a step the workflow moved on from) is an
// error, and the attempt is retried.
func (a *Activities) historyOf(ctx context.Context, in StepInput, e *cachedRun) (*toolrun.State, error) {
	if !activity.IsActivity(ctx) {
		return nil, sdktemporal.NewNonRetryableApplicationError("toolrun: a step given the state without its history runs only as an activity", "toolrun.NotActivity", nil)
	}
	if !a.queries.Load() {
		return nil, needHistory(errors.New("the activities were not registered with a worker, whose client a step queries its workflow with"))
	}
	info := activity.GetInfo(ctx)
	// An entry of an earlier history of the run (the worker's last step
	// of it, before another worker took the steps since) asks for what
	// came after it alone.
	var since HistorySince
	if e != nil && e.whole != nil && e.digest != "" && e.msgs > 0 && e.msgs <= in.Messages && len(e.whole.Params.Messages) == e.msgs {
		since = HistorySince{Messages: e.msgs, Digest: e.digest}
	}
	v, err := activity.GetClient(ctx).QueryWorkflow(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, HistoryQuery, since)
	if err != nil {
		return nil, needHistory(fmt.Errorf("query %s: %w", HistoryQuery, err))
	}
	var h HistoryAt
	if err := v.Get(&h); err != nil {
		return nil, needHistory(fmt.Errorf("query %s: %w", HistoryQuery, err))
	}
	if h.From != 0 {
		if h.State == nil || since.Digest == "" || h.From != since.Messages {
			return nil, needHistory(fmt.Errorf("the workflow left out %d messages of the history, and the step asked it to leave out %d", h.From, since.Messages))
		}
		// The messages held are never written into: the whole history
		// shares them.
		rest := h.State.Params.Messages
		h.State.Params.Messages = append(slices.Clip(e.whole.Params.Messages[:h.From]), rest...)
	}
	if h.State == nil || h.Digest != in.Digest || len(h.State.Params.Messages) != in.Messages {
		// An attempt of a step the workflow moved on from, whose result
		// is not recorded; or a workflow that cannot say.
		return nil, needHistory(fmt.Errorf("the workflow holds another history (%d messages, digest %.12s) than the step's (%d, %.12s)", h.Messages, h.Digest, in.Messages, in.Digest))
	}
	return h.State, nil
}

// errNeedHistory is the error type of a step that was given the state
// without its history and could not get the history: the workflow sends
// the step again with the whole state.
const errNeedHistory = "toolrun.NeedHistory"

func needHistory(err error) error {
	return sdktemporal.NewNonRetryableApplicationError("toolrun: the step has the state without its history and could not get it: "+err.Error(), errNeedHistory, nil)
}

// needsHistory reports whether a step failed for want of the history.
func needsHistory(err error) bool {
	var ae *sdktemporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == errNeedHistory
}

// wholeInput returns step input in with the whole state in place of the
// state without its history.
func (w *run) wholeInput(in StepInput) StepInput {
	in.State, in.Messages, in.Digest, in.HistoryBytes = w.state, 0, "", 0
	return in
}

// delta is what a step without a Store returns of the history: the
// messages after the first base of the history the step began with.
type delta struct {
	base   int
	digest string
	bytes  int // the whole history's JSON, about
}

// deltaOf cuts whole, the state after step in, to what the workflow does
// not hold: the history after the messages of prev (the history the step
// began with) if whole's begins with them, else the whole history (a
// compaction replaced it). It returns the cut state and its delta.
func deltaOf(in StepInput, prev []anthropic.BetaMessageParam, whole *toolrun.State) (*toolrun.State, delta, error) {
	msgs := whole.Params.Messages
	base := len(prev)
	if base > len(msgs) || !samePrefix(prev, msgs[:base]) {
		base = 0
	}
	cut := *whole
	cut.Params.Messages = msgs[base:]
	state, err := json.Marshal(&cut)
	if err != nil {
		return nil, delta{}, err
	}
	added, err := json.Marshal(cut.Params.Messages)
	if err != nil {
		return nil, delta{}, err
	}
	d := delta{base: base, bytes: len(added)}
	chain := ""
	if base > 0 {
		switch {
		case in.Digest != "":
			chain, d.bytes = in.Digest, d.bytes+in.HistoryBytes
		default:
			b, err := json.Marshal(prev)
			if err != nil {
				return nil, delta{}, err
			}
			chain, d.bytes = digestOf("", b), d.bytes+len(b)
		}
	}
	d.digest = digestOf(chain, state)
	return &cut, d, nil
}

// digestOf returns the digest of a history that is the one digested as
// chain with b after it.
func digestOf(chain string, b []byte) string {
	h := sha256.New()
	h.Write([]byte(chain))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// samePrefix reports whether a and b hold the same messages: a message
// is the same if it is the very message (the runner's messages are never
// written into, so the state a step began with on a runner and the one
// it ended with share those it did not replace, as the runner's own
// request cache takes them), else if it is equal. A step that went on
// from its runner compares pointers only, whatever the history's length;
// one resumed from a decoded state compares values, as decoding it cost.
// A difference it sees where there is none costs a whole history in the
// result, never a wrong one.
func samePrefix(a, b []anthropic.BetaMessageParam) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameMessage(&a[i], &b[i]) && !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// sameMessage reports whether a and b are the very same message: both
// point at the same content. A message with no content pointer (an
// override) is never the same.
func sameMessage(a, b *anthropic.BetaMessageParam) bool {
	if a.OfUser == nil && a.OfAssistant == nil && a.OfSystem == nil {
		return false
	}
	return a.OfUser == b.OfUser && a.OfAssistant == b.OfAssistant && a.OfSystem == b.OfSystem
}
