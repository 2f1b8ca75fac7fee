package driver

import (
	"context"
	"encoding/json"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/bridge"
	"github.com/toolrun/toolrun/internal/retry"
)

// planned is the root package's plannedCall: a struct type literal, so
// that a PlannedCall converts to it and back, and the root's functions
// that take or return it are asserted here without naming it. Its fields
// are PlannedCall's; the assertions below fail when the package is
// initialised if the two ever differ.
type planned = struct {
	Call        toolrun.ToolCall `json:"call"`
	Exclusive   bool             `json:"exclusive,omitempty"`
	Idempotent  bool             `json:"idempotent,omitempty"`
	Timeout     time.Duration    `json:"timeout,omitempty"`
	MaxParallel int              `json:"max_parallel,omitempty"`
}

// The root package's functions (see internal/bridge).
var (
	advance       = bridge.Advance.(func(context.Context, *toolrun.Runner) ([]planned, error))
	executeCall   = bridge.ExecuteCall.(func(context.Context, *toolrun.Runner, string) (*toolrun.ToolResult, error))
	cutResult     = bridge.CutResult.(func(*toolrun.Runner, *toolrun.ToolResult) *toolrun.ToolResult)
	batches       = bridge.Batches.(func([]planned) [][]planned)
	newCallQueue  = bridge.NewCallQueue.(func([]planned, int) any)
	skeleton      = bridge.Skeleton.(func(*toolrun.State) *toolrun.State)
	merge         = bridge.Merge.(func(*toolrun.State, *toolrun.State) *toolrun.State)
	forCall       = bridge.ForCall.(func(*toolrun.State, string) *toolrun.State)
	hasCall       = bridge.HasCall.(func(*toolrun.State, string) bool)
	canDecide     = bridge.CanDecide.(func(*toolrun.State, string, toolrun.Decision) error)
	stopAfterCall = bridge.StopAfterCall.(func(*toolrun.State, toolrun.StopReason, string) error)
	setResult     = bridge.SetResult.(func(*toolrun.State, string, *toolrun.ToolResult) error)
	responseText  = bridge.ResponseText.(func(*toolrun.State) (string, bool))
	snapshot      = bridge.Snapshot.(func(*toolrun.Runner) *toolrun.State)
	committed     = bridge.Committed.(func(*toolrun.Runner) (int, []*toolrun.ToolResult))
	resumeOwned   = bridge.ResumeOwned.(func(anthropic.Client, *toolrun.State, []toolrun.Tool, *toolrun.Options) (*toolrun.Runner, error))
	validateInput = bridge.ValidateInput.(func(context.Context, string, json.RawMessage, json.RawMessage) error)
	shareEvents   = bridge.ShareEvents.(func(*toolrun.Options))
	changeTools   = bridge.ChangeTools.(func(*toolrun.State, []string, []anthropic.BetaToolUnionParam, bool) error)
)

// PlannedCall is a call of the pending turn that is decided and allowed,
// ready to be run with [ExecuteCall], with what a scheduler needs to know
// about its tool.
type PlannedCall struct {
	// Call is the call; its Input is the input the tool will run with (the
	// decision's, if it replaced the model's).
	Call toolrun.ToolCall `json:"call"`
	// Exclusive, Idempotent and Timeout come from the tool's
	// [toolrun.ToolConfig]; Timeout is the call's effective timeout
	// ([toolrun.Timeouts].Tool for a tool that sets none), zero for none.
	Exclusive  bool          `json:"exclusive,omitempty"`
	Idempotent bool          `json:"idempotent,omitempty"`
	Timeout    time.Duration `json:"timeout,omitempty"`
	// MaxParallel is the tool's [toolrun.ToolConfig].MaxParallel: at most
	// that many of its calls run at once (see [CallQueue]); zero for no
	// bound of its own.
	MaxParallel int `json:"max_parallel,omitempty"`
}

func toPlanned(calls []PlannedCall) []planned {
	out := make([]planned, len(calls))
	for i, c := range calls {
		out[i] = planned(c)
	}
	return out
}

func fromPlanned(calls []planned) []PlannedCall {
	if calls == nil {
		return nil
	}
	out := make([]PlannedCall, len(calls))
	for i, c := range calls {
		out[i] = PlannedCall(c)
	}
	return out
}

// Advance takes the run of r as far as it goes without running a tool, and
// returns the calls that must run before it can go further, in the order
// of the response. The caller runs them, here or elsewhere, with
// [ExecuteCall] (on r, or on a runner resumed from its State whose results
// are then recorded with [SetResult]), then calls Advance again; [Batches]
// says which of them may run together. When Advance returns no calls and
// no error, the run has either stopped (r.Result() is non-nil) or sent a
// request whose response needs no tool to run (a pause_turn, say, or calls
// that were all denied), and the caller calls Advance again.
//
// Advance is the engine's step, as [toolrun.Runner.Next] takes it, with at
// most one model request per call (and a compaction's, when one is due),
// so that each call of Advance is a bounded piece of work that can be
// retried from the State it started from. It returns the error Run would
// return.
func Advance(ctx context.Context, r *toolrun.Runner) ([]PlannedCall, error) {
	calls, err := advance(ctx, r)
	return fromPlanned(calls), err
}

// ExecuteCall answers one call of r's pending turn, by its tool_use id, as
// [toolrun.Runner.Next] would, through the same executor: it decides the
// call if the State records no decision for it (a decision recorded
// stands, by whichever runner took it), runs it if it is allowed, records
// the result in the pending turn and returns it. A call answered already
// is not run again: its result is returned as it is.
//
// It runs only a call that Next would run: the engine's rule for whether a
// turn's calls may start is the same for both. So it returns an error
// wrapping [toolrun.ErrNotRun], runs nothing and changes nothing, for a
// call of a run stopped for good (the turn limit, a budget, a hook's
// StopRun: the error wraps [toolrun.ErrMaxTurns] or [toolrun.ErrBudget]
// for a limit), of a turn the caller took over (RetryTurn, SetMessages),
// of a final response (max_tokens, refusal: its calls are answered as not
// run by the next step), or of a turn that the turn limit or
// Budget.ToolCalls holds back. A run suspended awaiting approval is not
// stopped for good: a call decided since runs. The next Next or Advance
// then does with the turn what it would have done.
//
// It returns an error, and no result, for a call deferred to a person and
// not decided yet (give the decision with [toolrun.Runner.Decide] or
// [toolrun.State.Decide]) or if the pending turn has no call with that id.
// If ctx is cancelled while the tool runs, the call is left started (its
// phase in the State is started) and ctx's error is returned. If AfterTool
// ends the run, the result is returned with the hook's error (nil for
// StopRun) and r.Result() says how the run stopped; after a StopRun, the
// turn's other calls are refused.
//
// Like the rest of Runner it is not safe for concurrent use, so calls of
// one turn run in parallel on runners of their own, each resumed from the
// run's State.
func ExecuteCall(ctx context.Context, r *toolrun.Runner, toolUseID string) (*toolrun.ToolResult, error) {
	return executeCall(ctx, r, toolUseID)
}

// CutResult returns res as the model receives it from r: with its text cut
// to the result limit of its tool ([toolrun.ToolConfig].MaxResultBytes,
// else [toolrun.Options].MaxResultBytes) and the note that says so, and
// Truncated set; res itself if it is within the limit. A runner that sends
// a cut result sends it as it is, so the model sees exactly what it sees
// of the whole result in process. A driver that carries a result
// through a channel of bounded size (an activity's result, a queue) cuts
// it there; what it no longer carries is the text past the limit, which
// the model never sees. res is not changed.
func CutResult(r *toolrun.Runner, res *toolrun.ToolResult) *toolrun.ToolResult {
	return cutResult(r, res)
}

// Batches splits the allowed calls of a turn, in the order of the response,
// into the groups that may run at once: consecutive calls of tools that are
// not [toolrun.ToolConfig].Exclusive form one group, and each call of an
// exclusive tool is a group of its own, so it runs after the calls before
// it have finished and before any after it start. A toolset's calls
// ([toolrun.ToolConfig].Toolset) run one at a time in the model's order: a
// group ends before a second call of a toolset it has. The groups run one
// after another. Once a call's answer ends the run (AfterTool returned an error
// or [toolrun.StopRun]), no call that has not started starts, in its group
// or a later one. [CallQueue] applies this rule, with the bounds on
// parallel calls: the runner's executor and the Temporal workflow both
// start calls through it.
func Batches(calls []PlannedCall) [][]PlannedCall {
	groups := batches(toPlanned(calls))
	out := make([][]PlannedCall, len(groups))
	for i, g := range groups {
		out[i] = fromPlanned(g)
	}
	return out
}

// queue is the root's callQueue, as CallQueue reaches it.
type queue interface {
	Start() (planned, bool)
	Ready() bool
	Done(toolUseID string)
	Stop()
	Running() int
}

// CallQueue hands out the planned calls of one turn in the order and
// groups they may run in, and is the one implementation of that rule: the
// runner's executor starts its calls through one, and a driver that
// schedules calls itself uses one to run them as the runner would. The
// rule: the groups of [Batches], one after another; within a group, at
// most the turn's bound of calls at once ([toolrun.Options].MaxParallelTools)
// and at most [toolrun.ToolConfig].MaxParallel calls of one tool; and once
// [CallQueue.Stop] is called (a call's answer ended the run) no call
// starts. It does no I/O and reads no clock, so a deterministic workflow
// may use it.
//
// A CallQueue is not safe for concurrent use.
type CallQueue struct{ q queue }

// NewCallQueue returns a queue of calls, as [Advance] returned them, with
// at most maxParallel of them running at once
// ([toolrun.DefaultMaxParallelTools] if maxParallel is zero or less).
func NewCallQueue(calls []PlannedCall, maxParallel int) *CallQueue {
	return &CallQueue{q: newCallQueue(toPlanned(calls), maxParallel).(queue)}
}

// Start returns a call that may start now, and marks it running; false if
// none may: the queue is stopped, every call has started, or the calls
// that may not start yet wait for running ones to be [CallQueue.Done]. A
// call that waits for its tool's MaxParallel does not hold back a later
// call of its group: each call waits only for its own tool's place.
func (q *CallQueue) Start() (PlannedCall, bool) {
	c, ok := q.q.Start()
	return PlannedCall(c), ok
}

// Ready reports whether [CallQueue.Start] would return a call now, and
// changes nothing: a driver that must check something before a call
// starts (whether the run stopped) checks it only then.
func (q *CallQueue) Ready() bool { return q.q.Ready() }

// Done marks the started call toolUseID as finished, so that a call that
// waited for its place may start. A call not started, or done already, is
// ignored.
func (q *CallQueue) Done(toolUseID string) { q.q.Done(toolUseID) }

// Stop makes the queue start no more calls: a call's answer ended the run.
// The calls running finish; the others stay decided, not run.
func (q *CallQueue) Stop() { q.q.Stop() }

// Running returns the number of calls started and not done.
func (q *CallQueue) Running() int { return q.q.Running() }

// Skeleton returns a copy of s without what grows with the run and only a
// model request needs: the history (Params.Messages) and the turn in
// progress's response as a message. The turn's calls are kept, with their
// inputs, decisions and results, so decisions and results can be recorded
// in the skeleton. A driver keeps the skeleton where size matters (a
// workflow's history) and the whole State in a [toolrun.Store]; [Merge]
// puts the two together again. s is not changed.
func Skeleton(s *toolrun.State) *toolrun.State { return skeleton(s) }

// Snapshot returns the state of r as [toolrun.Runner.State] does, but
// sharing the history's messages with the runner rather than copying
// them through JSON: the runner never writes into a message it holds (it
// appends, or replaces the history), so the snapshot stays as it was
// while the run goes on. It is for a driver that reads the state after
// each step, encodes it or cuts it, and never writes into its messages:
// it costs what the history's slice costs to copy, not what its JSON
// costs, so that a step of a long run costs what a step of a short one
// does. Write into a copy from State instead.
func Snapshot(r *toolrun.Runner) *toolrun.State { return snapshot(r) }

// Committed returns the turn r committed last and the results of its
// calls, in the response's order, as [toolrun.State.CallResult] gave them
// while the turn was in progress; 0 and nil once r has received another
// response, or if it committed no turn. An [Advance] that receives a
// response whose calls it answers itself (an unknown tool's, a call a
// policy denied or skipped, an input its schema refuses, the calls of a
// final response) commits that turn before it returns, so its State no
// longer shows those calls: a driver that reports each call's answer, as
// [toolrun.ToolFinished] does in process, reads them here.
func Committed(r *toolrun.Runner) (turn int, results []*toolrun.ToolResult) { return committed(r) }

// ResumeOwned returns a runner that continues the run s, as
// [toolrun.Resume] does, but takes s over rather than copying it through
// JSON: the caller decoded s itself (from a Store, a workflow's payload)
// and neither uses it again nor writes into its messages, which the
// runner then shares. A driver that resumes a run each step pays for the
// State's decoding once, not three times. Everything Resume checks (the
// format, the signature, [toolrun.State.Check], the added tools) it
// checks too.
func ResumeOwned(client anthropic.Client, s *toolrun.State, tools []toolrun.Tool, opts *toolrun.Options) (*toolrun.Runner, error) {
	return resumeOwned(client, s, tools, opts)
}

// Merge returns the whole state from skeleton (see [Skeleton]) and whole,
// the State it was cut from or a later one of the same turn: skeleton's
// progress (its decisions, results and counters) with whole's history and,
// if whole is of the same turn, its response. Neither is changed.
func Merge(skeleton, whole *toolrun.State) *toolrun.State { return merge(skeleton, whole) }

// ForCall returns the skeleton of s (see [Skeleton]) with the call
// toolUseID alone in its turn in progress: what a driver hands the worker
// that runs that call, which needs neither the history nor the other
// calls. s is not changed.
func ForCall(s *toolrun.State, toolUseID string) *toolrun.State { return forCall(s, toolUseID) }

// HasCall reports whether the turn in progress of s has a call with the
// tool_use id toolUseID. A driver that receives a decision before the turn
// holding its call keeps it until HasCall says the call is there.
func HasCall(s *toolrun.State, toolUseID string) bool { return hasCall(s, toolUseID) }

// CanDecide returns nil if [toolrun.State.Decide] would record d for
// toolUseID, and the error Decide would return otherwise (wrapping
// [toolrun.ErrNotAwaitingApproval] for a call that does not await a
// person); it changes nothing. A driver validates a decision with it
// before accepting the message that carries it.
func CanDecide(s *toolrun.State, toolUseID string, d toolrun.Decision) error {
	return canDecide(s, toolUseID, d)
}

// StopAfterCall records in s the stop that answering one of its calls
// made elsewhere: a runner resumed from s (or from [ForCall]) ran the call
// with [ExecuteCall], and its Result says the run stopped, with reason and
// detail. Only the stops a call's answer makes are taken:
// [toolrun.StopHook] (AfterTool returned [toolrun.StopRun]),
// [toolrun.StopError] (AfterTool failed) and [toolrun.StopPayloadTooLarge]
// (the driver could not carry the result); any other reason is refused
// with an error. A stop recorded in s already stands, since the first stop
// of a turn is the one the run reports: s is then left as it was, with no
// error.
func StopAfterCall(s *toolrun.State, reason toolrun.StopReason, detail string) error {
	return stopAfterCall(s, reason, detail)
}

// SetResult records res as the result of the pending call toolUseID of s,
// as [ExecuteCall] would have on a runner holding s: for a call run
// elsewhere, or answered by the caller (a call interrupted by a crash,
// say). What is recorded is what the result's JSON form keeps (see
// [toolrun.ToolResult.MarshalJSON]), and, as by ExecuteCall, a result with
// Err and no Content, or with a zero content block, is an is_error result
// that says why; res.Call and res.Decision are ignored. The call is then
// never run again. It is an error if the pending turn has no such call or
// the call has a result already.
func SetResult(s *toolrun.State, toolUseID string, res *toolrun.ToolResult) error {
	return setResult(s, toolUseID, res)
}

// ResponseText returns the text of the response of the turn in progress of
// s (its text blocks, in order), and whether a turn is in progress: the
// response whose calls [toolrun.State.Calls] lists, which is in
// Params.Messages only once the turn is committed. A driver that reports
// each response as it arrives reads it here. A state without its history
// ([Skeleton]) has no response text.
func ResponseText(s *toolrun.State) (string, bool) { return responseText(s) }

// Retryable reports whether a failed model request may succeed if it is
// sent again, and how long the API asked to wait first (zero if it did not
// say). It is the rule the runner's own stream retries use: what the
// anthropic client retries is retryable (408, 409, 429, 5xx, a dropped
// connection, a timeout, a stream cut short or idle), and so is an error
// event in a stream that began whose type is overloaded_error, api_error,
// rate_limit_error or timeout_error; a bad request, a bad key or a refused
// permission is not. An error that is no *anthropic.Error is a transport
// fault and retryable: the caller checks its own context first. A driver
// that retries a turn itself asks it, so that it retries the same faults
// the runner does.
func Retryable(err error) (ok bool, wait time.Duration) { return retry.Retryable(err) }

// CheckInput checks input, a tool's input as JSON, against schema, the
// tool's input schema, with the runner's own validator: nil if the runner
// would run the tool with it, else the *[toolrun.ValidationError] the
// model would get (for the tool named tool), or ctx's error. A driver that
// lets a person edit a call's input checks the edit with it, so the person
// reads the message the model would. A schema the runner cannot use is an
// error wrapping [toolrun.ErrInvalidSchema].
func CheckInput(ctx context.Context, tool string, schema, input json.RawMessage) error {
	return validateInput(ctx, tool, schema, input)
}

// ShareEvents makes the runner opts configure hand [toolrun.Options.OnEvent]
// the params of each [toolrun.RequestSent] as the request holds them,
// rather than the deep copy an observer otherwise gets: that copy is of
// the whole history, at every request, and a driver whose observer
// neither reads the params nor keeps them (one that maps events onto a
// protocol of its own, say) pays for it on every turn. The observer must
// not write into Params nor keep it past the call; set it only where
// every observer of the run is the driver's own.
func ShareEvents(opts *toolrun.Options) { shareEvents(opts) }

// ChangeTools does to s what [toolrun.Runner.RemoveTools] of remove and
// then [toolrun.Runner.AddTools] and [toolrun.Runner.AddToolParams] of
// add do to a runner's State, for a driver that holds a run's State and
// no runner (a workflow, which has no history to build one from): the
// definitions added to s ([toolrun.State.AddedTools]) named in remove
// are taken out, and their names kept out of a run resumed from s
// (State.Removed); then add's definitions are added, in order. Under the
// inline-tools beta, the tool_removal and tool_addition blocks a runner
// would queue are queued, and go to the model ahead of the next request.
// A name in remove that no definition added to s has is ignored: s does
// not say whether the run has such a tool among the tools given to
// [toolrun.Resume]. A client tool (OfTool) of add needs its function, as
// any added one does, among the tools given to Resume (or a stand-in,
// as the temporal module's DeferClientTools makes).
//
// Each definition of add is checked as AddTools checks a tool: a client
// tool's name and input schema (wrapping [toolrun.ErrInvalidSchema]),
// and a name no tool of s has after the removals, among its params'
// tools, those added and the others of add (wrapping
// [toolrun.ErrToolExists]). On an error s is unchanged. It reads and
// writes s as plain data, so a workflow may call it.
func ChangeTools(s *toolrun.State, remove []string, add ...anthropic.BetaToolUnionParam) error {
	return changeTools(s, remove, add, true)
}

// CanChangeTools returns the error [ChangeTools] would return for the
// same change, and changes nothing: a driver checks a change with it
// before it accepts the message that carries it.
func CanChangeTools(s *toolrun.State, remove []string, add ...anthropic.BetaToolUnionParam) error {
	return changeTools(s, remove, add, false)
}

// BlobStore is a store of bytes under keys, beside a run's States: a driver
// keeps there what it must not carry itself (the large values of a
// Temporal workflow's history). [Blobs] returns the one a [toolrun.Store]
// has.
type BlobStore interface {
	// PutBlob saves b under key, replacing what was there, atomically:
	// a reader sees the old bytes or the new ones, never part of them.
	PutBlob(ctx context.Context, key string, b []byte) error
	// GetBlob returns the bytes saved under key, or an error wrapping
	// [io/fs.ErrNotExist] if there are none.
	GetBlob(ctx context.Context, key string) ([]byte, error)
	// DeleteBlob removes the bytes under key; it is not an error if there
	// are none.
	DeleteBlob(ctx context.Context, key string) error
}

// Blobs returns the blobs st keeps: st itself if it implements
// [BlobStore] (sqlitestore's and filestore's Stores do), and nil for a
// Store that keeps no blobs.
func Blobs(st toolrun.Store) BlobStore {
	switch s := st.(type) {
	case nil:
		return nil
	case BlobStore:
		return s
	}
	return nil
}
