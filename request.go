package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/toolrun/toolrun/internal/deepcopy"
	"github.com/toolrun/toolrun/internal/wire"
	"github.com/toolrun/toolrun/pricing"
)

// request sends the next turn's request, makes its response the pending
// turn and returns it as a turn to hand out; or stops the run and returns
// nil. A response the runner cannot answer validly (see checkResponse) is
// asked for once more, and then stops the run with
// [ErrMalformedResponse]: it never reaches the history.
func (r *Runner) request(ctx context.Context) *Turn {
	n := r.st.Turns + 1
	r.flushToolChanges()
	params := r.requestParams()
	if err := r.beforeRequest(ctx, n, &params); err != nil {
		r.hookFailed(ctx, err)
		return nil
	}
	var msg *anthropic.BetaMessage
	for attempt := 1; ; attempt++ {
		if res, err := r.checkBudget(&params, r.lastInput, r.lastInputMsgs); err != nil {
			r.fail(ctx, err, "")
			return nil
		} else if res != nil {
			r.stop(ctx, res)
			return nil
		}
		if size := r.requestSize(&params); size > maxRequestBytes {
			r.fail(ctx, fmt.Errorf("%w: turn %d's request would be %d bytes, past the API's limit of %d", ErrRequestTooLarge, n, size, maxRequestBytes), "")
			return nil
		}
		start := time.Now()
		sent := RequestSent{Turn: n, Params: &params, Streamed: r.opts.Stream, Attempt: 1}
		r.emit(ctx, sent)
		m, err := r.send(ctx, sent)
		if refused, ok := err.(*retryRefused); ok { // a failed stream's retry would pass the budget
			r.stop(ctx, refused.stop)
			return nil
		}
		if err != nil {
			te, ok := err.(*TurnError)
			if !ok {
				te = &TurnError{Turn: n, Attempt: 1, Err: err}
			}
			r.fail(ctx, te, fmt.Sprintf("turn %d failed", n))
			return nil
		}
		r.account(ctx, m, params.Model)
		bad := r.checkResponse(m)
		if bad == nil {
			r.threadReplied(m)
			msg = m
			r.emit(ctx, ResponseReceived{Turn: n, Message: m, Duration: time.Since(start), Usage: usageOf(m)})
			break
		}
		if attempt < 2 {
			r.log.WarnContext(ctx, "toolrun: malformed response; asking again", "turn", n, "error", bad.Error())
			continue
		}
		err = fmt.Errorf("%w: turn %d: %v", ErrMalformedResponse, n, bad)
		r.log.ErrorContext(ctx, "toolrun: malformed response twice; the run stops", "turn", n, "error", err.Error(),
			"response", string(wire.ResponseJSON(m)))
		r.fail(ctx, err, "")
		return nil
	}
	r.st.Turns = n
	r.adoptContainer(msg)
	r.last, r.lastRaw = msg, ""
	r.lastInput = contextUsage(msg).inputTotal()
	if r.measureFloor {
		r.compactFloor, r.measureFloor = r.lastInput, false
	}
	r.lastInputMsgs, r.inputStale = len(params.Messages), false
	p := newTurnState(n, msg)
	// Messages held back from a turn that answered calls made from code
	// follow this turn (state.go's held).
	p.After, r.st.held = r.st.held, nil
	if !r.objectInputs(ctx, p) {
		r.threadReply(p)
	}
	r.setPending(p)
	if err := r.save(ctx); err != nil {
		r.fail(ctx, err, "")
		return nil
	}
	if h := r.opts.AfterResponse; h != nil {
		if err := r.callHook(ctx, "AfterResponse", func() error { return h(ctx, n, msg) }); err != nil {
			r.hookFailed(ctx, err)
			return nil
		}
	}
	calls := make([]ToolCall, len(p.Calls))
	for i, c := range p.Calls {
		calls[i] = c.Call
		calls[i].Input = slices.Clone(c.Call.Input) // the caller's: the State keeps its own
	}
	return &Turn{Number: n, Message: msg, ToolCalls: calls}
}

// beforeRequest calls Options.BeforeRequest, if set, with params, the
// request for turn n. Every request the runner sends goes through it: a
// turn's and a compaction's (compaction.go), so that a hook that takes a
// secret out of the history takes it out of every request.
func (r *Runner) beforeRequest(ctx context.Context, n int, params *anthropic.BetaMessageNewParams) error {
	h := r.opts.BeforeRequest
	if h == nil {
		return nil
	}
	// The hook may change the messages, tools and system prompt of this
	// request only: it gets a copy of the history, which shares nothing
	// with the run (and is encoded afresh: encode.go), and of the lists of
	// tools (whose definitions are shared with other runners: toolentry.go)
	// and system blocks.
	params.Messages = deepcopy.Copy(params.Messages)
	params.Tools = slices.Clone(params.Tools)
	params.System = deepcopy.Copy(params.System)
	return r.callHook(ctx, "BeforeRequest", func() error { return h(ctx, n, params) })
}

// requestOptions are the client options of a request that is not
// streamed, a turn's or a compaction's, and its guard: one list, so that
// they cannot drift apart. The guard bounds each attempt by
// Timeouts.Request and refuses a retry-after beyond Timeouts.RetryAfter
// (see requestGuard); ctx is the request's own, which the guard cancels
// when an attempt stalls. The client's own per-attempt timeout is always
// passed, and longer than the guard's, so that the guard's fires first and
// the stalled attempt is not sent again: without a timeout of its own the
// client refuses a request whose max_tokens could take it past 10 minutes
// ("streaming is required") before sending it.
func (r *Runner) requestOptions(ctx context.Context) (context.Context, []option.RequestOption, *requestGuard) {
	g := r.newGuard(ctx)
	bound := r.requestBound()
	if bound > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		g.idle, g.cancel = bound, cancel
	}
	opts := []option.RequestOption{option.WithMiddleware(g.middleware)}
	if bound > 0 {
		opts = append(opts, option.WithRequestTimeout(bound+time.Minute))
	}
	return ctx, opts, g
}

// requestBound bounds an attempt of a request that is not streamed: see
// Timeouts.Request; 0 for none.
func (r *Runner) requestBound() time.Duration {
	if r.opts.Timeouts.Request == 0 {
		return orDefault(r.opts.Timeouts.StreamIdle, defaultStreamIdleTimeout)
	}
	return orDefault(r.opts.Timeouts.Request, 0)
}

// requestParams are the params of the next request: the history, every
// tool, and the default cache breakpoint.
func (r *Runner) requestParams() anthropic.BetaMessageNewParams {
	params := r.st.Params
	params.Tools = r.toolDefs
	params.Betas = r.st.Betas
	if !r.opts.NoCache && params.CacheControl == (anthropic.BetaCacheControlEphemeralParam{}) {
		params.CacheControl = anthropic.NewBetaCacheControlEphemeralParam()
		params.CacheControl.TTL = r.opts.CacheTTL
	}
	return params
}

// adoptContainer carries the container a response reports (the sandbox
// its code execution ran in) onto every later request of the run, exactly
// as the official runner does: only where the request names no container
// (a caller's container params without an id get the id, their skills
// kept), never over a container the caller chose. It is kept in the run's
// params, so it outlives threads, compaction and State/Resume, and the
// model's next code runs where its files are.
func (r *Runner) adoptContainer(m *anthropic.BetaMessage) {
	id := m.Container.ID
	if id == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &r.st.Params.Container
	switch {
	case c.OfContainer != nil:
		if !c.OfContainer.ID.Valid() {
			cp := *c.OfContainer // the caller's skills stay
			cp.ID = param.NewOpt(id)
			c.OfContainer = &cp
		}
	case !c.OfString.Valid():
		c.OfString = param.NewOpt(id)
	}
}

// newTurnState is the pending turn of a response, each call new: a
// tool_use before the response's last fallback block is no call of the
// run (see fallback.go). It
// shares no tool_use input with msg, which is handed out (Turn.Message,
// TurnFinished, Result.Message): ToParam decodes each block afresh from
// the JSON it came as, and each call has a copy of its input, so a write
// through msg's bytes after the run took it does not change the State.
func newTurnState(n int, msg *anthropic.BetaMessage) *turnState {
	p := &turnState{Turn: n, Message: sendableInputs(msg.ToParam()), StopReason: msg.StopReason}
	seam := fallbackSeam(msg.Content) // the calls before it were declined (fallback.go)
	for i, c := range msg.Content {
		if c.Type != "tool_use" || i < seam {
			continue
		}
		input := slices.Clone(c.Input)
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		call := ToolCall{ID: c.ID, Name: c.Name, Input: input, Toolset: c.ToolsetName, Caller: c.Caller.Type, CallerToolID: c.Caller.ToolID}
		p.Calls = append(p.Calls, callState{Call: call, Phase: phaseNew})
	}
	return p
}

// objectInputs gives every tool_use of p's message whose input is not a
// JSON object (a string, an array, a number, null) the input {} in the
// history, and logs it: the API refuses any other input in a request, so
// the history as the model wrote it would fail every later turn. The call
// keeps the model's input, and is answered with a *ValidationError that
// names what it was (see decideCall), so the model can call again with an
// object. It reports whether it changed the message: the run's thread
// then holds a reply that is not the history's, and the next request
// starts a new thread.
//
// The thinking blocks after the first such tool_use are left out of the
// history, as [blankInputs] leaves them out and for the same reason: what
// came before them is not what the model wrote.
func (r *Runner) objectInputs(ctx context.Context, p *turnState) (changed bool) {
	first := -1
	for j, b := range p.Message.OfAssistant.Content {
		tu := b.OfToolUse
		if tu == nil {
			continue
		}
		raw, ok := tu.Input.(json.RawMessage)
		if !ok {
			raw, _ = json.Marshal(tu.Input) // a null input is nil
		}
		kind := inputKind(raw)
		if kind == "" {
			continue
		}
		tu.Input, changed = json.RawMessage("{}"), true
		if first < 0 {
			first = j
		}
		for i := range p.Calls {
			if c := &p.Calls[i].Call; c.ID == tu.ID {
				c.Input = raw
			}
		}
		r.log.WarnContext(ctx, "toolrun: a tool_use input is not a JSON object; the history holds {} in its place",
			"turn", p.Turn, "tool", tu.Name, "id", tu.ID, "input", kind)
	}
	if first >= 0 {
		a := p.Message.OfAssistant
		kept := slices.Clone(a.Content[:first])
		for _, b := range a.Content[first:] {
			if b.OfThinking == nil && b.OfRedactedThinking == nil {
				kept = append(kept, b)
			}
		}
		a.Content = kept
	}
	return changed
}

// inputKind names the kind of JSON value of a tool_use input that is not an
// object, such as "a JSON string"; "" for an object (or what is not JSON,
// which validation answers).
func inputKind(in json.RawMessage) string {
	for _, c := range in {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return ""
		case '"':
			return "a JSON string"
		case '[':
			return "a JSON array"
		case 'n':
			return "JSON null"
		case 't', 'f':
			return "a JSON boolean"
		}
		return "a JSON number"
	}
	return ""
}

// nonObjectInput is the answer to a call whose input is of kind, not a
// JSON object.
func nonObjectInput(tool, kind string) error {
	return &ValidationError{Tool: tool, Violations: []Violation{{
		Expected: "a JSON object of the tool's parameters (the history holds {} for this call)",
		Got:      kind,
	}}}
}

// checkResponse returns why a response cannot be answered validly, or nil:
// every tool_use needs an id of its own, in the response and in the
// history, since each gets exactly one tool_result by that id. A response
// that reuses an id of an earlier turn (a proxy replaying a cached
// response, say) would run that call again and leave a history the API
// refuses at every later request.
func (r *Runner) checkResponse(m *anthropic.BetaMessage) error {
	ids := map[string]bool{} // on the stack: it does not escape
	for _, c := range m.Content {
		if c.Type != "tool_use" {
			continue
		}
		switch {
		case c.ID == "":
			return fmt.Errorf("a tool_use block of tool %q has no id", c.Name)
		case ids[c.ID]:
			return fmt.Errorf("two tool_use blocks share the id %q", c.ID)
		case r.inHistory(c.ID):
			return fmt.Errorf("the tool_use id %q is one of an earlier turn's", c.ID)
		}
		ids[c.ID] = true
	}
	return nil
}

// inHistory reports whether id is the id of a tool_use in the history.
func (r *Runner) inHistory(id string) bool {
	if r.historyIDs == nil {
		r.historyIDs = map[string]struct{}{}
		for _, m := range r.st.Params.Messages {
			if m.OfAssistant == nil {
				continue
			}
			for _, b := range m.OfAssistant.Content {
				if b.OfToolUse != nil {
					r.historyIDs[b.OfToolUse.ID] = struct{}{}
				}
			}
		}
	}
	_, ok := r.historyIDs[id]
	return ok
}

// account adds a response's usage and cost to the run's: what it is billed
// for (see usageOf), a compaction's included. The response is priced by
// the model it names, and if that model has no price (a gateway that
// renames models, say) by the model of its request, requested: a cost
// budget checked before the request by the one model holds after it.
func (r *Runner) account(ctx context.Context, m *anthropic.BetaMessage, requested anthropic.Model) {
	r.st.Usage.add(usageOf(m))
	price, ok := pricing.Find(r.opts.Budget.Prices, string(m.Model))
	if !ok && requested != m.Model {
		if price, ok = pricing.Find(r.opts.Budget.Prices, string(requested)); ok && r.warnOnce(string(m.Model)) {
			r.log.WarnContext(ctx, "toolrun: no price for the response's model; its responses are priced as the request's model",
				"model", string(m.Model), "request_model", string(requested))
		}
	}
	if !ok {
		// Once per run: CostIncomplete is in the State, so a runner
		// resumed from it (each step of a durable driver) does not warn
		// again.
		first := !r.st.CostIncomplete
		r.st.CostIncomplete = true
		if first && r.warnOnce(string(m.Model)) {
			r.log.WarnContext(ctx, "toolrun: no price for the model; Result.CostUSD leaves its responses out (set Budget.Prices)",
				"model", string(m.Model))
		}
		return
	}
	r.st.CostUSD += costOf(price, m)
}

// warnOnce reports whether the Warn about model's price is to be written:
// once per model and runner.
func (r *Runner) warnOnce(model string) bool {
	if r.warnedPrice[model] {
		return false
	}
	if r.warnedPrice == nil {
		r.warnedPrice = map[string]bool{}
	}
	r.warnedPrice[model] = true
	return true
}

// send sends one turn's request and returns the whole response.
func (r *Runner) send(ctx context.Context, sent RequestSent) (*anthropic.BetaMessage, error) {
	params := sent.Params
	if r.opts.Stream {
		return r.sendStream(ctx, sent)
	}
	rctx, opts, g := r.requestOptions(ctx)
	defer g.stop()
	m, err := r.sendWhole(rctx, params, opts)
	return m, g.failure(ctx, err)
}

// sendWhole sends a request that is not streamed, on the run's thread
// unless Options.NoThread or the API has none.
func (r *Runner) sendWhole(ctx context.Context, params *anthropic.BetaMessageNewParams, opts []option.RequestOption) (*anthropic.BetaMessage, error) {
	if r.threaded() {
		if m, ok, err := r.sendThread(ctx, params, opts); ok {
			return m, err
		}
	}
	// The body is encoded incrementally (encode.go); params still go to
	// the client, for what it reads of them.
	if body, ok := r.wireCache().body(params, false); ok {
		p, opts := wireRequest(params, body, opts)
		return r.messages.New(ctx, p, opts...)
	}
	return r.messages.New(ctx, *params, opts...)
}

// callHook calls a hook, turning a panic in it into a *HookError that
// carries the stack, and an error into a *HookError naming the hook
// ([StopRun] passes through).
func (r *Runner) callHook(ctx context.Context, hook string, f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Value: v, Stack: stack()}
			r.log.ErrorContext(ctx, "toolrun: hook panicked", "hook", hook, "panic", fmt.Sprint(v), "stack", string(pe.Stack))
			err = &HookError{Hook: hook, Err: pe}
		}
	}()
	if err := f(); err != nil {
		var sr *stopRunError
		if errors.As(err, &sr) {
			return err
		}
		return &HookError{Hook: hook, Err: err}
	}
	return nil
}
