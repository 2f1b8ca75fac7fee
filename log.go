package toolrun

import (
	"context"
	"errors"
	"log/slog"
)

// logEvent writes the log record of e, if it has one. Failures are never
// below Warn, so a tool that fails is seen even with the default handler.
func logEvent(ctx context.Context, log *slog.Logger, e Event) {
	switch e := e.(type) {
	case RequestSent:
		log.DebugContext(ctx, "toolrun: request sent", "turn", e.Turn, "model", string(e.Params.Model), "messages", len(e.Params.Messages))
	case ResponseReceived:
		log.DebugContext(ctx, "toolrun: response received", "turn", e.Turn,
			"stop_reason", string(e.Message.StopReason), "input_tokens", e.Message.Usage.InputTokens,
			"output_tokens", e.Message.Usage.OutputTokens, "duration", e.Duration)
	case ToolDecided:
		switch e.Decision.Kind {
		case Deny, Skip:
			log.WarnContext(ctx, "toolrun: tool call "+decisionVerb(e.Decision.Kind), "tool", e.Call.Name,
				"tool_use_id", e.Call.ID, "turn", e.Turn, "reason", e.Decision.Reason, "by", e.By)
		case Defer:
			log.InfoContext(ctx, "toolrun: tool call awaits approval", "tool", e.Call.Name,
				"tool_use_id", e.Call.ID, "turn", e.Turn, "reason", e.Decision.Reason, "by", e.By)
		}
	case ToolFinished:
		res := e.Result
		if res.Err == nil {
			log.DebugContext(ctx, "toolrun: tool call finished", "tool", res.Call.Name, "tool_use_id", res.Call.ID,
				"turn", e.Turn, "duration", res.Duration, "is_error", res.IsError)
			return
		}
		attrs := []any{"tool", res.Call.Name, "tool_use_id", res.Call.ID, "turn", e.Turn,
			"duration", res.Duration, "error", res.Err.Error()}
		var pe *PanicError
		if errors.As(res.Err, &pe) {
			attrs = append(attrs, "stack", string(pe.Stack))
		}
		switch {
		case errors.Is(res.Err, ErrDenied), errors.Is(res.Err, ErrNotRun):
			// A denial is logged where it was decided; a call not run is
			// explained by the run's stop.
			log.WarnContext(ctx, "toolrun: tool call not run", attrs...)
		default:
			log.ErrorContext(ctx, "toolrun: tool call failed", attrs...)
		}
	case RunStopped:
		res := e.Result
		attrs := []any{"stop_reason", string(res.StopReason), "turns", res.Turns, "tool_calls", res.ToolCalls,
			"tool_failures", res.ToolFailures, "input_tokens", res.Usage.InputTokens, "output_tokens", res.Usage.OutputTokens}
		if res.Detail != "" {
			attrs = append(attrs, "detail", res.Detail)
		}
		switch res.StopReason {
		case StopEndTurn:
			log.DebugContext(ctx, "toolrun: run stopped", attrs...)
		case StopAwaitingApproval, StopHook, StopCanceled:
			log.InfoContext(ctx, "toolrun: run stopped", attrs...)
		case StopError:
			log.ErrorContext(ctx, "toolrun: run stopped", append(attrs, "error", res.Err.Error())...)
		default: // limits, refusals: the run did not finish its task
			log.WarnContext(ctx, "toolrun: run stopped", attrs...)
		}
	}
}

func decisionVerb(k DecisionKind) string {
	switch k {
	case Deny:
		return "denied"
	case Skip:
		return "skipped"
	}
	return k.String()
}
