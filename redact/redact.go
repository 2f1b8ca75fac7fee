// Package redact takes credentials out of text before it is recorded: the
// redaction the runner applies to every record it logs (see
// toolrun.Options.Logger), and that package transcript, package mcptool,
// the server and the OpenTelemetry integration apply to what they write.
// A program that records what a run did elsewhere (a trace, a metric, a
// report of its own) passes error messages and model-chosen names through
// [String], or its log records through a handler from [NewHandler], so that
// each sink removes the same things.
//
// Redaction is a safety net, not a guarantee: it cannot recognise a secret
// of the application's own.
package redact

import (
	"log/slog"

	"github.com/toolrun/toolrun/internal/redact"
)

// Mark replaces each secret that [String] finds.
const Mark = redact.Mark

// String returns s with each credential it recognises replaced by [Mark]:
// the values of Authorization, Proxy-Authorization (whose scheme is kept),
// Cookie and Set-Cookie headers; of fields whose names end in api_key,
// access_key, secret_key, private_key, secret, password, passwd,
// passphrase, token, credential(s) or auth, in text, HTTP dumps, JSON,
// configuration files and query strings; keys and tokens known by their
// shape (sk-ant-…, other vendors' keys, JSON Web Tokens, bearer and basic
// credentials); a URL's password; a PEM private key's body; and the values
// (8 bytes or more) of environment variables whose names say they hold
// secrets. These are found in JSON strings too, however often escaped.
//
// String keeps valid JSON valid, and redacting twice gives what redacting
// once did.
func String(s string) string { return redact.String(s) }

// NewHandler returns a handler that passes each record to h with [String]
// applied to its message and to every string, error, []byte and
// json.RawMessage value, in groups too, and to the text of any other value
// that holds a secret; a handler from NewHandler is returned as it is. The
// handler recovers a panic of h, drops that record and reports the first
// such panic on standard error: h runs on goroutines the runner started,
// where a panic would end the process.
func NewHandler(h slog.Handler) slog.Handler { return redact.NewHandler(h) }
