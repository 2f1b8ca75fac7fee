package jsonschema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// compileTest compiles one schema given as JSON text.
func compileTest(t *testing.T, schema string) *Schema {
	t.Helper()
	doc, err := UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := NewCompiler()
	if err := c.AddResource("https://example.invalid/s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("https://example.invalid/s.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func decodeTest(t *testing.T, s string) any {
	t.Helper()
	v, err := UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// intList is a JSON array of n integers from start, with last at the end
// instead of the last one when last is not "".
func intList(start, n int, last string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == n-1 && last != "" {
			b.WriteString(last)
		} else {
			fmt.Fprint(&b, start+i)
		}
	}
	b.WriteByte(']')
	return b.String()
}

// TestCostlyStepStopsWithinSlack: a single step that compares or hashes
// large values (const, enum, uniqueItems) looks at the context as it goes.
// The context is cancelled once the work is under way (after 1000 values
// compared or hashed); the validation must return ctx's error after at
// most CheckEvery more, where it used to finish the whole
// comparison (minutes for the inputs of the issue).
func TestCostlyStepStopsWithinSlack(t *testing.T) {
	const big = 50_000
	bigArray := intList(0, big, "")
	tests := []struct {
		name, schema, input string
	}{
		{"const against a large value", `{"const":` + bigArray + `}`, intList(0, big, "-1")},
		{"enum of large values", `{"items":{"enum":[` + bigArray + `,` + intList(1, big, "") + `]}}`, `[` + intList(0, big, "-1") + `]`},
		{"enum of many objects", `{"items":{"enum":` + objects(20_000, "") + `}}`, objects(1000, `"x"`)},
		{"uniqueItems of 20 large items", `{"uniqueItems":true}`, `[` + strings.Repeat(intList(0, 20_000, "")+",", 19) + intList(0, 20_000, "-1") + `]`},
		{"uniqueItems of many large items", `{"uniqueItems":true}`, `[` + strings.Repeat(intList(0, 2_000, "")+",", 99) + intList(0, 2_000, "-1") + `]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sch := compileTest(t, tt.schema)
			v := decodeTest(t, tt.input)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			compared, atCancel := 0, -1
			testHookValue = func() {
				compared++
				if compared == 1000 {
					atCancel = compared
					cancel()
				}
			}
			defer func() { testHookValue = nil }()
			err := sch.ValidateBounded(ctx, v, Bounds{})
			if atCancel < 0 {
				t.Fatalf("the validation looked at only %d values, want a costly step (got %v)", compared, err)
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", err)
			}
			if after := compared - atCancel; after > CheckEvery {
				t.Errorf("looked at %d values after the context ended, want at most %d", after, CheckEvery)
			}
		})
	}
}

// objects is a JSON array of n objects, distinct from each other, each
// with a field of value last when last is not "".
func objects(n int, last string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"item %d","tags":["a","b","c"],"size":{"w":1,"h":2}`, i, i)
		if last != "" {
			fmt.Fprintf(&b, `,"last":%s`, last)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String()
}

// TestEnumLookupIsHashed: a value is compared with the enum items it may
// equal, not with every item, so 255 integers against a 100,000-item enum
// take a few hundred comparisons, not 25 million.
func TestEnumLookupIsHashed(t *testing.T) {
	sch := compileTest(t, `{"items":{"enum":`+intList(0, 100_000, "")+`}}`)
	v := decodeTest(t, intList(100_000, 255, ""))
	compared := 0
	testHookValue = func() { compared++ }
	defer func() { testHookValue = nil }()
	err := sch.ValidateBounded(t.Context(), v, Bounds{})
	if _, ok := err.(*ValidationError); !ok {
		t.Fatalf("got %v, want a *ValidationError (no item is in the enum)", err)
	}
	if compared > 255*4 {
		t.Errorf("compared %d values, want at most %d", compared, 255*4)
	}
	if err := sch.ValidateBounded(t.Context(), decodeTest(t, intList(99_745, 255, "")), Bounds{}); err != nil {
		t.Errorf("items in the enum: got %v, want valid", err)
	}
}

// TestPanicIsAnError: a panic inside the validator comes back as a
// *PanicError naming the location, not as a panic.
func TestPanicIsAnError(t *testing.T) {
	sch := compileTest(t, `{"properties":{"lat":{"minimum":0}}}`)
	// A number big.Rat refuses (an exponent beyond 10^6), which used to
	// panic on a nil *big.Rat, stops the validation with an error.
	err := sch.ValidateBounded(t.Context(), map[string]any{"lat": json.Number("1e1000001")}, Bounds{})
	if err == nil || !strings.Contains(err.Error(), "cannot be compared exactly") {
		t.Errorf("got %v, want an error that the number cannot be compared", err)
	}

	// Any other panic, here injected at the evaluation of /a/b, is a
	// *PanicError naming where.
	ext := compileTest(t, `{"properties":{"a":{"properties":{"b":{"type":"string"}}}}}`)
	b := newBudget(t.Context(), Bounds{})
	b.testHookCharge = func(units int) {
		if len(b.loc) == 2 {
			panic("boom")
		}
	}
	err = ext.validateBudget(map[string]any{"a": map[string]any{"b": "x"}}, b)
	perr, ok := err.(*PanicError)
	if !ok {
		t.Fatalf("got %v, want a *PanicError", err)
	}
	if got, want := perr.Error(), "the validator failed at /a/b: boom"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestNumbersBigRatRefuses: a number big.Rat cannot hold (an exponent
// beyond 10^6) is hashed and compared by its text in uniqueItems, const and
// enum, where it used to panic on a nil *big.Rat; keywords that need its
// value stop the validation with an error.
func TestNumbersBigRatRefuses(t *testing.T) {
	huge := json.Number("1e1000001")
	items := make([]any, 21)
	for i := range items {
		items[i] = json.Number(fmt.Sprint(i))
	}
	items[20] = huge
	tests := []struct {
		name, schema string
		v            any
		valid        bool
	}{
		{"uniqueItems, distinct", `{"uniqueItems":true}`, items, true},
		{"uniqueItems, repeated", `{"uniqueItems":true}`, append(slices.Clone(items), huge), false},
		{"const", `{"const":1}`, huge, false},
		{"enum", `{"enum":[1,2]}`, huge, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := compileTest(t, tt.schema).ValidateBounded(t.Context(), tt.v, Bounds{})
			if err != nil {
				if _, ok := err.(*ValidationError); !ok {
					t.Fatalf("got %v, want a verdict", err)
				}
			}
			if got := err == nil; got != tt.valid {
				t.Errorf("valid %v, want %v (%v)", got, tt.valid, err)
			}
		})
	}
	for _, kw := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"} {
		err := compileTest(t, `{"`+kw+`":1}`).ValidateBounded(t.Context(), huge, Bounds{})
		if err == nil || !strings.Contains(err.Error(), "cannot be compared exactly") {
			t.Errorf("%s: got %v, want an error that the number cannot be compared", kw, err)
		}
	}
}

// TestPatternTimeout: a backtracking match gets the least of what is left
// of the pattern time, of the work budget at UnitTime a unit, and of the
// time to the context's deadline, so that it stops by itself near the
// deadline instead of running its engine's whole timeout past it.
func TestPatternTimeout(t *testing.T) {
	soon, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	tests := []struct {
		name                  string
		ctx                   context.Context
		bounds                Bounds
		pattern               time.Duration // already spent
		units                 int           // already spent
		wantAtMost, wantLeast time.Duration
	}{
		{"no limits", t.Context(), Bounds{}, 0, 0, 0, 0},
		{"pattern time left", t.Context(), Bounds{MaxPatternTime: time.Second}, 900 * time.Millisecond, 0, 100 * time.Millisecond, 100 * time.Millisecond},
		{"work left", t.Context(), Bounds{MaxPatternTime: time.Second, MaxWork: 1_000_000}, 0, 970_000, 30 * time.Millisecond, 30 * time.Millisecond},
		{"deadline", soon, Bounds{MaxPatternTime: time.Second, MaxWork: 1_000_000}, 0, 0, 20 * time.Millisecond, time.Millisecond},
		{"spent", t.Context(), Bounds{MaxPatternTime: time.Second}, 2 * time.Second, 0, time.Millisecond, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBudget(tt.ctx, tt.bounds)
			b.pattern, b.units = tt.pattern, tt.units
			got := b.patternTimeout()
			if got > tt.wantAtMost || got < tt.wantLeast {
				t.Errorf("got %v, want between %v and %v", got, tt.wantLeast, tt.wantAtMost)
			}
		})
	}
}

// TestWorkIsCharged: a step is charged by the items or properties of its
// value, a string by its length where it is hashed, compared or counted,
// and a charge that would pass MaxWork stops the validation uncounted.
func TestWorkIsCharged(t *testing.T) {
	long := strings.Repeat("x", 100*1024)
	tests := []struct {
		name, schema string
		v            any
		want         int
	}{
		{"an array's items", `{"minItems":1}`, []any{true, true, true}, 1 + 3},
		{"an object's properties", `{"minProperties":1}`, map[string]any{"a": 1, "b": 2}, 1 + 2},
		{"required names", `{"required":["a","b","c"]}`, map[string]any{}, 1 + 3},
		{"a string hashed", `{"enum":["y"]}`, long, 1 + 1 + 100},
		{"a string counted", `{"minLength":1}`, long, 1 + 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got int
			_ = compileTest(t, tt.schema).ValidateBounded(t.Context(), tt.v, Bounds{Work: &got})
			if got != tt.want {
				t.Errorf("got %d units, want %d", got, tt.want)
			}
		})
	}
	var got int
	err := compileTest(t, `{"minLength":1}`).ValidateBounded(t.Context(), long, Bounds{MaxWork: 100, Work: &got})
	if !errors.Is(err, ErrBudget) || got != 1 {
		t.Errorf("got %v after %d units, want ErrBudget after 1", err, got)
	}
}
