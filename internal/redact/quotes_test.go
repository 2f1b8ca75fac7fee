package redact_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolrun/toolrun/internal/redact"
)

// TestQuotedValues: a quoted value ends at its own closing quote, not at
// the other quote inside it, an escaped quote or a doubled one; an
// unterminated quote runs to the end of the line; in a JSON string the
// quote that closes the string ends the value. Before, password='hun"ter2'
// left "ter2' in the text.
func TestQuotedValues(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"double inside single", `password='hun"ter2' next`, `password='[REDACTED]' next`},
		{"single inside double", `password="hun'ter2" next`, `password="[REDACTED]" next`},
		{"yaml style", `password: 'hun"ter2' next`, `password: '[REDACTED]' next`},
		{"python dict", `{'password': 'hun"ter2', 'x': 1}`, `{'password': '[REDACTED]', 'x': 1}`},
		{"backslash-escaped single", `password='hun\'ter2' next`, `password='[REDACTED]' next`},
		{"backslash-escaped double", `password="hun\"ter2" next`, `password="[REDACTED]" next`},
		{"doubled single", `password='it''s-secret' next`, `password='[REDACTED]' next`},
		{"empty single", `password='' user='bob'`, `password='' user='bob'`},
		{"unterminated single", `password='hunter2 and the rest`, `password='[REDACTED]`},
		{"unterminated with a double inside", `password='hun"ter2`, `password='[REDACTED]`},
		{"unquoted with a double inside", `password=hun"ter2 next`, `password=[REDACTED] next`},
		{"unquoted with a single inside", `password=hun'ter2 next`, `password=[REDACTED] next`},
		{"in a JSON string, single quotes", `{"msg":"password='hun\"ter2' next"}`, `{"msg":"password='[REDACTED]' next"}`},
		{"in a JSON string, escaped doubles", `{"msg":"password=\"hun'ter2\" next"}`, `{"msg":"password=\"[REDACTED]\" next"}`},
		{"in a JSON string, unterminated", `{"msg":"password='hunter2"}`, `{"msg":"password='[REDACTED]"}`},
		{"in a JSON string, unquoted", `{"msg":"password=hunter2","n":1}`, `{"msg":"password=[REDACTED]","n":1}`},
		{"in a JSON string, nested escape", `{"msg":"password=\"hun\\\"ter2\" next"}`, `{"msg":"password=\"[REDACTED]\" next"}`},
		{"JSON in a string", `token="{\"a\":\"sec\"}" next`, `token="[REDACTED]" next`},
		{"JSON key", `{"password":"hun'ter2","x":"y"}`, `{"password":"[REDACTED]","x":"y"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := redact.String(tt.in)
			if got != tt.want {
				t.Errorf("String(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			if again := redact.String(got); again != got {
				t.Errorf("redacting twice gives %s, once %s", again, got)
			}
			if json.Valid([]byte(tt.in)) && !json.Valid([]byte(got)) {
				t.Errorf("valid JSON %s became invalid: %s", tt.in, got)
			}
		})
	}
}

// TestLongLineOfKeys: a line of keys with no value, or with each value
// on the next line, takes one pass. Each key used to measure its line's
// indentation by reading back to the line's start (or to the text's, for
// an escaped newline), so 4 MB of them took hours, not milliseconds: this
// test then runs past go test's timeout.
func TestLongLineOfKeys(t *testing.T) {
	for _, unit := range []string{`password=\'`, "password:\n", "password: |\n", `password:\n`} {
		s := strings.Repeat(unit, 4<<20/len(unit))
		if got := redact.String(s); got != s {
			t.Errorf("String(%q × %d) changed the text", unit, len(s)/len(unit))
		}
	}
}
