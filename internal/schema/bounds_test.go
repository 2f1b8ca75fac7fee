package schema

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func mustCompile(t *testing.T, raw string) *Schema {
	t.Helper()
	s, err := Compile([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// backtracking is a pattern only an ECMAScript engine compiles (the
// lookahead), with nested quantifiers that take exponential time on a run
// of "a" that ends in another character.
const backtracking = `^(?=a)(a+)+$`

// stringsInput is {"xs":[...]} with n copies of s.
func stringsInput(n int, s string) []byte {
	return []byte(`{"xs":[` + strings.TrimSuffix(strings.Repeat(`"`+s+`",`, n), ",") + `]}`)
}

// TestPatternStopsAtDeadline: 255 strings of 34 characters against a
// backtracking pattern used to hold a validation 55 s past its deadline
// (each match ran to its timeout, and the context was read every 256
// steps). The context is cancelled once the first match is under way; the
// validation must return ctx's error without starting another match, and
// without waiting for the one in progress, which ends by its own timeout.
func TestPatternStopsAtDeadline(t *testing.T) {
	for _, where := range []string{"pattern", "patternProperties"} {
		t.Run(where, func(t *testing.T) {
			schema := `{"type":"object","properties":{"xs":{"items":{"type":"string","pattern":"` + backtracking + `"}}}}`
			input := stringsInput(255, strings.Repeat("a", 33)+"!")
			if where == "patternProperties" {
				schema = `{"type":"object","properties":{"xs":{"items":{"type":"object","patternProperties":{"` + backtracking + `":{}}}}}}`
				input = []byte(`{"xs":[` + strings.TrimSuffix(strings.Repeat(`{"`+strings.Repeat("a", 33)+`!":1},`, 255), ",") + `]}`)
			}
			s := mustCompile(t, schema)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			before := matchesStarted.Load()
			done := make(chan error, 1)
			go func() {
				_, err := s.Validate(ctx, input)
				done <- err
			}()
			for matchesStarted.Load() == before {
				select {
				case err := <-done:
					t.Fatalf("returned %v before any match began", err)
				default:
					runtime.Gosched()
				}
			}
			cancel()
			err := <-done
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", err)
			}
			// The first match may have ended on its own before the
			// cancellation was seen, and a second begun; never more.
			if n := matchesStarted.Load() - before; n > 2 {
				t.Errorf("%d matches started, want at most 2", n)
			}
		})
	}
}

// TestPatternTimeTotal: the backtracking matches of one validation stop at
// MaxPatternTime in total, not after one timeout per string. The clock is
// the schema's, advanced 60 ms by each reading, so every match "takes"
// 60 ms and the 17th passes 1 s.
func TestPatternTimeTotal(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"xs":{"items":{"type":"string","pattern":"^(?=a)a+$"}}}}`)
	var clock time.Time
	s.now = func() time.Time {
		clock = clock.Add(60 * time.Millisecond)
		return clock
	}
	before := matchesStarted.Load()
	_, err := s.Validate(t.Context(), stringsInput(255, "aaa"))
	if !errors.Is(err, ErrPatternTime) {
		t.Fatalf("got %v, want ErrPatternTime", err)
	}
	if got, want := matchesStarted.Load()-before, int32(17); got != want {
		t.Errorf("%d matches ran, want %d", got, want)
	}
}

// TestNumberLimits: numbers are compared exactly within MaxNumberDigits and
// MaxNumberExponent, and refused past them (or, for an input, beyond a
// float64) with a violation before any keyword sees them. A 1-million-digit
// decimal against multipleOf took 6.5 s and 2.1 GB in one step.
func TestNumberLimits(t *testing.T) {
	digits := func(n int) string { return "0." + strings.Repeat("1", n-1) }
	limits := "a number of at most 1000 digits with an exponent between -1000 and 1000"
	float := "a number between -1.7976931348623157e308 and 1.7976931348623157e308 (the largest a 64-bit float holds)"
	tests := []struct {
		name, schema, input string
		want                []Violation
	}{
		{"1,000,000 digits against multipleOf", `{"properties":{"n":{"multipleOf":0.01}}}`, `{"n":` + digits(1_000_000) + `}`,
			[]Violation{{"/n", limits, digits(58) + "… (number)"}}},
		{"1000 digits are compared exactly", `{"properties":{"n":{"multipleOf":0.01}}}`, `{"n":` + digits(1000) + `}`,
			[]Violation{{"/n", "a multiple of 0.01", digits(58) + "… (number)"}}},
		{"1001 digits", `{"properties":{"n":{"minimum":0}}}`, `{"n":` + digits(1001) + `}`,
			[]Violation{{"/n", limits, digits(58) + "… (number)"}}},
		{"exponent -1000", `{"properties":{"n":{"multipleOf":1e-1000}}}`, `{"n":3e-1000}`, nil},
		{"exponent -1001", `{"properties":{"n":{"maximum":1}}}`, `{"n":1e-1001}`, []Violation{{"/n", limits, "1e-1001 (number)"}}},
		{"exponent 1000001", `{"properties":{"n":{"maximum":1}}}`, `{"n":1E+1000001}`, []Violation{{"/n", limits, "1E+1000001 (number)"}}},
		{"exponent of many digits", `{}`, `{"n":1e-00000000000000000000000000001}`, nil},
		{"exponent too long", `{}`, `{"n":1e123456789012345678901234567890}`, []Violation{{"/n", limits, "1e123456789012345678901234567890 (number)"}}},
		{"beyond float64", `{}`, `{"n":[1e308,1e309,-1e309,1e-400]}`, []Violation{{"/n/1", float, "1e309 (number)"}, {"/n/2", float, "-1e309 (number)"}}},
		{"integers beyond 2^53 keep their digits", `{"properties":{"n":{"maximum":12345678901234567890122}}}`, `{"n":12345678901234567890123}`,
			[]Violation{{"/n", "a number <= 12345678901234567890122", "12345678901234567890123 (number)"}}},
		{"uniqueItems over 20 items", `{"properties":{"n":{"uniqueItems":true}}}`, `{"n":[` + strings.Repeat("1e-5,", 20) + `0.00001]}`,
			[]Violation{{"/n", "unique items", "items 0 and 1 are equal"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.schema)
			got, err := s.Validate(t.Context(), []byte(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSchemaNumberLimits: a schema's number past the limits is refused
// when the schema is compiled; it used to be dropped without a word (the
// keyword then checked nothing).
func TestSchemaNumberLimits(t *testing.T) {
	for _, schema := range []string{
		`{"properties":{"n":{"minimum":1e1000001}}}`,
		`{"properties":{"n":{"multipleOf":1e-1001}}}`,
		`{"properties":{"n":{"enum":[0.` + strings.Repeat("1", 1000) + `]}}}`,
	} {
		_, err := Compile([]byte(schema))
		if err == nil || !strings.Contains(err.Error(), "the schema's number at /properties/n/") {
			t.Errorf("Compile(%.60s): got %v, want an error naming the number", schema, err)
		}
	}
}
