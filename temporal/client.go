package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/temporal/internal/described"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdktemporal "go.temporal.io/sdk/temporal"
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
	if o.MaxTurns != 0 {
		// The limit goes in the State, which the workers resume: their
		// own Options.MaxTurns applies only to runs that set none.
		r.SetMaxTurns(o.MaxTurns)
	}
	return Input{State: r.State(), Options: o}
}

// Start starts a new run of params as an execution of [Workflow] with c,
// as [NewInput] describes; start says where (task queue, workflow id).
// It starts the run with the memo [PendingMemo] saying that no call awaits
// approval, so that [Pending] answers from the memo even before a worker
// has taken the run's first task.
func Start(ctx context.Context, c client.Client, start client.StartWorkflowOptions, params anthropic.BetaMessageNewParams, opts *RunOptions) (client.WorkflowRun, error) {
	if _, ok := start.Memo[PendingMemo]; !ok {
		memo := make(map[string]any, len(start.Memo)+1)
		maps.Copy(memo, start.Memo)
		memo[PendingMemo] = pendingApprovals(nil)
		start.Memo = memo
	}
	return c.ExecuteWorkflow(ctx, start, WorkflowName, NewInput(params, opts))
}

// Decide gives a person's decision for a call of run workflowID awaiting
// approval, with [DecideUpdate]. It returns once the workflow has applied
// it, or an error if the call has a decision already or does not await
// one: errors.Is(err, [toolrun.ErrNotAwaitingApproval]) holds for it, as
// for [toolrun.State.Decide]'s; errors.As finds the update's
// *temporal.ApplicationError (see [FromFailure]).
//
// A decision of any size goes through with a Store ([ClientOptions].Store): its
// edited input, reason or Skip result over the claim threshold
// ([ClientOptions].ClaimThreshold, [DefaultClaimThreshold] by default) is put in
// the Store first, and the update carries a mark that stands for it,
// which the workers read back from the same Store; a refused decision's
// values are deleted again. Without a Store, a decision over
// [MaxDecisionBytes] is refused before it is sent, with
// [ErrDecisionTooLarge].
//
// An update needs a worker: the server hands it to one to validate and
// apply, and with no worker of the run's task queue running, Decide blocks
// until ctx is done. Give ctx a deadline, or use [DecideBySignal], which
// the server accepts with no worker running.
func Decide(ctx context.Context, c client.Client, workflowID, toolUseID string, d toolrun.Decision, opts *ClientOptions) error {
	d, cl, err := prepareDecision(ctx, workflowID, toolUseID, d, clientOptionsOf(opts))
	if err != nil {
		return err
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateName:   DecideUpdate,
		Args:         []any{Approval{ToolUseID: toolUseID, Decision: d}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err != nil {
		var ae *sdktemporal.ApplicationError
		if errors.As(err, &ae) {
			// Refused by the workflow, which never kept the decision.
			cl.undo(ctx)
		}
		return FromFailure(err)
	}
	return nil
}

// prepareDecision returns d as Decide and DecideBySignal send it: its
// large values put in the Store as claims (claimDecision), and refused,
// with its claims deleted again, if it is still too large to send.
func prepareDecision(ctx context.Context, workflowID, toolUseID string, d toolrun.Decision, o clientOptions) (toolrun.Decision, *claims, error) {
	d, cl, err := claimDecision(ctx, o, workflowID, d)
	if err != nil {
		return d, nil, err
	}
	if err := sendable(toolUseID, d, o); err != nil {
		cl.undo(ctx)
		return d, nil, err
	}
	return d, cl, nil
}

// sendable refuses, before it is sent, a decision that the workflow would
// refuse for its size: one large enough would not reach the workflow at
// all, since the server fails the workflow task that carries a payload
// over its limit.
func sendable(toolUseID string, d toolrun.Decision, o clientOptions) error {
	a := Approval{ToolUseID: toolUseID, Decision: d}
	if n := decisionSize(a); n > MaxDecisionBytes {
		hint := "give the client the workers' Store in temporal.ClientOptions.Store, so that the large values travel through it, or give a shorter reason, input or result"
		if o.store != nil {
			hint = "what is over the claim threshold travels through the Store, and the rest is too large still: give a shorter reason or tool_use id"
		}
		return fmt.Errorf("%w: the decision for call %q is %d bytes, over the limit of %d (temporal.MaxDecisionBytes): %s", ErrDecisionTooLarge, truncID(toolUseID), n, MaxDecisionBytes, hint)
	}
	return nil
}

// DecideBySignal gives a person's decision for a call of run workflowID
// with [DecideSignal] (a large one through the Store given with
// [ClientOptions].Store, or refused with [ErrDecisionTooLarge] without one, as
// Decide does), and returns as soon as the server has recorded the
// signal in the run's history: it does not wait for a worker. A signal is
// durable: the workflow applies it when a worker next runs it, even one
// started days later, and a decision for a call that does not exist yet is
// kept until the call appears. What it does not do is report back: a
// decision for a call decided already is dropped, with a warning in the
// worker's log, where [Decide] returns the refusal. So use DecideBySignal
// where no worker may be running (an approval page, a chat command) and
// [Pending] to see, once a worker has run, that the call no longer awaits
// approval.
//
// A dropped decision's values in the Store are deleted by the workers as
// they drop it; those of a signal that failed, or was sent to a run that
// has ended, stay.
func DecideBySignal(ctx context.Context, c client.Client, workflowID, toolUseID string, d toolrun.Decision, opts *ClientOptions) error {
	d, _, err := prepareDecision(ctx, workflowID, toolUseID, d, clientOptionsOf(opts))
	if err != nil {
		return err
	}
	// A failed signal may have been recorded still (a timeout, a dropped
	// connection), so its values stay in the Store: better room lost
	// than a decision whose values are gone.
	return c.SignalWorkflow(ctx, workflowID, "", DecideSignal, Approval{ToolUseID: toolUseID, Decision: d})
}

// Pending returns the calls of run workflowID awaiting approval, from the
// memo [PendingMemo] that DescribeWorkflowExecution returns: one request
// to the server, answered with no worker running. It lists at most
// [MemoMaxCalls] calls (those beyond are listed once the first are
// decided), without an input over [MemoMaxInput] bytes (Input is then
// null). A run that is no longer running awaits nothing: Pending returns
// no calls for it.
//
// The memo, not [PendingQuery], because a query is answered by a worker
// replaying the workflow: with no worker running, the server fails it
// after a 10 s wait, and a busy worker delays it. The memo is what the run
// showed at its last workflow task: a decision sent a moment ago shows
// once a worker has applied it. A run started by a toolrun older than the
// memo has none; for it, Pending falls back on the query.
//
// The memo is decoded with the data converter c was built with
// (client.Options.DataConverter: a codec that encrypts or compresses
// payloads, say), as the workers encoded it, so a converter given once to
// the client serves here too.
func Pending(ctx context.Context, c client.Client, workflowID string, opts *ClientOptions) ([]toolrun.PendingCall, error) {
	d, err := c.DescribeWorkflow(ctx, workflowID, "")
	if err != nil {
		return nil, fmt.Errorf("toolrun: pending calls of %s: %w", workflowID, err)
	}
	o := clientOptionsOf(opts).of(d)
	info := d.RawResponse.GetWorkflowExecutionInfo()
	if info.GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, nil
	}
	raw, ok := info.GetMemo().GetFields()[PendingMemo]
	if !ok {
		return pendingByQuery(ctx, c, workflowID)
	}
	var p PendingApprovals
	if err := o.dc.FromPayload(raw, &p); err != nil {
		return nil, fmt.Errorf("toolrun: pending calls of %s: the memo %s: %w", workflowID, PendingMemo, err)
	}
	return p.Calls, nil
}

// pendingByQuery returns the calls of run workflowID awaiting approval, with
// [PendingQuery].
func pendingByQuery(ctx context.Context, c client.Client, workflowID string) ([]toolrun.PendingCall, error) {
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
//
// With a Store that keeps blobs ([BlobStore]), the values the state holds
// in it (see [RunOptions.ClaimThreshold]) are read back in their place; a
// missing one is an error wrapping [ErrClaimMissing].
func LoadState(ctx context.Context, store toolrun.Store, o *Outcome) (*toolrun.State, error) {
	if o.Ref == "" {
		return o.State, nil
	}
	stored, err := loadState(ctx, store, o.Ref)
	if err != nil {
		return nil, err
	}
	blobs := driver.Blobs(store)
	skel, err := (&claims{store: blobs, prefix: claimKeyPrefix(refWorkflow(o.Ref))}).restore(ctx, o.State)
	if err != nil {
		return nil, err
	}
	return merge(skel, stored), nil
}

// ClientOptions are the options of the functions of this package that read
// what a run shows or send it a decision with a client ([Pending],
// [Decide], [DecideBySignal], [Follow]). A nil *ClientOptions, like the
// zero value, means the defaults.
type ClientOptions struct {
	// Store is the Store the workers keep their states in (their
	// [toolrun.Options.Store]), which must keep blobs too
	// ([driver.Blobs]: a [github.com/toolrun/toolrun/filestore.Store] or sqlitestore's Store), so
	// that a decision's edited input, reason or Skip result over the
	// claim threshold travels through it rather than through the
	// workflow's history, and a decision of any size goes through.
	// Without one that keeps blobs, a decision over [MaxDecisionBytes] is
	// refused with [ErrDecisionTooLarge]. [Follow] reads the values of the
	// run's claims from it, so that a large result or input is reported
	// whole.
	Store toolrun.Store

	// ClaimThreshold is the size, in bytes of JSON, above which a
	// decision's value travels through Store: zero means
	// [DefaultClaimThreshold], and a negative value sends every value
	// whole, as without a Store.
	ClaimThreshold int

	// DataConverter decodes what a run shows (the memo [PendingMemo], the
	// history [Follow] reads). Nil, the default, means the converter the
	// client was built with (client.Options.DataConverter, or the SDK's
	// default when it sets none), which a run's description decodes with:
	// a codec given to the client is not given again here. Set it only to
	// decode with a converter other than the client's.
	DataConverter converter.DataConverter
}

// clientOptions are the ClientOptions in the form the functions use.
type clientOptions struct {
	dc        converter.DataConverter
	store     BlobStore
	threshold int
}

// clientOptionsOf returns opts with the defaults in place of zeros, but
// for the data converter, which [clientOptions.of] fills in.
func clientOptionsOf(opts *ClientOptions) clientOptions {
	var o clientOptions
	if opts == nil {
		return o
	}
	if opts.DataConverter != nil {
		o.dc = opts.DataConverter
	}
	if b := driver.Blobs(opts.Store); b != nil {
		o.store = b
	}
	o.threshold = opts.ClaimThreshold
	return o
}

// of returns o with, if it has no data converter, that of the client
// that described a run as d.
func (o clientOptions) of(d *client.WorkflowExecutionDescription) clientOptions {
	if o.dc == nil {
		o.dc = described.Converter(d)
	}
	return o
}

// claimDecision puts the values of d over the claim threshold in o's
// Store and returns d with marks in their place, and the claims it made,
// to undo if the decision is not sent or refused.
func claimDecision(ctx context.Context, o clientOptions, workflowID string, d toolrun.Decision) (toolrun.Decision, *claims, error) {
	c := &claims{store: o.store, prefix: claimKeyPrefix(workflowID), threshold: thresholdOf(o.threshold), unique: true}
	if c.store == nil || c.threshold <= 0 {
		return d, c, nil
	}
	put := func(raw []byte) (string, bool, error) {
		if len(raw) <= c.threshold {
			return "", false, nil
		}
		key, err := c.put(ctx, raw)
		if err != nil {
			return "", false, err
		}
		c.keys = append(c.keys, key)
		return key, true, nil
	}
	fail := func(err error) (toolrun.Decision, *claims, error) {
		c.undo(ctx)
		return d, c, fmt.Errorf("toolrun: decision for run %s: %w", workflowID, err)
	}
	if d.Reason != "" {
		raw, err := json.Marshal(d.Reason)
		if err != nil {
			return fail(err)
		}
		if key, ok, err := put(raw); err != nil {
			return fail(err)
		} else if ok {
			d.Reason = markText(key)
		}
	}
	if len(d.Input) > 0 {
		raw, err := json.Marshal(d.Input) // compact, as the State keeps it
		if err != nil {
			return fail(fmt.Errorf("the decision's Input is not JSON: %w", err))
		}
		if key, ok, err := put(raw); err != nil {
			return fail(err)
		} else if ok {
			d.Input = markJSON(fieldValue, key)
		}
	}
	if len(d.Result) > 0 {
		raw, err := json.Marshal(d.Result)
		if err != nil {
			return fail(err)
		}
		if key, ok, err := put(raw); err != nil {
			return fail(err)
		} else if ok {
			d.Result = []toolrun.Content{toolrun.Text(markText(key))}
		}
	}
	return d, c, nil
}

// undo deletes the claims c made: best effort, as a value left behind
// costs room, not correctness.
func (c *claims) undo(ctx context.Context) {
	if c == nil || c.store == nil {
		return
	}
	for _, key := range c.keys {
		_ = c.store.DeleteBlob(ctx, key)
	}
	c.keys = nil
}

// refWorkflow returns the workflow id of ref, a state's key in the Store
// (<workflow id>/<run id>/step-…), whose claims are <workflow id>/claim-….
func refWorkflow(ref string) string {
	i := strings.LastIndex(ref, "/")
	if i < 0 {
		return ref
	}
	j := strings.LastIndex(ref[:i], "/")
	if j < 0 {
		return ref[:i]
	}
	return ref[:j]
}
