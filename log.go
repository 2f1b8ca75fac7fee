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

// Redact returns s with every credential it recognises replaced by
// "[REDACTED]":
//
//   - the values of Authorization and Proxy-Authorization headers, whatever
//     their scheme (Bearer, Basic, Token, Digest, AWS4-HMAC-SHA256 or none),
//     of which the scheme is kept, and of Cookie and Set-Cookie headers;
//   - the values of fields whose names end in api_key, access_key,
//     secret_key, private_key, secret, password, passwd, passphrase,
//     token, credential(s) or auth ("X-Api-Key: v", `"client_secret":"v"`,
//     "X-Amz-Security-Token=v"), and of Signature= and X-Amz-Signature=, as
//     they appear in text, HTTP dumps, JSON, Go's printed http.Header and
//     query strings, where key= and sig= are redacted too;
//   - Anthropic API keys and tokens (sk-ant-…), the keys and tokens of other
//     vendors known by their shape (OpenAI, AWS access key IDs, GitHub,
//     GitLab, Slack, Google, Stripe, npm), JSON Web Tokens, bearer and basic
//     credentials, the password of a URL's userinfo and the body of a PEM
//     private key;
//   - the values, at least 8 bytes long, of the environment variables whose
//     names say they hold secrets, as set when Redact is called:
//     ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, GITHUB_TOKEN,
//     AWS_SECRET_ACCESS_KEY, any name with SECRET, PASSWORD, TOKEN, APIKEY,
//     CREDENTIAL, AUTH, COOKIE, SESSION, PRIVATE or PAT as one of its
//     '_'-separated words, or KEY as its last.
//
// The header and field forms are found inside JSON strings too, escaped
// once or more: an Authorization line after a "\n" inside a JSON-encoded
// HTTP body is redacted to the end of its line. Redact keeps valid JSON
// valid, and redacting twice gives what redacting once did.
//
// A runner passes every record it logs through Redact (see
// [Options.Logger]); package transcript passes every string it writes, and
// package mcptool every record it logs, with the standard error of the
// servers it runs. Redact is a safety net, not a guarantee: it cannot
// recognise a secret of the application's own.
func Redact(s string) string { return redact.String(s) }

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
// takes them: boxing their attributes for a logger that drops them was a
// few allocations per turn (issue 15, CPU per turn).
func logEvent(ctx context.Context, log runLogger, e Event) {
	switch e := e.(type) {
	case RequestSent:
		if log.Enabled(ctx, log.routine) {
			log.Log(ctx, log.routine, "toolrun: request sent", "turn", e.Turn, "model", string(e.Params.Model),
				"messages", len(e.Params.Messages), "streamed", e.Streamed)
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
			log.Log(ctx, log.routine, "toolrun: response received", "turn", e.Turn,
				"stop_reason", string(e.Message.StopReason), "input_tokens", e.Message.Usage.InputTokens,
				"output_tokens", e.Message.Usage.OutputTokens, "duration", e.Duration)
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
				log.Log(ctx, log.routine, "toolrun: tool call finished", "tool", res.Call.Name, "tool_use_id", res.Call.ID,
					"turn", e.Turn, "duration", res.Duration, "is_error", res.IsError)
			}
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
		if res.StopReason == StopEndTurn && !log.Enabled(ctx, log.routine) {
			return
		}
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
