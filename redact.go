package toolrun

import "github.com/toolrun/toolrun/internal/redact"

// Redact returns s with each credential it recognises replaced by a mark:
// the same redaction the runner applies to every record it logs (see
// [Options].Logger), and that package transcript applies to what it
// writes. Integrations that record what a run did elsewhere (a trace, a
// metric, a report of their own) pass error messages and model-chosen
// names through Redact, so that each sink removes the same things.
//
// Redact keeps valid JSON valid, and redacting twice gives what redacting
// once did. It is a safety net, not a guarantee: it cannot recognise a
// secret of the application's own.
func Redact(s string) string { return redact.String(s) }
