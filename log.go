package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"

	"github.com/toolrun/toolrun/internal/redact"
	"github.com/toolrun/toolrun/internal/wire"
)

// logEnv is the environment variable that turns up a runner's logging, as
// the Anthropic SDKs' ANTHROPIC_LOG does: "info" logs one record per request,
// response, tool call and stop at Info; "debug" also logs the request and
// response bodies, at Debug. See [Options.Logger]. Other values are ignored,
// with a warning.
const logEnv = "ANTHROPIC_LOG"

// runLogger is the logger a runner writes to, and how loud it is.
type runLogger struct {
	*slog.Logger
	// routine is the level of the records of a run going as it should:
	// Debug, or Info when logEnv asks for info or debug.
	routine slog.Level
	// bodies reports that logEnv=debug asks for request and response bodies.
	bodies bool
}

// logEnvKnown reports whether env, the value of logEnv, is one the runner
// understands: "info" or "debug", in any case and with spaces around.
func logEnvKnown(env string) bool {
	switch strings.ToLower(strings.TrimSpace(env)) {
	case "info", "debug":
		return true
	}
	return false
}

// newRunLogger returns the logger of a runner whose Options.Logger is l, as
// [Options.Logger] describes, with env the value of logEnv.
func newRunLogger(l *slog.Logger, env string) runLogger {
	rl := runLogger{routine: slog.LevelDebug}
	level, known := slog.LevelDebug, logEnvKnown(env)
	switch strings.ToLower(strings.TrimSpace(env)) {
	case "info":
		rl.routine, level = slog.LevelInfo, slog.LevelInfo
	case "debug":
		rl.routine, level, rl.bodies = slog.LevelInfo, slog.LevelDebug, true
	}
	if l == nil {
		if known {
			l = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
		} else {
			l = slog.Default()
		}
	}
	rl.Logger = slog.New(redact.NewHandler(l.Handler()))
	if env != "" && !known {
		rl.Warn("toolrun: "+logEnv+" not understood; want info or debug", "value", env)
	}
	return rl
}

// logEvent writes the log record of e, if it has one. Failures are never
// below Warn, so a tool that fails is seen even with the default handler;
// the records of a run going as it should are at log.routine.
//
// The routine records, most of a run's, are built only when the logger
// takes them, so that a logger that drops them costs a turn nothing.
func logEvent(ctx context.Context, log runLogger, e Event) {
	switch e := e.(type) {
	case RequestSent:
		if e.Attempt > 1 {
			log.WarnContext(ctx, "toolrun: streamed response failed; retrying", "turn", e.Turn, "attempt", e.Attempt,
				"delay", e.Delay, "error", e.Err.Error())
			break
		}
		if log.Enabled(ctx, log.routine) {
			args := []any{"turn", e.Turn, "model", string(e.Params.Model), "messages", len(e.Params.Messages), "streamed", e.Streamed}
			if e.Compaction {
				args = append(args, "compaction", true)
			}
			log.Log(ctx, log.routine, "toolrun: request sent", args...)
		}
		if log.bodies && log.Enabled(ctx, slog.LevelDebug) {
			body, err := json.Marshal(e.Params)
			if err != nil {
				body = []byte(err.Error())
			}
			log.DebugContext(ctx, "toolrun: request body", "turn", e.Turn, "body", string(body))
		}
	case ResponseReceived:
		if log.Enabled(ctx, log.routine) {
			// The tokens billed: a compaction's are not in the top-level usage.
			u := usageOf(e.Message)
			args := []any{"turn", e.Turn, "stop_reason", string(e.Message.StopReason), "input_tokens", u.InputTokens,
				"output_tokens", u.OutputTokens, "duration", e.Duration}
			if e.Compaction {
				args = append(args, "compaction", true)
			}
			log.Log(ctx, log.routine, "toolrun: response received", args...)
		}
		if log.bodies && log.Enabled(ctx, slog.LevelDebug) {
			log.DebugContext(ctx, "toolrun: response body", "turn", e.Turn, "body", string(wire.ResponseJSON(e.Message)))
		}
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
			if log.Enabled(ctx, log.routine) {
				log.Log(ctx, log.routine, "toolrun: tool call finished", append(callAttrs(res.Call, "tool", res.Call.Name, "tool_use_id", res.Call.ID),
					"turn", e.Turn, "duration", res.Duration, "is_error", res.IsError)...)
			}
			return
		}
		attrs := append(callAttrs(res.Call, "tool", res.Call.Name, "tool_use_id", res.Call.ID), "turn", e.Turn,
			"duration", res.Duration, "error", res.Err.Error())
		var pe *PanicError
		if errors.As(res.Err, &pe) {
			attrs = append(attrs, "stack", string(pe.Stack))
		}
		switch {
		case errors.Is(res.Err, ErrDenied):
			// A denial was logged, at Warn, where it was decided
			// (ToolDecided): once is enough.
			if log.Enabled(ctx, log.routine) {
				log.Log(ctx, log.routine, "toolrun: tool call finished", attrs...)
			}
		case errors.Is(res.Err, ErrNotRun):
			// A call not run is explained by the run's stop.
			log.WarnContext(ctx, "toolrun: tool call not run", attrs...)
		default:
			log.ErrorContext(ctx, "toolrun: tool call failed", attrs...)
		}
	case RunStopped:
		res := e.Result
		if res.StopReason == StopEndTurn && !log.Enabled(ctx, log.routine) {
			return
		}
		attrs := []any{"stop_reason", string(res.StopReason), "turns", res.Turns, "tool_calls", res.ToolCalls,
			"tool_failures", res.ToolFailures, "tool_denials", res.ToolDenials, "input_tokens", res.Usage.InputTokens, "output_tokens", res.Usage.OutputTokens}
		if res.Detail != "" {
			attrs = append(attrs, "detail", res.Detail)
		}
		switch res.StopReason {
		case StopEndTurn:
			log.Log(ctx, log.routine, "toolrun: run stopped", attrs...)
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

// callAttrs returns attrs followed by the toolset and the caller of c,
// where it has them: a record of a call made from code says so.
func callAttrs(c ToolCall, attrs ...any) []any {
	if c.Toolset != "" {
		attrs = append(attrs, "toolset", c.Toolset)
	}
	if c.Caller != "" && c.Caller != "direct" {
		attrs = append(attrs, "caller", c.Caller, "caller_tool_id", c.CallerToolID)
	}
	return attrs
}
