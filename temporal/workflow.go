package temporal

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
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
	// DeleteClaimsActivity is the name of [Activities.DeleteClaims].
	DeleteClaimsActivity = "toolrun.DeleteClaims"
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
	// DefaultContinueAsNewBytes is the default of
	// [RunOptions.ContinueAsNewBytes]: an execution's event history that
	// a worker replays, on a miss of its workflow cache, in milliseconds.
	DefaultContinueAsNewBytes = 1 << 20
	DefaultStepTimeout        = 10 * time.Minute
	DefaultToolTimeout        = 24 * time.Hour
	DefaultHeartbeatTimeout   = 30 * time.Second
	// DefaultModelRetryFor is how long a step's model request is retried
	// by default: long enough to wait out a 15-minute outage of the API.
	DefaultModelRetryFor = 30 * time.Minute
	// DefaultPayloadLimit is the default of [RunOptions.PayloadLimit]:
	// below the 2 MiB a Temporal server accepts by default in one payload,
	// with room for the envelope.
	DefaultPayloadLimit = 1536 << 10
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
	// [toolrun.DefaultMaxParallelTools], as there. Calls of [toolrun.ToolConfig.Exclusive]
	// tools run alone, and a tool's [toolrun.ToolConfig.MaxParallel] bounds
	// its own calls, as in the runner's executor ([driver.CallQueue]).
	MaxParallelTools int `json:"max_parallel_tools,omitempty"`

	// ContinueAsNewBytes is how large an execution's event history grows
	// before the workflow continues as new, so that a worker that replays
	// it (after a restart, or a miss of its workflow cache) has little to
	// replay. Zero means [DefaultContinueAsNewBytes]. The workflow
	// continues as new once the execution's history is at least this many
	// bytes and at least [ContinueAsNewFactor] times the run's state, and
	// whenever the server suggests it (its history limits).
	//
	// The second bound is what keeps a long run's cost per turn flat:
	// without a Store, the input of a continue-as-new carries the whole
	// state, and continuing as new every so many turns would write the
	// whole state again every so many turns, more each time, so that the
	// bytes written per turn would grow with the conversation. A
	// continue-as-new writes the state twice (the closing execution's
	// last event and the next one's first); continuing only once the
	// execution has written [ContinueAsNewFactor] times the state, the
	// continue-as-new events of a run add at most half again to the
	// history bytes its turns write, however long it runs, as long as the
	// state is under a fifth of the history size at which the server
	// suggests continuing (4 MB by default), which then decides. With a
	// Store the state the workflow holds is small, and the first bound
	// decides.
	ContinueAsNewBytes int `json:"continue_as_new_bytes,omitempty"`

	// ContinueAsNewAfter, if positive, makes the workflow continue as new
	// after that many turns of an execution too, whatever its history's
	// size: for a test, or a deployment that wants executions of a bounded
	// number of turns. Zero leaves it to [RunOptions.ContinueAsNewBytes].
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
	//
	// It also bounds how soon a cancellation of the run (or of a call's
	// activity) reaches a running tool: the worker learns of it from the
	// server's answer to a heartbeat, and the SDK sends heartbeats at most
	// every 0.8 × HeartbeatTimeout, so the tool's context is cancelled
	// within about that once the server has the request (24 s by
	// default). Set it lower for a faster cancellation, at the cost of
	// more heartbeats.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`

	// ModelRetry is the retry policy of a step, in place of the anthropic
	// client's own retries, which the activities turn off. Nil means an
	// initial interval of 1s, doubling up to 1m, with no limit on the
	// attempts: [RunOptions.ModelRetryFor] bounds them in time. Errors the
	// client would not retry (invalid requests, authentication) are not
	// retried; a retry-after header from the API sets the next interval. A
	// streamed response that fails after it began is first retried within
	// the step, per [toolrun.Options.StreamRetry], exactly as in process.
	ModelRetry *sdktemporal.RetryPolicy `json:"model_retry,omitempty"`

	// ModelRetryFor bounds the time a step may take with all its retries
	// (its schedule-to-close timeout): how long an outage of the API the
	// run waits out before it stops with [toolrun.StopError]. Zero means
	// [DefaultModelRetryFor], 30 minutes.
	ModelRetryFor time.Duration `json:"model_retry_for,omitempty"`

	// PayloadLimit is the largest payload, in bytes of JSON, that the run
	// sends through Temporal (an activity's input or result, the input of
	// a continue-as-new). A run that would send a larger one stops
	// gracefully with [toolrun.StopPayloadTooLarge] and an [Outcome], rather than
	// being terminated by the server. Zero means [DefaultPayloadLimit].
	PayloadLimit int `json:"payload_limit,omitempty"`

	// ClaimThreshold is the size, in bytes of JSON, above which a value
	// of the run travels through the workers' Store rather than through
	// the workflow's history (the claim check): a tool's result (after
	// its cut to MaxResultBytes), and a decision's edited input, reason
	// or Skip result. The value is put in the Store, under a key of the
	// run (<workflow id>/claim-…), and the workflow holds a mark that
	// stands for it, which the activity that needs the value replaces
	// with it. Zero means [DefaultClaimThreshold], 16 KiB; a negative
	// value turns the claim check off. It needs a Store on the workers
	// that keeps blobs ([BlobStore]; [github.com/toolrun/toolrun/filestore.Store] and
	// sqlitestore's do); without one, every value travels whole, within
	// [RunOptions.PayloadLimit]. The decisions a client sends are the
	// client's: see [ClientOptions].Store.
	//
	// A claim is deleted once no step can read it again: the step after
	// the one that read it last deletes it (a step is retried with its
	// input, so the step that read it may read it again until its result
	// is recorded), and when the execution ends, the workflow deletes the
	// claims left, but those its Outcome's State refers to (a run that
	// stopped in a turn), which [LoadState] reads, and which stay until
	// you delete the workflow's keys as its states under Ref do. A claim
	// whose activity's result is lost (its worker died after saving it)
	// stays too. A claim missing when an activity needs it stops the run
	// with [ErrClaimMissing]. [Pending] and [StateQuery] show the mark
	// where a value is in the Store. Every worker of the task queue must
	// run a release with the claim check before a run uses it: see the
	// package's doc, "Values of any size".
	ClaimThreshold int `json:"claim_threshold,omitempty"`

	// NoSearchAttributes turns off the search attributes ([StatusAttribute]
	// and the others), for a namespace where they are not registered.
	NoSearchAttributes bool `json:"no_search_attributes,omitempty"`

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
	if o.ContinueAsNewBytes <= 0 {
		o.ContinueAsNewBytes = DefaultContinueAsNewBytes
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
		o.ModelRetry = &sdktemporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute}
	}
	if o.ModelRetryFor <= 0 {
		o.ModelRetryFor = DefaultModelRetryFor
	}
	if o.PayloadLimit <= 0 {
		o.PayloadLimit = DefaultPayloadLimit
	}
	if o.ToolRetry == nil {
		o.ToolRetry = &sdktemporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 5}
	}
	return o
}

// Input is the input of [Workflow]: the run's state and how to schedule it.
// Build it with [NewInput].
type Input struct {
	// State is the run's state: whole for a new run. For a run continued as
	// new by workers that keep states in a [toolrun.Store] (see
	// [NewActivities]), it is the state without its history, which is in
	// the Store under Ref.
	State *toolrun.State `json:"state"`
	// Ref is the key of the whole state in the workers' Store, or empty if
	// State is whole.
	Ref string `json:"ref,omitempty"`
	// Superseded is the key of the state saved before Ref, which the next
	// step deletes from the Store (see [StepInput.Superseded]).
	Superseded string     `json:"superseded,omitempty"`
	Options    RunOptions `json:"options"`
	// Decisions holds decisions received but not applied yet, carried over
	// when the workflow continues as new.
	Decisions []Approval `json:"decisions,omitempty"`
	// Claims are the keys of the claims (see [RunOptions.ClaimThreshold])
	// that State and Decisions refer to, and Spent those no step reads
	// again, which the next step deletes.
	Claims []string `json:"claims,omitempty"`
	Spent  []string `json:"spent_claims,omitempty"`
	// Digest and HistoryBytes are what identifies State's history and
	// its size in JSON, about, as the steps of a run without a Store
	// reported them (see [StepInput.Digest]), so that the next
	// execution's first step need not carry the history; empty for
	// none.
	Digest       string `json:"digest,omitempty"`
	HistoryBytes int    `json:"history_bytes,omitempty"`
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
	// new workflow. If the workers keep states in a [toolrun.Store], State
	// has no history (Params.Messages) and Ref names the whole state in
	// the Store: load it with [LoadState].
	State *toolrun.State `json:"state"`
	// Ref is the key of the whole final state in the workers' Store, or
	// empty if State is whole.
	Ref string `json:"ref,omitempty"`
}

// StepInput is the input of [Activities.Step].
type StepInput struct {
	// State is the run's state, whole or, with Ref or Digest, without its
	// history.
	State *toolrun.State `json:"state"`
	// Ref is the key of the whole state in the workers' Store, or empty.
	Ref string `json:"ref,omitempty"`
	// Superseded is the key of the state the step before Ref's started
	// from: no step reads it again, since the step that saved Ref is
	// recorded, so this step deletes it from the Store once it has loaded
	// Ref. Empty for none.
	Superseded string `json:"superseded,omitempty"`
	// PayloadLimit is [RunOptions.PayloadLimit] with its default.
	PayloadLimit int `json:"payload_limit,omitempty"`
	// ClaimThreshold is [RunOptions.ClaimThreshold].
	ClaimThreshold int `json:"claim_threshold,omitempty"`
	// Spent are claims no step reads again, which this step deletes.
	Spent []string `json:"spent_claims,omitempty"`
	// Deltas says that the workflow holds the whole state and takes a
	// result without a Store as a delta: only the history after the
	// messages it holds ([StepResult.Base]).
	Deltas bool `json:"deltas,omitempty"`
	// Digest, if set, says that State is the state without its history,
	// which the workflow holds: Messages messages, whose digest, as the
	// step before reported it ([StepResult.Digest]), is Digest, and whose
	// JSON is about HistoryBytes. A worker whose state cache holds the
	// run at that history goes on from it; another asks the workflow for
	// it ([HistoryQuery]).
	Messages     int    `json:"messages,omitempty"`
	Digest       string `json:"digest,omitempty"`
	HistoryBytes int    `json:"history_bytes,omitempty"`
}

// ReceivedCall is a call of a response that the step which received it
// also answered, with how it was decided and its result, as
// [StepResult].Received carries it: a [toolrun.ToolResult]'s JSON keeps
// neither its call nor its decision.
type ReceivedCall struct {
	Call     toolrun.ToolCall    `json:"call"`
	Decision toolrun.Decision    `json:"decision,omitzero"`
	Result   *toolrun.ToolResult `json:"result"`
}

// result returns a copy of rc's Result that holds its call and decision
// again, as a ToolFinished reports it; rc.Result must not be nil.
func (rc *ReceivedCall) result() *toolrun.ToolResult {
	r := *rc.Result
	r.Call, r.Decision = rc.Call, rc.Decision
	return &r
}

// StepResult is the result of [Activities.Step].
type StepResult struct {
	// State is the new state: whole, or without its history if the worker
	// keeps states in a Store, under Ref, or, with Base, with only the
	// messages the step added to the history.
	State *toolrun.State `json:"state"`
	Ref   string         `json:"ref,omitempty"`
	// Text is the text of the last response.
	Text string `json:"text,omitempty"`
	// Calls are the calls to run before the next step.
	Calls []driver.PlannedCall `json:"calls,omitempty"`
	// Committed holds, by tool_use id, the results of the calls this step
	// answered (denied or skipped) and committed with its request, which
	// State no longer shows: with a Store, they are nowhere else in the
	// history, and [Follow] reports them from here.
	Committed map[string]*toolrun.ToolResult `json:"committed,omitempty"`
	// Received are the calls of the response this step received when the
	// step also answered every one of them itself (an unknown tool's, a
	// call a policy denied or skipped, an input its schema refuses, the
	// calls of a final response) and committed the turn: State's turn in
	// progress never shows them, and [Follow] reports them from here.
	Received []ReceivedCall `json:"received,omitempty"`
	// Size is the size of this result in JSON, as the activity measured it,
	// so that the workflow need not encode the state to know it.
	Size int `json:"size,omitempty"`
	// Claims are the keys of the claims State and Calls refer to.
	Claims []string `json:"claims,omitempty"`
	// Base, for a step given [StepInput.Deltas] and no Store, is the
	// number of messages of the history the step began with that State's
	// history follows: State's history is only what the step added
	// ([ApplyStep] puts the two together). Zero means that State is
	// whole (the history was replaced, by a compaction, say).
	Base int `json:"base,omitempty"`
	// Digest identifies the whole history after the step, and
	// HistoryBytes is its size in JSON, about: the next step's
	// [StepInput.Digest] and [StepInput.HistoryBytes].
	Digest       string `json:"digest,omitempty"`
	HistoryBytes int    `json:"history_bytes,omitempty"`
}

// ToolInput is the input of [Activities.RunTool]: the run's state without
// its history, and the call to run.
type ToolInput struct {
	State     *toolrun.State `json:"state"`
	ToolUseID string         `json:"tool_use_id"`
	// PayloadLimit is [RunOptions.PayloadLimit] with its default.
	PayloadLimit int `json:"payload_limit,omitempty"`
	// ClaimThreshold is [RunOptions.ClaimThreshold].
	ClaimThreshold int `json:"claim_threshold,omitempty"`
}

// ToolOutput is the result of [Activities.RunTool].
type ToolOutput struct {
	Result *toolrun.ToolResult `json:"result"`
	// StopReason and Detail are set when [toolrun.Options.AfterTool] ended
	// the run, or the result was over the payload limit.
	StopReason toolrun.StopReason `json:"stop_reason,omitempty"`
	Detail     string             `json:"detail,omitempty"`
	// Claims are the keys of the claims Result refers to: a result over
	// [RunOptions.ClaimThreshold] is in the Store, and Result is a mark.
	Claims []string `json:"claims,omitempty"`
}

// The change ids of [workflow.GetVersion]: each guards a change to the
// commands the workflow issues, so that a run started by an older toolrun
// replays on a newer one. See the module README's upgrade guide.
const (
	// versionSearchAttributes guards the upserts of the search attributes.
	versionSearchAttributes = "toolrun.search-attributes"
	// versionPendingMemo guards the upserts of the memo [PendingMemo].
	versionPendingMemo = "toolrun.pending-memo"
	// versionEndStatus guards the upserts at the end of an execution that
	// make the search attributes and the memo show that it ended: a
	// cancelled run's status "canceled", and no call awaiting approval in
	// an execution that can no longer take a decision. It is asked at the
	// end, not at the start, so that a run that was waiting when its
	// workers were upgraded gets it too.
	versionEndStatus = "toolrun.end-status"
	// versionDecisionBounds guards the bounds on decisions
	// ([MaxDecisionBytes], [MaxEarlyDecisions], [MaxEarlyDecisionBytes]):
	// an execution recorded before them applied or kept every decision. It
	// is asked when an execution starts, so a run that was waiting when its
	// workers were upgraded gets the bounds from its next execution on.
	versionDecisionBounds = "toolrun.decision-bounds"
	// versionStopCalls guards the rule that no call of a turn starts once
	// a call's answer ended the run (AfterTool, or the payload guard), as
	// [driver.Batches] states it: an execution recorded before it went on
	// scheduling the turn's later calls. It is asked only when a stop
	// meets a call not started yet, so an execution that never does
	// records no marker.
	versionStopCalls = "toolrun.stop-calls"
	// versionClaims guards the activity that deletes the claims left when
	// an execution ends (see [RunOptions.ClaimThreshold]). It is asked only
	// when there are claims to delete, so an execution without claims (every
	// execution recorded before them) records no marker.
	versionClaims = "toolrun.claims"
	// versionAppend marks the executions that took messages by
	// [AppendUpdate] (appended to the turn awaiting approval, so in the
	// next step's input), so that a later change to how they are taken can
	// tell those recorded before it. It is asked only when an update's
	// messages are taken, so an execution that takes none (every execution
	// recorded before the update) records no marker and replays as before.
	versionAppend = "toolrun.append"
	// versionAppendTools guards the client tools an [AppendUpdate] carries
	// ([ClientTools]), and the answer of a call of a tool they took out
	// by the decision that answers it. An execution recorded before them
	// took the messages alone, as a worker older than the argument does.
	// It is asked only when an update carries client tools, or when a
	// decision answers a call of a tool taken out, so an execution that
	// has neither records no marker.
	versionAppendTools = "toolrun.append-tools"
	// versionPaced guards the pauses of a coroutine that took [stepWork]
	// bytes of signals or results in one go (see [pacer]): a pause lets
	// the task's other coroutines run in between, which may change the
	// order of the commands an execution recorded before it issued. It is
	// asked only when a pause is due, so an execution that never takes
	// that much at once records no marker.
	versionPaced = "toolrun.paced"
	// versionStateGuard guards the answer of a call whose result would
	// bring the run's state over [RunOptions.PayloadLimit]: an error in
	// its place, and the run stopped with [toolrun.StopPayloadTooLarge].
	// An execution recorded before it took the result and stopped at the
	// next step's guard, with an Outcome over the limit. It is asked only
	// when a result would cross the limit.
	versionStateGuard = "toolrun.state-guard"
	// versionContinueBySize guards when an execution continues as new: by
	// the size of its history against the state's
	// ([RunOptions.ContinueAsNewBytes]). An execution recorded before it
	// continued as new every 20 turns when its options set no
	// [RunOptions.ContinueAsNewAfter]. It is asked when an execution
	// starts its loop, so a run that was waiting when its workers were
	// upgraded keeps the old rule until its next execution.
	versionContinueBySize = "toolrun.continue-by-size"
)

// Workflow runs the tool loop of one conversation as a Temporal workflow. It
// holds the run's [toolrun.State] and drives it with two activities: a step
// ([Activities.Step]: the decisions on a turn's calls and one model
// request) and a tool call ([Activities.RunTool], one per call), so that no
// model request and no tool runs in the workflow itself. It ends with an
// [Outcome] when the run stops: the model finished, a limit, a hook, a
// payload over [RunOptions.PayloadLimit] ([toolrun.StopPayloadTooLarge]), or a
// step that failed after its retries ([toolrun.StopError]).
//
// With workers that keep states in a [toolrun.Store], the workflow holds
// the state without its history, and a key to the whole state in the
// Store: its payloads and its event history do not grow with the
// conversation. Without a Store, it holds the whole state itself, and a
// step's input and result carry the state without its history and what
// the step added ([StepDeltaActivity], [ApplyStep]): only the input of a
// continue-as-new and the Outcome carry the whole state.
//
// A call deferred to a person makes the workflow wait for a decision, sent
// with [DecideSignal] or [DecideUpdate]; the memo [PendingMemo] lists the
// calls awaiting one (read it with [Pending], no worker needed), and so
// does [PendingQuery]. A call's first decision is final: a later one, by update
// or signal, is refused ([toolrun.ErrNotAwaitingApproval]). The workflow
// continues as new with its state when its event history is large
// against the state ([RunOptions.ContinueAsNewBytes]). Unless
// [RunOptions.NoSearchAttributes], it keeps the search attributes
// [StatusAttribute] and the others up to date.
//
// A turn's calls run as [driver.Batches] groups them, and once a call's
// answer ends the run ([toolrun.Options.AfterTool] returns an error or
// [toolrun.StopRun], or its result is over the payload limit, or would
// bring the run's state over it, when the call is answered with an error
// in its place) no call of the turn that has not started starts: it
// stays decided, not run, in the Outcome's state, as in the runner's own
// executor.
//
// A cancelled run (client.CancelWorkflow) ends as Temporal's workflows
// usually do: with Temporal's CanceledError, not an Outcome, so that the
// execution closes as cancelled. Before it does, the search attributes
// and the memo are set to show it: [StatusAttribute] "canceled",
// [AwaitingApprovalAttribute] false, no calls in [PendingMemo]. A run that
// ends with an Outcome shows its stop reason, and nothing awaiting
// approval either: calls that still await a decision when a hook or a
// limit stops the run are in the Outcome's state, for a run resumed from
// it, but this execution takes no more decisions. An execution that
// continues as new keeps what it showed ("running", or awaiting the calls
// it carries over), since the run goes on in the next execution, which
// starts with the same search attributes and memo: query with
// ExecutionStatus = "Running" to see each run once. A run terminated, or
// timed out by the server, keeps what it last showed: no workflow code
// runs then.
func Workflow(ctx workflow.Context, in Input) (*Outcome, error) {
	if in.State == nil {
		return nil, sdktemporal.NewNonRetryableApplicationError("toolrun: workflow input has no state", "toolrun.InvalidInput", nil)
	}
	w := &run{state: in.State, ref: in.Ref, superseded: in.Superseded, input: in.Options, opts: in.Options.withDefaults(), buffered: in.Decisions,
		claims: in.Claims, spent: in.Spent}
	if in.Ref == "" {
		w.text = lastText(in.State)
	}
	w.attrs = !w.opts.NoSearchAttributes &&
		workflow.GetVersion(ctx, versionSearchAttributes, workflow.DefaultVersion, 1) >= 1
	w.memo = workflow.GetVersion(ctx, versionPendingMemo, workflow.DefaultVersion, 1) >= 1
	w.bounded = workflow.GetVersion(ctx, versionDecisionBounds, workflow.DefaultVersion, 1) >= 1
	if in.Ref == "" {
		w.deltas = workflow.GetVersion(ctx, versionDeltas, workflow.DefaultVersion, 1) >= 1
		w.digest, w.histBytes, w.startSize = in.Digest, in.HistoryBytes, in.HistoryBytes
		w.mark(in.Digest, true)
	}
	if err := w.handle(ctx); err != nil {
		return nil, err
	}
	if err := w.handleHistory(ctx); err != nil {
		return nil, err
	}
	out, err := w.loop(ctx)
	if err != nil && ctx.Err() != nil {
		w.canceled(ctx)
	}
	return out, err
}

// loop drives the run until it ends with an [Outcome], continues as new
// (a [workflow.ContinueAsNewError]) or is cancelled (an error, with ctx
// done).
func (w *run) loop(ctx workflow.Context) (*Outcome, error) {
	w.applyBuffered(ctx)
	w.upsert(ctx)
	firstTurn := w.state.Turns
	bySize := workflow.GetVersion(ctx, versionContinueBySize, workflow.DefaultVersion, 1) >= 1
	for {
		info := workflow.GetInfo(ctx)
		if w.continueNow(info.GetCurrentHistorySize(), info.GetContinueAsNewSuggested(), firstTurn, bySize) {
			return w.continueAsNew(ctx)
		}
		in := w.stepInput()
		what := "the input of a step"
		if in.Deltas {
			what = "the run's state, which the input of a continue-as-new carries,"
		}
		if w.tooLarge(what, w.size) {
			return w.end(ctx), nil
		}
		res, err := w.step(ctx, in)
		if err != nil && in.Digest != "" && needsHistory(err) && ctx.Err() == nil {
			// The worker had not the history, nor could it ask for it.
			in = w.wholeInput(in)
			res, err = w.step(ctx, in)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			if err := w.state.Stop(toolrun.StopError, "step failed: "+rootMessage(err)); err != nil {
				return nil, err
			}
			return w.end(ctx), nil
		}
		if res.Ref != w.ref {
			w.superseded = in.Ref
		}
		w.afterStep(in, res)
		if err := w.takeStep(in, res); err != nil {
			if err := w.state.Stop(toolrun.StopError, "step result: "+err.Error()); err != nil {
				return nil, err
			}
			return w.end(ctx), nil
		}
		if res.Text != "" {
			w.text = res.Text
		}
		w.applyBuffered(ctx)
		w.upsert(ctx)
		if len(res.Calls) > 0 {
			if err := w.runCalls(ctx, res.Calls); err != nil {
				return nil, err
			}
			if w.state.StopReason != "" { // AfterTool, or the payload guard, ended the run
				return w.end(ctx), nil
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
			w.upsert(ctx)
		default:
			return w.end(ctx), nil
		}
	}
}

// run is the state of one workflow execution.
type run struct {
	state *toolrun.State // whole, or without its history if ref is set
	ref   string         // the key of the whole state in the workers' Store
	// superseded is the key of the state saved before ref, for the next
	// step to delete
	superseded string
	text       string     // the text of the last response
	input      RunOptions // as given, for continue-as-new
	opts       RunOptions // with defaults
	stepping   bool       // a step is in flight: its result will replace state
	buffered   []Approval // decisions not applied yet
	bufSizes   []int      // the size of each of buffered (decisionSize), once known: see sizes
	signals    workflow.ReceiveChannel
	size       int     // about the size of state in JSON: the last step's result and the results since
	attrs      bool    // upsert the search attributes
	shown      summary // what the search attributes show
	memo       bool    // upsert the memo PendingMemo
	bounded    bool    // decisions are bounded (decisionBounds)
	memoSet    bool    // the memo was upserted in this execution
	memoKey    string  // the calls the memo lists, as pendingKey gives them
	// claims are the keys of the claims state and buffered refer to;
	// spent those no step reads again, for the next step to delete
	// (the workflow keeps any key it is given: the activities delete
	// only those of the run's own workflow id, which a replay need not
	// have)
	claims, spent []string
	ending        string // the status the execution ends with, once it ends; "" while it runs
	// appended is the JSON size of the messages AppendUpdate appended to
	// the turn appendedTurn, for MaxAppendBytes
	appended, appendedTurn int
	// deltas: without a Store, steps carry deltas (versionDeltas), and
	// digest and histBytes identify state's history as the last step
	// reported it ("" and 0 until one did)
	deltas    bool
	digest    string
	histBytes int
	// startSize is the size of the history this execution began with, as
	// its input said, for the continue-as-new rule before a step reports
	// the state's size
	startSize int
	// known are the marks of the last histories the workflow held,
	// oldest first, each the beginning of the history it holds now: what
	// a worker may name with HistorySince
	known []historyMark
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
			if err := w.decisionTooLarge(a); err != nil {
				return typedError(err)
			}
			err := w.decidable(a)
			if errors.Is(err, errUnknownCall) {
				err = fmt.Errorf("%w: no call %q awaits approval", toolrun.ErrNotAwaitingApproval, a.ToolUseID)
			}
			// The refusal reaches the client as an ApplicationError: its
			// type names the sentinel, which FromFailure puts back.
			return typedError(err)
		}},
	); err != nil {
		return err
	}
	if err := w.handleAppend(ctx); err != nil {
		return err
	}
	w.signals = workflow.GetSignalChannel(ctx, DecideSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		var p pacer
		for {
			var a Approval
			if !w.signals.ReceiveAsync(&a) {
				p.blocks()
				if !w.signals.Receive(ctx, &a) {
					return
				}
			}
			p.took(ctx, w.receive(ctx, a))
		}
	})
	return nil
}

// handleAppend registers [AppendUpdate]: its validator refuses messages
// that are not user messages, over [MaxAppendBytes] with the client tools
// sent with them and those appended to the turn before, client tools
// [driver.CanChangeTools] refuses, or an update sent while the run awaits
// no decision or a step is in flight (whose result will replace the
// state); its handler appends the messages after the results of the turn
// awaiting approval, and makes the client tools the run's.
func (w *run) handleAppend(ctx workflow.Context) error {
	appendable := func(messages []anthropic.BetaMessageParam, tools *ClientTools) (int, error) {
		before := w.appended
		if w.appendedTurn != w.state.Turns {
			before = 0
		}
		n, err := appendSize(messages, tools, before)
		if err != nil {
			return 0, err
		}
		if w.stepping || w.ending != "" || len(w.state.AwaitingApproval()) == 0 {
			return 0, fmt.Errorf("%w: a turn is in flight or the run ended; send the messages when it awaits a decision, or with its next run", ErrNotAwaiting)
		}
		if tools != nil {
			remove, add := clientToolChange(w.state, tools.Tools)
			if err := driver.CanChangeTools(w.state, remove, add...); err != nil {
				return 0, err
			}
		}
		return before + n, nil
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, AppendUpdate,
		func(ctx workflow.Context, messages []anthropic.BetaMessageParam, tools *ClientTools) error {
			total, err := appendable(messages, tools)
			if err != nil {
				return appendRefusal(err)
			}
			workflow.GetVersion(ctx, versionAppend, workflow.DefaultVersion, 1)
			if tools != nil && workflow.GetVersion(ctx, versionAppendTools, workflow.DefaultVersion, 1) >= 1 {
				remove, add := clientToolChange(w.state, tools.Tools)
				if err := driver.ChangeTools(w.state, remove, add...); err != nil {
					return appendRefusal(err) // checked by appendable: not reached
				}
			}
			if w.appendedTurn == w.state.Turns {
				w.size += total - w.appended
			} else {
				w.size += total
			}
			w.state.AppendMessages(messages...)
			w.appended, w.appendedTurn = total, w.state.Turns
			return nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, messages []anthropic.BetaMessageParam, tools *ClientTools) error {
			_, err := appendable(messages, tools)
			if err != nil {
				return appendRefusal(err)
			}
			return nil
		}},
	)
}

// decidable is the one rule for a decision, by update or signal: a call
// takes one decision, the first. A decision received and not applied yet
// counts as given.
func (w *run) decidable(a Approval) error {
	for _, b := range w.buffered {
		if b.ToolUseID == a.ToolUseID && hasCall(w.state, a.ToolUseID) {
			return fmt.Errorf("%w: call %q was decided already", toolrun.ErrNotAwaitingApproval, a.ToolUseID)
		}
	}
	return decidable(w.state, a.ToolUseID, a.Decision)
}

// receive takes a decision: it is applied now if its call awaits approval
// and no step is in flight, kept for later if its call is not known yet or
// a step is in flight, and dropped with a warning otherwise (a call
// decided already, or that does not await approval). It returns the size
// of a's JSON, which it measures once, for the caller's [pacer].
func (w *run) receive(ctx workflow.Context, a Approval) int {
	n := decisionSize(a)
	if err := w.sizeTooLarge(a, n); err != nil {
		w.drop(ctx, a, err)
		return n
	}
	err := w.decidable(a)
	if err != nil && !errors.Is(err, errUnknownCall) {
		w.drop(ctx, a, err)
		return n
	}
	if err != nil && w.bounded {
		if err := w.roomForEarly(a, n); err != nil {
			w.drop(ctx, a, err)
			return n
		}
	}
	w.addClaims(approvalClaims(a, "")...)
	w.buffered = append(w.buffered, a)
	if w.bufSizes != nil {
		w.bufSizes = append(w.bufSizes, n)
	}
	if !w.stepping {
		w.applyBuffered(ctx)
	}
	return n
}

// applyBuffered applies the decisions kept for calls that now await
// approval, in the order received: the first decision for a call wins, and
// the others are dropped, as are decisions for calls that cannot take one
// (answered, not deferred). Decisions for calls not seen yet are kept.
func (w *run) applyBuffered(ctx workflow.Context) {
	kept := w.buffered[:0]
	sizes := w.sizes()
	keptSizes := sizes[:0]
	for i, a := range w.buffered {
		err := w.decide(ctx, a)
		switch {
		case err == nil:
		case errors.Is(err, errUnknownCall):
			kept = append(kept, a)
			keptSizes = append(keptSizes, sizes[i])
		default:
			w.drop(ctx, a, err)
		}
	}
	w.buffered, w.bufSizes = kept, keptSizes
	w.upsert(ctx)
}

// decide records decision a in the state if [decidable] allows it. A
// Skip or Deny of a call whose tool a [ClientTools] change took out
// (see removedClientTool) is recorded as the call's answer, as serve does
// in process: the step's runner, with no tool left to decide the call
// with, would answer it as an unknown tool's and lose the client's
// result.
func (w *run) decide(ctx workflow.Context, a Approval) error {
	d := a.Decision
	if (d.Kind == toolrun.Skip || d.Kind == toolrun.Deny) && decidable(w.state, a.ToolUseID, d) == nil &&
		removedClientTool(w.state, a.ToolUseID) &&
		workflow.GetVersion(ctx, versionAppendTools, workflow.DefaultVersion, 1) >= 1 {
		res := &toolrun.ToolResult{Content: d.Result, IsError: d.IsError}
		if d.Kind == toolrun.Deny {
			res = &toolrun.ToolResult{Err: fmt.Errorf("%w: %s", toolrun.ErrDenied, d.Reason)}
		}
		return driver.SetResult(w.state, a.ToolUseID, res)
	}
	return decide(w.state, a.ToolUseID, d)
}

// step runs one step activity.
func (w *run) step(ctx workflow.Context, in StepInput) (*StepResult, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    w.opts.StepTimeout,
		ScheduleToCloseTimeout: w.opts.ModelRetryFor,
		HeartbeatTimeout:       w.opts.HeartbeatTimeout,
		RetryPolicy:            w.opts.ModelRetry,
		Summary:                fmt.Sprintf("turn %d", w.state.Turns+1),
	})
	w.stepping = true
	defer func() { w.stepping = false }()
	var res StepResult
	name := StepActivity
	if in.Digest != "" {
		name = StepDeltaActivity
	}
	if err := workflow.ExecuteActivity(actx, name, in).Get(ctx, &res); err != nil {
		return nil, err
	}
	if res.State == nil {
		return nil, errors.New("toolrun: step returned no state")
	}
	return &res, nil
}

// runCalls runs the planned calls of a turn as activities, in the order
// and groups of the runner's own executor ([driver.CallQueue]):
// consecutive calls of non-exclusive tools together, up to
// MaxParallelTools at once and a tool's [toolrun.ToolConfig.MaxParallel]
// of its calls, and each call of an exclusive tool alone; once a call's
// answer ends the run, no call that has not started starts (the calls
// running finish), so a later call stays decided, not run, in the
// Outcome's state. Each result is written into the state as it arrives.
func (w *run) runCalls(ctx workflow.Context, calls []driver.PlannedCall) error {
	q := driver.NewCallQueue(calls, w.opts.MaxParallelTools)
	sel := workflow.NewSelector(ctx)
	var firstErr error
	var p pacer
	for {
		for firstErr == nil && q.Ready() {
			if w.stopsCalls(ctx) {
				q.Stop()
				break
			}
			c, _ := q.Start()
			in := ToolInput{State: forCall(w.state, c.Call.ID), ToolUseID: c.Call.ID, PayloadLimit: w.opts.PayloadLimit, ClaimThreshold: w.opts.ClaimThreshold}
			f := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, w.toolOptions(c)), ToolActivity, in)
			sel.AddFuture(f, func(f workflow.Future) {
				q.Done(c.Call.ID)
				n, err := w.finish(ctx, c, f)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				p.took(ctx, n)
			})
		}
		if q.Running() == 0 {
			return firstErr
		}
		if !sel.HasPending() {
			p.blocks()
		}
		sel.Select(ctx)
	}
}

// stopsCalls reports whether a call's answer has ended the run, so that no
// more calls of the turn start. An execution recorded before the rule
// (versionStopCalls) goes on scheduling them, as it did; on a new worker
// such a call of a run stopped for good (StopRun, the payload guard) is
// then refused (driver.ExecuteCall) and left unanswered by
// finish, while after a hook's failure (StopError, which a run tries
// again) it still runs, as it did.
func (w *run) stopsCalls(ctx workflow.Context) bool {
	return w.state.StopReason != "" &&
		workflow.GetVersion(ctx, versionStopCalls, workflow.DefaultVersion, 1) >= 1
}

// toolGrace is what a call's activity timeout adds to the tool's own
// timeout: the tool's timeout fires first, in the worker, and the call is
// answered with a timeout error rather than lost.
const toolGrace = 30 * time.Second

// toolOptions are the activity options of call p: the tool's timeout
// (plus [toolGrace]) as the start-to-close timeout, and a single attempt
// for a call of a tool that is not idempotent.
func (w *run) toolOptions(p driver.PlannedCall) workflow.ActivityOptions {
	timeout := w.opts.ToolTimeout
	if p.Timeout > 0 {
		timeout = p.Timeout + toolGrace
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

// finish writes the outcome of call p's activity into the state, and
// returns the size of the result's JSON, about. An activity that failed
// (its worker lost, its timeout passed, its retries spent) answers the
// call as interrupted; only the workflow's cancellation is an error.
func (w *run) finish(ctx workflow.Context, p driver.PlannedCall, f workflow.Future) (int, error) {
	var out ToolOutput
	err := f.Get(ctx, &out)
	if err != nil {
		if ctx.Err() != nil {
			return 0, err
		}
		if notRun(err) {
			// The worker refused the call without running it (the run had
			// stopped): it stays as it was, not answered as interrupted.
			workflow.GetLogger(ctx).Warn("toolrun: tool call not run", "tool", p.Call.Name, "tool_use_id", p.Call.ID, "error", rootMessage(err))
			return 0, nil
		}
		out = ToolOutput{Result: interrupted(p, err)}
		workflow.GetLogger(ctx).Error("toolrun: tool call interrupted", "tool", p.Call.Name, "tool_use_id", p.Call.ID, "error", err.Error())
	}
	w.addClaims(out.Claims...)
	// One call's result: at most the payload limit, which its activity
	// checked, so measuring it is a bounded step.
	n, _ := overLimit(out.Result, 0)
	if w.size > 0 && w.size+n > w.opts.PayloadLimit && workflow.GetVersion(ctx, versionStateGuard, workflow.DefaultVersion, 1) >= 1 {
		// The results of the turn would bring the state over the limit,
		// which the next step's input or the Outcome would carry: the
		// server refuses such a payload, and the run would retry its
		// workflow task for ever. The call is answered as a result over
		// the limit is, and the run stops.
		detail := payloadDetail("the run's state with the result of call "+p.Call.ID, w.size+n, w.opts.PayloadLimit)
		e := "toolrun: " + detail
		out = ToolOutput{
			Result:     &toolrun.ToolResult{Content: []toolrun.Content{toolrun.Text(e)}, IsError: true, Err: errors.New(e), Ran: true},
			StopReason: toolrun.StopPayloadTooLarge,
			Detail:     detail,
		}
		n, _ = overLimit(out.Result, 0)
	}
	if w.size > 0 {
		w.size += n
	}
	if err := driver.SetResult(w.state, p.Call.ID, out.Result); err != nil {
		workflow.GetLogger(ctx).Warn("toolrun: tool result dropped", "tool_use_id", p.Call.ID, "error", err.Error())
	}
	if out.StopReason != "" {
		if err := driver.StopAfterCall(w.state, out.StopReason, out.Detail); err != nil {
			workflow.GetLogger(ctx).Warn("toolrun: stop not recorded", "tool_use_id", p.Call.ID, "error", err.Error())
		}
	}
	return n, nil
}

// notRun reports whether a tool activity failed because the worker
// refused to run its call ([callNotRun]).
func notRun(err error) bool {
	var ae *sdktemporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == callNotRun
}

// interrupted is the result of a call whose activity failed.
func interrupted(p driver.PlannedCall, err error) *toolrun.ToolResult {
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
	return &toolrun.ToolResult{Content: []toolrun.Content{toolrun.Text(e.Error())}, IsError: true, Err: e}
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

// tooLarge reports whether a payload of n bytes is over the payload limit;
// if it is, it stops the run with [toolrun.StopPayloadTooLarge]. The workflow
// estimates n from the sizes its activities report, rather than encode the
// state itself: that would hold the workflow task for as long as it takes.
func (w *run) tooLarge(what string, n int) bool {
	if n <= w.opts.PayloadLimit {
		return false
	}
	// Stop refuses no StopPayloadTooLarge, so its error is always nil.
	_ = w.state.Stop(toolrun.StopPayloadTooLarge, payloadDetail(what, n, w.opts.PayloadLimit))
	return true
}

// overLimit returns the size of v in JSON, and whether it is over limit.
// Encoding a value to JSON is deterministic, so a workflow may call it.
func overLimit(v any, limit int) (int, bool) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, false // the data converter will say what is wrong
	}
	return len(b), len(b) > limit
}

func payloadDetail(what string, n, limit int) string {
	return fmt.Sprintf("%s would be %d bytes, over the payload limit of %d bytes", what, n, limit)
}

// ContinueAsNewFactor is how many times the run's state an execution's
// event history is at least before the workflow continues as new (see
// [RunOptions.ContinueAsNewBytes]).
const ContinueAsNewFactor = 5

// legacyContinueAsNewAfter is the number of turns after which an
// execution recorded before versionContinueBySize continued as new when
// its options set none.
const legacyContinueAsNewAfter = 20

// continueNow reports whether the execution, whose first turn was
// firstTurn and whose history is history bytes, continues as new before
// its next step: when the server suggests it, after
// [RunOptions.ContinueAsNewAfter] turns if set, and, unless the execution
// was recorded before bySize, once its history is past
// [RunOptions.ContinueAsNewBytes] and [ContinueAsNewFactor] times the
// state. The history's size and the suggestion are the ones the server
// reported when the workflow task began, recorded in the task's event,
// so a replay decides alike.
func (w *run) continueNow(history int, suggested bool, firstTurn int, bySize bool) bool {
	if suggested {
		return true
	}
	turns := w.state.Turns - firstTurn
	if !bySize {
		after := w.opts.ContinueAsNewAfter
		if after <= 0 {
			after = legacyContinueAsNewAfter
		}
		return turns >= after
	}
	if w.opts.ContinueAsNewAfter > 0 && turns >= w.opts.ContinueAsNewAfter {
		return true
	}
	// An execution takes a turn before it continues by size: its input
	// alone may be past the bytes, and the state's size is known from the
	// first step's result on (before it, from the history's bytes the
	// input carries).
	size := max(w.size, w.startSize)
	return turns > 0 && history >= w.opts.ContinueAsNewBytes && history >= ContinueAsNewFactor*size
}

// continueAsNew waits for the update handlers to finish, takes the signals
// received so far, and continues as new with the state; or stops the run
// if its input would be over the payload limit.
func (w *run) continueAsNew(ctx workflow.Context) (*Outcome, error) {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return nil, err
	}
	var p pacer
	for {
		var a Approval
		if !w.signals.ReceiveAsync(&a) {
			break
		}
		p.took(ctx, w.receive(ctx, a))
	}
	in := Input{State: w.state, Ref: w.ref, Superseded: w.superseded, Options: w.input, Decisions: w.buffered, Claims: w.claims, Spent: w.spent,
		Digest: w.digest, HistoryBytes: w.histBytes}
	if w.tooLarge("the input of continue-as-new", w.size) {
		return w.end(ctx), nil
	}
	return nil, workflow.NewContinueAsNewError(ctx, WorkflowName, in)
}

// end returns the run's outcome, with the search attributes showing it:
// the stop reason as the status, and no call awaiting approval, since
// this execution takes no more decisions (the outcome's state still has
// the calls that awaited one, for a run resumed from it).
func (w *run) end(ctx workflow.Context) *Outcome {
	if workflow.GetVersion(ctx, versionEndStatus, workflow.DefaultVersion, 1) >= 1 {
		w.ending = string(w.state.StopReason)
	}
	w.upsert(ctx)
	w.releaseClaims(ctx)
	return &Outcome{StopReason: w.state.StopReason, Detail: w.state.Detail, Text: w.text, State: w.state, Ref: w.ref}
}

// canceled makes the search attributes and the memo show that the run was
// cancelled: status [toolrun.StopCanceled], nothing awaiting approval. The
// workflow's result stays Temporal's CanceledError, so that the execution
// closes as cancelled, as Temporal's tools expect; the upserts go through
// a disconnected context, since ctx is done.
func (w *run) canceled(ctx workflow.Context) {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	w.releaseClaims(ctx)
	if workflow.GetVersion(ctx, versionEndStatus, workflow.DefaultVersion, 1) < 1 {
		return
	}
	w.ending = string(toolrun.StopCanceled)
	w.upsert(ctx)
}

// upsert updates the memo and the search attributes if what they show
// changed.
func (w *run) upsert(ctx workflow.Context) {
	w.upsertMemo(ctx)
	if !w.attrs {
		return
	}
	s := summarize(w.state)
	if w.ending != "" {
		s.status, s.awaiting = w.ending, false
	}
	if s == w.shown {
		return
	}
	w.shown = s
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		StatusAttribute.ValueSet(s.status),
		AwaitingApprovalAttribute.ValueSet(s.awaiting),
		ModelAttribute.ValueSet(s.model),
		TurnsAttribute.ValueSet(int64(s.turns)),
		CostAttribute.ValueSet(s.cost),
	); err != nil {
		workflow.GetLogger(ctx).Warn("toolrun: search attributes not updated", "error", err.Error())
	}
}

// upsertMemo sets the memo [PendingMemo] to the calls awaiting approval,
// once in each execution (so that a run without such calls says so, and
// [Pending] need not fall back on the query) and then whenever those calls
// change: a decision, a new turn, the end of the run (when it lists none).
func (w *run) upsertMemo(ctx workflow.Context) {
	if !w.memo {
		return
	}
	var calls []toolrun.PendingCall
	if w.ending == "" {
		calls = w.state.AwaitingApproval()
	}
	p := pendingApprovals(calls)
	key := pendingKey(p)
	if w.memoSet && key == w.memoKey {
		return
	}
	w.memoSet, w.memoKey = true, key
	if err := workflow.UpsertMemo(ctx, map[string]any{PendingMemo: p}); err != nil {
		workflow.GetLogger(ctx).Warn("toolrun: pending memo not updated", "error", err.Error())
	}
}

// stepWork is how many bytes of values (decisions, tool results) one of
// the workflow's coroutines takes before it lets the others run: the
// SDK's deadlock detector fails a workflow task whose coroutine runs a
// second without blocking, and a task may bring any number of signals or
// results at once, each decoded and measured here. Taken in steps of this
// size, each step is a few milliseconds of work, however many arrive.
const stepWork = 256 << 10

// workTaken, if non-nil, is called with the bytes of each value a
// coroutine of the workflow takes, and with -1 each time the coroutine
// blocks (a pause, or a wait for more): how a test counts the work of one
// step, rather than timing it.
var workTaken func(n int)

// pacer counts the bytes of values one coroutine of the workflow took
// since it last blocked, and blocks it for a moment once they reach
// [stepWork] (in an execution that records versionPaced: one recorded
// before took them all in one go, and replays so).
type pacer struct{ n int }

// took counts n bytes taken, and pauses the coroutine once the step is
// full.
func (p *pacer) took(ctx workflow.Context, n int) {
	p.n += n
	if workTaken != nil {
		workTaken(n)
	}
	if p.n >= stepWork && workflow.GetVersion(ctx, versionPaced, workflow.DefaultVersion, 1) >= 1 {
		pause(ctx)
		p.n = 0
	}
}

// blocks says that the coroutine is about to block: its next step starts.
func (p *pacer) blocks() {
	p.n = 0
	if workTaken != nil {
		workTaken(-1)
	}
}

// pause blocks the coroutine and lets the workflow task's others run; it
// returns within the same task, once the dispatcher comes back to it,
// which it does, since the coroutine made progress before it paused. It
// issues no command, so it changes nothing on a replay.
func pause(ctx workflow.Context) {
	resumed := false
	_ = workflow.Await(ctx, func() bool { // an error only if ctx is done: the caller sees it next
		r := resumed
		resumed = true
		return r
	})
	if workTaken != nil {
		workTaken(-1)
	}
}
