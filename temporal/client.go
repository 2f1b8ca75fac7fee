package temporal

import (
	"context"
	"log/slog"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"go.temporal.io/sdk/client"
)

// NewInput returns the input of [Workflow] for a new run of params (model,
// max_tokens, system, messages and any other request fields), scheduled as
// opts says (nil for the defaults). The tools are the workers'.
func NewInput(params anthropic.BetaMessageNewParams, opts *RunOptions) Input {
	var o RunOptions
	if opts != nil {
		o = *opts
	}
	// The runner is built only for its State: it sends nothing and logs
	// nothing.
	r := toolrun.New(anthropic.Client{}, params, nil, &toolrun.Options{MaxTurns: o.MaxTurns, Logger: slog.New(slog.DiscardHandler)})
	return Input{State: r.State(), Options: o}
}

// Start starts a new run of params as an execution of [Workflow] with c,
// as [NewInput] describes; start says where (task queue, workflow id).
func Start(ctx context.Context, c client.Client, start client.StartWorkflowOptions, params anthropic.BetaMessageNewParams, opts *RunOptions) (client.WorkflowRun, error) {
	return c.ExecuteWorkflow(ctx, start, WorkflowName, NewInput(params, opts))
}

// Decide gives a person's decision for a call of run workflowID awaiting
// approval, with [DecideUpdate]. It returns once the workflow has applied
// it, or an error if no call with that id awaits approval.
func Decide(ctx context.Context, c client.Client, workflowID, toolUseID string, d toolrun.Decision) error {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateName:   DecideUpdate,
		Args:         []any{Approval{ToolUseID: toolUseID, Decision: d}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, nil)
}

// Pending returns the calls of run workflowID awaiting approval, with
// [PendingQuery].
func Pending(ctx context.Context, c client.Client, workflowID string) ([]toolrun.PendingCall, error) {
	v, err := c.QueryWorkflow(ctx, workflowID, "", PendingQuery)
	if err != nil {
		return nil, err
	}
	var out []toolrun.PendingCall
	if err := v.Get(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// LoadState returns the whole state of a run whose workers keep states in
// store (see [NewActivities]), by the key an [Outcome] (Ref) or the
// [StateQuery] gave: the state with its history, as [toolrun.Resume]
// takes it.
func LoadState(ctx context.Context, store toolrun.Store, o *Outcome) (*toolrun.State, error) {
	if o.Ref == "" {
		return o.State, nil
	}
	stored, err := loadState(ctx, store, o.Ref)
	if err != nil {
		return nil, err
	}
	return merge(o.State, stored), nil
}
