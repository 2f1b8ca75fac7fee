package schema

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of the texts in a Violation.
const (
	maxGotRunes      = 60  // a value rendered in Got
	maxExpectedRunes = 500 // an enum, const, pattern or name rendered in Expected
)

// describeValue renders v for Violation.Got: compact JSON cut to about 60
// characters, followed by its JSON type, as in `"abc" (string)` or
// `3.5 (number)`. Null is just `null`.
func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return quoteLimited(v, maxGotRunes) + " (string)"
	case json.Number:
		return truncateRunes(string(v), maxGotRunes) + " (number)"
	case bool:
		return strconv.FormatBool(v) + " (boolean)"
	case []any:
		return renderLimited(v, maxGotRunes) + " (array)"
	case map[string]any:
		return renderLimited(v, maxGotRunes) + " (object)"
	}
	return renderLimited(v, maxGotRunes)
}

// renderLimited renders v as compact JSON of at most n runes, ending in "…"
// when cut.
func renderLimited(v any, n int) string {
	// A rune takes at most 4 bytes, so 4n+4 bytes are enough to cut at n
	// runes; appendJSON stops early on large values.
	return truncateRunes(string(appendJSON(nil, v, 4*n+4)), n)
}

// quoteLimited renders s as a JSON string; when s is longer than n runes it
// is cut and "…" is put inside the quotes.
func quoteLimited(s string, n int) string {
	cut := false
	if utf8.RuneCountInString(s) > n {
		s = truncateRunes(s, n)
		s = strings.TrimSuffix(s, "…")
		cut = true
	}
	b := appendQuoted(nil, s)
	if cut {
		b = append(b[:len(b)-1], "…\""...)
	}
	return string(b)
}

// truncateRunes cuts s to n runes, the last being "…", when s is longer.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for range n - 1 {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i] + "…"
}

// appendJSON appends compact JSON for v, with object keys sorted, giving up
// once b is longer than limit bytes.
func appendJSON(b []byte, v any, limit int) []byte {
	if len(b) > limit {
		return b
	}
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case string:
		return appendQuoted(b, v)
	case json.Number:
		return append(b, v...)
	case float64:
		return append(b, formatFloat(v)...)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if len(b) > limit {
				return b
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e, limit)
		}
		return append(b, ']')
	case map[string]any:
		b = append(b, '{')
		for i, k := range slices.Sorted(maps.Keys(v)) {
			if len(b) > limit {
				return b
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = appendQuoted(b, k)
			b = append(b, ':')
			b = appendJSON(b, v[k], limit)
		}
		return append(b, '}')
	}
	data, err := marshalRecovered(v)
	if err != nil {
		return fmt.Appendf(b, "%v", v)
	}
	return append(b, data...)
}

// appendQuoted appends s as a JSON string, escaping only what JSON requires.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"':
			b = append(b, `\"`...)
		case r == '\\':
			b = append(b, `\\`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r < 0x20 || r == 0x7f:
			b = fmt.Appendf(b, `\u%04x`, r)
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// marshalRecovered is json.Marshal for arbitrary values from a schema
// literal, whose MarshalJSON methods might panic.
func marshalRecovered(v any) (data []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("marshaling %T: %v", v, r)
		}
	}()
	return json.Marshal(v)
}

// formatFloat formats f the way encoding/json does.
func formatFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(nil, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return string(b)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return strconv.Itoa(n) + " " + strings.TrimSuffix(noun, "y") + "ies"
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// oneLine joins the lines of s with "; ", collapses runs of white space and
// cuts the result to at most n runes, so that it fits on one line.
func oneLine(s string, n int) string {
	var lines []string
	for line := range strings.Lines(s) {
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			lines = append(lines, line)
		}
	}
	return truncateRunes(strings.Join(lines, "; "), n)
}
