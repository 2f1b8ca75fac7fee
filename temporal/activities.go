package temporal

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"go.temporal.io/sdk/activity"
	sdktemporal "go.temporal.io/sdk/temporal"
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
}

// NewActivities returns the activities for a worker that runs tools with
// client and opts (which may be nil), as an in-process [toolrun.Runner]
// would: the same decisions (Allow and Deny lists, Decide, the tools'
// policies), hooks and events, called in the worker that runs the activity
// with the activity's context. Every worker of a task queue must be given
// the same tools.
//
// The client's own retries are turned off, as are the runner's retries of
// a broken stream, so that the workflow's retry policy
// ([RunOptions.ModelRetry]) is the only one; opts.Store is not used, since
// the workflow's history keeps the state.
func NewActivities(client anthropic.Client, tools []toolrun.Tool, opts *toolrun.Options) *Activities {
	a := &Activities{client: client, tools: slices.Clone(tools)}
	if opts != nil {
		a.opts = *opts
	}
	a.client.Beta.Messages.Options = append(slices.Clone(client.Beta.Messages.Options), option.WithMaxRetries(0))
	if a.opts.StreamRetry.MaxAttempts == 0 {
		a.opts.StreamRetry.MaxAttempts = 1
	}
	a.opts.Store, a.opts.RunID = nil, ""
	return a
}

// Registry is where [Register] registers the workflow and its activities:
// a worker.Worker, or a test environment of go.temporal.io/sdk/testsuite.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers [Workflow] as [WorkflowName] and a's activities as
// [StepActivity] and [ToolActivity] with r.
func Register(r Registry, a *Activities) {
	r.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
	r.RegisterActivityWithOptions(a.Step, activity.RegisterOptions{Name: StepActivity})
	r.RegisterActivityWithOptions(a.RunTool, activity.RegisterOptions{Name: ToolActivity})
}

// Step takes the run in s one step: on a runner resumed from s, it calls
// [toolrun.Runner.Advance], which decides the pending turn's calls, answers
// those that need no running, and commits the turn and sends at most one
// request once every call is answered. It returns the new state and the
// calls to run. A failed request is returned as an error for Temporal to
// retry, unless the client would not retry it either; a failed hook stops
// the run, in the state.
func (a *Activities) Step(ctx context.Context, s *toolrun.State) (*StepResult, error) {
	defer heartbeat(ctx)()
	r, err := toolrun.Resume(a.client, s, a.tools, &a.opts)
	if err != nil {
		return nil, sdktemporal.NewNonRetryableApplicationError(err.Error(), "toolrun.InvalidState", nil)
	}
	calls, err := r.Advance(ctx)
	if err != nil {
		var he *toolrun.HookError
		if !errors.As(err, &he) {
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, retryable(err)
		}
	}
	return &StepResult{State: r.State(), Calls: calls}, nil
}

// RunTool runs one call of the pending turn in in.State with
// [toolrun.Runner.ExecuteCall]: input validated, panics recovered, the
// tool's timeout enforced, AfterTool called. A tool's failure is a result
// (is_error), not an activity failure; the activity fails only when it is
// cancelled or the call cannot run here.
func (a *Activities) RunTool(ctx context.Context, in ToolInput) (*ToolOutput, error) {
	defer heartbeat(ctx)()
	r, err := toolrun.Resume(a.client, in.State, a.tools, &a.opts)
	if err != nil {
		return nil, sdktemporal.NewNonRetryableApplicationError(err.Error(), "toolrun.InvalidState", nil)
	}
	res, err := r.ExecuteCall(ctx, in.ToolUseID)
	if res == nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, sdktemporal.NewNonRetryableApplicationError(err.Error(), "toolrun.CallNotRunnable", nil)
	}
	out := &ToolOutput{}
	st := r.State()
	for _, c := range st.Pending.Calls {
		if c.Call.ID == in.ToolUseID && c.Result != nil {
			out.Result = *c.Result
		}
	}
	if stop := r.Result(); stop != nil { // AfterTool ended the run
		out.StopReason, out.Detail = stop.StopReason, stop.Detail
	}
	return out, nil
}

// heartbeat records a heartbeat three times per heartbeat timeout until the
// returned func is called, so a worker that dies is noticed and a long tool
// or stream is not. Outside an activity it does nothing.
func heartbeat(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	timeout := activity.GetInfo(ctx).HeartbeatTimeout
	if timeout <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(max(timeout/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// retryable makes a failed model request a Temporal error: not retryable
// if the client would not retry it (a bad request, a bad key), and with
// the API's retry-after as the next interval if it gave one.
func retryable(err error) error {
	var api *anthropic.Error
	if !errors.As(err, &api) {
		return err // a dropped connection, a timeout: retried
	}
	switch s := api.StatusCode; {
	case s == http.StatusRequestTimeout, s == http.StatusConflict, s == http.StatusTooManyRequests, s >= 500:
		return sdktemporal.NewApplicationErrorWithOptions(err.Error(), "toolrun.APIError", sdktemporal.ApplicationErrorOptions{
			NextRetryDelay: retryAfter(api.Response),
		})
	}
	return sdktemporal.NewNonRetryableApplicationError(err.Error(), "toolrun.APIError", nil)
}

// retryAfter reads the retry-after-ms and retry-after headers, as the
// client does; zero if there are none, or they ask for more than a minute.
func retryAfter(resp *http.Response) time.Duration {
	if resp == nil {
		return 0
	}
	var d time.Duration
	if ms, err := strconv.ParseFloat(resp.Header.Get("Retry-After-Ms"), 64); err == nil {
		d = time.Duration(ms * float64(time.Millisecond))
	} else if s, err := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64); err == nil {
		d = time.Duration(s * float64(time.Second))
	}
	if d <= 0 || d > time.Minute {
		return 0
	}
	return d
}
