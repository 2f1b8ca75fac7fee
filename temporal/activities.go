package temporal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
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
// (a database, a shared file system): [toolrun.FileStore] on one machine,
// sqlitestore, or your own. A run keeps at most its last two states in
// the Store: each step deletes the state its predecessor started from,
// and the earlier attempts of its own; the one before the last stays
// until the next step, because a step whose result is not recorded yet
// may be retried and read it again. A run that ended keeps those two: the
// last under [Outcome.Ref], and the one before it, which nothing deletes. With opts.Store nil, the whole state travels
// in every step's input and result, and a run stops with
// [toolrun.StopPayloadTooLarge] when it outgrows [RunOptions.PayloadLimit].
// A Store that keeps blobs too ([BlobStore]: FileStore and sqlitestore's
// do) also carries the run's values over [RunOptions.ClaimThreshold]
// (results, a decision's edited input or reason), so that none goes
// through the history.
// opts.RunID is not used: the keys are the workflow's.
func NewActivities(client anthropic.Client, tools []toolrun.Tool, opts *toolrun.Options) *Activities {
	a := &Activities{client: client, tools: slices.Clone(tools)}
	if opts != nil {
		a.opts = *opts
	}
	a.client.Beta.Messages.Options = append(slices.Clone(client.Beta.Messages.Options), option.WithMaxRetries(0))
	a.store = a.opts.Store
	a.opts.Store, a.opts.RunID = nil, ""
	return a
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

// NewWorker returns a worker for task queue queue, with [Workflow] and a's
// activities registered. Unlike worker.New, it gives opts a
// WorkerStopTimeout when it has none ([DefaultWorkerStopTimeout]), so that
// stopping the worker (worker.InterruptCh on SIGTERM) lets its running
// tools finish rather than cancelling them: a tool cancelled after its
// effect is answered "interrupted", and the call waits out its heartbeat
// timeout before the workflow learns so. Give your deployment's shutdown
// grace period (Kubernetes' terminationGracePeriodSeconds, say) a little
// more than the stop timeout. Dial c with [DrainOnShutdown] too, so that a
// stopping worker also runs the tasks its last polls bring rather than
// losing them. With worker versioning on (opts.DeploymentOptions, see
// [Deployment]) and no default behavior, the workflow is
// [DefaultVersioningBehavior].
func NewWorker(c client.Client, queue string, a *Activities, opts worker.Options) worker.Worker {
	if opts.WorkerStopTimeout <= 0 {
		opts.WorkerStopTimeout = DefaultWorkerStopTimeout
	}
	w := worker.New(c, queue, versioned(opts))
	Register(w, a)
	return w
}

// Register registers [Workflow] as [WorkflowName] and a's activities as
// [StepActivity], [ToolActivity] and [DeleteClaimsActivity] with r. If r
// is a worker whose WorkerStopTimeout is 0 (worker.New's default), it logs a warning with
// a's logger: such a worker cancels its running tools when it is asked to
// stop; [NewWorker] sets one.
func Register(r Registry, a *Activities) {
	warnStopTimeout(a.logger(), r)
	r.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName, VersioningBehavior: versioningBehavior(r)})
	r.RegisterActivityWithOptions(a.Step, activity.RegisterOptions{Name: StepActivity})
	r.RegisterActivityWithOptions(a.RunTool, activity.RegisterOptions{Name: ToolActivity})
	r.RegisterActivityWithOptions(a.DeleteClaims, activity.RegisterOptions{Name: DeleteClaimsActivity})
}

// Step takes the run one step: on a runner resumed from the state, it
// calls [toolrun.Runner.Advance], which decides the pending turn's calls,
// answers those that need no running, and commits the turn and sends at
// most one request once every call is answered. It returns the new state
// and the calls to run. With a Store, it loads the whole state from
// in.Ref, saves the new one under a key of its own and returns that key
// with the state without its history.
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
	defer heartbeat(ctx)()
	s := in.State
	if s == nil {
		return nil, sdktemporal.NewNonRetryableApplicationError("toolrun: step input has no state", "toolrun.InvalidState", nil)
	}
	c := a.claimsOf(workflowID(ctx), in.ClaimThreshold)
	s, err := c.restore(ctx, s)
	if err != nil {
		return nil, claimError(err)
	}
	a.deleteSpent(ctx, c, in.Spent)
	if in.Ref != "" {
		if a.store == nil {
			return nil, sdktemporal.NewNonRetryableApplicationError("toolrun: the run's state is in a Store, and this worker has none (toolrun.Options.Store)", "toolrun.NoStore", nil)
		}
		stored, err := loadState(ctx, a.store, in.Ref)
		if err != nil {
			return nil, err // retried: the Store may be back
		}
		s = merge(s, stored)
		if in.Superseded != "" && in.Superseded != in.Ref {
			// Best effort: a state left behind costs room, not correctness.
			if err := a.store.Delete(ctx, in.Superseded); err != nil {
				a.logger().Warn("toolrun: superseded state not deleted", "key", in.Superseded, "error", err)
			}
		}
	}
	// A step is a resumed Runner, so on a message thread (toolrun's
	// default) each step's request creates a new thread with the whole
	// history: the same turn as without one, and no bytes saved, since the
	// thread does not outlive the step. Options.NoThread leaves it out.
	r, err := toolrun.Resume(a.client, s, a.tools, &a.opts)
	if err != nil {
		return nil, activityError(err, "toolrun.InvalidState", true, 0)
	}
	calls, err := r.Advance(ctx)
	// A limit the caller set (the turn limit, a budget), an answer cut
	// short (max_tokens) and a hook's failure
	// are how the run stopped, recorded in its state: not a step to retry.
	if err != nil && !errors.Is(err, toolrun.ErrMaxTurns) && !errors.Is(err, toolrun.ErrBudget) && !errors.Is(err, toolrun.ErrIncomplete) {
		var he *toolrun.HookError
		if !errors.As(err, &he) {
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, modelError(err)
		}
	}
	whole := r.State()
	res := &StepResult{State: whole, Text: lastText(whole), Calls: calls}
	if a.store != nil {
		key, err := stateKey(ctx)
		if err != nil {
			return nil, err
		}
		if err := saveState(ctx, a.store, key, whole); err != nil {
			return nil, err
		}
		a.deleteEarlierAttempts(ctx, key)
		res.State, res.Ref = skeleton(whole), key
		if err := c.stashStep(ctx, res); err != nil {
			return nil, err // retried: the Store may be back
		}
	}
	n, over := overLimit(res, limitOr(in.PayloadLimit))
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
		n, _ = overLimit(res, 0)
	}
	res.Size = n
	return res, nil
}

// stateKey returns the Store key of the state a step attempt saves: one
// per attempt, so that no attempt overwrites another's state, and the
// workflow's history says which one counts.
func stateKey(ctx context.Context) (string, error) {
	if !activity.IsActivity(ctx) {
		return "", sdktemporal.NewNonRetryableApplicationError("toolrun: a step with a Store runs only as an activity", "toolrun.NotActivity", nil)
	}
	info := activity.GetInfo(ctx)
	return fmt.Sprintf("%s/%s/step-%s.%d", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID, info.Attempt), nil
}

// deleteEarlierAttempts deletes the states that the earlier attempts of
// this step saved: a step attempt runs only once the one before it failed
// or timed out, so the workflow never records that attempt's result, and
// no step reads its state.
func (a *Activities) deleteEarlierAttempts(ctx context.Context, key string) {
	info := activity.GetInfo(ctx)
	for n := int32(1); n < info.Attempt; n++ {
		old := fmt.Sprintf("%s/%s/step-%s.%d", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID, n)
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
// [toolrun.Runner.ExecuteCall]: input validated, panics recovered, the
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
	r, err := toolrun.Resume(a.client, st, a.tools, &a.opts)
	if err != nil {
		return nil, activityError(err, "toolrun.InvalidState", true, 0)
	}
	res, err := r.ExecuteCall(ctx, in.ToolUseID)
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
	placed, key := a.resultClaim(ctx, c, st, in.ToolUseID, r.CutResult(res))
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
// [toolrun.Runner.ExecuteCall] refused without running it.
const callNotRun = "toolrun.CallNotRun"

// modelError makes a failed model request a Temporal error: not retryable
// if it would fail again (a bad request, a bad key), and with the API's
// retry-after as the next interval if it gave one.
func modelError(err error) error {
	ok, wait := retryable(err)
	return activityError(err, "toolrun.APIError", !ok, wait)
}
