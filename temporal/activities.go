package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Activities are the activities of [Workflow], bound to what a worker
// holds and a workflow cannot: the client, the tools and the
// [toolrun.Options] with their hooks. Build them with [NewActivities] and
// register them with [Register]. Their methods are safe for concurrent use,
// as the tools must be.
type Activities struct {
	client anthropic.Client
	tools  []toolrun.Tool
	opts   toolrun.Options
	store  toolrun.Store // nil: whole states travel through Temporal
	cache  *stateCache   // the runners of the runs this worker stepped last
	// deferClient makes stand-ins for client tools (clienttools.go).
	deferClient bool
	// queries says that the activities run on a worker (registered
	// with [Register], by [NewWorker] or not), whose client a step may
	// ask its workflow for the history with ([HistoryQuery]); a step of
	// activities registered otherwise (a test environment's, say) asks
	// the workflow to send it instead. Atomic: Register may set it while
	// another worker runs the activities.
	queries atomic.Bool
}

// NewActivities returns the activities for a worker that runs tools with
// client and opts (which may be nil), as an in-process [toolrun.Runner]
// would: the same decisions (Options.Policy and the tools' policies), hooks and events, called in the worker that runs the activity
// with the activity's context. Every worker of a task queue must be given
// the same tools.
//
// The client's own retries are turned off, so that a failed request is
// retried by the workflow's retry policy ([RunOptions.ModelRetry]); a
// streamed response that fails after it began is retried within the step
// first, per opts.StreamRetry, exactly as in process.
//
// opts.Store is where the workers keep the run's state (the claim-check
// pattern): each step saves the whole state there under a key of its own,
// written once, and the workflow holds only that key and the state without
// its history, so that no payload and no event history grows with the
// conversation. Every worker of the task queue must reach the same Store
// (a database, a shared file system): [github.com/toolrun/toolrun/filestore.Store] on one machine,
// sqlitestore, or your own. A run keeps at most its last two states in
// the Store while it goes on, and one, its last, under [Outcome.Ref], once
// a step ended it (see the package doc's "What the Store costs"). Each
// worker also keeps a bounded cache of the runs it stepped
// ([Activities.SetStateCacheRuns]). With opts.Store nil, the workflow
// holds the whole state, a step's input and result carry only the state
// without its history and what the step added to the history (see the
// package doc's "What a turn costs"), and a run stops with
// [toolrun.StopPayloadTooLarge] when its whole state outgrows
// [RunOptions.PayloadLimit] (the input of a continue-as-new carries it).
// A Store that keeps blobs too ([BlobStore]: filestore.Store and sqlitestore's
// do) also carries the run's values over [RunOptions.ClaimThreshold]
// (results, a decision's edited input or reason), so that none goes
// through the history.
// opts.RunID is not used: the keys are the workflow's. Nor is
// opts.StateKey: the workflow changes the state between steps (it applies
// decisions and writes results in) and holds no key, so no state it hands
// a step could carry a signature. A run's states are as safe as its
// history (the Temporal server, and a data converter that encrypts) and
// the workers' Store; NewActivities logs a Warn when StateKey is set, and
// the activities run as they would without it.
func NewActivities(client anthropic.Client, tools []toolrun.Tool, opts *toolrun.Options) *Activities {
	a := &Activities{client: client, tools: slices.Clone(tools)}
	if opts != nil {
		a.opts = *opts
	}
	a.client.Beta.Messages.Options = append(slices.Clone(client.Beta.Messages.Options), option.WithMaxRetries(0))
	a.store = a.opts.Store
	a.opts.Store, a.opts.RunID = nil, ""
	if len(a.opts.StateKey) > 0 {
		l := a.opts.Logger
		if l == nil {
			l = slog.Default()
		}
		l.Warn("toolrun/temporal: Options.StateKey is not used by the workflow's activities: the workflow changes the state between steps and holds no key; protect the history with the client's data converter and the Store with its access rights")
		a.opts.StateKey = nil
	}
	a.cache = &stateCache{max: DefaultStateCacheRuns, maxBytes: DefaultStateCacheBytes}
	return a
}

// SetStateCacheRuns sets how many runs the worker keeps in its state
// cache: 0 means [DefaultStateCacheRuns], a negative n none. Call it
// before the worker starts.
//
// The cache keeps, for each run the worker stepped last, the runner of
// that step: the run's state decoded and the request JSON of its
// messages, so that the run's next step on the same worker neither loads
// the state from the Store nor decodes it, and encodes only the messages
// that are new, rather than the whole conversation each turn. It holds a
// run's entry only while the run goes on (an ended run's is dropped) and
// at most n runs, dropping the least recently stepped, and at most the
// bytes [Activities.SetStateCacheBytes] allows: each run about twice its
// JSON with a Store (decoded, and encoded for requests), three times
// without one (the state the step returned too, from which the next
// step's delta is cut). A step uses an entry only if it is exactly the
// state the workflow gives it (with a Store, the key of the state the
// step before saved; without one, the history's length and digest), with
// the results the workflow recorded since; a person's decision since, a
// step on another worker, a restart or anything else is a miss, and the
// step loads and resumes the state as it would without a cache (without
// a Store, from the entry's history if it is the same one, else from the
// workflow: [HistoryQuery]), so no run depends on it. On a hit, the runner's message thread
// (toolrun.Options.NoThread) goes on from the step before, as in process.
func (a *Activities) SetStateCacheRuns(n int) {
	if n == 0 {
		n = DefaultStateCacheRuns
	}
	a.cache = &stateCache{max: n, maxBytes: a.cache.maxBytes}
}

// SetStateCacheBytes bounds the memory the worker's state cache takes, in
// bytes, about, besides its number of runs ([Activities.SetStateCacheRuns]):
// 0 means [DefaultStateCacheBytes], a negative n no bound in bytes. Once
// the runs held take more, the least recently stepped are dropped; a run
// that takes more alone is not kept. A run held without a Store counts
// about three times its history's JSON (the runner's state decoded, the
// request JSON of its messages, and the state the step returned, from
// which the next step's delta is cut); with a Store, the worker does not
// measure the history it saves, and a run counts only twice the state
// without its history: bound such workers by runs. Call it before the
// worker starts.
func (a *Activities) SetStateCacheBytes(n int64) {
	if n == 0 {
		n = DefaultStateCacheBytes
	}
	a.cache = &stateCache{max: a.cache.max, maxBytes: max(n, 0)}
}

// Registry is where [Register] registers the workflow and its activities:
// a worker.Worker, or a test environment of go.temporal.io/sdk/testsuite.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// DefaultWorkerStopTimeout is the [worker.Options.WorkerStopTimeout] that
// [NewWorker] sets when none is given: how long a worker that is asked to
// stop (SIGTERM, say) lets the calls it is running finish before it
// cancels them.
const DefaultWorkerStopTimeout = 5 * time.Minute

// MinWorkerStopTimeout is the least [worker.Options.WorkerStopTimeout] of
// a worker of this package. A stopping worker lets its polls under way end
// rather than cancel them (see the package doc's "Stopping a worker"), and
// the SDK gives a poll 70 s; the SDK's stop gives up at its stop timeout
// and leaves such a poll open, and a task the server then hands it is
// dropped by the stopped worker: it is lost until its timeout, and a tool
// call whose task it was is answered "interrupted". So [NewWorker] raises a
// shorter stop timeout to this one, and [Register] refuses a worker of
// worker.New with a shorter one. A stop still returns as soon as the polls
// have ended and the running tasks finished.
const MinWorkerStopTimeout = 80 * time.Second

// DefaultDeadlockDetectionTimeout is the DeadlockDetectionTimeout that
// [NewWorker] gives a worker whose options set none: how long one
// workflow task may run without blocking before the SDK fails it as a
// deadlock (TMPRL1101). The SDK's default is a second. The workflow's own
// work between two blocks is bounded (see the package doc's "What a
// workflow task does"), but converting the largest payload a run carries
// (its state, within [RunOptions.PayloadLimit], in an execution's input,
// a continue-as-new or the Outcome) is done by the SDK in one go, and on
// a loaded machine, or under the race detector, that can take more than
// a second: the task would then fail at every attempt and the run make no
// progress. Five seconds is below the workflow task timeout (10 s), so a
// task that truly never blocks still fails on its worker first. A worker
// of worker.New given to [Register] keeps the SDK's second: set
// worker.Options.DeadlockDetectionTimeout there.
const DefaultDeadlockDetectionTimeout = 5 * time.Second

// NewWorker returns a worker for task queue queue, with [Workflow] and a's
// activities registered, that stops without losing work. Asked to stop
// (worker.InterruptCh on SIGTERM, a rolling restart), it stops polling,
// runs every task its last polls bring (a task the server handed to a
// cancelled poll would be lost, and its call answered "interrupted" once
// its heartbeat timed out, though it never started), lets its running
// tools finish, and exits. No client option is needed (see the package
// doc's "Stopping a worker"). An idle worker stops at once on a server
// that ends a stopping worker's polls (1.32 and later, with
// frontend.enableCancelWorkerPollsOnShutdown on); on one that does not,
// its polls under way end when the server answers them, within a minute:
// an idle worker takes up to that minute to stop.
//
// Unlike worker.New, it gives opts a DeadlockDetectionTimeout when it
// has none ([DefaultDeadlockDetectionTimeout], not the SDK's second), and
// a WorkerStopTimeout when it has none
// ([DefaultWorkerStopTimeout]), so that a stop lets the running tools
// finish rather than cancelling them, and raises a shorter one than
// [MinWorkerStopTimeout] to it, so that the stop outlasts the polls. Give
// your deployment's shutdown grace period (Kubernetes'
// terminationGracePeriodSeconds, say) a little more than the stop
// timeout. With worker versioning on (opts.DeploymentOptions, see
// [Deployment]) and no default behavior, the workflow is
// [DefaultVersioningBehavior].
func NewWorker(c client.Client, queue string, a *Activities, opts worker.Options) worker.Worker {
	if opts.WorkerStopTimeout <= 0 {
		opts.WorkerStopTimeout = DefaultWorkerStopTimeout
	}
	if opts.DeadlockDetectionTimeout <= 0 {
		opts.DeadlockDetectionTimeout = DefaultDeadlockDetectionTimeout
	}
	opts.WorkerStopTimeout = max(opts.WorkerStopTimeout, MinWorkerStopTimeout)
	w := worker.New(c, queue, versioned(opts))
	Register(w, a)
	return w
}

// Register registers [Workflow] as [WorkflowName] and a's activities as
// [StepActivity], [ToolActivity] and [DeleteClaimsActivity] with r, a
// worker or a test environment of go.temporal.io/sdk/testsuite.
//
// Given a worker of worker.New rather than one of [NewWorker], it makes
// it work as NewWorker's does: it switches the worker to drain on a stop
// (it stops polling and runs what its polls under way bring, see the
// package doc's "Stopping a worker"), and its steps ask the workflow for
// the history they miss (a query with the worker's client). It panics,
// naming NewWorker, given a worker whose WorkerStopTimeout is below
// [MinWorkerStopTimeout] (worker.New's default is 0): its stop would
// cancel its running tools at once, answering their calls "interrupted",
// or give up before its polls end, losing the tasks they bring; or a
// worker of a version of the SDK that keeps the drain switch elsewhere.
func Register(r Registry, a *Activities) {
	if d, ok := stopTimeout(r); ok && d < MinWorkerStopTimeout {
		panic(fmt.Sprintf("toolrun/temporal: Register: the worker's WorkerStopTimeout is %s, below temporal.MinWorkerStopTimeout (%s): a stop (SIGTERM) would cancel its running tools and answer their calls \"interrupted\", or give up before its polls end and lose the tasks they bring; build it with temporal.NewWorker (stop timeout %s by default), or set worker.Options.WorkerStopTimeout", d, MinWorkerStopTimeout, DefaultWorkerStopTimeout))
	}
	isWorker, err := drainWorker(r)
	if err != nil {
		panic("toolrun/temporal: Register: " + err.Error() + "; build the worker with temporal.NewWorker")
	}
	if isWorker {
		// A worker has a client to query the workflow with; a test
		// environment's activities ask the workflow to send the history.
		a.queries.Store(true)
	}
	r.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName, VersioningBehavior: versioningBehavior(r)})
	r.RegisterActivityWithOptions(a.stepJSON, activity.RegisterOptions{Name: StepActivity})
	r.RegisterActivityWithOptions(a.stepJSON, activity.RegisterOptions{Name: StepDeltaActivity})
	r.RegisterActivityWithOptions(a.RunTool, activity.RegisterOptions{Name: ToolActivity})
	r.RegisterActivityWithOptions(a.DeleteClaims, activity.RegisterOptions{Name: DeleteClaimsActivity})
}

// Step takes the run one step: on a runner resumed from the state, it
// calls [driver.Advance], which decides the pending turn's calls,
// answers those that need no running, and commits the turn and sends at
// most one request once every call is answered. It returns the new state
// and the calls to run. With a Store, it loads the whole state from
// in.Ref, saves the new one under a key of its own and returns that key
// with the state without its history. Without one, given in.Deltas, it
// returns only what it added to the history ([StepResult.Base]), and
// given in.Digest (the state without its history) it takes the history
// from the worker's cache or asks the workflow for it ([HistoryQuery]). A step that finds the runner of the
// run's last step in the worker's state cache, holding exactly in.State
// (see [Activities.SetStateCacheRuns]), goes on with it instead of
// loading and resuming the state.
//
// A failed request is returned as an error for Temporal to retry, unless
// it is one that would fail again (see [retryable]); a failed hook stops
// the run, in the state. A result over in.PayloadLimit stops the run with
// [toolrun.StopPayloadTooLarge]. With a Store that keeps blobs, the
// claims in.State refers to are read back first (a missing one fails the
// step, not retried, with [ErrClaimMissing]), in.Spent are deleted, and
// the values of the result over in.ClaimThreshold are put in the Store
// (see [RunOptions.ClaimThreshold]).
func (a *Activities) Step(ctx context.Context, in StepInput) (*StepResult, error) {
	res, _, err := a.step(ctx, in)
	return res, err
}

// stepJSON is the step activity that [Register] registers: [Activities.Step],
// with its result encoded once, as the step measured it against the
// payload limit, rather than once to measure it and again by the data
// converter: a state without a Store is the whole conversation.
func (a *Activities) stepJSON(ctx context.Context, in StepInput) (json.RawMessage, error) {
	_, b, err := a.step(ctx, in)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// step is [Activities.Step], which also returns its result's JSON.
func (a *Activities) step(ctx context.Context, in StepInput) (*StepResult, []byte, error) {
	defer heartbeat(ctx)()
	s := in.State
	if s == nil {
		return nil, nil, sdktemporal.NewNonRetryableApplicationError("toolrun: step input has no state", "toolrun.InvalidState", nil)
	}
	if in.Ref != "" && a.store == nil {
		return nil, nil, sdktemporal.NewNonRetryableApplicationError("toolrun: the run's state is in a Store, and this worker has none (toolrun.Options.Store)", "toolrun.NoStore", nil)
	}
	c := a.claimsOf(workflowID(ctx), in.ClaimThreshold)
	s, err := c.restore(ctx, s)
	if err != nil {
		return nil, nil, claimError(err)
	}
	a.deleteSpent(ctx, c, in.Spent)
	id := workflowID(ctx)
	// Without a Store and with in.Deltas, the result carries only the
	// history after prev, the history the step began with.
	deltas := in.Deltas && a.store == nil
	var prev []anthropic.BetaMessageParam
	var r *toolrun.Runner
	var held *toolrun.State // the whole state the cache holds for in's history
	e := a.cache.take(id)   // nil, or the run's last step on this worker
	if e != nil {
		held = e.history(s, in.Digest, in.Messages)
		r = e.resume(s, in.Ref, in.Digest, in.Messages) // nil: a miss, and the entry is dropped
		if r != nil && e.whole != nil {
			prev = e.whole.Params.Messages
		}
	}
	if r == nil {
		if in.Digest != "" {
			// The state without its history, which the workflow holds:
			// the history is the cache's if it holds it (a person decided
			// since the step before, say), else the workflow's.
			got := held
			if got == nil {
				var err error
				if got, err = a.historyOf(ctx, in, e); err != nil {
					return nil, nil, err // retried: an attempt the workflow moved on from is not recorded
				}
				got = merge(s, got)
			}
			var err error
			if s, err = c.restore(ctx, got); err != nil {
				return nil, nil, claimError(err)
			}
		}
		prev = s.Params.Messages
		if in.Ref != "" {
			stored, err := loadState(ctx, a.store, in.Ref)
			if errors.Is(err, fs.ErrNotExist) {
				if res := a.endedEarlier(ctx); res != nil {
					b, err := encodeStep(res)
					return res, b, err
				}
			}
			if err != nil {
				return nil, nil, err // retried: the Store may be back
			}
			s = merge(s, stored)
		}
		// A step resumed from its state is a new Runner, so on a message
		// thread (toolrun's default) its request creates a new thread with
		// the whole history: the same turn as without one. A step that
		// found its run's runner in the cache goes on with its thread.
		// s was decoded for this step alone: the runner takes it over
		// rather than copying the whole conversation through JSON again.
		var err error
		r, err = driver.ResumeOwned(a.client, s, a.toolsFor(s), &a.opts)
		if err != nil {
			return nil, nil, activityError(err, "toolrun.InvalidState", true, 0)
		}
	}
	if in.Ref != "" && in.Superseded != "" && in.Superseded != in.Ref {
		// Best effort: a state left behind costs room, not correctness.
		if err := a.store.Delete(ctx, in.Superseded); err != nil {
			a.logger().Warn("toolrun: superseded state not deleted", "key", in.Superseded, "error", err)
		}
	}
	before := unanswered(s) // the calls the step may answer and commit
	turns := s.Turns
	calls, err := driver.Advance(ctx, r)
	// A limit the caller set (the turn limit, a budget), an answer cut
	// short (max_tokens) and a hook's failure
	// are how the run stopped, recorded in its state: not a step to retry.
	if err != nil && !errors.Is(err, toolrun.ErrMaxTurns) && !errors.Is(err, toolrun.ErrBudget) && !errors.Is(err, toolrun.ErrIncomplete) {
		var he *toolrun.HookError
		if !errors.As(err, &he) {
			if ctx.Err() != nil {
				return nil, nil, err
			}
			return nil, nil, modelError(err)
		}
	}
	whole := driver.Snapshot(r) // shares the history's messages: no copy of the whole conversation a step
	res := &StepResult{State: whole, Text: lastText(whole), Calls: calls, Committed: committedResults(before, whole), Received: receivedCalls(r, turns)}
	if deltas {
		cut, d, err := deltaOf(in, prev, whole)
		if err != nil {
			return nil, nil, activityError(err, "toolrun.InvalidState", true, 0)
		}
		res.State, res.Base, res.Digest, res.HistoryBytes = cut, d.base, d.digest, d.bytes
	}
	if a.store != nil {
		key, err := stateKey(ctx)
		if err != nil {
			return nil, nil, err
		}
		if err := saveState(ctx, a.store, key, whole); err != nil {
			return nil, nil, err
		}
		a.deleteEarlierAttempts(ctx, key)
		res.State, res.Ref = skeleton(whole), key
		if err := c.stashStep(ctx, res); err != nil {
			return nil, nil, err // retried: the Store may be back
		}
	}
	b, err := encodeStep(res)
	if err != nil {
		return nil, nil, err
	}
	n, over := len(b), len(b) > limitOr(in.PayloadLimit)
	if over {
		// Stop with what fits: the state without its history; with a
		// Store, the whole state is under Ref.
		st := skeleton(whole)
		if res.Ref != "" {
			if stashed, err := c.stash(ctx, st); err == nil {
				st = stashed
			}
		}
		// Stop refuses no StopPayloadTooLarge, so its error is always nil.
		_ = st.Stop(toolrun.StopPayloadTooLarge, payloadDetail("the result of a step", n, limitOr(in.PayloadLimit)))
		res = &StepResult{State: st, Ref: res.Ref, Text: res.Text, Claims: c.referred()}
		if b, err = encodeStep(res); err != nil {
			return nil, nil, err
		}
		n = len(b)
	}
	res.Size = n
	if a.store != nil && !over && len(calls) == 0 && ended(whole) && in.Ref != "" && in.Ref != res.Ref {
		// The run ends with this result: no step reads the state it
		// started from again, but a retry of this step after its result
		// was lost, which finds the result under this attempt's key
		// (endedEarlier).
		if err := a.store.Delete(ctx, in.Ref); err != nil {
			a.logger().Warn("toolrun: superseded state not deleted", "key", in.Ref, "error", err)
		}
	}
	if !over && !ended(whole) {
		// The run goes on: its next step may find the runner here.
		if e := newCachedRun(id, r, whole, res.Ref); e != nil {
			switch {
			case deltas:
				e.digest, e.whole = res.Digest, whole
				e.size = 3 * int64(res.HistoryBytes+res.Size)
			default:
				e.size = 2 * int64(n)
			}
			a.cache.put(e)
		}
	}
	return res, b, nil
}

// encodeStep returns the JSON of res with its Size, which is the size of
// that JSON without it, as the workflow counts it; res.Size is set.
func encodeStep(res *StepResult) ([]byte, error) {
	res.Size = 0
	b, err := json.Marshal(res)
	if err != nil {
		return nil, activityError(err, "toolrun.InvalidState", true, 0)
	}
	res.Size = len(b)
	// The object has its "state", and Size, zero, was left out: add it.
	return append(append(b[:len(b)-1], `,"size":`...), strconv.Itoa(res.Size)+"}"...), nil
}

// workflowID returns the id of the workflow whose activity ctx is, or "".
func workflowID(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	return activity.GetInfo(ctx).WorkflowExecution.ID
}

// stateKey returns the Store key of the state a step attempt saves: one
// per attempt, so that no attempt overwrites another's state, and the
// workflow's history says which one counts.
func stateKey(ctx context.Context) (string, error) {
	if !activity.IsActivity(ctx) {
		return "", sdktemporal.NewNonRetryableApplicationError("toolrun: a step with a Store runs only as an activity", "toolrun.NotActivity", nil)
	}
	info := activity.GetInfo(ctx)
	return attemptKey(info, info.Attempt), nil
}

// attemptKey returns the Store key of the state that attempt n of the
// step activity info saves.
func attemptKey(info activity.Info, n int32) string {
	return fmt.Sprintf("%s/%s/step-%s.%d", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID, n)
}

// ended reports whether a step's state s ends the run: stopped, and not
// to await a decision.
func ended(s *toolrun.State) bool {
	return s.StopReason != "" && s.StopReason != toolrun.StopAwaitingApproval
}

// endedEarlier returns the result of an earlier attempt of this step that
// ended the run, or nil if there is none. Such an attempt deleted the
// state the step starts from, and its result reached the workflow only if
// the attempt was recorded; a step whose state is gone looks for it, so
// that its retry ends the run as that attempt did, with no new request.
func (a *Activities) endedEarlier(ctx context.Context) *StepResult {
	if !activity.IsActivity(ctx) {
		return nil
	}
	info := activity.GetInfo(ctx)
	for n := info.Attempt - 1; n >= 1; n-- {
		key := attemptKey(info, n)
		st, err := loadState(ctx, a.store, key)
		if err != nil || !ended(st) {
			continue
		}
		res := &StepResult{State: skeleton(st), Ref: key, Text: lastText(st)}
		res.Size, _ = overLimit(res, 0)
		return res
	}
	return nil
}

// deleteEarlierAttempts deletes the states that the earlier attempts of
// this step saved: a step attempt runs only once the one before it failed
// or timed out, so the workflow never records that attempt's result, and
// no step reads its state.
func (a *Activities) deleteEarlierAttempts(ctx context.Context, key string) {
	info := activity.GetInfo(ctx)
	for n := int32(1); n < info.Attempt; n++ {
		old := attemptKey(info, n)
		if err := a.store.Delete(ctx, old); err != nil {
			a.logger().Warn("toolrun: superseded state not deleted", "key", old, "error", err)
		}
	}
}

func limitOr(n int) int {
	if n <= 0 {
		return DefaultPayloadLimit
	}
	return n
}

// RunTool runs one call of the pending turn in in.State with
// [driver.ExecuteCall]: input validated, panics recovered, the
// tool's timeout enforced, AfterTool called. A tool's failure is a result
// (is_error), not an activity failure; the activity fails only when it is
// cancelled or the call cannot run here: a call ExecuteCall refuses
// without running it ([toolrun.ErrNotRun]: the run is stopped, say) fails
// it with the error type "toolrun.CallNotRun", and the workflow leaves
// that call unanswered. A result over in.PayloadLimit is replaced by an
// error and stops the run with [toolrun.StopPayloadTooLarge]. With a
// Store that keeps blobs, a result over in.ClaimThreshold is put in it
// and the output carries a mark and its key (see
// [RunOptions.ClaimThreshold]), and the values of in.State in the Store
// are read back before the call runs; one that is missing answers the
// call, unrun, and stops the run with [toolrun.StopError] ([ErrClaimMissing]).
//
// While the tool runs, the activity heartbeats, with the last progress the
// tool reported with [ReportProgress] as the heartbeat's details.
func (a *Activities) RunTool(ctx context.Context, in ToolInput) (*ToolOutput, error) {
	ctx = withProgress(ctx)
	defer heartbeat(ctx)()
	c := a.claimsOf(workflowID(ctx), in.ClaimThreshold)
	st, err := c.restore(ctx, in.State)
	if err != nil {
		return claimStop(in.ToolUseID, err), nil
	}
	r, err := toolrun.Resume(a.client, st, a.toolsFor(st), &a.opts)
	if err != nil {
		return nil, activityError(err, "toolrun.InvalidState", true, 0)
	}
	res, err := driver.ExecuteCall(ctx, r, in.ToolUseID)
	if res == nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, toolrun.ErrNotRun) {
			return nil, activityError(err, callNotRun, true, 0)
		}
		return nil, activityError(err, "toolrun.CallNotRunnable", true, 0)
	}
	// The result is cut here to what the model receives of it, as in
	// process: the text past the tool's MaxResultBytes never reaches the
	// model, so it does not travel through the history either.
	// One over the claim threshold travels through the Store.
	placed, key := a.resultClaim(ctx, c, st, in.ToolUseID, driver.CutResult(r, res))
	out := &ToolOutput{Result: placed}
	if key != "" {
		out.Claims = []string{key}
	}
	if stop := r.Result(); stop != nil { // AfterTool ended the run
		out.StopReason, out.Detail = stop.StopReason, stop.Detail
	}
	if n, over := overLimit(out, limitOr(in.PayloadLimit)); over {
		detail := payloadDetail(fmt.Sprintf("the result of call %s", in.ToolUseID), n, limitOr(in.PayloadLimit))
		e := "toolrun: " + detail
		out = &ToolOutput{
			Result:     &toolrun.ToolResult{Content: []toolrun.Content{toolrun.Text(e)}, IsError: true, Err: errors.New(e), Ran: true},
			StopReason: toolrun.StopPayloadTooLarge,
			Detail:     detail,
		}
	}
	return out, nil
}

// callNotRun is the error type of a tool activity whose call
// [driver.ExecuteCall] refused without running it.
const callNotRun = "toolrun.CallNotRun"

// modelError makes a failed model request a Temporal error: not retryable
// if it would fail again (a bad request, a bad key), and with the API's
// retry-after as the next interval if it gave one.
func modelError(err error) error {
	ok, wait := retryable(err)
	return activityError(err, "toolrun.APIError", !ok, wait)
}
