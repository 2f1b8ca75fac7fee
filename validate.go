package toolrun

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// ValidationError reports every way a tool input breaks its schema. Its Error
// text is what the model receives in the is_error tool_result, so it is
// written for the model: one line per violation, each naming the JSON Pointer
// of the failing value, what the schema expects and what was given.
type ValidationError struct {
	// Tool is the name of the tool whose input was rejected. It is set by
	// the caller and may be empty.
	Tool string
	// Violations lists the failing values, sorted by Pointer, then Expected,
	// then Got.
	Violations []Violation
}

// maxListedViolations bounds how many violations Error spells out, so that a
// long array of bad items cannot flood the model's context.
const maxListedViolations = 50

// Error returns a text like
//
//	invalid input for tool "get_weather": 2 problems:
//	- /city: expected required property "city", got missing
//	- /units: expected one of ["celsius","fahrenheit"], got "kelvin" (string)
//
// The root value is shown as "(root)". After 50 violations the rest are
// summarised as "- and N more".
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("invalid input")
	if e.Tool != "" {
		fmt.Fprintf(&b, " for tool %q", e.Tool)
	}
	n := len(e.Violations)
	switch n {
	case 0:
		return b.String()
	case 1:
		b.WriteString(": 1 problem:")
	default:
		fmt.Fprintf(&b, ": %d problems:", n)
	}
	for i, v := range e.Violations {
		if i == maxListedViolations {
			fmt.Fprintf(&b, "\n- and %d more", n-i)
			break
		}
		b.WriteString("\n- ")
		b.WriteString(displayPointer(v.Pointer))
		b.WriteString(": expected ")
		b.WriteString(v.Expected)
		b.WriteString(", got ")
		b.WriteString(v.Got)
	}
	return b.String()
}

// displayPointer renders a JSON Pointer for Error: "(root)" for the empty
// pointer, and a quoted form when the pointer holds control characters that
// would break the one-line-per-violation layout.
func displayPointer(p string) string {
	if p == "" {
		return "(root)"
	}
	if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return strconv.Quote(p)
	}
	return p
}

// Violation is one failing field of a tool input.
type Violation struct {
	// Pointer is the RFC 6901 JSON Pointer to the failing value in the
	// input, "" for the root. For a missing required property it points at
	// where the property should be.
	Pointer string
	// Expected says what the schema wants, such as `type "integer"` or
	// `one of ["celsius","fahrenheit"]`.
	Expected string
	// Got says what was given, such as `"abc" (string)` or `missing`.
	// Long values are cut to about 60 characters and end with "…".
	Got string
}

// Texts of violations that do not come from a single keyword.
const (
	expectValidJSON    = "valid JSON"
	expectValidOverall = "a value valid against the schema"
	expectNoAdditional = "no additional properties"
	expectNothing      = "no value (the schema allows none here)"
)

// Limits of the walk and of the texts in a Violation.
const (
	maxSchemaWalkDepth = 64  // schema nesting walked before jsonschema-go takes over
	maxGotRunes        = 60  // a value rendered in Got
	maxExpectedRunes   = 500 // an enum, const, pattern or name rendered in Expected
	maxDelegatedRunes  = 500 // a jsonschema-go error in Got
)

// validateInput checks input, the raw JSON the model sent as a tool's input,
// against rs. It returns nil if the input is valid and otherwise a
// *ValidationError listing every violation found, sorted by Pointer, then
// Expected, then Got. A zero-length input counts as {}, and a nil rs accepts
// any valid JSON. validateInput is safe for concurrent use and never panics.
//
// The input is decoded with json.Decoder.UseNumber, so numbers are checked
// exactly: 3.0 is an integer, 3.5 is not, and integers beyond 2^53 keep every
// digit. Numbers in the schema, which [jsonschema.Schema] holds as float64,
// are read as the shortest decimal that round-trips, so multipleOf 0.01
// accepts 19.99 as its author meant.
//
// validateInput walks the schema itself so that it can report all violations,
// not only the first, for the keywords type, enum, const, required,
// properties, additionalProperties, items, prefixItems, minItems, maxItems,
// uniqueItems, minLength, maxLength, pattern, minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, multipleOf, minProperties and
// maxProperties; format is an annotation and is not asserted. A schema
// reached during the walk that uses any other validation keyword (allOf,
// anyOf, oneOf, not, $ref, if/then/else, dependentRequired,
// patternProperties, …), or that lies deeper than 64 levels, is left to
// jsonschema-go: if the walk found nothing, the whole input is decoded the
// way jsonschema-go expects and checked with rs.Validate, and its error, if
// any, becomes one violation at the root. jsonschema-go is consulted only
// when the walk found nothing so that the model never reads one problem
// twice; a problem only jsonschema-go sees surfaces on the model's next try.
func validateInput(rs *jsonschema.Resolved, input json.RawMessage) error {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	value, err := decodeInput(input)
	if err != nil {
		return &ValidationError{Violations: []Violation{{Expected: expectValidJSON, Got: err.Error()}}}
	}
	if rs == nil || rs.Schema() == nil {
		return nil
	}
	root := rs.Schema()
	w := &inputWalker{}
	switch root.Schema {
	case "", "https://json-schema.org/draft/2020-12/schema":
	case "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-07/schema#":
		w.draft7 = true
	default:
		// jsonschema-go refuses to validate other drafts; let it say so.
		w.delegate = true
	}
	w.walk(root, value, 0)
	if len(w.violations) == 0 && w.delegate {
		if v, ok := delegateValidation(rs, input); !ok {
			w.violations = append(w.violations, v)
		}
	}
	if len(w.violations) == 0 {
		return nil
	}
	slices.SortFunc(w.violations, func(a, b Violation) int {
		return cmp.Or(
			strings.Compare(a.Pointer, b.Pointer),
			strings.Compare(a.Expected, b.Expected),
			strings.Compare(a.Got, b.Got))
	})
	return &ValidationError{Violations: slices.Compact(w.violations)}
}

// decodeInput decodes one JSON value with numbers kept as json.Number. On
// failure it returns json.Unmarshal's description of the problem, with the
// byte offset, because that is the clearest text for the model.
func decodeInput(input []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("unexpected data after the top-level value")
		}
	}
	if err == nil {
		return v, nil
	}
	if uerr := json.Unmarshal(input, new(any)); uerr != nil {
		if serr, ok := errors.AsType[*json.SyntaxError](uerr); ok {
			return nil, fmt.Errorf("%s at offset %d", serr, serr.Offset)
		}
		err = uerr
	}
	return nil, err
}

// delegateValidation checks input with jsonschema-go, which wants it decoded
// by plain json.Unmarshal (float64 numbers). It reports ok when the input is
// valid, and otherwise the violation to report.
func delegateValidation(rs *jsonschema.Resolved, input []byte) (v Violation, ok bool) {
	var plain any
	if err := json.Unmarshal(input, &plain); err != nil {
		// Only a number outside the float64 range gets here, which the
		// tool's handler could not decode either.
		return Violation{Expected: expectValidOverall, Got: oneLine(err.Error(), maxDelegatedRunes)}, false
	}
	if err := validateRecovered(rs, plain); err != nil {
		return Violation{Expected: expectValidOverall, Got: oneLine(err.Error(), maxDelegatedRunes)}, false
	}
	return Violation{}, true
}

// validateRecovered calls rs.Validate, turning a panic into an error.
// jsonschema-go panics on some schemas built as Go literals that it does not
// reject at Resolve time, such as an infinite minimum; such a schema must
// still yield an is_error result for the model and a logged error for the
// operator instead of crashing the tool-use loop.
func validateRecovered(rs *jsonschema.Resolved, instance any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the schema could not be checked: %v", r)
		}
	}()
	return rs.Validate(instance)
}

// oneLine joins the lines of s with "; ", collapses runs of white space and
// cuts the result to at most n runes, so that it fits on one line of Error.
func oneLine(s string, n int) string {
	var lines []string
	for line := range strings.Lines(s) {
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			lines = append(lines, line)
		}
	}
	s = strings.Join(lines, "; ")
	s = strings.ReplaceAll(s, ":; ", ": ")
	return truncateRunes(s, n)
}

// inputWalker collects the violations of one input against one schema.
type inputWalker struct {
	draft7     bool // prefixItems is ignored and $ref hides its siblings
	delegate   bool // a schema used a keyword only jsonschema-go checks
	path       []pathSegment
	violations []Violation
}

// pathSegment is one step of a JSON Pointer: an object key, or an array
// index when index >= 0.
type pathSegment struct {
	key   string
	index int
}

func (w *inputWalker) pushKey(k string) { w.path = append(w.path, pathSegment{key: k, index: -1}) }
func (w *inputWalker) pushIndex(i int)  { w.path = append(w.path, pathSegment{index: i}) }
func (w *inputWalker) pop()             { w.path = w.path[:len(w.path)-1] }

// pointer returns the JSON Pointer of the current path.
func (w *inputWalker) pointer() string {
	var b strings.Builder
	for _, seg := range w.path {
		b.WriteByte('/')
		if seg.index >= 0 {
			b.WriteString(strconv.Itoa(seg.index))
			continue
		}
		for i := 0; i < len(seg.key); i++ {
			switch c := seg.key[i]; c {
			case '~':
				b.WriteString("~0")
			case '/':
				b.WriteString("~1")
			default:
				b.WriteByte(c)
			}
		}
	}
	return b.String()
}

func (w *inputWalker) add(expected, got string) {
	w.violations = append(w.violations, Violation{Pointer: w.pointer(), Expected: expected, Got: got})
}

// walk checks v, decoded with UseNumber, against s.
func (w *inputWalker) walk(s *jsonschema.Schema, v any, depth int) {
	if s == nil {
		return
	}
	if depth > maxSchemaWalkDepth || (w.draft7 && s.Ref != "") {
		// Deep schemas are usually recursive ones, and in draft-07 a $ref
		// makes its sibling keywords meaningless: jsonschema-go checks both.
		w.delegate = true
		return
	}
	if rejectsEverything(s) {
		w.add(expectNothing, describeValue(v))
		return
	}
	if usesDelegatedKeywords(s) {
		w.delegate = true
	}

	var num *jsonDecimal
	if n, ok := v.(json.Number); ok {
		num, _ = parseJSONDecimal(string(n)) // nil only if the decoder let a bad number through
	}

	if s.Type != "" || s.Types != nil {
		if !typeMatches(s, v, num) {
			// Every other keyword would only repeat the type mismatch.
			w.add(expectedType(s), describeValue(v))
			return
		}
	}

	if s.Enum != nil || s.Const != nil {
		failed := false
		key, ok := appendEqualityKey(nil, v)
		if s.Enum != nil && !(ok && enumContains(s.Enum, key)) {
			w.add("one of "+renderLimited(s.Enum, maxExpectedRunes), describeValue(v))
			failed = true
		}
		if s.Const != nil {
			ckey, cok := appendEqualityKey(nil, *s.Const)
			if !ok || !cok || !bytes.Equal(key, ckey) {
				w.add("exactly "+renderLimited(*s.Const, maxExpectedRunes), describeValue(v))
				failed = true
			}
		}
		if failed {
			// The allowed values are spelled out; checking the parts of v
			// against other keywords would only add noise.
			return
		}
	}

	switch v := v.(type) {
	case json.Number:
		if num != nil {
			w.checkNumber(s, num, v)
		}
	case string:
		w.checkString(s, v)
	case []any:
		w.checkArray(s, v, depth)
	case map[string]any:
		w.checkObject(s, v, depth)
	}
}

func (w *inputWalker) checkNumber(s *jsonschema.Schema, d *jsonDecimal, n json.Number) {
	bound := func(b *float64, ok func(c int) bool, op string) {
		if b == nil || math.IsInf(*b, 0) || math.IsNaN(*b) {
			return // not a usable bound; ignore rather than reject everything
		}
		if !ok(d.cmpFloat(*b)) {
			w.add("a number "+op+" "+formatFloat(*b), describeValue(n))
		}
	}
	bound(s.Minimum, func(c int) bool { return c >= 0 }, ">=")
	bound(s.Maximum, func(c int) bool { return c <= 0 }, "<=")
	bound(s.ExclusiveMinimum, func(c int) bool { return c > 0 }, ">")
	bound(s.ExclusiveMaximum, func(c int) bool { return c < 0 }, "<")
	if m := s.MultipleOf; m != nil && *m != 0 && !math.IsInf(*m, 0) && !math.IsNaN(*m) {
		if !d.isMultipleOf(math.Abs(*m)) {
			w.add("a multiple of "+formatFloat(math.Abs(*m)), describeValue(n))
		}
	}
}

func (w *inputWalker) checkString(s *jsonschema.Schema, str string) {
	if s.MinLength != nil || s.MaxLength != nil {
		n := utf8.RuneCountInString(str)
		got := func() string { return fmt.Sprintf("%s (%s)", quoteLimited(str, maxGotRunes), plural(n, "character")) }
		if s.MinLength != nil && n < *s.MinLength {
			w.add("at least "+plural(*s.MinLength, "character"), got())
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			w.add("at most "+plural(*s.MaxLength, "character"), got())
		}
	}
	if s.Pattern != "" {
		if re := compiledPattern(s.Pattern); re != nil && !re.MatchString(str) {
			w.add("a value matching pattern "+quoteLimited(s.Pattern, maxExpectedRunes), describeValue(str))
		}
	}
}

func (w *inputWalker) checkArray(s *jsonschema.Schema, arr []any, depth int) {
	got := func() string {
		return fmt.Sprintf("%s (%s)", renderLimited(arr, maxGotRunes), plural(len(arr), "item"))
	}
	if s.MinItems != nil && len(arr) < *s.MinItems {
		w.add("at least "+plural(*s.MinItems, "item"), got())
	}
	if s.MaxItems != nil && len(arr) > *s.MaxItems {
		w.add("at most "+plural(*s.MaxItems, "item"), got())
	}
	if s.UniqueItems && len(arr) > 1 {
		first := make(map[string]int, len(arr))
		for i, item := range arr {
			key, ok := appendEqualityKey(nil, item)
			if !ok {
				continue
			}
			if j, dup := first[string(key)]; dup {
				w.add("unique items", fmt.Sprintf("items %d and %d are equal", j, i))
			} else {
				first[string(key)] = i
			}
		}
	}
	var prefix []*jsonschema.Schema
	if !w.draft7 {
		prefix = s.PrefixItems
	}
	for i, item := range arr {
		var is *jsonschema.Schema
		if i < len(prefix) {
			is = prefix[i]
		} else {
			is = s.Items
		}
		if is == nil {
			continue
		}
		w.pushIndex(i)
		w.walk(is, item, depth+1)
		w.pop()
	}
}

func (w *inputWalker) checkObject(s *jsonschema.Schema, obj map[string]any, depth int) {
	got := func() string {
		return fmt.Sprintf("%s (%s)", renderLimited(obj, maxGotRunes), plural(len(obj), "property"))
	}
	if s.MinProperties != nil && len(obj) < *s.MinProperties {
		w.add("at least "+plural(*s.MinProperties, "property"), got())
	}
	if s.MaxProperties != nil && len(obj) > *s.MaxProperties {
		w.add("at most "+plural(*s.MaxProperties, "property"), got())
	}
	for _, name := range s.Required {
		if _, ok := obj[name]; !ok {
			w.pushKey(name)
			w.add("required property "+quoteLimited(name, maxExpectedRunes), "missing")
			w.pop()
		}
	}
	for name, ps := range s.Properties {
		if pv, ok := obj[name]; ok {
			w.pushKey(name)
			w.walk(ps, pv, depth+1)
			w.pop()
		}
	}
	// With patternProperties, some properties that look additional are
	// not; jsonschema-go decides those.
	if ap := s.AdditionalProperties; ap != nil && s.PatternProperties == nil {
		noneAllowed := rejectsEverything(ap)
		for name, pv := range obj {
			if _, ok := s.Properties[name]; ok {
				continue
			}
			w.pushKey(name)
			if noneAllowed {
				w.add(expectNoAdditional, "property "+quoteLimited(name, maxGotRunes))
			} else {
				w.walk(ap, pv, depth+1)
			}
			w.pop()
		}
	}
}

// rejectsEverything reports whether s contains {"not": {}}, which is how
// jsonschema-go represents the schema false (and how jsonschema.For writes
// additionalProperties for structs).
func rejectsEverything(s *jsonschema.Schema) bool {
	return s.Not != nil && reflect.ValueOf(*s.Not).IsZero()
}

// usesDelegatedKeywords reports whether s has a validation keyword that
// inputWalker does not check itself. Annotations, $defs, $id, $anchor and
// content* keywords validate nothing and so need no delegation; nor do
// minContains and maxContains, which only act beside contains.
func usesDelegatedKeywords(s *jsonschema.Schema) bool {
	return s.Ref != "" || s.DynamicRef != "" ||
		s.AllOf != nil || s.AnyOf != nil || s.OneOf != nil || s.Not != nil ||
		s.If != nil || s.Then != nil || s.Else != nil ||
		s.DependentRequired != nil || s.DependentSchemas != nil ||
		s.DependencySchemas != nil || s.DependencyStrings != nil ||
		s.PatternProperties != nil || s.PropertyNames != nil || s.UnevaluatedProperties != nil ||
		s.ItemsArray != nil || s.AdditionalItems != nil || s.Contains != nil || s.UnevaluatedItems != nil
}

// typeMatches reports whether v has one of the types s allows. A number is
// an integer when its fractional part is zero; "number" includes integers.
func typeMatches(s *jsonschema.Schema, v any, num *jsonDecimal) bool {
	var got string
	switch v.(type) {
	case nil:
		got = "null"
	case bool:
		got = "boolean"
	case string:
		got = "string"
	case json.Number:
		got = "number"
		if num == nil || num.isInteger() {
			got = "integer"
		}
	case []any:
		got = "array"
	case map[string]any:
		got = "object"
	}
	allows := func(t string) bool { return t == got || (t == "number" && got == "integer") }
	if s.Type != "" {
		return allows(s.Type)
	}
	return slices.ContainsFunc(s.Types, allows)
}

// expectedType renders the type or types s allows: `type "integer"`,
// `type "string" or "null"`.
func expectedType(s *jsonschema.Schema) string {
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
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

// enumContains reports whether an enum value has the given equality key.
func enumContains(enum []any, key []byte) bool {
	var buf []byte
	for _, e := range enum {
		ek, ok := appendEqualityKey(buf[:0], e)
		if ok && bytes.Equal(ek, key) {
			return true
		}
		buf = ek
	}
	return false
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

// schemaPatterns caches compiled pattern keywords by their source, so that
// no call compiles a regexp; a pattern that does not compile is stored as
// nil and ignored. The set of patterns is bounded by the tools' schemas.
var schemaPatterns sync.Map // string → *regexp.Regexp

func compiledPattern(pattern string) *regexp.Regexp {
	if re, ok := schemaPatterns.Load(pattern); ok {
		return re.(*regexp.Regexp)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		re = nil
	}
	stored, _ := schemaPatterns.LoadOrStore(pattern, re)
	return stored.(*regexp.Regexp)
}

// jsonDecimal is a JSON number held exactly: (-1 if neg) × 0.digits × 10^exp.
type jsonDecimal struct {
	neg    bool
	digits string   // significant digits, without leading or trailing zeros; "" for zero
	exp    int64    // the exponent, when bigExp is nil
	bigExp *big.Int // the exponent, when its magnitude is 2^53 or more
	rat    *big.Rat // the value, computed on demand for moderate numbers
}

// moderateExp bounds the exponents of numbers that are turned into big.Rat.
// It lies well beyond the float64 range, so any number outside it compares
// with every schema bound by its sign alone, and the bound keeps a number
// such as 1e999999 from costing a megabit of arithmetic.
const moderateExp = 400

// parseJSONDecimal parses a number in JSON syntax.
func parseJSONDecimal(s string) (*jsonDecimal, bool) {
	d := &jsonDecimal{}
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	digitsFrom := func(start int) int {
		for i = start; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		}
		return i
	}
	intStart := i
	intEnd := digitsFrom(intStart)
	if intEnd == intStart {
		return nil, false
	}
	fracStart, fracEnd := intEnd, intEnd
	if i < len(s) && s[i] == '.' {
		fracStart = i + 1
		fracEnd = digitsFrom(fracStart)
		if fracEnd == fracStart {
			return nil, false
		}
	}
	expText := ""
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		expStart := i + 1
		j := expStart
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if digitsFrom(j) == j {
			return nil, false
		}
		expText = s[expStart:i]
	}
	if i != len(s) {
		return nil, false
	}

	mantissa := s[intStart:intEnd] + s[fracStart:fracEnd]
	trimmed := strings.TrimLeft(mantissa, "0")
	if trimmed == "" {
		return &jsonDecimal{}, true // zero, including -0
	}
	leadingZeros := len(mantissa) - len(trimmed)
	d.digits = strings.TrimRight(trimmed, "0")
	shift := int64(intEnd-intStart) - int64(leadingZeros) // 0.digits × 10^shift without the exponent

	expText = strings.TrimPrefix(expText, "+")
	neg := strings.HasPrefix(expText, "-")
	expDigits := strings.TrimLeft(strings.TrimPrefix(expText, "-"), "0")
	if len(expDigits) <= 15 {
		e, _ := strconv.ParseInt(cmp.Or(expDigits, "0"), 10, 64)
		if neg {
			e = -e
		}
		d.exp = shift + e
		return d, true
	}
	e, _ := new(big.Int).SetString(expDigits, 10)
	if neg {
		e.Neg(e)
	}
	e.Add(e, big.NewInt(shift))
	if e.IsInt64() && e.Int64() < 1<<53 && e.Int64() > -1<<53 {
		d.exp = e.Int64()
	} else {
		d.bigExp = e
	}
	return d, true
}

func (d *jsonDecimal) sign() int {
	switch {
	case d.digits == "":
		return 0
	case d.neg:
		return -1
	}
	return 1
}

// isInteger reports whether d has no fractional part.
func (d *jsonDecimal) isInteger() bool {
	switch {
	case d.digits == "":
		return true
	case d.bigExp != nil:
		return d.bigExp.Sign() > 0
	}
	return int64(len(d.digits)) <= d.exp
}

// isHuge and isTiny report a magnitude far beyond the float64 range, above
// 10^400 or below 10^-400, where exact arithmetic is pointless.
func (d *jsonDecimal) isHuge() bool {
	return d.digits != "" && (d.bigExp != nil && d.bigExp.Sign() > 0 || d.bigExp == nil && d.exp > moderateExp)
}

func (d *jsonDecimal) isTiny() bool {
	return d.digits != "" && (d.bigExp != nil && d.bigExp.Sign() < 0 || d.bigExp == nil && d.exp < -moderateExp)
}

// toRat returns d as a big.Rat. It must not be called for huge or tiny d.
func (d *jsonDecimal) toRat() *big.Rat {
	if d.rat == nil {
		r, ok := new(big.Rat).SetString(d.digits + "e" + strconv.FormatInt(d.exp-int64(len(d.digits)), 10))
		if !ok {
			r = new(big.Rat)
		}
		if d.neg {
			r.Neg(r)
		}
		d.rat = r
	}
	return d.rat
}

// cmpFloat compares d with the finite schema number b, read as the
// shortest decimal that round-trips to b.
func (d *jsonDecimal) cmpFloat(b float64) int {
	switch {
	case d.digits == "":
		return -cmpSign(b)
	case d.isHuge():
		return d.sign()
	case d.isTiny():
		if b == 0 {
			return d.sign()
		}
		return -cmpSign(b)
	}
	return d.toRat().Cmp(floatRat(b))
}

func cmpSign(f float64) int {
	switch {
	case f > 0:
		return 1
	case f < 0:
		return -1
	}
	return 0
}

// isMultipleOf reports whether d is an integer multiple of the finite,
// positive schema number m, read as the shortest decimal that round-trips.
func (d *jsonDecimal) isMultipleOf(m float64) bool {
	mr := floatRat(m)
	switch {
	case d.digits == "":
		return true
	case d.isTiny():
		return false // 0 < |d| < m
	case d.isHuge():
		// d = D × 10^e. If e >= 0, d/m = D × 10^e × q / p is an integer
		// when p divides D × q × (10^e mod p); modular exponentiation
		// keeps this cheap however large e is. If e < 0, d has more than
		// 400 written digits and plain arithmetic is bounded by the input.
		e := big.NewInt(-int64(len(d.digits)))
		if d.bigExp != nil {
			e.Add(e, d.bigExp)
		} else {
			e.Add(e, big.NewInt(d.exp))
		}
		if e.Sign() >= 0 {
			p, q := mr.Num(), mr.Denom()
			digits, _ := new(big.Int).SetString(d.digits, 10)
			t := new(big.Int).Exp(big.NewInt(10), e, p)
			t.Mul(t, digits)
			t.Mul(t, q)
			return t.Mod(t, p).Sign() == 0
		}
		r, ok := new(big.Rat).SetString(d.digits + "e" + e.String())
		return ok && new(big.Rat).Quo(r, mr).IsInt()
	}
	return new(big.Rat).Quo(d.toRat(), mr).IsInt()
}

// floatRat returns the shortest decimal that round-trips to the finite f,
// as a big.Rat.
func floatRat(f float64) *big.Rat {
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	if !ok {
		r.SetFloat64(f)
	}
	return r
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

// appendEqualityKey appends to b a key for v such that two JSON values have
// the same key exactly when JSON Schema deems them equal: numbers compare by
// mathematical value, objects ignore key order. v is a decoded instance or a
// Go value from a schema's enum or const; ok is false for a value that has
// no JSON form, which equals nothing.
func appendEqualityKey(b []byte, v any) (_ []byte, ok bool) {
	switch v := v.(type) {
	case nil:
		return append(b, 'n'), true
	case bool:
		if v {
			return append(b, 't'), true
		}
		return append(b, 'f'), true
	case string:
		b = append(b, 's')
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		return append(b, v...), true
	case json.Number:
		return appendNumberKey(b, string(v))
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return b, false
		}
		return appendNumberKey(b, strconv.FormatFloat(v, 'g', -1, 64))
	case float32:
		f := float64(v)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return b, false
		}
		return appendNumberKey(b, strconv.FormatFloat(f, 'g', -1, 32))
	case int:
		return appendNumberKey(b, strconv.Itoa(v))
	case int64:
		return appendNumberKey(b, strconv.FormatInt(v, 10))
	case []any:
		b = append(b, '[')
		for _, e := range v {
			if b, ok = appendEqualityKey(b, e); !ok {
				return b, false
			}
			b = append(b, ',')
		}
		return append(b, ']'), true
	case map[string]any:
		b = append(b, '{')
		for _, k := range slices.Sorted(maps.Keys(v)) {
			b, _ = appendEqualityKey(b, k)
			if b, ok = appendEqualityKey(b, v[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	// Any other Go value from a schema literal: compare its JSON form.
	data, err := marshalRecovered(v)
	if err != nil {
		return b, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var plain any
	if err := dec.Decode(&plain); err != nil {
		return b, false
	}
	return appendEqualityKey(b, plain)
}

func appendNumberKey(b []byte, s string) ([]byte, bool) {
	d, ok := parseJSONDecimal(s)
	if !ok {
		return b, false
	}
	b = append(b, 'd')
	if d.neg {
		b = append(b, '-')
	}
	b = append(b, d.digits...)
	b = append(b, 'e')
	if d.bigExp != nil {
		return d.bigExp.Append(b, 10), true
	}
	return strconv.AppendInt(b, d.exp, 10), true
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
