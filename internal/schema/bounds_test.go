package schema

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
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

// fanOut is a schema whose property x applies leaf to the same value
// 10^levels times, through $refs to allOf of ten $refs each.
func fanOut(leaf string, levels int) string {
	var b strings.Builder
	b.WriteString(`{"$defs":{"l0":` + leaf)
	for k := 1; k <= levels; k++ {
		fmt.Fprintf(&b, `,"l%d":{"allOf":[`, k)
		for i := range 10 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"$ref":"#/$defs/l%d"}`, k-1)
		}
		b.WriteString(`]}`)
	}
	fmt.Fprintf(&b, `},"properties":{"x":{"$ref":"#/$defs/l%d"}}}`, levels)
	return b.String()
}

// intArray is a JSON array of the integers 0 to n-1.
func intArray(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i))
	}
	b.WriteByte(']')
	return b.String()
}

// objectOf is a JSON object of n keys.
func objectOf(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	b.WriteByte('}')
	return b.String()
}

// countWork makes s report the units of work of each validation.
func countWork(s *Schema) *int {
	var units int
	s.work = func(n int) { units = n }
	return &units
}

// TestWorkBudget: the budget counts the work inside an evaluation, so an
// input under 1 MB that a small schema applies whole-input keywords to
// many times over stops at MaxWork units (about a second of CPU) with
// ErrBudget. Counting evaluations alone, the uniqueItems case took 52-58 s
// and 18 GiB, enum 32 s and a pattern 15 s; a pattern of 632 RE2
// instructions took 3 s on 900 KB, and one of bounded repeats 8.7 s on
// 60 KB. Each is checked by the units counted, not by a clock.
func TestWorkBudget(t *testing.T) {
	long := strings.Repeat("a", 900_000)
	var required []string
	for i := range 3000 {
		required = append(required, fmt.Sprintf(`"p%d"`, i))
	}
	tests := []struct {
		name, schema, input string
	}{
		{"uniqueItems over 60,000 integers, 1000 times", fanOut(`{"uniqueItems":true}`, 3), `{"x":` + intArray(60_000) + `}`},
		{"enum of an array, against 60,000 integers, 1000 times", fanOut(`{"enum":[[1]]}`, 3), `{"x":` + intArray(60_000) + `}`},
		{"const of an array, 100 times", fanOut(`{"const":`+intArray(60_000)+`}`, 2), `{"x":` + intArray(60_000) + `}`},
		{"a pattern on 900 KB, 1000 times", fanOut(`{"pattern":"[0-9]x"}`, 3), `{"x":"` + long + `"}`},
		{"minLength on 900 KB, 10,000 times", fanOut(`{"minLength":1}`, 4), `{"x":"` + long + `"}`},
		{"a domain pattern on 900 KB", `{"properties":{"x":{"pattern":"[a-z0-9.-]{1,253}\\.[a-z]{2,63}"}}}`, `{"x":"` + long + `"}`},
		{"230 bytes of bounded repeats on 60 KB", `{"properties":{"x":{"pattern":"` + strings.Repeat(`(?:[a-z]{1,30}\\.){1,30}`, 10) + `"}}}`,
			`{"x":"` + strings.Repeat("a", 60_000) + `"}`},
		{"an object of 30,000 keys, 1000 times", fanOut(`{"unevaluatedProperties":true}`, 3), `{"x":` + objectOf(30_000) + `}`},
		{"3000 required names, 10,000 times", fanOut(`{"required":[`+strings.Join(required, ",")+`]}`, 4), `{"x":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.schema)
			units := countWork(s)
			_, err := s.Validate(t.Context(), []byte(tt.input))
			if !errors.Is(err, ErrBudget) {
				t.Errorf("got %v, want ErrBudget", err)
			}
			if *units > MaxWork {
				t.Errorf("did %d units of work, want at most %d", *units, MaxWork)
			}
		})
	}
}

// TestWorkBudgetFitsLargeInputs: a 1 MB input that a schema checks once
// per item stays well within the budget.
func TestWorkBudgetFitsLargeInputs(t *testing.T) {
	s := mustCompile(t, `{"properties":{"x":{"type":"array","uniqueItems":true,"items":{"type":"integer","minimum":0}},"s":{"type":"string","maxLength":1000000,"pattern":"^[a-z]+$"}}}`)
	units := countWork(s)
	vs, err := s.Validate(t.Context(), []byte(`{"x":`+intArray(90_000)+`,"s":"`+strings.Repeat("a", 400_000)+`"}`))
	if err != nil || vs != nil {
		t.Fatalf("got %v, %v; want valid", vs, err)
	}
	if *units > MaxWork/2 {
		t.Errorf("did %d units of work, want at most half of MaxWork (%d)", *units, MaxWork/2)
	}
}

// flipCtx is a context whose Err becomes context.Canceled once RE2 has
// read after runes, as if its deadline passed mid-match.
type flipCtx struct {
	context.Context
	after int64
}

func (c flipCtx) Err() error {
	if runesCharged.Load() >= c.after {
		return context.Canceled
	}
	return nil
}

// TestRE2StopsAtDeadline: an RE2 match of a long string reads it through
// the budget, so a context that ends mid-match stops it within CheckEvery
// units; the match of 900 KB against a 632-instruction pattern used to run
// to its end, 2.3 s past a 1 s deadline.
func TestRE2StopsAtDeadline(t *testing.T) {
	const pattern = `[a-z0-9.-]{1,253}\.[a-z]{2,63}`
	s := mustCompile(t, `{"properties":{"x":{"pattern":"`+strings.ReplaceAll(pattern, `\`, `\\`)+`"}}}`)
	re, err := compilePattern(pattern)
	if err != nil {
		t.Fatal(err)
	}
	perKRune := re.(re2Regexp).perKRune
	start := runesCharged.Load()
	ctx := flipCtx{t.Context(), start + 10_000}
	_, err = s.Validate(ctx, []byte(`{"x":"`+strings.Repeat("a", 900_000)+`"}`))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	// After the context ends: at most CheckEvery units of reading, and
	// the chunk under way.
	slack := int64((CheckEvery+64)*1024/perKRune + 64)
	if read := runesCharged.Load() - start; read > 10_000+slack {
		t.Errorf("RE2 read %d runes, want at most %d", read, 10_000+slack)
	}
}

// TestPatternEngines: RE2 takes a pattern whose program is within
// MaxRE2Program; bounded repeats that would unroll past it go to the
// backtracking engine, whose repeats stay loops and whose matches are
// timed out.
func TestPatternEngines(t *testing.T) {
	tests := []struct {
		pattern string
		wantRE2 bool
	}{
		{`[a-z0-9.-]{1,253}\.[a-z]{2,63}`, true},
		{strings.Repeat(`(?:[a-z]{1,30}\.){1,30}`, 10), true},
		{strings.Repeat(`[a-z0-9]{1,999}`, 17), false},
		{`^(?!admin)\w+$`, false},
	}
	for _, tt := range tests {
		re, err := compilePattern(tt.pattern)
		if err != nil {
			t.Fatal(err)
		}
		_, gotRE2 := re.(re2Regexp)
		if gotRE2 != tt.wantRE2 {
			t.Errorf("%.40s: matched by RE2 %v, want %v", tt.pattern, gotRE2, tt.wantRE2)
		}
	}
}
