package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
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
const AppendUpdate = "toolrun.append"

// MaxAppendBytes bounds the JSON of the messages appended to one turn, by
// every [AppendUpdate] it takes together: they travel in the workflow's
// history and in the next step's input, which the server bounds.
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
	if _, err := appendSize(messages, 0); err != nil {
		return err
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateName:   AppendUpdate,
		Args:         []any{messages},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	return FromFailure(err)
}

// appendSize returns the JSON size of messages, or the refusal of
// messages that are not user messages, or whose size with before bytes
// appended already is over [MaxAppendBytes].
func appendSize(messages []anthropic.BetaMessageParam, before int) (int, error) {
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
	if before+len(b) > MaxAppendBytes {
		return 0, fmt.Errorf("%w: %d bytes of messages with %d appended to the turn already, over the limit of %d (temporal.MaxAppendBytes): send a shorter message, or send it after the run goes on", ErrMessagesTooLarge, len(b), before, MaxAppendBytes)
	}
	return len(b), nil
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
