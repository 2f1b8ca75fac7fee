package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"
)

// This file holds the executor: the one place where calls run. Next, Run,
// Events and ExecuteCall all hand it the calls the engine allowed; it
// starts them as a CallQueue (driver_sched.go) allows, the queue the
// Temporal module schedules its activities with.

// Batches splits the allowed calls of a turn, in the order of the response,
// into the groups that may run at once: consecutive calls of tools that are
// not [ToolConfig.Exclusive] form one group, and each call of an exclusive
// tool is a group of its own, so it runs after the calls before it have
// finished and before any after it start. A toolset's calls
// ([ToolConfig].Toolset) run one at a time in the model's order, as the
// other runners run them, since a toolset's members act on one thing (a
// browser, a screen) whose state each call leaves for the next: a group
// ends before a second call of a toolset it has. The groups run one after
// another. Once a call's answer ends the run (AfterTool returned an error or
// [StopRun]), no call that has not started starts, in its group or a
// later one: the calls that are running finish, and the others stay
// decided, not run, for a run resumed from its [State].
// callQueue applies this rule, with the bounds on parallel calls: the
// runner's executor and the Temporal workflow both start calls through it.
func batches(calls []plannedCall) [][]plannedCall {
	var out [][]plannedCall
	for i := 0; i < len(calls); {
		j := i + 1
		if !calls[i].Exclusive {
			var toolsets []string // of the group's calls, usually none
			if ts := calls[i].Call.Toolset; ts != "" {
				toolsets = append(toolsets, ts)
			}
			for j < len(calls) && !calls[j].Exclusive {
				if ts := calls[j].Call.Toolset; ts != "" {
					if slices.Contains(toolsets, ts) {
						break
					}
					toolsets = append(toolsets, ts)
				}
				j++
			}
		}
		out = append(out, calls[i:j:j])
		i = j
	}
	return out
}

// execute runs calls, which the engine allowed, in the order a
// callQueue hands them out (the groups of Batches, within
// Options.MaxParallelTools and each tool's MaxParallel), and answers them:
// the queue is the one statement of the rule, which the Temporal workflow
// follows too. Each call is journaled as started before its tool runs. It
// returns the run's error if the run stopped meanwhile (cancelled, a hook,
// a failed checkpoint); calls not started then stay as they were, and none
// starts after the stop, in its group or a later one.
func (r *Runner) execute(ctx context.Context, calls []*callState) error {
	plans := make([]plannedCall, len(calls))
	byID := make(map[string]*callState, len(calls))
	for i, c := range calls {
		plans[i] = r.plan(c)
		byID[c.Call.ID] = c
	}
	type finished struct {
		id  string
		err error // AfterTool's
	}
	q := newCallQueue(plans, r.opts.maxParallel())
	done := make(chan finished, len(calls))
	var hookErr error
	for {
		// Only this goroutine touches q: the calls report here when done.
		for {
			pc, ok := q.Start()
			if !ok {
				break
			}
			go func() { done <- finished{pc.Call.ID, r.runCall(ctx, byID[pc.Call.ID], pc)} }()
		}
		if q.Running() == 0 {
			break
		}
		f := <-done
		q.Done(f.id)
		if f.err != nil && hookErr == nil {
			hookErr = f.err
		}
		if hookErr != nil || ctx.Err() != nil || r.hasSaveErr() {
			q.Stop() // the running calls finish; no other starts
		}
	}
	switch {
	case hookErr != nil:
		r.hookFailed(ctx, hookErr)
	case r.hasSaveErr():
		// Before the context: a save the store never answered is why the
		// run outlived its deadline, and what the caller has to fix.
		r.fail(ctx, r.takeSaveErr(), "")
	case ctx.Err() != nil:
		r.fail(ctx, context.Cause(ctx), fmt.Sprintf("cancelled during the tool calls of turn %d", r.st.pending.Turn))
	default:
		return nil
	}
	return r.stopErr
}

// runCall journals c as started, runs it and answers it. It returns the
// error of AfterTool, if any.
func (r *Runner) runCall(ctx context.Context, c *callState, pc plannedCall) error {
	if ctx.Err() != nil || r.hasSaveErr() {
		return nil // a call queued behind others does not start once the run is stopping
	}
	r.mu.Lock()
	c.Phase = phaseStarted
	r.mu.Unlock()
	if err := r.save(ctx); err != nil {
		// Not journaled, so not run: it stays decided, and the run stops.
		r.mu.Lock()
		c.Phase = phaseDecided
		r.mu.Unlock()
		return nil
	}
	e := r.tool(pc.Call)
	started := pc.Call // the input that runs, an edit's if any
	if r.observed() {
		started.Input = slices.Clone(started.Input) // the State's bytes
	}
	r.emit(ctx, ToolStarted{Turn: r.st.pending.Turn, Call: started})
	res := r.runTool(ctx, e, pc)
	if res == nil {
		return nil // cut off by the run's end: it stays started
	}
	return r.answer(ctx, c, res)
}

// runTool runs one call, recovering a panic and enforcing its timeout. It
// returns nil if the run's ctx ended before the call finished: the call
// then stays started, and is answered as interrupted unless its tool is
// idempotent. A tool that ignores its ctx is waited for CancelGrace at
// most, then abandoned and logged at Error.
func (r *Runner) runTool(ctx context.Context, e *toolEntry, pc plannedCall) *ToolResult {
	call := pc.Call
	callCtx, cancel := context.WithCancel(ctx)
	if pc.Timeout > 0 {
		callCtx, cancel = context.WithTimeout(ctx, pc.Timeout)
	}
	defer cancel()

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
		returned := false
		defer func() {
			if v := recover(); v != nil {
				done <- outcome{err: &PanicError{Tool: call.Name, Value: v, Stack: stack()}}
			} else if !returned {
				// runtime.Goexit (t.FailNow, say) ended the tool's
				// goroutine without a return or a panic: without an
				// answer the call would wait for ever.
				done <- outcome{err: fmt.Errorf("tool %q ended its goroutine (runtime.Goexit) without returning", call.Name)}
			}
		}()
		content, err := e.tool.Run(callCtx, call.Input)
		returned = true
		done <- outcome{content, err}
	}()
	res := &ToolResult{Call: call, Ran: true}
	select {
	case o := <-done:
		res.Duration = time.Since(start)
		if ctx.Err() != nil {
			return nil
		}
		res.Content, res.Err = o.content, o.err
		if o.err != nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
			res.Content, res.Err = nil, &TimeoutError{Tool: call.Name, After: pc.Timeout}
		}
	case <-callCtx.Done():
		res.Duration = time.Since(start)
		if ctx.Err() != nil {
			// The run ended: wait a little for the tool to notice, so it
			// cannot overlap a run of the same call on resume, then give up.
			t := time.NewTimer(r.opts.cancelGrace())
			defer t.Stop()
			select {
			case <-done:
			case <-t.C:
				r.log.ErrorContext(context.WithoutCancel(ctx), "toolrun: tool ignored its cancellation; abandoned, and answered as interrupted unless idempotent",
					"tool", call.Name, "tool_use_id", call.ID, "grace", r.opts.cancelGrace())
			}
			return nil
		}
		res.Err = &TimeoutError{Tool: call.Name, After: pc.Timeout}
		// A tool that ignores its ctx goes on in the background; its late
		// result is dropped, and logged so the operator knows. A tool that
		// stopped because of its ctx returns the ctx's error: nothing to tell.
		go func() {
			o := <-done
			if o.err != nil && errors.Is(o.err, callCtx.Err()) {
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

// answer records res as the result of c: a failure becomes an is_error
// result with the error's text, AfterTool may change it, and it is
// journaled and announced. It returns the error of AfterTool.
func (r *Runner) answer(ctx context.Context, c *callState, res *ToolResult) error {
	asFailure(res)
	if c.Decision != nil {
		res.Decision = *c.Decision
	}
	var hookErr error
	if h := r.opts.AfterTool; h != nil {
		hookErr = r.callHook(ctx, "AfterTool", func() error { return h(ctx, res) })
	}
	if emptyBlock(res) {
		r.log.ErrorContext(ctx, "toolrun: tool result has an empty content block; answered as a failure",
			"tool", c.Call.Name, "tool_use_id", c.Call.ID)
	}
	e := r.tool(c.Call)
	if _, cut := truncateContent(res.Content, r.resultLimit(e)); cut {
		res.Truncated = true
		r.log.WarnContext(ctx, "toolrun: tool result truncated for the model", "tool", c.Call.Name,
			"tool_use_id", c.Call.ID, "turn", r.st.pending.Turn, "limit", r.resultLimit(e))
	}
	r.mu.Lock()
	c.Result, c.Phase = resultOf(res), phaseAnswered
	if r.live == nil {
		r.live = map[string]*ToolResult{}
	}
	r.live[c.Call.ID] = res
	r.mu.Unlock()
	r.emit(ctx, ToolFinished{Turn: r.st.pending.Turn, Result: res})
	r.save(ctx) // a failure stops the run at its next step
	return hookErr
}

// asFailure makes a result that failed with no content an is_error result
// with the error's text, so that no failure reaches the model as an empty
// success: the one rule for the runner's results and driver.SetResult.
func asFailure(res *ToolResult) {
	if res.Err != nil && len(res.Content) == 0 {
		res.IsError = true
		res.Content = []Content{Text(res.Err.Error())}
	}
}

// emptyBlock makes a result with a zero content block (a bug in a tool or
// a hook: it encodes as null, which the API refuses at every retry and a
// State cannot decode) an is_error result that says so, and reports
// whether it did.
func emptyBlock(res *ToolResult) bool {
	i := slices.IndexFunc(res.Content, func(c Content) bool { return c.GetType() == nil })
	if i < 0 {
		return false
	}
	res.Err = fmt.Errorf("the result of tool %q has an empty content block (block %d of %d), which cannot be sent", res.Call.Name, i+1, len(res.Content))
	res.IsError, res.Content = true, []Content{Text(res.Err.Error())}
	return true
}

// input returns the input the call runs with: the decision's, if it
// replaced the model's.
func (c *callState) input() json.RawMessage {
	if c.Decision != nil && len(c.Decision.Input) > 0 {
		return c.Decision.Input
	}
	return c.Call.Input
}

// timeoutOf returns the timeout of a call of e, or 0 for none.
func (r *Runner) timeoutOf(e *toolEntry) time.Duration {
	t := e.config.Timeout
	if t == 0 {
		t = r.opts.Timeouts.Tool
	}
	return max(t, 0)
}

// stack returns the stack of the calling goroutine, for a recovered panic.
func stack() []byte { return debug.Stack() }

// storeSave calls Options.Store.Save, turning a panic in it into an
// error: saves are made on the goroutines that run the calls too, where a
// panic would end the process.
func (r *Runner) storeSave(ctx context.Context, s *State, prev uint64) (err error) {
	return r.storeCall(ctx, "Save", func(ctx context.Context) error {
		return r.opts.Store.Save(ctx, r.opts.RunID, s, prev)
	})
}

// storeCall calls call, the store's method op (Save or Append), as
// storeSave says.
func (r *Runner) storeCall(ctx context.Context, op string, call func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Value: v, Stack: stack()}
			r.log.ErrorContext(ctx, "toolrun: the store panicked", "run_id", r.opts.RunID, "panic", fmt.Sprint(v), "stack", string(pe.Stack))
			err = fmt.Errorf("the store's %s: %w", op, pe)
		}
	}()
	// ctx is boundedStoreCall's: not cancelled when the run ends, only
	// when the grace for the store's answer has run out.
	return call(ctx)
}
