package schema

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/toolrun/toolrun/internal/jsonschema"
	"github.com/toolrun/toolrun/internal/jsonschema/kind"
)

// Violation is one failing value of an input: where, what the schema
// expects there and what was given.
type Violation struct {
	Pointer  string // RFC 6901 JSON Pointer into the input, "" for the root
	Expected string
	Got      string
}

// Texts of violations that do not come from a single keyword's values.
const (
	expectNoAdditional = "no additional properties"
	expectNothing      = "no value (the schema allows none here)"
)

func sortViolations(vs []Violation) []Violation {
	slices.SortFunc(vs, func(a, b Violation) int {
		return cmp.Or(
			strings.Compare(a.Pointer, b.Pointer),
			strings.Compare(a.Expected, b.Expected),
			strings.Compare(a.Got, b.Got))
	})
	return slices.Compact(vs)
}

// explainer turns the engine's tree of errors into violations: one per
// failing leaf, located by instance pointer, with composite keywords
// (allOf, $ref, if/then, …) explained by their failing leaves.
type explainer struct {
	root any
	out  []Violation
}

var english = message.NewPrinter(language.English)

func (e *explainer) add(loc []string, expected, got string) {
	e.out = append(e.out, Violation{Pointer: pointer(loc), Expected: expected, Got: got})
}

// value returns the input's value at loc.
func (e *explainer) value(loc []string) any {
	v := e.root
	for _, tok := range loc {
		switch c := v.(type) {
		case map[string]any:
			v = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

func (e *explainer) explain(err *jsonschema.ValidationError) {
	if err == nil || err.ErrorKind == nil {
		return
	}
	loc := err.InstanceLocation
	v := e.value(loc)
	switch k := err.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference, *kind.ContentSchema:
		for _, c := range err.Causes {
			e.explain(c)
		}
	case *kind.AnyOf:
		e.alternatives(err, "anyOf")
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			e.alternatives(err, "oneOf")
			return
		}
		e.add(loc, "exactly one oneOf option to match", fmt.Sprintf("%s, which matches options %d and %d", describeValue(v), k.Subschemas[0]+1, k.Subschemas[1]+1))
	case *kind.Required:
		for _, name := range k.Missing {
			e.add(append(slices.Clip(loc), name), "required property "+quoteLimited(name, maxExpectedRunes), "missing")
		}
	case *kind.DependentRequired:
		for _, name := range k.Missing {
			e.add(append(slices.Clip(loc), name), fmt.Sprintf("required property %s (since %s is present)", quoteLimited(name, maxExpectedRunes), quoteLimited(k.Prop, maxExpectedRunes)), "missing")
		}
	case *kind.Dependency:
		for _, name := range k.Missing {
			e.add(append(slices.Clip(loc), name), fmt.Sprintf("required property %s (since %s is present)", quoteLimited(name, maxExpectedRunes), quoteLimited(k.Prop, maxExpectedRunes)), "missing")
		}
	case *kind.AdditionalProperties:
		for _, name := range k.Properties {
			e.add(append(slices.Clip(loc), name), expectNoAdditional, "property "+quoteLimited(name, maxGotRunes))
		}
	case *kind.PropertyNames:
		sub := explainer{root: k.Property}
		for _, c := range err.Causes {
			sub.explain(c)
		}
		var want []string
		for _, w := range sub.out {
			want = append(want, w.Expected)
		}
		expected := "a property name valid against propertyNames"
		if len(want) > 0 {
			expected = "a property name that is " + strings.Join(slices.Compact(slices.Sorted(slices.Values(want))), " and ")
		}
		e.add(append(slices.Clip(loc), k.Property), expected, "property "+quoteLimited(k.Property, maxGotRunes))
	default:
		expected, got := leafText(err.ErrorKind, v)
		e.add(loc, expected, got)
	}
}

// alternatives explains a failed anyOf or oneOf by the failing leaves of
// every option. When every leaf sits at the same value, the options merge
// into one line: `type "integer" or type "null"`. Otherwise each leaf says
// which option it belongs to.
func (e *explainer) alternatives(err *jsonschema.ValidationError, kw string) {
	loc := err.InstanceLocation
	p := pointer(loc)
	branches := make([][]Violation, len(err.Causes))
	same := true
	for i, c := range err.Causes {
		sub := explainer{root: e.root}
		sub.explain(c)
		if len(sub.out) == 0 {
			sub.out = []Violation{{Pointer: p, Expected: fmt.Sprintf("a value valid against %s option %d", kw, i+1), Got: describeValue(e.value(loc))}}
		}
		branches[i] = sortViolations(sub.out)
		for _, v := range sub.out {
			same = same && v.Pointer == p
		}
	}
	if same {
		var want []string
		for _, b := range branches {
			var parts []string
			for _, v := range b {
				parts = append(parts, v.Expected)
			}
			want = append(want, strings.Join(parts, " and "))
		}
		want = slices.Compact(want)
		e.out = append(e.out, Violation{Pointer: p, Expected: strings.Join(want, " or "), Got: describeValue(e.value(loc))})
		return
	}
	for i, b := range branches {
		for _, v := range b {
			v.Expected += fmt.Sprintf(" (%s option %d of %d)", kw, i+1, len(branches))
			e.out = append(e.out, v)
		}
	}
}

// leafText renders one keyword's failure as the Expected and Got of a
// violation.
func leafText(k jsonschema.ErrorKind, v any) (expected, got string) {
	got = describeValue(v)
	switch k := k.(type) {
	case *kind.Type:
		return expectedType(k.Want), got
	case *kind.Enum:
		return "one of " + renderLimited(k.Want, maxExpectedRunes), got
	case *kind.Const:
		return "exactly " + renderLimited(k.Want, maxExpectedRunes), got
	case *kind.FalseSchema:
		return expectNothing, got
	case *kind.Not:
		return `a value that does not match the "not" schema`, got
	case *kind.MinLength:
		return "at least " + plural(k.Want, "character"), stringLength(v, k.Got)
	case *kind.MaxLength:
		return "at most " + plural(k.Want, "character"), stringLength(v, k.Got)
	case *kind.Pattern:
		expected = "a value matching pattern " + quoteLimited(k.Want, maxExpectedRunes)
		if k.Err != nil {
			return expected, got + ", which the pattern could not decide: " + k.Err.Error()
		}
		return expected, got
	case *kind.Minimum:
		return "a number >= " + ratString(k.Want), got
	case *kind.Maximum:
		return "a number <= " + ratString(k.Want), got
	case *kind.ExclusiveMinimum:
		return "a number > " + ratString(k.Want), got
	case *kind.ExclusiveMaximum:
		return "a number < " + ratString(k.Want), got
	case *kind.MultipleOf:
		return "a multiple of " + ratString(k.Want), got
	case *kind.MinItems:
		return "at least " + plural(k.Want, "item"), sized(v, "item")
	case *kind.MaxItems:
		return "at most " + plural(k.Want, "item"), sized(v, "item")
	case *kind.MinProperties:
		return "at least " + plural(k.Want, "property"), sized(v, "property")
	case *kind.MaxProperties:
		return "at most " + plural(k.Want, "property"), sized(v, "property")
	case *kind.UniqueItems:
		return "unique items", fmt.Sprintf("items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	case *kind.Contains:
		return `at least 1 item valid against "contains"`, got
	case *kind.MinContains:
		return fmt.Sprintf(`at least %s valid against "contains"`, plural(k.Want, "item")), fmt.Sprintf("%s, with %d such", got, len(k.Got))
	case *kind.MaxContains:
		return fmt.Sprintf(`at most %s valid against "contains"`, plural(k.Want, "item")), fmt.Sprintf("%s, with %d such", got, len(k.Got))
	case *kind.AdditionalItems:
		arr, _ := v.([]any)
		return fmt.Sprintf("at most %s (no additional items)", plural(len(arr)-k.Count, "item")), sized(v, "item")
	}
	kw := strings.Join(k.KeywordPath(), "/")
	return fmt.Sprintf("a value valid against %q", kw), got + ": " + oneLine(k.LocalizedString(english), maxExpectedRunes)
}

func stringLength(v any, n int) string {
	s, _ := v.(string)
	return fmt.Sprintf("%s (%s)", quoteLimited(s, maxGotRunes), plural(n, "character"))
}

func sized(v any, noun string) string {
	n := 0
	switch v := v.(type) {
	case []any:
		n = len(v)
	case map[string]any:
		n = len(v)
	}
	return fmt.Sprintf("%s (%s)", renderLimited(v, maxGotRunes), plural(n, noun))
}

// expectedType renders the types a schema allows: `type "integer"`,
// `type "string" or "null"`.
func expectedType(types []string) string {
	if len(types) == 0 {
		return "a type, but the schema allows none"
	}
	var b strings.Builder
	b.WriteString("type ")
	for i, t := range types {
		switch {
		case i == 0:
		case i == len(types)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(t))
	}
	return b.String()
}

// ratString renders a schema number exactly when it has a finite decimal
// form (0.01, not 1/100), and to 20 places otherwise.
func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	// The decimal places are the larger count of 2s and 5s in the
	// denominator, when it has no other factor. The 2s are counted at
	// once and the 5s at most 401 times, so that a schema number of a
	// thousand digits costs microseconds to render, not milliseconds per
	// violation.
	const maxPlaces = 400
	twos := r.Denom().TrailingZeroBits()
	if twos > maxPlaces {
		return strings.TrimRight(r.FloatString(20), "0") + "…"
	}
	d := new(big.Int).Rsh(r.Denom(), twos)
	five, rem := big.NewInt(5), new(big.Int)
	fives := 0
	for fives <= maxPlaces {
		q, m := new(big.Int).QuoRem(d, five, rem)
		if m.Sign() != 0 {
			break
		}
		d = q
		fives++
	}
	if places := max(int(twos), fives); d.Cmp(big.NewInt(1)) == 0 && places <= maxPlaces {
		return r.FloatString(places)
	}
	return strings.TrimRight(r.FloatString(20), "0") + "…"
}
