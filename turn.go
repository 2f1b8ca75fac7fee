package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"golang.org/x/sync/errgroup"
)

// pendingTurn is a response handed out and not yet committed to the
// history, with the progress of its tool calls. It is what a suspended run
// carries in its [State].
type pendingTurn struct {
	turn       int
	message    *anthropic.BetaMessage // nil for a turn restored from State
	param      anthropic.BetaMessageParam
	stopReason anthropic.BetaStopReason
	calls      []*callState
	streaming  bool // a response still streaming in, whose calls may start early: not part of the State
}

// callState is the progress of one call of a pending turn.
type callState struct {
	call      ToolCall
	decided   bool // decision holds a decision given with Runner.Decide
	deferred  bool // awaiting a person's decision
	decision  Decision
	decidedBy string

	// Guarded by Runner.stateMu once the calls run, as the tools' goroutines
	// set them while a checkpoint may read them.
	started bool        // the tool's Run was called (journaled before it is)
	result  *ToolResult // nil until the call is answered
}

func newPendingTurn(n int, msg *anthropic.BetaMessage) *pendingTurn {
	p := &pendingTurn{turn: n, message: msg, param: msg.ToParam(), stopReason: msg.StopReason}
	for _, c := range msg.Content {
		if c.Type != "tool_use" {
			continue
		}
		input := c.Input
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		p.calls = append(p.calls, &callState{call: ToolCall{ID: c.ID, Name: c.Name, Input: input}})
	}
	return p
}

func (p *pendingTurn) toolCalls() []ToolCall {
	calls := make([]ToolCall, len(p.calls))
	for i, c := range p.calls {
		calls[i] = c.call
	}
	return calls
}

// undecided counts the deferred calls of the pending turn still awaiting a
// decision.
func (r *Runner) undecided() int {
	if r.pending == nil {
		return 0
	}
	n := 0
	for _, c := range r.pending.calls {
		if c.result == nil && c.deferred && !c.decided {
			n++
		}
	}
	return n
}

// modelStop maps the stop_reason of a final response to the run's.
func modelStop(reason anthropic.BetaStopReason) (StopReason, string) {
	switch reason {
	case anthropic.BetaStopReasonEndTurn, anthropic.BetaStopReasonStopSequence:
		return StopEndTurn, ""
	case anthropic.BetaStopReasonMaxTokens:
		return StopMaxTokens, "the response was cut off at max_tokens"
	case anthropic.BetaStopReasonRefusal:
		return StopRefusal, "the model refused"
	case anthropic.BetaStopReasonModelContextWindowExceeded:
		return StopContextWindow, "the model's context window was exceeded"
	}
	return StopEndTurn, fmt.Sprintf("the model stopped with %q", reason)
}

// finishTurn acts on the pending turn: it answers its tool calls and commits
// it to the history, or stops the run. It reports whether the run stopped.
func (r *Runner) finishTurn(ctx context.Context) (bool, error) {
	p := r.pending
	if isToolTurn(p.stopReason) {
		if len(p.calls) == 0 {
			// pause_turn and compaction are sent back as they are, so the
			// server resumes the turn.
			r.commit(ctx)
			return false, nil
		}
		if res := r.heldBack(p); res != nil {
			if res.StopReason == StopMaxTurns {
				r.log.WarnContext(ctx, "toolrun: turn limit reached; the last turn's tool calls are left pending",
					"turn", p.turn, "max_turns", r.maxTurns, "pending_calls", len(p.calls))
			}
			r.stop(ctx, res)
			return true, nil
		}
		if err := r.answerCalls(ctx, p); err != nil {
			return true, err
		}
		if r.stopped != nil { // a hook stopped the run
			return true, nil
		}
		if r.undecided() > 0 {
			r.stop(ctx, &Result{StopReason: StopAwaitingApproval, Detail: fmt.Sprintf("%s of turn %d awaiting approval", count(r.undecided(), "tool call"), p.turn)})
			return true, nil
		}
		r.commit(ctx)
		return false, nil
	}
	reason, detail := modelStop(p.stopReason)
	for _, c := range p.calls {
		if c.result == nil {
			r.answer(ctx, c, &ToolResult{Call: c.call, Err: fmt.Errorf("%w: %s", ErrNotRun, detail)})
		}
	}
	r.commit(ctx)
	r.stop(ctx, &Result{StopReason: reason, Detail: detail})
	return true, nil
}

// heldBack returns the stop for a tool turn whose calls must not start: the
// run is at its turn limit (the calls wait for it to be raised) or they
// would pass the tool-call budget. A turn some of whose calls were answered
// or decided already goes on.
func (r *Runner) heldBack(p *pendingTurn) *Result {
	if p.started() {
		return nil
	}
	if r.maxTurns != Unlimited && r.turns >= r.maxTurns {
		return &Result{StopReason: StopMaxTurns, Detail: fmt.Sprintf("turn limit of %d reached; %s of turn %d not run", r.maxTurns, count(len(p.calls), "tool call"), p.turn)}
	}
	if b := r.opts.Budget.ToolCalls; b > 0 && r.toolCalls+len(p.calls) > b {
		return budgetStop("tool_calls", fmt.Sprintf("tool-call budget of %d would be exceeded: %d answered, turn %d asks for %d more; they are left pending", b, r.toolCalls, p.turn, len(p.calls)))
	}
	return nil
}

// isToolTurn reports whether a response's calls are to be answered, as
// opposed to answered as not run because the response is final.
func isToolTurn(reason anthropic.BetaStopReason) bool {
	switch reason {
	case anthropic.BetaStopReasonToolUse, anthropic.BetaStopReasonPauseTurn, anthropic.BetaStopReasonCompaction:
		return true
	}
	return false
}

// started reports whether any call of the turn was answered or decided.
func (p *pendingTurn) started() bool {
	for _, c := range p.calls {
		if c.result != nil || c.decided {
			return true
		}
	}
	return false
}

// commit appends the pending turn's assistant message and tool results to
// the history.
func (r *Runner) commit(ctx context.Context) {
	p := r.pending
	r.pending = nil
	r.params.Messages = append(r.params.Messages, sanitizeAssistant(p.param))
	var results []*ToolResult
	if len(p.calls) > 0 {
		blocks := make([]anthropic.BetaContentBlockParamUnion, len(p.calls))
		for i, c := range p.calls {
			results = append(results, c.result)
			blocks[i] = r.resultBlock(c.result)
			r.toolCalls++
			if c.result.IsError {
				r.toolFailures++
			}
		}
		r.params.Messages = append(r.params.Messages, anthropic.NewBetaUserMessage(blocks...))
	}
	var u Usage
	if p.message != nil {
		u = usageOf(p.message)
	}
	r.emit(ctx, TurnFinished{Turn: p.turn, Message: p.message, Results: results, Usage: u})
	r.save(ctx)
}

// sanitizeAssistant makes a response safe to send back: a tool_use whose
// input was cut off (max_tokens) is not valid JSON, and would make every
// later request fail.
func sanitizeAssistant(m anthropic.BetaMessageParam) anthropic.BetaMessageParam {
	if m.OfAssistant == nil {
		return m
	}
	for i, b := range m.OfAssistant.Content {
		if b.OfToolUse == nil {
			continue
		}
		raw, ok := b.OfToolUse.Input.(json.RawMessage)
		if ok && !json.Valid(raw) {
			tu := *b.OfToolUse
			tu.Input = map[string]any{}
			m.OfAssistant.Content[i].OfToolUse = &tu
		}
	}
	return m
}

func (r *Runner) resultBlock(res *ToolResult) anthropic.BetaContentBlockParamUnion {
	content, _ := truncateContent(res.Content, r.resultLimit(r.tools[res.Call.Name]))
	b := anthropic.BetaToolResultBlockParam{ToolUseID: res.Call.ID, Content: content}
	if res.IsError {
		b.IsError = anthropic.Bool(true)
	}
	return anthropic.BetaContentBlockParamUnion{OfToolResult: &b}
}

// answer records res as the result of c: a failure becomes an is_error
// result with the error's text, AfterTool may change it, and it is counted
// and announced.
func (r *Runner) answer(ctx context.Context, c *callState, res *ToolResult) error {
	if res.Err != nil && len(res.Content) == 0 {
		res.IsError = true
		res.Content = []Content{Text(res.Err.Error())}
	}
	res.Decision = c.decision
	var hookErr error
	if h := r.opts.AfterTool; h != nil {
		hookErr = h(ctx, res)
	}
	if _, cut := truncateContent(res.Content, r.resultLimit(r.tools[c.call.Name])); cut {
		res.Truncated = true
		r.log.WarnContext(ctx, "toolrun: tool result truncated for the model", "tool", c.call.Name,
			"tool_use_id", c.call.ID, "turn", r.pending.turn, "limit", r.resultLimit(r.tools[c.call.Name]))
	}
	r.stateMu.Lock()
	c.result = res
	r.stateMu.Unlock()
	r.emit(ctx, ToolFinished{Turn: r.pending.turn, Result: res})
	r.save(ctx) // a failure stops the run at its next step
	return hookErr
}

// job is a call decided to run, with its tool and the input to run it with.
type job struct {
	c     *callState
	e     *toolEntry
	input json.RawMessage
}

// decideCalls decides the unanswered calls of p, answers those that need no
// running, and returns those to run, with the errors of AfterTool for the
// answered ones. Calls awaiting a person are neither. Decisions are taken
// one call at a time, in order, so a hook that asks a person asks about one
// call at a time.
func (r *Runner) decideCalls(ctx context.Context, p *pendingTurn) ([]job, []error) {
	var jobs []job
	var hookErrs []error
	for _, c := range p.calls {
		if c.result != nil {
			continue
		}
		e, input, res, ok := r.prepare(ctx, c, true)
		switch {
		case res != nil:
			hookErrs = append(hookErrs, r.answer(ctx, c, res))
		case ok:
			jobs = append(jobs, job{c, e, input})
		}
	}
	return jobs, hookErrs
}

// timeoutOf returns the timeout of a call of e, or 0 for none.
func (r *Runner) timeoutOf(e *toolEntry) time.Duration {
	t := e.config.Timeout
	if t == 0 {
		t = r.opts.ToolTimeout
	}
	return max(t, 0)
}

// answerCalls decides the unanswered calls of p, answers the ones that need
// no running, and runs the allowed ones.
func (r *Runner) answerCalls(ctx context.Context, p *pendingTurn) error {
	jobs, hookErrs := r.decideCalls(ctx, p)
	// Consecutive non-exclusive calls run together, bounded; an exclusive
	// call runs alone.
	limit := r.opts.MaxParallelTools
	if limit <= 0 {
		limit = DefaultMaxParallelTools
	}
	var mu sync.Mutex // guards hookErrs
	for i := 0; i < len(jobs); {
		j := i + 1
		if !jobs[i].e.config.Exclusive {
			for j < len(jobs) && !jobs[j].e.config.Exclusive {
				j++
			}
		}
		run := func(jb job) error {
			res := r.runTool(ctx, jb.e, jb.c.call, jb.input)
			if res == nil { // cancelled: left unanswered, to run again on resume
				return nil
			}
			if err := r.answer(ctx, jb.c, res); err != nil {
				mu.Lock()
				hookErrs = append(hookErrs, err)
				mu.Unlock()
			}
			return nil
		}
		if j-i == 1 {
			// One call: runTool already isolates it in a goroutine of its own.
			run(jobs[i])
		} else {
			var g errgroup.Group
			g.SetLimit(limit)
			for _, jb := range jobs[i:j] {
				g.Go(func() error { return run(jb) })
			}
			g.Wait()
		}
		i = j
		if ctx.Err() != nil {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return r.fail(ctx, err, fmt.Sprintf("cancelled during the tool calls of turn %d", p.turn))
	}
	if err := firstErr(hookErrs); err != nil {
		return r.hookFailed(ctx, "AfterTool", err)
	}
	return nil
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// decide works out what happens to c. It returns the call's result when it
// is answered without running (unknown tool, invalid input, denied,
// skipped); otherwise the tool and the input to run it with, unless the call
// is deferred.
func (r *Runner) decide(ctx context.Context, c *callState) (*toolEntry, json.RawMessage, *ToolResult) {
	e, ok := r.tools[c.call.Name]
	if !ok {
		return nil, nil, &ToolResult{Call: c.call, Err: unknownToolError(c.call.Name, r.names)}
	}
	input := c.call.Input
	if err := r.validate(ctx, e, c.call.Name, input); err != nil {
		return nil, nil, &ToolResult{Call: c.call, Err: err}
	}
	d, by := c.decision, c.decidedBy
	if c.decided {
		r.emit(ctx, ToolDecided{Turn: r.pending.turn, Call: c.call, Decision: d, By: by})
	} else {
		d, by = r.decision(ctx, e, c.call)
		if (d.Kind == Deny || d.Kind == Skip) && d.Reason == "" {
			d.Reason = "no reason given"
		}
		c.decision, c.decidedBy = d, by
		if d.Kind == Defer {
			c.deferred = true
		}
		r.emit(ctx, ToolDecided{Turn: r.pending.turn, Call: c.call, Decision: d, By: by})
		if d.Kind == Defer {
			return nil, nil, nil
		}
	}
	switch d.Kind {
	case Deny:
		reason := d.Reason
		if reason == "" { // a person's decision given with Decide
			reason = "no reason given"
		}
		return nil, nil, &ToolResult{Call: c.call, Err: fmt.Errorf("%w: %s", ErrDenied, reason)}
	case Skip:
		return nil, nil, &ToolResult{Call: c.call, Content: d.Result, IsError: d.IsError}
	case Defer:
		return nil, nil, nil
	}
	if len(d.Input) > 0 {
		if err := r.validate(ctx, e, c.call.Name, d.Input); err != nil {
			return nil, nil, &ToolResult{Call: c.call, Err: err}
		}
		input = d.Input
	}
	return e, input, nil
}

// decision asks the lists, Options.Decide and the tool's policy about call.
func (r *Runner) decision(ctx context.Context, e *toolEntry, call ToolCall) (Decision, string) {
	if r.always[call.Name] {
		return AllowCall(), "always"
	}
	if slicesContains(r.opts.Deny, call.Name) {
		return DenyCall(fmt.Sprintf("tool %q is not allowed in this run", call.Name)), "options"
	}
	if r.opts.Allow != nil && !slicesContains(r.opts.Allow, call.Name) {
		return DenyCall(fmt.Sprintf("tool %q is not allowed in this run", call.Name)), "options"
	}
	if r.opts.Decide != nil {
		if d := r.opts.Decide(ctx, call); d.Kind != Allow || len(d.Input) > 0 {
			return d, "options"
		}
	}
	if e.config.Policy != nil {
		if d := e.config.Policy(ctx, call); d.Kind != Allow || len(d.Input) > 0 {
			return d, "policy"
		}
	}
	return AllowCall(), "default"
}

func slicesContains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// validate checks input against the tool's schema.
//
// A validation cut short by ctx is no verdict on the input, and must not
// answer the call: validate then returns nil, and runTool, which starts no
// call once ctx is done, leaves the call unanswered.
func (r *Runner) validate(ctx context.Context, e *toolEntry, name string, input json.RawMessage) error {
	err := e.schema.validate(ctx, input)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		ve.Tool = name
	}
	return err
}

// runTool runs one call, recovering a panic and enforcing its timeout. It
// returns nil if the run's ctx was cancelled before the call finished: the
// call stays unanswered.
func (r *Runner) runTool(ctx context.Context, e *toolEntry, call ToolCall, input json.RawMessage) *ToolResult {
	if ctx.Err() != nil { // a call queued behind others does not start once the run is cancelled
		return nil
	}
	if err := r.journalStart(ctx, call, e); err != nil {
		return &ToolResult{Call: call, Err: fmt.Errorf("%w: %w", ErrNotRun, err)}
	}
	timeout := r.timeoutOf(e)
	var callCtx context.Context
	var cancel context.CancelFunc
	if timeout > 0 {
		callCtx, cancel = context.WithTimeout(ctx, timeout)
	} else {
		callCtx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	r.emit(ctx, ToolStarted{Turn: r.pending.turn, Call: call})

	type outcome struct {
		content []Content
		err     error
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		// The tool is the caller's code: a panic in it must not take the
		// process down, so it is recovered here and sent to the model and the
		// log as a failure of that one call.
		defer func() {
			if v := recover(); v != nil {
				done <- outcome{err: &PanicError{Tool: call.Name, Value: v, Stack: debug.Stack()}}
			}
		}()
		content, err := e.tool.Run(callCtx, input)
		done <- outcome{content, err}
	}()
	res := &ToolResult{Call: call, Ran: true}
	select {
	case o := <-done:
		res.Duration = time.Since(start)
		res.Content, res.Err = o.content, o.err
		if ctx.Err() != nil {
			return nil
		}
		if o.err != nil && callCtx.Err() == context.DeadlineExceeded {
			res.Content, res.Err = nil, &TimeoutError{Tool: call.Name, After: timeout}
		}
	case <-callCtx.Done():
		res.Duration = time.Since(start)
		if ctx.Err() != nil {
			// Cancelled with the run, or with a response that failed as it
			// streamed in: the call is waited for (Run honours ctx), so that
			// it cannot overlap a run of the same call from the retried
			// response or on resume.
			<-done
			return nil
		}
		res.Err = &TimeoutError{Tool: call.Name, After: timeout}
		// A tool that ignores its ctx goes on in the background; its late
		// result is dropped, and logged so the operator knows. A tool that
		// stopped because of its ctx returns the ctx's error: nothing to tell.
		go func() {
			o := <-done
			if o.err != nil && callCtx.Err() != nil && errors.Is(o.err, callCtx.Err()) {
				return
			}
			r.log.WarnContext(context.WithoutCancel(ctx), "toolrun: tool ignored its cancellation and returned after its timeout; result dropped",
				"tool", call.Name, "tool_use_id", call.ID, "error", o.err)
		}()
	}
	if res.Err != nil {
		res.Content = nil
	}
	return res
}

// count renders n things, in the singular for one.
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
