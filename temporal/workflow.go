package temporal

import (
	"errors"
	"fmt"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	enumspb "go.temporal.io/api/enums/v1"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// The names under which [Register] registers the workflow and its
// activities, and the names of the workflow's signal, update and queries.
const (
	// WorkflowName is the name of [Workflow].
	WorkflowName = "toolrun.Run"
	// StepActivity is the name of [Activities.Step].
	StepActivity = "toolrun.Step"
	// ToolActivity is the name of [Activities.RunTool].
	ToolActivity = "toolrun.Tool"
	// DecideSignal is the signal that carries an [Approval]; the workflow
	// applies it once its call awaits approval.
	DecideSignal = "toolrun.decide"
	// DecideUpdate is the update that carries an [Approval]; it is rejected
	// unless its call awaits approval, and completes once it is applied.
	DecideUpdate = "toolrun.decide"
	// PendingQuery returns the calls awaiting approval, as
	// []toolrun.PendingCall.
	PendingQuery = "toolrun.pending"
	// StateQuery returns the run's [toolrun.State] as it stands.
	StateQuery = "toolrun.state"
)

// Defaults of [RunOptions].
const (
	DefaultContinueAsNewAfter = 20
	DefaultStepTimeout        = 10 * time.Minute
	DefaultToolTimeout        = 24 * time.Hour
	DefaultHeartbeatTimeout   = 30 * time.Second
)

// RunOptions configures the workflow side of a run: how it schedules its
// activities. The zero value is ready to use; each field's doc gives its
// default. The tools, the client and the [toolrun.Options] (hooks,
// policies, events) are the worker's: see [NewActivities].
type RunOptions struct {
	// MaxTurns is the run's turn limit, as [toolrun.Options.MaxTurns]. It is
	// kept in the run's State by [NewInput]; the workflow itself does not
	// read it.
	MaxTurns int `json:"max_turns,omitempty"`

	// MaxParallelTools bounds the calls of one turn that run at once, as
	// [toolrun.Options.MaxParallelTools]. Zero means
	// [toolrun.DefaultMaxParallelTools]. Calls of [toolrun.ToolConfig.Exclusive]
	// tools run alone.
	MaxParallelTools int `json:"max_parallel_tools,omitempty"`

	// ContinueAsNewAfter is the number of turns after which the workflow
	// continues as new, carrying its State, so that its event history stays
	// small. Zero means [DefaultContinueAsNewAfter]. The workflow also
	// continues as new when the server suggests it.
	ContinueAsNewAfter int `json:"continue_as_new_after,omitempty"`

	// StepTimeout bounds one attempt of a step: the decisions on a turn's
	// calls and one model request. Zero means [DefaultStepTimeout].
	StepTimeout time.Duration `json:"step_timeout,omitempty"`

	// ToolTimeout bounds one attempt of a call whose tool has no timeout
	// (neither [toolrun.ToolConfig.Timeout] nor [toolrun.Options.ToolTimeout]).
	// Zero means [DefaultToolTimeout]. A call with a timeout of its own gets
	// that timeout plus a minute.
	ToolTimeout time.Duration `json:"tool_timeout,omitempty"`

	// HeartbeatTimeout is how long an activity may go without a heartbeat
	// before its worker is taken for lost. The activities heartbeat three
	// times per HeartbeatTimeout while they run. Zero means
	// [DefaultHeartbeatTimeout].
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`

	// ModelRetry is the retry policy of a step, in place of the anthropic
	// client's own retries, which the activities turn off. Nil means an
	// initial interval of 1s, doubling up to 1m, at most 10 attempts. Errors
	// the client would not retry (invalid requests, authentication) are not
	// retried; a retry-after header from the API sets the next interval.
	ModelRetry *sdktemporal.RetryPolicy `json:"model_retry,omitempty"`

	// ToolRetry is the retry policy of a call of a
	// [toolrun.ToolConfig.Idempotent] tool whose activity fails (its worker
	// is lost, say). Nil means an initial interval of 1s, doubling up to 1m,
	// at most 5 attempts. A call of a tool that is not idempotent is never
	// attempted twice: if its activity fails, the model is told that the
	// call was interrupted ([toolrun.ErrInterrupted]).
	ToolRetry *sdktemporal.RetryPolicy `json:"tool_retry,omitempty"`
}

func (o RunOptions) withDefaults() RunOptions {
	if o.MaxParallelTools <= 0 {
		o.MaxParallelTools = toolrun.DefaultMaxParallelTools
	}
	if o.ContinueAsNewAfter <= 0 {
		o.ContinueAsNewAfter = DefaultContinueAsNewAfter
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = DefaultStepTimeout
	}
	if o.ToolTimeout <= 0 {
		o.ToolTimeout = DefaultToolTimeout
	}
	if o.HeartbeatTimeout <= 0 {
		o.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if o.ModelRetry == nil {
		o.ModelRetry = &sdktemporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 10}
	}
	if o.ToolRetry == nil {
		o.ToolRetry = &sdktemporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 5}
	}
	return o
}

// Input is the input of [Workflow]: the run's state and how to schedule it.
// Build it with [NewInput].
type Input struct {
	State   *toolrun.State `json:"state"`
	Options RunOptions     `json:"options"`
	// Decisions holds decisions received but not applied yet, carried over
	// when the workflow continues as new.
	Decisions []Approval `json:"decisions,omitempty"`
}

// Approval is a person's decision on a call awaiting approval, sent with
// [DecideSignal] or [DecideUpdate] (or [Decide]).
type Approval struct {
	ToolUseID string           `json:"tool_use_id"`
	Decision  toolrun.Decision `json:"decision"`
}

// Outcome is how a run ended: the workflow's result.
type Outcome struct {
	StopReason toolrun.StopReason `json:"stop_reason"`
	// Detail says more about the stop, as [toolrun.Result.Detail].
	Detail string `json:"detail,omitempty"`
	// Text is the text of the last response.
	Text string `json:"text,omitempty"`
	// State is the run's final state: a run that stopped at a limit, with
	// an error or by a hook can go on from it, with [toolrun.Resume] or a
	// new workflow.
	State *toolrun.State `json:"state"`
}

// StepResult is the result of [Activities.Step].
type StepResult struct {
	State *toolrun.State `json:"state"`
	// Calls are the calls to run before the next step.
	Calls []toolrun.PlannedCall `json:"calls,omitempty"`
}

// ToolInput is the input of [Activities.RunTool]: the run's state without
// its history, and the call to run.
type ToolInput struct {
	State     *toolrun.State `json:"state"`
	ToolUseID string         `json:"tool_use_id"`
}

// ToolOutput is the result of [Activities.RunTool].
type ToolOutput struct {
	Result toolrun.ResultState `json:"result"`
	// StopReason and Detail are set when [toolrun.Options.AfterTool] ended
	// the run.
	StopReason toolrun.StopReason `json:"stop_reason,omitempty"`
	Detail     string             `json:"detail,omitempty"`
}

// Workflow runs the tool loop of one conversation as a Temporal workflow. It
// holds the run's [toolrun.State] and drives it with two activities: a step
// ([Activities.Step]: the decisions on a turn's calls and one model
// request) and a tool call ([Activities.RunTool], one per call), so that no
// model request and no tool runs in the workflow itself. It ends with an
// [Outcome] when the run stops: the model finished, a limit, a hook, or a
// step that failed after its retries ([toolrun.StopError]).
//
// A call deferred to a person makes the workflow wait for a decision, sent
// with [DecideSignal] or [DecideUpdate]; [PendingQuery] lists the calls
// awaiting one. Every [RunOptions.ContinueAsNewAfter] turns the workflow
// continues as new with its state.
func Workflow(ctx workflow.Context, in Input) (*Outcome, error) {
	if in.State == nil {
		return nil, sdktemporal.NewNonRetryableApplicationError("toolrun: workflow input has no state", "toolrun.InvalidInput", nil)
	}
	w := &run{state: in.State, input: in.Options, opts: in.Options.withDefaults(), buffered: in.Decisions}
	if err := w.handle(ctx); err != nil {
		return nil, err
	}
	w.applyBuffered(ctx)
	firstTurn := w.state.Turns
	for {
		info := workflow.GetInfo(ctx)
		if w.state.Turns-firstTurn >= w.opts.ContinueAsNewAfter || info.GetContinueAsNewSuggested() {
			return nil, w.continueAsNew(ctx)
		}
		res, err := w.step(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			w.state.StopReason, w.state.Detail = toolrun.StopError, "step failed: "+rootMessage(err)
			return w.outcome(), nil
		}
		w.state = res.State
		w.applyBuffered(ctx)
		if len(res.Calls) > 0 {
			if err := w.runCalls(ctx, res.Calls); err != nil {
				return nil, err
			}
			if w.state.StopReason != "" { // AfterTool ended the run
				return w.outcome(), nil
			}
			continue
		}
		switch w.state.StopReason {
		case "":
			// A request whose response needs no tool run: step again.
		case toolrun.StopAwaitingApproval:
			if err := workflow.Await(ctx, func() bool { return len(w.state.AwaitingApproval()) == 0 }); err != nil {
				return nil, err
			}
		default:
			return w.outcome(), nil
		}
	}
}

// run is the state of one workflow execution.
type run struct {
	state    *toolrun.State
	input    RunOptions // as given, for continue-as-new
	opts     RunOptions // with defaults
	stepping bool       // a step is in flight: its result will replace state
	buffered []Approval // decisions not applied yet
	signals  workflow.ReceiveChannel
}

// handle registers the queries, the update and the signal.
func (w *run) handle(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, PendingQuery, func() ([]toolrun.PendingCall, error) {
		return w.state.AwaitingApproval(), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (*toolrun.State, error) {
		return w.state, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, DecideUpdate,
		func(ctx workflow.Context, a Approval) error {
			w.receive(ctx, a)
			// A decision that arrived during a step is applied when the
			// step is done.
			return workflow.Await(ctx, func() bool { return !w.stepping })
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, a Approval) error {
			if a.Decision.Kind == toolrun.Defer {
				return errors.New("toolrun: a person's decision cannot be defer")
			}
			for _, p := range w.state.AwaitingApproval() {
				if p.Call.ID == a.ToolUseID {
					return nil
				}
			}
			return fmt.Errorf("toolrun: no call %q awaits approval", a.ToolUseID)
		}},
	); err != nil {
		return err
	}
	w.signals = workflow.GetSignalChannel(ctx, DecideSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var a Approval
			if !w.signals.Receive(ctx, &a) {
				return
			}
			w.receive(ctx, a)
		}
	})
	return nil
}

// receive takes a decision: it is applied now if its call awaits approval
// and no step is in flight, and kept for later otherwise.
func (w *run) receive(ctx workflow.Context, a Approval) {
	w.buffered = append(w.buffered, a)
	if !w.stepping {
		w.applyBuffered(ctx)
	}
}

// applyBuffered applies the decisions kept for calls that now await
// approval. Decisions for calls that exist but cannot take one (answered,
// not deferred) are dropped; decisions for calls not seen yet are kept.
func (w *run) applyBuffered(ctx workflow.Context) {
	kept := w.buffered[:0]
	for _, a := range w.buffered {
		if err := w.state.Decide(a.ToolUseID, a.Decision); err != nil {
			if known(w.state, a.ToolUseID) || a.Decision.Kind == toolrun.Defer {
				workflow.GetLogger(ctx).Warn("toolrun: decision dropped", "tool_use_id", a.ToolUseID, "error", err.Error())
				continue
			}
			kept = append(kept, a)
		}
	}
	w.buffered = kept
}

func known(s *toolrun.State, id string) bool {
	if s.Pending == nil {
		return false
	}
	for _, c := range s.Pending.Calls {
		if c.Call.ID == id {
			return true
		}
	}
	return false
}

// step runs one step activity.
func (w *run) step(ctx workflow.Context) (*StepResult, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: w.opts.StepTimeout,
		HeartbeatTimeout:    w.opts.HeartbeatTimeout,
		RetryPolicy:         w.opts.ModelRetry,
		Summary:             fmt.Sprintf("turn %d", w.state.Turns+1),
	})
	w.stepping = true
	defer func() { w.stepping = false }()
	var res StepResult
	if err := workflow.ExecuteActivity(actx, StepActivity, w.state).Get(ctx, &res); err != nil {
		return nil, err
	}
	if res.State == nil {
		return nil, errors.New("toolrun: step returned no state")
	}
	return &res, nil
}

// runCalls runs the planned calls of a turn as activities: consecutive
// calls of non-exclusive tools together, up to MaxParallelTools at once, and
// each call of an exclusive tool alone. Each result is written into the
// state as it arrives.
func (w *run) runCalls(ctx workflow.Context, calls []toolrun.PlannedCall) error {
	for i := 0; i < len(calls); {
		j := i + 1
		if !calls[i].Exclusive {
			for j < len(calls) && !calls[j].Exclusive {
				j++
			}
		}
		if err := w.runBatch(ctx, calls[i:j]); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func (w *run) runBatch(ctx workflow.Context, calls []toolrun.PlannedCall) error {
	sel := workflow.NewSelector(ctx)
	next, running := 0, 0
	var firstErr error
	start := func() {
		p := calls[next]
		next++
		running++
		f := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, w.toolOptions(p)), ToolActivity, toolInput(w.state, p.Call.ID))
		sel.AddFuture(f, func(f workflow.Future) {
			running--
			if err := w.finish(ctx, p, f); err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	for next < len(calls) && running < w.opts.MaxParallelTools {
		start()
	}
	for running > 0 {
		sel.Select(ctx)
		for next < len(calls) && running < w.opts.MaxParallelTools && firstErr == nil {
			start()
		}
	}
	return firstErr
}

// toolOptions are the activity options of call p: a call of a tool that is
// not idempotent is attempted once.
func (w *run) toolOptions(p toolrun.PlannedCall) workflow.ActivityOptions {
	timeout := w.opts.ToolTimeout
	if p.Timeout > 0 {
		timeout = p.Timeout + time.Minute
	}
	retry := &sdktemporal.RetryPolicy{MaximumAttempts: 1}
	if p.Idempotent {
		retry = w.opts.ToolRetry
	}
	return workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    w.opts.HeartbeatTimeout,
		RetryPolicy:         retry,
		Summary:             p.Call.Name + " " + p.Call.ID,
	}
}

// toolInput is the input of the tool activity for call id: the state
// without the history or the response, and with that call alone.
func toolInput(s *toolrun.State, id string) ToolInput {
	t := *s
	t.Params.Messages = nil
	if s.Pending != nil {
		p := *s.Pending
		p.Message = anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{}}
		p.Calls = nil
		for _, c := range s.Pending.Calls {
			if c.Call.ID == id {
				p.Calls = append(p.Calls, c)
			}
		}
		t.Pending = &p
	}
	return ToolInput{State: &t, ToolUseID: id}
}

// finish writes the outcome of call p's activity into the state. An
// activity that failed (its worker lost, its timeout passed, its retries
// spent) answers the call as interrupted; only the workflow's cancellation
// is an error.
func (w *run) finish(ctx workflow.Context, p toolrun.PlannedCall, f workflow.Future) error {
	var out ToolOutput
	err := f.Get(ctx, &out)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		out = ToolOutput{Result: interrupted(p, err)}
		workflow.GetLogger(ctx).Error("toolrun: tool call interrupted", "tool", p.Call.Name, "tool_use_id", p.Call.ID, "error", err.Error())
	}
	if err := w.state.SetResult(p.Call.ID, out.Result); err != nil {
		workflow.GetLogger(ctx).Warn("toolrun: tool result dropped", "tool_use_id", p.Call.ID, "error", err.Error())
	}
	if out.StopReason != "" && w.state.StopReason == "" {
		w.state.StopReason, w.state.Detail = out.StopReason, out.Detail
	}
	return nil
}

// interrupted is the result of a call whose activity failed.
func interrupted(p toolrun.PlannedCall, err error) toolrun.ResultState {
	cause := rootMessage(err)
	var te *sdktemporal.TimeoutError
	if errors.As(err, &te) {
		switch te.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_HEARTBEAT:
			cause = "the worker running it stopped responding"
		case enumspb.TIMEOUT_TYPE_START_TO_CLOSE, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE:
			cause = "it ran past its activity timeout"
		}
	}
	var e error
	if p.Idempotent {
		e = fmt.Errorf("%w: it did not finish (%s), and tool %q gave up after its retries", toolrun.ErrInterrupted, cause, p.Call.Name)
	} else {
		e = fmt.Errorf("%w: it started but did not finish (%s), and tool %q is not declared idempotent, so it was not run again; its effects, if any, are unknown", toolrun.ErrInterrupted, cause, p.Call.Name)
	}
	return toolrun.ResultState{Content: []toolrun.Content{toolrun.Text(e.Error())}, IsError: true, Error: e.Error()}
}

// rootMessage returns the message of the innermost error of err's chain,
// without the activity and attempt details Temporal wraps it in.
func rootMessage(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// continueAsNew waits for the update handlers to finish, takes the signals
// received so far, and continues as new with the state.
func (w *run) continueAsNew(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	for {
		var a Approval
		if !w.signals.ReceiveAsync(&a) {
			break
		}
		w.receive(ctx, a)
	}
	return workflow.NewContinueAsNewError(ctx, WorkflowName, Input{State: w.state, Options: w.input, Decisions: w.buffered})
}

func (w *run) outcome() *Outcome {
	return &Outcome{StopReason: w.state.StopReason, Detail: w.state.Detail, Text: lastText(w.state), State: w.state}
}

// lastText returns the text of the last assistant message of s.
func lastText(s *toolrun.State) string {
	msgs := s.Params.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i].OfAssistant
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, c := range m.Content {
			if c.OfText != nil {
				b.WriteString(c.OfText.Text)
			}
		}
		return b.String()
	}
	return ""
}
