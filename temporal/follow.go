package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdktemporal "go.temporal.io/sdk/temporal"
)

// RunEventKind is what a [RunEvent] reports.
type RunEventKind int

// The kinds of [RunEvent], in the order a turn shows them.
const (
	// StepStarted: a Step activity was scheduled. Turn is the number the
	// response it requests, if it sends a request, will have: the run's
	// turns so far, plus one.
	StepStarted RunEventKind = iota + 1
	// StepFinished: a Step completed. Turn is the run's turns after it,
	// Usage the run's total so far. If the step received a response (its
	// Turn is above the one before), Text is the response's text and
	// Calls are the response's calls in its order: those to run with their
	// tool's settings, the others (deferred to a person, denied, an
	// unknown tool's) with their Call alone. A step that only took
	// decisions has no Text and no Calls. The calls a step answers itself
	// (an unknown tool's, denied or skipped, an input its schema refuses)
	// are ToolFinished events around it: those of the turn it began with
	// before it, since the model receives them with the step's request,
	// and those of the response it received after it, in the response's
	// order, as a run in process reports them.
	StepFinished
	// ToolFinished: a call was answered. Result holds the call (ID, name,
	// input), its content and IsError: a tool's result, a call denied or
	// skipped by a policy or a person, or a call whose activity failed
	// (answered with [toolrun.ErrInterrupted], as the workflow answers
	// it).
	ToolFinished
	// Awaiting: the run waits for a person's decisions. Pending lists the
	// calls awaiting one, More counts those beyond.
	Awaiting
	// Finished: the run ended, with Outcome, or with Err if the workflow
	// failed, was terminated, cancelled or timed out. It is the last event.
	Finished
)

// String returns the kind's name, for logs and test failures.
func (k RunEventKind) String() string {
	switch k {
	case StepStarted:
		return "StepStarted"
	case StepFinished:
		return "StepFinished"
	case ToolFinished:
		return "ToolFinished"
	case Awaiting:
		return "Awaiting"
	case Finished:
		return "Finished"
	}
	return fmt.Sprintf("RunEventKind(%d)", int(k))
}

// RunEvent is one thing a run's workflow history records, in order, as
// [Follow] reads it. Which fields are set depends on Kind (see
// [RunEventKind]).
//
// Seq numbers the event along the run's chain of executions (each
// continue-as-new starts one): execution<<43 | eventID<<12 | n, where
// execution counts the executions before this one in the chain, eventID is
// the history event that records it, and n numbers the events one history
// event gives (a step's StepFinished and the calls it answered). So Seq is
// strictly increasing along the run and the same on every read, by any
// client: give the last one a reader had to [Follow] as after, and it gets
// the rest, nothing twice.
type RunEvent struct {
	Seq  int64
	Kind RunEventKind
	// Turn, Text, Calls and Usage are a step's, for StepStarted (Turn
	// alone) and StepFinished: see each kind for what they hold.
	Turn  int
	Text  string
	Calls []driver.PlannedCall
	Usage toolrun.Usage
	// Started and Completed are when the step's activity started on a
	// worker (its last attempt, if it was retried) and completed, as the
	// history records them, for StepFinished: Completed minus Started is
	// the time a worker took for the step (its model request, and the
	// loading and saving of the state around it), without the time the
	// step waited in the task queue.
	Started, Completed time.Time
	// Result is the call and its answer, for ToolFinished.
	Result *toolrun.ToolResult
	// Pending are the calls awaiting a decision, for Awaiting: at most
	// [MemoMaxCalls] of them, with their inputs; More counts the others,
	// which a later Awaiting lists once those before them are decided.
	Pending []toolrun.PendingCall
	More    int
	// Outcome is how the run ended, for a Finished without Err.
	Outcome *Outcome
	// Err is why the workflow ended without an Outcome, for Finished.
	Err error
}

// The layout of [RunEvent.Seq].
const (
	seqSubBits   = 12
	seqEventBits = 31
	seqExecBits  = 63 - seqEventBits - seqSubBits
)

func seqOf(exec int, eventID int64, n int) int64 {
	return int64(exec)<<(seqEventBits+seqSubBits) | eventID<<seqSubBits | int64(n)
}

// Follow calls yield with each event of the run started as
// workflowID/runID numbered above after (0 for all), in order, waiting for
// new ones, until the run is Finished (then it returns nil), yield returns
// false (nil), or ctx ends (ctx.Err()). runID is the run's first
// execution's (what [Start] returned); empty means the latest execution of
// workflowID, numbered from the first of its chain all the same.
//
// Follow reads the run's workflow history with long polls, one request at
// a time: it needs no worker, and nothing the history records is missed
// between reads. It decodes the payloads with the data converter c was
// built with (or [ClientOptions].DataConverter, if set): the one the
// workers encode with. It goes on to the next execution at each
// continue-as-new; executions whose events are all at or below after are
// skipped with one request each, for their last event.
//
// Awaiting is reported from the memo [PendingMemo] that the workflow
// upserts: once when calls start waiting, and again each time the calls
// waiting change and some still wait (a decision on one of two, say), not
// again when an execution continues as new with the same calls waiting.
// The memo leaves out an input over [MemoMaxInput]; Follow puts it back
// from the step that made the call. A run started by a toolrun older than
// the memo reports no Awaiting.
//
// Every call's answer is reported once, with workers that keep states in
// a [toolrun.Store] too: the history holds what Follow reports, and only
// that (a call a person denied, in a step that then sent the next request,
// is in [StepResult.Committed]; a response whose calls the step that
// received it answered and committed, in [StepResult.Received]).
func Follow(ctx context.Context, c client.Client, workflowID, runID string, after int64, yield func(RunEvent) bool, opts *ClientOptions) error {
	if yield == nil {
		return errors.New("toolrun: follow: yield is nil")
	}
	f := &follower{ctx: ctx, c: c, workflowID: workflowID, after: after, yield: yield}
	first, d, err := f.first(ctx, runID)
	if err != nil {
		return f.fail(ctx, err)
	}
	o := clientOptionsOf(opts).of(d)
	f.store, f.dc = o.store, o.dc
	f.fc = sdktemporal.NewDefaultFailureConverter(sdktemporal.DefaultFailureConverterOptions{DataConverter: o.dc})
	run := first
	for exec := 0; ; exec++ {
		if exec >= 1<<seqExecBits {
			return fmt.Errorf("toolrun: follow %s: more than %d executions", workflowID, 1<<seqExecBits)
		}
		if after >= seqOf(exec+1, 0, 0) {
			// Every event of this execution was read already: only its
			// last one matters, for the next execution's run id.
			next, err := f.nextRun(ctx, run)
			if err != nil {
				return f.fail(ctx, err)
			}
			if next != "" {
				run = next
				continue
			}
		}
		next, done, err := f.execution(ctx, exec, run)
		if err != nil || done {
			return f.fail(ctx, err)
		}
		run = next
	}
}

// follower is the state of one [Follow].
type follower struct {
	ctx        context.Context // Follow's: for the claims read from store
	store      BlobStore       // ClientOptions.Store's, or nil
	c          client.Client
	dc         converter.DataConverter
	fc         converter.FailureConverter
	workflowID string
	after      int64
	yield      func(RunEvent) bool
}

// fail returns ctx's error if ctx ended, err otherwise, so that a read cut
// short by the caller's cancellation says so.
func (f *follower) fail(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// first returns the run id of the first execution of the chain runID (or
// the latest execution of the workflow, if empty) belongs to, with one
// request that reads no payload of the history, and the run's
// description, whose client's converter decodes the payloads.
func (f *follower) first(ctx context.Context, runID string) (string, *client.WorkflowExecutionDescription, error) {
	d, err := f.c.DescribeWorkflow(ctx, f.workflowID, runID)
	if err != nil {
		return "", nil, fmt.Errorf("toolrun: follow %s: %w", f.workflowID, err)
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	if name := info.GetType().GetName(); name != WorkflowName {
		return "", nil, fmt.Errorf("toolrun: follow %s: it runs workflow %q, not %q", f.workflowID, name, WorkflowName)
	}
	if first := info.GetFirstRunId(); first != "" {
		return first, d, nil
	}
	// A server that does not say: the start event does.
	it := f.c.GetWorkflowHistory(ctx, f.workflowID, info.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return "", nil, fmt.Errorf("toolrun: follow %s: the history is empty", f.workflowID)
	}
	e, err := it.Next()
	if err != nil {
		return "", nil, fmt.Errorf("toolrun: follow %s: %w", f.workflowID, err)
	}
	if first := e.GetWorkflowExecutionStartedEventAttributes().GetFirstExecutionRunId(); first != "" {
		return first, d, nil
	}
	return info.GetExecution().GetRunId(), d, nil
}

// nextRun returns the run id the execution run continued as, from its last
// event, or "" if it ended otherwise (or is still running).
func (f *follower) nextRun(ctx context.Context, run string) (string, error) {
	it := f.c.GetWorkflowHistory(ctx, f.workflowID, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return "", fmt.Errorf("toolrun: follow %s/%s: %w", f.workflowID, run, err)
		}
		if a := e.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			return a.GetNewExecutionRunId(), nil
		}
	}
	return "", nil
}

// scheduled is an activity of the execution, by its scheduled event.
type scheduled struct {
	name  string
	input *commonpb.Payloads
	step  *StepInput // decoded input, once needed
	// started is when its last attempt started, once the history says
	started time.Time
}

// execution is what Follow keeps while it reads one execution's history.
type execution struct {
	*follower
	exec    int    // the execution's index in the chain
	run     string // its run id
	acts    map[int64]*scheduled
	memoKey string               // what the memo showed last, as pendingKey gives it
	cancel  bool                 // the run's cancellation was requested
	planned []driver.PlannedCall // the calls of the last step, with their tools' settings
	last    *toolrun.State       // the state of the last step
}

// execution reads the history of execution exec of the chain, run, with
// long polls, and yields its events above f.after. It returns the next
// execution's run id, or done once the run ended or the caller stopped.
func (f *follower) execution(ctx context.Context, exec int, run string) (next string, done bool, err error) {
	x := &execution{follower: f, exec: exec, run: run, acts: map[int64]*scheduled{}}
	it := f.c.GetWorkflowHistory(ctx, f.workflowID, run, true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return "", true, fmt.Errorf("toolrun: follow %s/%s: %w", f.workflowID, run, err)
		}
		id := e.GetEventId()
		if id >= 1<<seqEventBits {
			return "", true, fmt.Errorf("toolrun: follow %s/%s: event %d is past the last one Follow numbers", f.workflowID, run, id)
		}
		if a := e.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			return a.GetNewExecutionRunId(), false, nil
		}
		out, err := x.events(e, seqOf(exec, id, 0) <= f.after)
		if err != nil {
			return "", true, err
		}
		for n, ev := range out {
			if n >= 1<<seqSubBits {
				return "", true, fmt.Errorf("toolrun: follow %s/%s: event %d records more than %d events", f.workflowID, run, id, 1<<seqSubBits)
			}
			ev.Seq = seqOf(exec, id, n)
			if ev.Seq <= f.after {
				continue
			}
			if !f.yield(ev) {
				return "", true, nil
			}
		}
		if isClose(e) {
			return "", true, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return "", true, err
	}
	return "", true, fmt.Errorf("toolrun: follow %s/%s: the history ended without the run's end", f.workflowID, run)
}

// events returns the events history event e records; seen says that the
// caller had them already (they are at or below after), so that only what
// later events need is decoded.
func (x *execution) events(e *historypb.HistoryEvent, seen bool) ([]RunEvent, error) {
	id := e.GetEventId()
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		if raw, ok := e.GetWorkflowExecutionStartedEventAttributes().GetMemo().GetFields()[PendingMemo]; ok {
			var p PendingApprovals
			if err := x.decode(raw, &p); err != nil {
				return nil, x.payloadError(x.run, id, "the memo "+PendingMemo, err)
			}
			x.memoKey = pendingKey(p)
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
		x.cancel = true
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		a := e.GetActivityTaskScheduledEventAttributes()
		s := &scheduled{name: a.GetActivityType().GetName(), input: a.GetInput()}
		x.acts[id] = s
		if !isStep(s.name) || seen {
			return nil, nil
		}
		in, err := x.stepInput(s)
		if err != nil {
			return nil, x.payloadError(x.run, id, "a step's input", err)
		}
		return []RunEvent{{Kind: StepStarted, Turn: in.State.Turns + 1}}, nil
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
		if s := x.acts[e.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; s != nil {
			s.started = e.GetEventTime().AsTime()
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		a := e.GetActivityTaskCompletedEventAttributes()
		s := x.acts[a.GetScheduledEventId()]
		switch {
		case s == nil:
		case isStep(s.name):
			evs, err := x.stepCompleted(s, a.GetScheduledEventId(), id, a.GetResult(), seen)
			for i := range evs {
				if evs[i].Kind == StepFinished {
					evs[i].Started, evs[i].Completed = s.started, e.GetEventTime().AsTime()
				}
			}
			return evs, err
		case s.name == ToolActivity && !seen:
			return x.toolCompleted(s, a.GetScheduledEventId(), id, a.GetResult())
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		var sched int64
		var failure error
		if a := e.GetActivityTaskFailedEventAttributes(); a != nil {
			sched, failure = a.GetScheduledEventId(), x.fc.FailureToError(a.GetFailure())
		} else {
			a := e.GetActivityTaskTimedOutEventAttributes()
			sched, failure = a.GetScheduledEventId(), x.fc.FailureToError(a.GetFailure())
		}
		s := x.acts[sched]
		if s == nil || s.name != ToolActivity || seen || notRun(failure) || x.cancel {
			// A step that failed ends the run, which Finished reports; a
			// call the worker refused to run stays unanswered, and so
			// does one that fails once the run is being cancelled.
			return nil, nil
		}
		var in ToolInput
		if err := x.decodePayloads(s.input, &in); err != nil {
			return nil, x.payloadError(x.run, sched, "a tool call's input", err)
		}
		// The workflow answers the call so (see run.finish).
		p := plannedOf(in, x.planned)
		return []RunEvent{{Kind: ToolFinished, Result: withCall(interrupted(p, failure), p.Call)}}, nil
	case enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
		raw, ok := e.GetWorkflowPropertiesModifiedEventAttributes().GetUpsertedMemo().GetFields()[PendingMemo]
		if !ok {
			return nil, nil
		}
		var p PendingApprovals
		if err := x.decode(raw, &p); err != nil {
			return nil, x.payloadError(x.run, id, "the memo "+PendingMemo, err)
		}
		key := pendingKey(p)
		if key == x.memoKey {
			return nil, nil
		}
		x.memoKey = key
		if len(p.Calls) == 0 && p.More == 0 {
			return nil, nil
		}
		return []RunEvent{{Kind: Awaiting, Pending: withInputs(p.Calls, x.last), More: p.More}}, nil
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		ev := RunEvent{Kind: Finished}
		if !seen {
			var o Outcome
			if err := x.decodePayloads(e.GetWorkflowExecutionCompletedEventAttributes().GetResult(), &o); err != nil {
				return nil, x.payloadError(x.run, id, "the run's outcome", err)
			}
			ev.Outcome = &o
		}
		return []RunEvent{ev}, nil
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
		err := FromFailure(x.fc.FailureToError(e.GetWorkflowExecutionFailedEventAttributes().GetFailure()))
		return []RunEvent{{Kind: Finished, Err: fmt.Errorf("toolrun: run %s failed: %w", x.workflowID, err)}}, nil
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
		a := e.GetWorkflowExecutionTerminatedEventAttributes()
		return []RunEvent{{Kind: Finished, Err: fmt.Errorf("toolrun: run %s was terminated (%q, by %q)", x.workflowID, a.GetReason(), a.GetIdentity())}}, nil
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
		return []RunEvent{{Kind: Finished, Err: fmt.Errorf("toolrun: run %s was cancelled: %w", x.workflowID, sdktemporal.NewCanceledError())}}, nil
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		return []RunEvent{{Kind: Finished, Err: fmt.Errorf("toolrun: run %s timed out: %w", x.workflowID, sdktemporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil))}}, nil
	}
	return nil, nil
}

// stepCompleted returns the events of step s, scheduled as event sched,
// completed as event id with result. The result is decoded even when seen:
// the calls that follow need its planned calls and its state.
func (x *execution) stepCompleted(s *scheduled, sched, id int64, result *commonpb.Payloads, seen bool) ([]RunEvent, error) {
	var res StepResult
	if err := x.decodePayloads(result, &res); err != nil {
		return nil, x.payloadError(x.run, id, "a step's result", err)
	}
	if res.State == nil {
		return nil, x.payloadError(x.run, id, "a step's result", errors.New("it has no state"))
	}
	x.planned, x.last = res.Calls, res.State
	if seen {
		return nil, nil
	}
	in, err := x.stepInput(s)
	if err != nil {
		return nil, x.payloadError(x.run, sched, "a step's input", err)
	}
	evs := stepFinished(in.State, &res)
	for i := range evs {
		for j := range evs[i].Calls {
			evs[i].Calls[j].Call.Input = x.claimed(fieldValue, evs[i].Calls[j].Call.Input)
		}
		if r := evs[i].Result; r != nil {
			whole := x.claimedResult(r)
			if whole != r {
				// A claim holds the result alone: the call and its
				// decision are the step's.
				whole.Call, whole.Decision = r.Call, r.Decision
			}
			whole.Call.Input = x.claimed(fieldValue, whole.Call.Input)
			evs[i].Result = whole
		}
	}
	return evs, nil
}

// toolCompleted returns the ToolFinished of tool activity s, scheduled as
// event sched, completed as event id with result.
func (x *execution) toolCompleted(s *scheduled, sched, id int64, result *commonpb.Payloads) ([]RunEvent, error) {
	var in ToolInput
	if err := x.decodePayloads(s.input, &in); err != nil {
		return nil, x.payloadError(x.run, sched, "a tool call's input", err)
	}
	var out ToolOutput
	if err := x.decodePayloads(result, &out); err != nil {
		return nil, x.payloadError(x.run, id, "a tool call's result", err)
	}
	if out.Result == nil {
		return nil, nil
	}
	r := *x.claimedResult(out.Result)
	r.Call = callOf(in, x.planned)
	return []RunEvent{{Kind: ToolFinished, Result: &r}}, nil
}

// claimed returns the value that raw, a field of shape fld, stands for if
// it is a claim's mark of this run ([RunOptions.ClaimThreshold]) and the
// follower has the workers' Store (ClientOptions.Store); raw otherwise, a claim
// deleted already included: a claim lasts until no step reads it again,
// so a reader that comes long after the step sees the mark.
func (f *follower) claimed(fld claimField, raw json.RawMessage) json.RawMessage {
	if f.store == nil {
		return raw
	}
	key, ok := markKey(fld, raw)
	if !ok || !strings.HasPrefix(key, claimKeyPrefix(f.workflowID)) {
		return raw
	}
	b, err := f.store.GetBlob(f.ctx, key)
	if err != nil {
		return raw
	}
	return b
}

// claimedResult returns r, or the whole result r's claim mark stands for.
func (f *follower) claimedResult(r *toolrun.ToolResult) *toolrun.ToolResult {
	if f.store == nil {
		return r
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return r
	}
	b := f.claimed(fieldResult, raw)
	if len(b) == len(raw) && string(b) == string(raw) {
		return r
	}
	var whole toolrun.ToolResult
	if json.Unmarshal(b, &whole) != nil {
		return r
	}
	return &whole
}

// isStep reports whether activity name is a step's.
func isStep(name string) bool { return name == StepActivity || name == StepDeltaActivity }

// isClose reports whether e ends an execution with the run's end.
func isClose(e *historypb.HistoryEvent) bool {
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		return true
	}
	return false
}

// stepInput returns the decoded input of step s.
func (f *follower) stepInput(s *scheduled) (*StepInput, error) {
	if s.step != nil {
		return s.step, nil
	}
	var in StepInput
	if err := f.decodePayloads(s.input, &in); err != nil {
		return nil, err
	}
	if in.State == nil {
		return nil, errors.New("it has no state")
	}
	s.step = &in
	return s.step, nil
}

// decodePayloads decodes the first of ps (an activity's input or result,
// a workflow's result) into v.
func (f *follower) decodePayloads(ps *commonpb.Payloads, v any) error {
	if len(ps.GetPayloads()) == 0 {
		return errors.New("no payload")
	}
	return f.decode(ps.GetPayloads()[0], v)
}

// decode decodes one payload of the run's history into v with the
// client's data converter. Every payload Follow reads goes through it.
func (f *follower) decode(p *commonpb.Payload, v any) error {
	return f.dc.FromPayload(p, v)
}

// payloadError says which payload of the history could not be decoded.
func (f *follower) payloadError(run string, eventID int64, what string, err error) error {
	return fmt.Errorf("toolrun: follow %s/%s: %s (event %d) could not be decoded (were the client and the workers built with the same data converter?): %w", f.workflowID, run, what, eventID, err)
}

// stepFinished returns the events of a step that went from state in to
// res: a ToolFinished for each call the step answered (an unknown tool's,
// denied or skipped by a policy or a person's decision, an invalid
// input), in the order the model receives them, around the StepFinished.
func stepFinished(in *toolrun.State, res *StepResult) []RunEvent {
	s := res.State
	ev := RunEvent{Kind: StepFinished, Turn: s.Turns, Usage: s.Usage}
	if s.Turns > in.Turns {
		ev.Text = res.Text
		for _, c := range s.Calls() {
			p := driver.PlannedCall{Call: c}
			if i := slices.IndexFunc(res.Calls, func(p driver.PlannedCall) bool { return p.Call.ID == c.ID }); i >= 0 {
				p = res.Calls[i]
			}
			ev.Calls = append(ev.Calls, p)
		}
		for _, rc := range res.Received {
			ev.Calls = append(ev.Calls, driver.PlannedCall{Call: rc.Call})
		}
	}
	var out []RunEvent
	answered := func(st *toolrun.State, id string) bool {
		_, ok := st.CallResult(id)
		return ok
	}
	// The calls of the turn the step began with that it answered come
	// before the step's end, since they were answered before its request;
	// those of the response it received, after.
	for _, c := range in.Calls() {
		if answered(in, c.ID) {
			continue
		}
		if r, ok := s.CallResult(c.ID); ok {
			out = append(out, RunEvent{Kind: ToolFinished, Result: r})
		} else if r := res.Committed[c.ID]; r != nil {
			out = append(out, RunEvent{Kind: ToolFinished, Result: withCall(r, c)})
		} else if r := committedResult(s, c); r != nil {
			// A step of a worker that did not fill Committed.
			out = append(out, RunEvent{Kind: ToolFinished, Result: r})
		}
	}
	out = append(out, ev)
	for _, c := range s.Calls() {
		if driver.HasCall(in, c.ID) {
			continue
		}
		if r, ok := s.CallResult(c.ID); ok {
			out = append(out, RunEvent{Kind: ToolFinished, Result: r})
		}
	}
	if s.Turns > in.Turns {
		// The response's calls the step answered and committed itself,
		// which its state no longer shows.
		for _, rc := range res.Received {
			if rc.Result == nil {
				continue
			}
			out = append(out, RunEvent{Kind: ToolFinished, Result: rc.result()})
		}
	}
	return out
}

// unanswered returns the calls of the turn in progress of s that have no
// result yet.
func unanswered(s *toolrun.State) []toolrun.ToolCall {
	var out []toolrun.ToolCall
	for _, c := range s.Calls() {
		if _, ok := s.CallResult(c.ID); !ok {
			out = append(out, c)
		}
	}
	return out
}

// committedResults returns, by tool_use id, the results of the calls of
// before (those of the turn a step began with that had no result, see
// unanswered) that the step answered and committed
// with its request, read from the history of whole, the state after the
// step, for [StepResult.Committed]: the calls whose results whole's turn in
// progress no longer shows.
func committedResults(before []toolrun.ToolCall, whole *toolrun.State) map[string]*toolrun.ToolResult {
	var out map[string]*toolrun.ToolResult
	for _, c := range before {
		if driver.HasCall(whole, c.ID) {
			continue // still in the turn in progress, with its result if it has one
		}
		if r := committedResult(whole, c); r != nil {
			if out == nil {
				out = map[string]*toolrun.ToolResult{}
			}
			out[c.ID] = r
		}
	}
	return out
}

// receivedCalls returns the calls of the response r received in a step
// that began at turns, if the step answered them all and committed the
// turn, for [StepResult.Received]; nil otherwise.
func receivedCalls(r *toolrun.Runner, turns int) []ReceivedCall {
	turn, results := driver.Committed(r)
	if turn <= turns || len(results) == 0 {
		return nil // none, or a turn that an earlier step received
	}
	out := make([]ReceivedCall, len(results))
	for i, res := range results {
		out[i] = ReceivedCall{Call: res.Call, Decision: res.Decision, Result: res}
	}
	return out
}

// committedResult returns the result of call c from the history of s, the
// tool_result the step committed for it, or nil if s has no history (the
// workers keep it in a Store).
func committedResult(s *toolrun.State, c toolrun.ToolCall) *toolrun.ToolResult {
	msgs := s.Params.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i].OfUser
		if m == nil {
			continue
		}
		for _, b := range m.Content {
			tr := b.OfToolResult
			if tr == nil || tr.ToolUseID != c.ID {
				continue
			}
			return &toolrun.ToolResult{Call: c, Content: slices.Clone(tr.Content), IsError: tr.IsError.Value}
		}
	}
	return nil
}

// plannedOf returns the planned call of tool activity input in: from the
// last step's planned calls, or the call in the input's state.
func plannedOf(in ToolInput, planned []driver.PlannedCall) driver.PlannedCall {
	if i := slices.IndexFunc(planned, func(p driver.PlannedCall) bool { return p.Call.ID == in.ToolUseID }); i >= 0 {
		return planned[i]
	}
	return driver.PlannedCall{Call: callIn(in)}
}

// callOf returns the call of tool activity input in.
func callOf(in ToolInput, planned []driver.PlannedCall) toolrun.ToolCall {
	return plannedOf(in, planned).Call
}

// callIn returns the call of tool activity input in from its state.
func callIn(in ToolInput) toolrun.ToolCall {
	if in.State != nil {
		for _, c := range in.State.Calls() {
			if c.ID == in.ToolUseID {
				return c
			}
		}
	}
	return toolrun.ToolCall{ID: in.ToolUseID}
}

// withCall returns r with its call set to c.
func withCall(r *toolrun.ToolResult, c toolrun.ToolCall) *toolrun.ToolResult {
	r.Call = c
	return r
}

// withInputs returns calls with the inputs the memo left out put back
// from s, the state of the step that made them.
func withInputs(calls []toolrun.PendingCall, s *toolrun.State) []toolrun.PendingCall {
	out := slices.Clone(calls)
	if s == nil {
		return out
	}
	all := s.Calls()
	for i, p := range out {
		if len(p.Call.Input) != 0 && string(p.Call.Input) != "null" {
			continue
		}
		if j := slices.IndexFunc(all, func(c toolrun.ToolCall) bool { return c.ID == p.Call.ID }); j >= 0 {
			out[i].Call.Input = all[j].Input
		}
	}
	return out
}
