package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"

	"github.com/toolrun/toolrun/internal/wire"
)

// LogEnv is the environment variable that turns up a runner's logging, as
// the Anthropic SDKs' ANTHROPIC_LOG does: "info" logs one record per request,
// response, tool call and stop at Info; "debug" also logs the request and
// response bodies, at Debug. See [Options.Logger]. Other values are ignored,
// with a warning.
const LogEnv = "ANTHROPIC_LOG"

// redacted replaces each secret that [Redact] finds.
const redacted = "[REDACTED]"

var (
	// anthropicKeyRE matches Anthropic API keys and tokens.
	anthropicKeyRE = regexp.MustCompile(`sk-ant-[A-Za-z0-9_-]+`)
	// schemeTokenRE matches the credentials of an Authorization header:
	// "Bearer <token>", "Basic <token>".
	schemeTokenRE = regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/-]{8,}=*`)
	// credentialRE matches a credential header or field and its value, as
	// in "x-api-key: v", "Authorization=v", `"api_key":"v"` and
	// `{"X-Api-Key":["v"]}`, also inside a JSON string (\"...\").
	credentialRE = regexp.MustCompile(`(?i)\b(authorization|x-api-key|anthropic_api_key|anthropic_auth_token|api[_-]?key|auth[_-]?token)` +
		`(\\?["']?\s*[:=]\s*\[?\s*\\?["']?)([^\s"'\\,;\[\]{}]+)`)
)

// secretEnv lists the environment variables whose values [Redact] removes.
var secretEnv = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"}

// Redact returns s with every secret it recognises replaced by
// "[REDACTED]":
//
//   - Anthropic API keys and tokens (sk-ant-…);
//   - the values of the ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN
//     environment variables, as set when Redact is called, if they are at
//     least 8 bytes long;
//   - the values of Authorization and X-Api-Key headers and of api_key and
//     auth_token fields, as they appear in text, HTTP dumps and JSON, and
//     bearer and basic credentials.
//
// Redact keeps valid JSON valid when the secrets are inside JSON strings, as
// they are in request and response bodies. A runner passes every record it
// logs through Redact (see [Options.Logger]); package transcript passes
// every string it writes. Redact is a safety net, not a guarantee: it cannot
// recognise a secret of the application's own.
func Redact(s string) string {
	for _, name := range secretEnv {
		if v := os.Getenv(name); len(v) >= 8 && strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, redacted)
		}
	}
	s = anthropicKeyRE.ReplaceAllString(s, "sk-ant-"+redacted)
	s = schemeTokenRE.ReplaceAllString(s, "${1}${2}"+redacted)
	return credentialRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := credentialRE.FindStringSubmatch(m)
		switch v := strings.ToLower(sub[3]); v {
		case "bearer", "basic": // the scheme of an Authorization value, redacted by schemeTokenRE
			return m
		case "redacted": // "[REDACTED]" read as a list
			return m
		}
		return sub[1] + sub[2] + redacted
	})
}

// runLogger is the logger a runner writes to, and how loud it is.
type runLogger struct {
	*slog.Logger
	// routine is the level of the records of a run going as it should:
	// Debug, or Info when LogEnv asks for info or debug.
	routine slog.Level
	// bodies reports that LogEnv=debug asks for request and response bodies.
	bodies bool
}

// newRunLogger returns the logger of a runner whose Options.Logger is l, as
// [Options.Logger] describes.
func newRunLogger(l *slog.Logger) runLogger {
	rl := runLogger{routine: slog.LevelDebug}
	env := os.Getenv(LogEnv)
	level, known := slog.LevelDebug, true
	switch strings.ToLower(strings.TrimSpace(env)) {
	case "":
		known = false
	case "info":
		rl.routine, level = slog.LevelInfo, slog.LevelInfo
	case "debug":
		rl.routine, level, rl.bodies = slog.LevelInfo, slog.LevelDebug, true
	default:
		known = false
	}
	if l == nil {
		if known {
			l = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
		} else {
			l = slog.Default()
		}
	}
	rl.Logger = slog.New(redactHandler{l.Handler()})
	if env != "" && !known {
		rl.Warn("toolrun: "+LogEnv+" not understood; want info or debug", "value", env)
	}
	return rl
}

// redactHandler passes each record to its handler with [Redact] applied to
// the message and to every string, error and []byte value.
type redactHandler struct{ h slog.Handler }

func (h redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h redactHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, Redact(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = redactAttr(a)
	}
	return redactHandler{h.h.WithAttrs(out)}
}

func (h redactHandler) WithGroup(name string) slog.Handler { return redactHandler{h.h.WithGroup(name)} }

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, Redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, ga := range g {
			out[i] = redactAttr(ga)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, Redact(x.Error()))
		case json.RawMessage:
			return slog.String(a.Key, Redact(string(x)))
		case []byte:
			return slog.String(a.Key, Redact(string(x)))
		default:
			// A value the handler would print some other way: only if its
			// text holds a secret is it replaced by its redacted text.
			if s := fmt.Sprintf("%+v", x); Redact(s) != s {
				return slog.String(a.Key, Redact(s))
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// logEvent writes the log record of e, if it has one. Failures are never
// below Warn, so a tool that fails is seen even with the default handler;
// the records of a run going as it should are at log.routine.
func logEvent(ctx context.Context, log runLogger, e Event) {
	switch e := e.(type) {
	case RequestSent:
		log.Log(ctx, log.routine, "toolrun: request sent", "turn", e.Turn, "model", string(e.Params.Model),
			"messages", len(e.Params.Messages), "streamed", e.Streamed)
		if log.bodies && log.Enabled(ctx, slog.LevelDebug) {
			body, err := json.Marshal(e.Params)
			if err != nil {
				body = []byte(err.Error())
			}
			log.DebugContext(ctx, "toolrun: request body", "turn", e.Turn, "body", string(body))
		}
	case ResponseReceived:
		log.Log(ctx, log.routine, "toolrun: response received", "turn", e.Turn,
			"stop_reason", string(e.Message.StopReason), "input_tokens", e.Message.Usage.InputTokens,
			"output_tokens", e.Message.Usage.OutputTokens, "duration", e.Duration)
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
			log.Log(ctx, log.routine, "toolrun: tool call finished", "tool", res.Call.Name, "tool_use_id", res.Call.ID,
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
	case StreamRetried:
		log.WarnContext(ctx, "toolrun: streamed response failed; retrying", "turn", e.Turn, "attempt", e.Attempt,
			"delay", e.Delay, "error", e.Err.Error())
	case RunStopped:
		res := e.Result
		attrs := []any{"stop_reason", string(res.StopReason), "turns", res.Turns, "tool_calls", res.ToolCalls,
			"tool_failures", res.ToolFailures, "input_tokens", res.Usage.InputTokens, "output_tokens", res.Usage.OutputTokens}
		if res.Detail != "" {
			attrs = append(attrs, "detail", res.Detail)
		}
		switch res.StopReason {
		case StopEndTurn:
			log.Log(ctx, log.routine, "toolrun: run stopped", attrs...)
		case StopAwaitingApproval, StopHook, StopCanceled:
			log.InfoContext(ctx, "toolrun: run stopped", attrs...)
		case StopError, StopMalformedResponse:
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
