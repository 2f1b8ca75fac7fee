package toolrun

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// This file holds the engine: a run is one state machine, [Runner.step],
// which looks at the run's [State] and says what happens next — hand out a
// turn, run these calls, or stopped — and applies what happened back to
// the State. Every way of driving a run is a short loop over it: Next,
// Turns and Run here, Events in events.go, Advance and ExecuteCall in
// advance.go. The calls go to the one executor in executor.go; the
// decision order is in decision.go; when a turn's calls are held back is
// in hold.go; how a run stops and what its Result is, in stop.go.

// Run runs the loop until it stops and returns how it ended. The result is
// never nil. The error is nil when the model finished (or refused, or ran
// out of max_tokens or context: Result.StopReason says which), when a hook
// stopped the run, and when the run awaits approval. It is non-nil when
// the run stopped short of the model's answer: a failure ([StopError],
// [StopCanceled]) or a limit the caller set
// ([ErrMaxTurns], [ErrBudget]).
//
// With Options.Stream, Run streams every response (and retries faults
// mid-stream) without handing out its events; use [Runner.Events] to see
// them.
func (r *Runner) Run(ctx context.Context) (*Result, error) {
	for {
		turn, err := r.Next(ctx)
		if err != nil || turn == nil {
			return r.result(), err
		}
	}
}

// Turns returns an iterator over the run's turns: each response, before the
// runner acts on it (see [Turn]). It ends when the run stops, after yielding
// the error if it stopped with one (as Run returns it). Leaving the loop
// with break keeps the run as it is; ranging over Turns again picks it up
// where it was.
func (r *Runner) Turns(ctx context.Context) iter.Seq2[*Turn, error] {
	return func(yield func(*Turn, error) bool) {
		for {
			turn, err := r.Next(ctx)
			if err != nil {
				yield(nil, err)
				return
			}
			if turn == nil || !yield(turn, nil) {
				return
			}
		}
	}
}

// Next takes one step: it answers the turn handed out before, if any (see
// [Turn]), then sends the next request and returns the response as a turn.
// It returns a nil turn once the run has stopped, with the error Run would
// return; [Runner.Result] says why. A run stopped with an error keeps its
// state: calling Next again tries again.
func (r *Runner) Next(ctx context.Context) (*Turn, error) {
	ctx, cancel := r.runContext(ctx)
	defer cancel()
	for {
		s := r.step(ctx, true)
		switch s.kind {
		case stepTurn:
			return s.turn, nil
		case stepCalls:
			if err := r.execute(ctx, s.calls); err != nil {
				return nil, err
			}
		default:
			return nil, r.stopErr
		}
	}
}

// stepKind is what the engine says happens next.
type stepKind int

const (
	stepStopped stepKind = iota // the run stopped; the State says how
	stepTurn                    // a response arrived: hand it out
	stepCalls                   // run these calls, then step again
	stepYield                   // a request is due, and the driver asked for none
)

type step struct {
	kind  stepKind
	turn  *Turn
	calls []*callState // allowed, not started, in the order of the response
}

// step takes the run one step from its state: it commits a pending turn
// whose calls are all answered, decides the calls that have no decision
// (answering those that need no running), and sends the next request when
// one is due — unless request is false, for a driver that sends at most
// one request at a time.
func (r *Runner) step(ctx context.Context, request bool) step {
	if r.halted() {
		return step{}
	}
	r.clearStop()
	if err := r.claim(ctx); err != nil {
		r.fail(ctx, err, "")
		return step{}
	}
	for {
		if err := r.takeSaveErr(); err != nil {
			r.fail(ctx, err, "")
			return step{}
		}
		if err := r.takeObserverErr(); err != nil {
			r.fail(ctx, err, "an OnEvent observer panicked")
			return step{}
		}
		if ctx.Err() != nil {
			r.fail(ctx, context.Cause(ctx), "")
			return step{}
		}
		p := r.st.pending
		if p == nil {
			if res := r.turnLimit(nil); res != nil {
				r.stop(ctx, res)
				return step{}
			}
			if !request {
				return step{kind: stepYield}
			}
			if due, tokens := r.compactDue(); due {
				if err := r.compact(ctx, tokens); err != nil {
					r.fail(ctx, err, "")
					return step{}
				}
				if r.stopped() { // over budget
					return step{}
				}
			}
			turn := r.request(ctx)
			if turn == nil {
				return step{}
			}
			return step{kind: stepTurn, turn: turn}
		}
		h, held := r.held(p)
		switch h {
		case holdStopped:
			return step{} // not reached: a halted run returned at the top
		case holdEdited:
			r.leaveOut(ctx, p)
			continue
		case holdFinal:
			// A final response: calls in it are answered as not run, never
			// executed with input that may be cut off.
			reason, detail := modelStop(p.StopReason)
			for i := range p.Calls {
				if c := &p.Calls[i]; c.Phase != phaseAnswered {
					r.answer(ctx, c, &ToolResult{Call: c.Call, Err: fmt.Errorf("%w: %s", ErrNotRun, detail)})
				}
			}
			// The answer and the stop are saved together: a crash between
			// two saves would leave a history ending in the model's answer
			// with no stop, and the run resumed from it would ask the model
			// again.
			after := len(p.After) > 0
			r.appendTurn(ctx)
			if after {
				// The caller said more (AppendMessages) once the answer
				// was out: the run goes on with it.
				r.save(ctx)
				continue
			}
			r.stop(ctx, &Result{StopReason: reason, Detail: detail})
			return step{}
		case holdLimit:
			if held.StopReason == StopMaxTurns {
				r.log.WarnContext(ctx, "toolrun: turn limit reached; the last turn's tool calls are left pending",
					"turn", p.Turn, "max_turns", r.maxTurns(), "pending_calls", len(p.Calls))
			}
			r.stop(ctx, held)
			return step{}
		}
		if len(p.Calls) == 0 {
			// pause_turn and compaction are sent back as they are, so the
			// server resumes the turn.
			r.commit(ctx)
			continue
		}
		calls, err := r.decideTurn(ctx, p)
		if err != nil {
			r.hookFailed(ctx, err)
			return step{}
		}
		if len(calls) > 0 {
			return step{kind: stepCalls, calls: calls}
		}
		if n := len(r.st.AwaitingApproval()); n > 0 {
			r.stop(ctx, &Result{StopReason: StopAwaitingApproval, Detail: fmt.Sprintf("%s of turn %d awaiting approval", count(n, "tool call"), p.Turn)})
			return step{}
		}
		r.commit(ctx)
	}
}

// setPending makes p the pending turn and forgets what this runner knew of
// the previous one.
func (r *Runner) setPending(p *turnState) {
	r.mu.Lock()
	r.st.pending, r.st.edited = p, false
	r.mu.Unlock()
	if p != nil {
		r.committed = nil // a turn of its own now
	}
	// Dropped rather than cleared: a run held awaiting approval keeps no
	// map of a turn it no longer has.
	r.live = nil
}

// commit appends the pending turn's assistant message and tool results to
// the history, and saves the state.
func (r *Runner) commit(ctx context.Context) {
	r.appendTurn(ctx)
	r.save(ctx)
}

// appendTurn is commit without the save, for a caller that saves what
// follows with it.
func (r *Runner) appendTurn(ctx context.Context) {
	p := r.st.pending
	// One new array, of the size it needs: a run held awaiting approval
	// keeps it, and a long run copies its history once per turn, not twice.
	add := 1
	if len(p.Calls) > 0 {
		add = 2
	}
	r.st.Params.Messages = append(slices.Grow(slices.Clip(r.st.Params.Messages), add), sanitizeAssistant(p.Message))
	if r.historyIDs != nil {
		for _, c := range p.Calls {
			r.historyIDs[c.Call.ID] = struct{}{}
		}
	}
	var results []*ToolResult
	if len(p.Calls) > 0 {
		blocks := make([]anthropic.BetaContentBlockParamUnion, len(p.Calls))
		for i := range p.Calls {
			c := &p.Calls[i]
			res := r.live[c.Call.ID]
			if res == nil {
				res = c.toolResult()
			}
			results = append(results, res)
			blocks[i] = r.resultBlock(c)
			r.st.ToolCalls++
			// A denial or a skip is a decision, not a failure.
			decided := c.Decision != nil && (c.Decision.Kind == Deny || c.Decision.Kind == Skip)
			switch {
			case decided && c.Decision.Kind == Deny:
				r.st.ToolDenials++
			case c.Result.IsError && !decided:
				r.st.ToolFailures++
			}
		}
		// Cut to fit the API's request size limit before they are first
		// sent (size.go).
		blocks = fitResults(blocks, r.resultBudget(p))
		r.st.Params.Messages = append(r.st.Params.Messages, anthropic.NewBetaUserMessage(blocks...))
	}
	if len(p.After) > 0 && answersCode(p) {
		// The API takes nothing but tool_result blocks in the user turn
		// that answers calls made from code, and would merge these into
		// it: they wait for the next turn (state.go's held).
		r.st.held = append(p.After, r.st.held...)
	} else if len(p.After) > 0 {
		r.st.Params.Messages = append(r.st.Params.Messages, p.After...)
		r.historyIDs, r.inputStale = nil, true
	}
	var msg *anthropic.BetaMessage
	var u Usage
	if m := r.lastMessage(); m != nil && r.st.Turns == p.Turn {
		msg, u = m, usageOf(m)
	}
	r.setPending(nil)
	r.committed = nil
	if len(p.Calls) > 0 {
		// Its calls alone: the history holds the response.
		p.Message, p.After = anthropic.BetaMessageParam{}, nil
		r.committed = p
	}
	r.emit(ctx, TurnFinished{Turn: p.Turn, Message: msg, Results: results, Usage: u})
}

// sanitizeAssistant makes a response safe to send back: a tool_use whose
// input was cut off (max_tokens) is not valid JSON, and would make every
// later request fail. m is not changed.
func sanitizeAssistant(m anthropic.BetaMessageParam) anthropic.BetaMessageParam {
	return blankInputs(m, func(input any) bool {
		raw, ok := input.(json.RawMessage)
		return ok && !json.Valid(raw)
	})
}

// resultBlock is the tool_result block of an answered call.
func (r *Runner) resultBlock(c *callState) anthropic.BetaContentBlockParamUnion {
	content, _ := truncateContent(c.Result.Content, r.resultLimit(r.tool(c.Call)))
	b := anthropic.BetaToolResultBlockParam{ToolUseID: c.Call.ID, Content: content, CacheControl: c.Result.CacheControl}
	if c.Call.Toolset != "" {
		// A toolset member's result names its toolset, as the API expects.
		b.ToolsetName = anthropic.String(c.Call.Toolset)
	}
	if c.Result.IsError {
		b.IsError = anthropic.Bool(true)
	}
	return anthropic.BetaContentBlockParamUnion{OfToolResult: &b}
}

// answersCode reports whether p's tool results answer a call made from
// code the model ran (programmatic tool calling): a call whose Caller is
// neither "" nor "direct".
func answersCode(p *turnState) bool {
	for i := range p.Calls {
		if c := p.Calls[i].Call.Caller; c != "" && c != "direct" {
			return true
		}
	}
	return false
}
