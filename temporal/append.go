package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
)

// AppendUpdate is the update that carries user messages for a run that
// awaits decisions, as [AppendMessages] sends them: the workflow adds them
// after the results of the turn awaiting approval (see
// [toolrun.State.AppendMessages]), so that the request that follows the
// decisions gives the model the results and then the messages. It is
// rejected, and the run is unchanged, unless the run awaits a decision and
// no step is in flight ([ErrNotAwaiting]), or if the messages are not user
// messages or are over [MaxAppendBytes] ([ErrMessagesTooLarge]).
//
// The messages travel in the State's turn in progress, which a worker of
// a toolrun older than the update ignores: upgrade every worker of the
// task queue before a client sends it.
//
// The update takes an optional second argument, a *[ClientTools] (as
// [AppendMessagesWithTools] sends it): the client tools the run offers
// the model from the request after the decisions on. Without it (a
// client that sends the messages alone, or a nil), the run's tools are
// unchanged. A worker older than that argument ignores it, and the model
// keeps the earlier client tools: upgrade the workers before a client
// sends it.
const AppendUpdate = "toolrun.append"

// ClientTools is the second argument of [AppendUpdate]: the client tools
// the run offers the model from its next request on, in place of the
// client tools added to it before (the definitions with OfTool set among
// [toolrun.State.AddedTools]), as a client that runs its own tools and
// declares them with each message means: a tool declared before and not
// here is taken out (an empty Tools takes them all out), a new one is
// added, and one whose definition changed is replaced. Tools the API runs
// (added with AddToolParams) and the workers' own tools are left alone.
// Each definition is checked as [toolrun.Runner.AddTools] checks a tool
// (its name and input schema, a name no other tool of the run has), and
// its JSON counts toward [MaxAppendBytes] with the messages'; a refused
// one refuses the update, and nothing of it is applied.
//
// The workers need the functions of the client tools added, as for any
// added tool ([Activities.DeferClientTools] stands in for them). A call
// of a tool taken out that still awaits its answer is answered by the
// decision that answers it (a Skip's result, a Deny's reason), as the
// workflow records it: the run has no tool left to decide it with.
type ClientTools struct {
	Tools []anthropic.BetaToolParam `json:"tools"`
}

// MaxAppendBytes bounds the JSON of the messages appended to one turn, by
// every [AppendUpdate] it takes together, with the [ClientTools] sent
// with them: they travel in the workflow's history and in the next
// step's input, which the server bounds.
const MaxAppendBytes = 256 << 10

// ErrMessagesTooLarge is wrapped by the refusal of messages that would
// take the messages appended to a turn over [MaxAppendBytes]. Nothing of
// them is appended, and the run goes on as it was.
var ErrMessagesTooLarge = errors.New("toolrun: appended messages too large")

// ErrNotAwaiting is wrapped by the refusal of messages sent to a run that
// does not await a decision: a turn is in flight (its model request or
// its tools), whose response the messages would race, or the run ended.
// Nothing is appended; send the messages once the run awaits decisions
// again or, for a run that ended, start its next run with them.
var ErrNotAwaiting = errors.New("toolrun: the run does not await a decision")

// AppendMessages sends user messages to run workflowID, which awaits
// decisions, with [AppendUpdate], and returns once the workflow has taken
// them: they follow the results of the calls awaiting approval, in the
// request that follows their decisions. Send the decisions after it
// returns (with [Decide] or [DecideBySignal]): a run whose last call is
// decided first may have sent that request already, and refuses the
// messages with [ErrNotAwaiting].
//
// The messages must be user messages, at most [MaxAppendBytes] of JSON
// with those appended to the turn before; larger ones are refused before
// they are sent, with [ErrMessagesTooLarge]. A refusal by the workflow
// satisfies errors.Is with the sentinel it wraps. Like [Decide], it
// needs a worker to take the update, and blocks until ctx is done while
// none runs.
func AppendMessages(ctx context.Context, c client.Client, workflowID string, messages ...anthropic.BetaMessageParam) error {
	return appendMessages(ctx, c, workflowID, nil, messages)
}

// AppendMessagesWithTools is [AppendMessages] with the client tools the
// run offers the model from the request after the decisions on, in place
// of the client tools added to it before (see [ClientTools]): an empty
// tools takes them all out. The definitions are checked, and counted
// toward [MaxAppendBytes], before they are sent, as by the workflow.
func AppendMessagesWithTools(ctx context.Context, c client.Client, workflowID string, tools ClientTools, messages ...anthropic.BetaMessageParam) error {
	return appendMessages(ctx, c, workflowID, &tools, messages)
}

func appendMessages(ctx context.Context, c client.Client, workflowID string, tools *ClientTools, messages []anthropic.BetaMessageParam) error {
	if _, err := appendSize(messages, tools, 0); err != nil {
		return err
	}
	if tools != nil {
		if _, add := clientToolChange(nil, tools.Tools); len(add) > 0 {
			if err := driver.CanChangeTools(&toolrun.State{}, nil, add...); err != nil {
				return err
			}
		}
	}
	args := []any{messages}
	if tools != nil {
		args = append(args, tools)
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateName:   AppendUpdate,
		Args:         args,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	return FromFailure(err)
}

// appendSize returns the JSON size of messages and tools, or the refusal
// of messages that are not user messages, or whose size with tools' and
// before bytes appended already is over [MaxAppendBytes].
func appendSize(messages []anthropic.BetaMessageParam, tools *ClientTools, before int) (int, error) {
	if len(messages) == 0 {
		return 0, errors.New("toolrun: append: no messages")
	}
	for i, m := range messages {
		if m.OfUser == nil {
			return 0, fmt.Errorf("toolrun: append: message %d is not a user message; only user messages are appended", i)
		}
		if len(m.OfUser.Content) == 0 {
			return 0, fmt.Errorf("toolrun: append: message %d has no content", i)
		}
	}
	b, err := json.Marshal(messages)
	if err != nil {
		return 0, fmt.Errorf("toolrun: append: the messages: %w", err)
	}
	n := len(b)
	if tools != nil {
		t, err := json.Marshal(tools)
		if err != nil {
			return 0, fmt.Errorf("toolrun: append: the client tools: %w", err)
		}
		n += len(t)
	}
	if before+n > MaxAppendBytes {
		return 0, fmt.Errorf("%w: %d bytes of messages and tools with %d appended to the turn already, over the limit of %d (temporal.MaxAppendBytes): send a shorter message, or send it after the run goes on", ErrMessagesTooLarge, n, before, MaxAppendBytes)
	}
	return n, nil
}

// appendRefusal returns err as the update's refusal: an
// *temporal.ApplicationError whose type names the sentinel it wraps, so
// that FromFailure puts it back on the client.
func appendRefusal(err error) error {
	if te := typedError(err); te != err {
		return te
	}
	return sdktemporal.NewNonRetryableApplicationError(err.Error(), "toolrun.InvalidInput", nil)
}
