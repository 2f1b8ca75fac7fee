package toolrun

import (
	"context"
	"encoding/json"
	"slices"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun/internal/deepcopy"
)

// This file holds what a caller reads and changes of a run between steps:
// its State, its history and its turn limit.

// State returns a copy of the run's data, signed with Options.StateKey if
// set. It shares nothing with the runner: writing into the copy, down to a
// block's text or a tool_use input's bytes, does not change the run.
//
// The copy is made through the State's JSON, the form a [Store] keeps. A
// history that does not encode as JSON — a message the caller gave with a
// tool_use Input that is not valid JSON, or an Input holding a value
// encoding/json refuses (a func, a channel, an infinite or NaN float) — is
// copied without it, field by field, and State logs an Error, because no
// Store can save that state either. Such a run cannot be sent: Run, Next
// and the other drivers stop it with [StopError] and a *[TurnError] whose
// text carries the encoding's error (the SDK encodes with its own copy of
// encoding/json, whose error types a caller cannot name), before anything
// goes out, as often as they are called: nothing is sent twice, and no
// call runs again. Replacing the message with [Runner.SetMessages] lets
// the run go on.
func (r *Runner) State() *State {
	s := r.versioned()
	var out State
	b, err := json.Marshal(s)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err == nil {
		out.Params.Betas = slices.Clone(s.Params.Betas)
		s = &out
	} else {
		// Not silent: a Store could not save this state. The copy made
		// without JSON keeps unexported SDK bookkeeping (param.Opt status,
		// metadata) by value, which no caller can write through; see
		// internal/deepcopy. The turn in progress is unexported here and
		// is copied on its own, so State.Decide on the copy cannot reach
		// the runner's calls.
		r.log.Error("toolrun: the run's state does not encode as JSON; State returns a copy made without it, which a Store cannot save", "error", err)
		out = deepcopy.Copy(*s)
		out.pending = deepcopy.Copy(s.pending)
		s = &out
	}
	r.sign(s)
	return s
}

// sharedState is State without its deep copy, for package driver's
// Snapshot: a copy of the run's data whose history shares the runner's
// messages, which the runner never writes into (it appends to the history
// or replaces it), so that a driver reading the state after each step
// pays for the history's slice, not for its JSON.
func (r *Runner) sharedState() *State {
	s := r.versioned()
	s.Params.Betas = slices.Clone(s.Params.Betas)
	r.sign(s)
	return s
}

// versioned is [Runner.snapshot] with the run's version and id.
func (r *Runner) versioned() *State {
	s := r.snapshot()
	r.saveMu.Lock()
	s.Version = r.version
	r.saveMu.Unlock()
	s.RunID = r.opts.RunID
	return s
}

// sign signs s with the run's StateKey, if it has one. A failure is
// logged, not returned: the state is still the run's, and a resume checks
// the signature it carries.
func (r *Runner) sign(s *State) {
	if err := s.sign(r.opts.StateKey); err != nil {
		r.log.Error("toolrun: signing the state failed", "error", err)
	}
}

// snapshot returns a copy of the run's data that shares no slice the
// runner changes.
func (r *Runner) snapshot() *State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.clone()
}

// Messages returns a copy of the history that shares nothing with the run:
// writing into it, down to a block's text, does not change the run; give
// the edited copy to [Runner.SetMessages] to change it. The response of a
// turn handed out by Next is not in it until the next call of Next commits
// it.
func (r *Runner) Messages() []anthropic.BetaMessageParam {
	return deepcopy.Copy(r.st.Params.Messages)
}

// SetMessages replaces the history with a copy of messages. Called while a
// turn is handed out, it takes over that turn: the runner will not append
// the turn's response or run its tools. If the run had stopped, it may go
// on. Messages appended to that turn with [Runner.AppendMessages] before
// follow the new history: they are the caller's, not the turn's. Writing
// into messages afterwards does not change the run.
func (r *Runner) SetMessages(messages []anthropic.BetaMessageParam) {
	r.setHistory(deepcopy.Copy(messages))
	r.markEdited()
}

// AppendMessages appends a copy of messages to the history, after the
// turn in progress if there is one: a turn awaiting approval keeps its
// calls, which still await their decisions, and a turn handed out by Next
// is still the runner's to act on (its tools run). Either way the
// messages follow the turn's response and tool results, so the model's
// next request has those and then the messages; see
// [State.AppendMessages]. A run that had stopped with the model's answer
// goes on with them; one awaiting approval goes on once its calls are
// decided; one stopped by a limit keeps them and goes on once the limit is
// raised (SetMaxTurns, a new Budget). Writing into messages afterwards
// does not change the run. Nothing is saved here: with Options.Store the
// messages reach the Store with the run's next save (when Run or Next
// goes on), so a process that ends before that must append them again.
//
// To take a turn over instead (leave its response out, answer its calls
// yourself), use [Runner.SetMessages] or [Runner.RetryTurn]; after either,
// AppendMessages appends to the history as the caller left it. Like every
// method of a Runner, it is called between steps (in the loop body of
// [Runner.Turns], or while the run is stopped), never from a hook, a
// tool, an OnEvent observer or the loop body of [Runner.Events].
func (r *Runner) AppendMessages(messages ...anthropic.BetaMessageParam) {
	r.mu.Lock()
	r.st.AppendMessages(messages...)
	r.mu.Unlock()
	r.historyIDs = nil
	r.inputStale = true
	if r.stopped() && r.st.StopReason != StopAwaitingApproval {
		r.clearStop()
	}
}

// setHistory replaces the history otherwise than by committing a turn.
// Any message may be another now: the set of tool_use ids is built again
// when needed, and the next request's input is estimated in full
// (budget.go).
func (r *Runner) setHistory(messages []anthropic.BetaMessageParam) {
	r.st.Params.Messages = messages
	r.historyIDs = nil
	r.inputStale = true
}

// RetryTurn discards the turn handed out by Next: its response is not
// appended and its tools do not run, and the next call of Next sends the
// same history again, with any messages appended to the turn with
// [Runner.AppendMessages] after it.
func (r *Runner) RetryTurn() { r.markEdited() }

// leaveOut drops the pending turn p, which the caller took over by changing
// the history. That is routine, and logged at Debug, unless some of its
// calls ran (or started): their effects stay, but the model will never see
// their results unless the caller put them in the history, so that is a
// Warn naming them.
func (r *Runner) leaveOut(ctx context.Context, p *turnState) {
	var ran []string
	for _, c := range p.Calls {
		if c.Phase == phaseStarted || (c.Result != nil && c.Result.Ran) {
			ran = append(ran, c.Call.ID)
		}
	}
	if len(ran) > 0 {
		r.log.WarnContext(ctx, "toolrun: history changed by the caller; turn left out with calls that ran, whose results the model will not see",
			"turn", p.Turn, "tool_use_ids", ran)
	} else {
		r.log.DebugContext(ctx, "toolrun: history changed by the caller; turn left out", "turn", p.Turn)
	}
	r.setPending(nil)
}

func (r *Runner) markEdited() {
	if p := r.st.pending; p != nil {
		if !r.st.edited && len(p.After) > 0 {
			// Messages appended to the turn (AppendMessages) are the
			// caller's, not the turn's: taken over, the turn leaves them
			// after the history the caller left, before any appended next.
			r.mu.Lock()
			r.st.Params.Messages = append(slices.Clip(r.st.Params.Messages), p.After...)
			p.After = nil
			r.mu.Unlock()
			r.historyIDs, r.inputStale = nil, true
		}
		r.st.edited = true
	}
	if r.stopped() && r.st.StopReason != StopAwaitingApproval {
		r.clearStop()
	}
}

// SetMaxTurns changes the turn limit; see [Options.MaxTurns]. A run stopped
// at its limit may go on after it is raised.
func (r *Runner) SetMaxTurns(n int) {
	if n == 0 {
		n = DefaultMaxTurns
	}
	r.st.MaxTurns = n
	if r.stopped() && r.st.StopReason == StopMaxTurns {
		r.clearStop()
	}
}

// Params returns a copy of the request params the runner sends, with the
// history as Messages and every tool's definition. It shares nothing with
// the run.
func (r *Runner) Params() anthropic.BetaMessageNewParams {
	p := r.st.Params
	p.Tools = r.toolDefs
	p.Betas = r.st.Betas
	return deepcopy.Copy(p)
}
