// Package schema validates tool inputs against JSON Schema, for the root
// package's tools. One engine (a fork of santhosh-tekuri/jsonschema, in
// internal/jsonschema) gives every verdict; this package checks a schema once
// when a tool is registered, bounds each validation, and explains a failing
// input to the model one line per violation.
package schema

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/toolrun/toolrun/internal/jsonschema"
)

// Limits on a schema, checked once when it is compiled.
const (
	MaxSchemaBytes = 1 << 20 // the schema's JSON text
	MaxSchemaDepth = 128     // nesting of the schema's JSON text
	MaxSubschemas  = 20000   // schemas reachable from the root, after $ref
)

// MaxSteps bounds one validation: how many times a schema may be evaluated
// against a value. Real tool inputs need a few hundred; a schema whose
// alternatives multiply (nested anyOf) stops here instead of running for
// hours.
const MaxSteps = 100_000

// MaxWork bounds the work of one validation, in units of about a
// microsecond of CPU at most (see [CheckEvery]): every evaluation, item,
// property, value compared or hashed, KiB of string read and rune a
// pattern reads (by the size of its program) is counted, so that no schema
// and input under 1 MB take more than about a second of CPU when there is
// no deadline. Real tool inputs need a few thousand units; a 1 MB input of
// 100,000 items checked one schema each needs a few hundred thousand.
const MaxWork = 1_000_000

// MaxPatternTime bounds the matches of backtracking patterns (see
// [MatchTimeout]) in one validation, in total: 255 strings each taking
// nearly MatchTimeout stop here, not after 25 s.
const MaxPatternTime = time.Second

// CheckEvery is how many units of work (see [MaxWork] and
// jsonschema.CheckEvery for what a unit is) pass between two looks at the
// context during a validation. With numbers within [MaxNumberDigits] and
// [MaxNumberExponent], each unit costs at most about a microsecond, so a
// validation returns within a few milliseconds of its context ending, also
// in the middle of an RE2 match; a backtracking match in progress is not
// waited for (it ends by itself within its timeout, which is cut to the
// time left before the deadline).
const CheckEvery = jsonschema.CheckEvery

// ErrUnsafe is wrapped by the errors of Compile for a schema that is valid
// JSON Schema but that the validator refuses to run: a reference cycle that
// makes no progress, or a schema too large or too deep.
var ErrUnsafe = errors.New("schema cannot be validated safely")

// ErrBudget is wrapped by the error of Validate when an input needs more
// than MaxSteps evaluations or MaxWork units of work.
var ErrBudget = jsonschema.ErrBudget

// ErrPatternTime is returned by Validate when the input's matches of
// backtracking patterns took more than MaxPatternTime in total.
var ErrPatternTime = jsonschema.ErrPatternTime

// ErrInternal is wrapped by the error of Validate, and of Compile, when the
// validator itself failed (panicked); the error names where in the input
// or schema, and the host goes on.
var ErrInternal = errors.New("the validator failed")

// baseURL names the schema inside the compiler. It is never fetched.
const baseURL = "https://toolrun.invalid/input-schema.json"

// drafts are the $schema values a tool may declare, without the scheme and
// the empty fragment, and their names.
var drafts = map[string]string{
	"json-schema.org/draft/2020-12/schema": "2020-12",
	"json-schema.org/draft/2019-09/schema": "2019-09",
	"json-schema.org/draft-07/schema":      "draft-07",
	"json-schema.org/draft-06/schema":      "draft-06",
	"json-schema.org/draft-04/schema":      "draft-04",
}

// Schema is a compiled tool input schema. It is safe for concurrent use.
type Schema struct {
	compiled *jsonschema.Schema
	// names are every property name the schema declares; folded maps each
	// name's case fold to it, so that a key differing only in case from a
	// declared name can be told apart from an unrelated key.
	names  map[string]bool
	folded map[string]string
	// Draft is the draft the schema is validated as, such as "2020-12".
	Draft string
	// now is the clock MaxPatternTime is measured with; nil means
	// time.Now. Tests set it.
	now func() time.Time
	// work, if non-nil, is told the units of work of each validation;
	// tests bound validations by it.
	work func(units int)
}

// Compile checks raw, a tool's input schema, and compiles it. nil or empty
// raw means {"type":"object"}; the schema true or {} accepts any object.
// Compile refuses, with an error naming the reason, a schema that is not an
// object schema, declares an unknown $schema, references anything outside
// itself, has a pattern no engine compiles, or (wrapping [ErrUnsafe]) has a
// reference cycle without progress or breaks a limit.
func Compile(raw []byte) (s *Schema, err error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		raw = []byte(`{"type":"object"}`)
	}
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("%w while compiling the schema: %v", ErrInternal, r)
		}
	}()
	return compile(raw, jsonschema.Draft2020, true, refuseLoader{})
}

// compile compiles raw as a schema of defaultDraft unless it declares its
// own, loading what it refers to outside itself with loader. For a tool's
// schema, the root must be an object schema.
func compile(raw []byte, defaultDraft *jsonschema.Draft, forTool bool, loader jsonschema.URLLoader) (*Schema, error) {
	if len(raw) > MaxSchemaBytes {
		return nil, fmt.Errorf("%w: it is %d bytes, more than %d", ErrUnsafe, len(raw), MaxSchemaBytes)
	}
	d, err := decodeJSON(raw, MaxSchemaDepth)
	switch {
	case errors.Is(err, errTooDeep):
		return nil, fmt.Errorf("%w: it is nested more than %d levels deep", ErrUnsafe, MaxSchemaDepth)
	case err != nil:
		return nil, fmt.Errorf("the schema is not valid JSON: %w", err)
	case len(d.dups) > 0:
		return nil, fmt.Errorf("the schema repeats the key at %s", d.dups[0])
	}
	if vs := numberViolations(d, false); len(vs) > 0 {
		return nil, fmt.Errorf("the schema's number at %s is %s; toolrun validates %s", displayPointer(vs[0].Pointer), vs[0].Got, vs[0].Expected)
	}
	doc := d.value
	switch v := doc.(type) {
	case bool:
		if forTool && !v {
			return nil, errors.New("the schema is false, so no input would ever be valid")
		}
	case map[string]any:
	default:
		return nil, fmt.Errorf("the schema must be a JSON object, got %s", describeValue(doc))
	}
	root, _ := doc.(map[string]any)
	if forTool {
		if err := checkRootType(root["type"]); err != nil {
			return nil, err
		}
	}
	draft, _ := draftName(defaultDraft.String())
	if s, ok := root["$schema"]; ok {
		str, _ := s.(string)
		name, known := draftName(str)
		switch {
		case !known && !forTool:
			// A schema that is not a tool's (the test suite's) may name
			// a metaschema its loader serves.
			name = str
		case !known:
			return nil, fmt.Errorf("unsupported $schema %s: toolrun validates drafts 2020-12, 2019-09, draft-07, draft-06 and draft-04", renderLimited(s, 200))
		}
		draft = name
	}

	c := jsonschema.NewCompiler()
	c.DefaultDraft(defaultDraft)
	c.UseLoader(loader)
	c.UseRegexpEngine(compilePattern)
	if err := c.AddResource(baseURL, doc); err != nil {
		return nil, fmt.Errorf("the schema cannot be used: %w", err)
	}
	compiled, err := c.Compile(baseURL)
	if err != nil {
		return nil, fmt.Errorf("the schema cannot be used: %s", strings.ReplaceAll(err.Error(), baseURL, ""))
	}
	s := &Schema{compiled: compiled, Draft: draft, names: map[string]bool{}, folded: map[string]string{}}
	// Definitions no reference reaches are checked too: a cycle there is
	// harmless today but would not be once a reference reached it, and
	// refusing it now tells the schema's author at once.
	roots := []*jsonschema.Schema{compiled}
	for _, kw := range []string{"$defs", "definitions"} {
		defs, _ := root[kw].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(defs)) {
			def, err := c.Compile(baseURL + (&url.URL{Fragment: pointer([]string{kw, name})}).String())
			if err != nil {
				return nil, fmt.Errorf("the schema cannot be used: %s", strings.ReplaceAll(err.Error(), baseURL, ""))
			}
			roots = append(roots, def)
		}
	}
	if err := s.checkGraph(roots); err != nil {
		return nil, err
	}
	for name := range s.names {
		s.folded[fold(name)] = name
	}
	return s, nil
}

// draftName returns the name of the draft a $schema value declares.
func draftName(url string) (string, bool) {
	u := strings.TrimSuffix(url, "#")
	u, ok := strings.CutPrefix(u, "https://")
	if !ok {
		u, ok = strings.CutPrefix(u, "http://")
	}
	name, known := drafts[u]
	return name, ok && known
}

// checkRootType accepts a root type that is absent or "object": the API
// takes only object schemas, and sends the model's input as an object.
func checkRootType(t any) error {
	switch t := t.(type) {
	case nil:
		return nil
	case string:
		if t == "object" {
			return nil
		}
	case []any:
		if len(t) == 1 && t[0] == "object" {
			return nil
		}
	}
	return fmt.Errorf(`the schema's type is %s; a tool's input schema must have "type": "object"`, renderLimited(t, 200))
}

// refuseLoader refuses every URL: a tool's schema must be self-contained,
// and a schema must never make the host read a file or the network.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("the schema refers to %s; references outside the schema are not allowed", url)
}

// checkGraph walks every schema reachable from the root. It refuses a
// cycle of references and in-place applicators (allOf, anyOf, oneOf, not,
// if/then/else, dependentSchemas) that would evaluate the same value
// against the same schema again, and more than MaxSubschemas schemas. It
// collects the declared property names on the way.
func (s *Schema) checkGraph(roots []*jsonschema.Schema) error {
	var all []*jsonschema.Schema
	seen := map[*jsonschema.Schema]bool{}
	collect := func(sch *jsonschema.Schema) error {
		for stack := []*jsonschema.Schema{sch}; len(stack) > 0; {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n == nil || seen[n] {
				continue
			}
			seen[n] = true
			all = append(all, n)
			if len(all) > MaxSubschemas {
				return fmt.Errorf("%w: it has more than %d subschemas", ErrUnsafe, MaxSubschemas)
			}
			for name := range n.Properties {
				s.names[name] = true
			}
			stack = append(stack, inPlace(n, nil)...)
			stack = append(stack, progressing(n)...)
		}
		return nil
	}
	for _, r := range roots {
		if err := collect(r); err != nil {
			return err
		}
	}
	// $dynamicRef and $recursiveRef may land on any schema with the same
	// anchor; count all of them as targets.
	dynamic := map[string][]*jsonschema.Schema{}
	var recursive []*jsonschema.Schema
	for _, n := range all {
		if n.DynamicAnchor != "" {
			dynamic[n.DynamicAnchor] = append(dynamic[n.DynamicAnchor], n)
		}
		if n.RecursiveAnchor {
			recursive = append(recursive, n)
		}
	}
	extra := func(n *jsonschema.Schema) []*jsonschema.Schema {
		var out []*jsonschema.Schema
		if n.DynamicRef != nil && n.DynamicRef.Anchor != "" {
			out = append(out, dynamic[n.DynamicRef.Anchor]...)
		}
		if n.RecursiveRef != nil {
			out = append(out, recursive...)
		}
		return out
	}

	// Depth-first search for a cycle among in-place edges, iteratively so
	// that no schema can exhaust the stack.
	const (
		white = iota
		grey
		black
	)
	color := map[*jsonschema.Schema]int{}
	type frame struct {
		n    *jsonschema.Schema
		next []*jsonschema.Schema
	}
	for _, start := range all {
		if color[start] != white {
			continue
		}
		color[start] = grey
		stack := []frame{{start, inPlace(start, extra)}}
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if len(top.next) == 0 {
				color[top.n] = black
				stack = stack[:len(stack)-1]
				continue
			}
			m := top.next[0]
			top.next = top.next[1:]
			switch color[m] {
			case grey:
				return fmt.Errorf("%w: %s refers back to itself without reaching into the input (a reference cycle)", ErrUnsafe, location(m))
			case white:
				color[m] = grey
				stack = append(stack, frame{m, inPlace(m, extra)})
			}
		}
	}
	return nil
}

// location renders a schema's place in the tool's schema, as a JSON
// Pointer fragment such as "#/$defs/a".
func location(n *jsonschema.Schema) string {
	loc, ok := strings.CutPrefix(n.Location, baseURL)
	if !ok {
		return n.Location
	}
	if loc == "" || loc == "#" {
		return "the root schema"
	}
	return "the schema at " + loc
}

// inPlace lists the schemas that apply to the same value as n.
func inPlace(n *jsonschema.Schema, extra func(*jsonschema.Schema) []*jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{n.Ref, n.RecursiveRef, n.Not, n.If, n.Then, n.Else}
	if n.DynamicRef != nil {
		out = append(out, n.DynamicRef.Ref)
	}
	out = append(out, n.AllOf...)
	out = append(out, n.AnyOf...)
	out = append(out, n.OneOf...)
	for _, k := range slices.Sorted(maps.Keys(n.DependentSchemas)) {
		out = append(out, n.DependentSchemas[k])
	}
	for _, k := range slices.Sorted(maps.Keys(n.Dependencies)) {
		if sch, ok := n.Dependencies[k].(*jsonschema.Schema); ok {
			out = append(out, sch)
		}
	}
	if extra != nil {
		out = append(out, extra(n)...)
	}
	return slices.DeleteFunc(out, func(s *jsonschema.Schema) bool { return s == nil })
}

// progressing lists the schemas that apply to a part of n's value (an
// item, a property, a name, decoded content).
func progressing(n *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{n.PropertyNames, n.UnevaluatedProperties, n.Contains,
		n.Items2020, n.UnevaluatedItems, n.ContentSchema}
	for _, k := range slices.Sorted(maps.Keys(n.Properties)) {
		out = append(out, n.Properties[k])
	}
	for _, sch := range n.PatternProperties {
		out = append(out, sch)
	}
	if sch, ok := n.AdditionalProperties.(*jsonschema.Schema); ok {
		out = append(out, sch)
	}
	switch items := n.Items.(type) {
	case *jsonschema.Schema:
		out = append(out, items)
	case []*jsonschema.Schema:
		out = append(out, items...)
	}
	if sch, ok := n.AdditionalItems.(*jsonschema.Schema); ok {
		out = append(out, sch)
	}
	out = append(out, n.PrefixItems...)
	return slices.DeleteFunc(out, func(s *jsonschema.Schema) bool { return s == nil })
}

// fold returns the key encoding/json would match s with: its simple case
// fold. Go's decoder, and many policy engines, match object keys to fields
// without regard to case.
func fold(s string) string {
	return strings.ToLower(strings.ToUpper(s))
}

// Validate checks input, a tool input as the model sent it, against s. It
// returns the violations, sorted by pointer, or none if the input is valid.
// Empty input counts as {}. It returns an error only when it could not
// decide: ctx is done (ctx's error), the input needs more than MaxSteps or
// MaxWork ([ErrBudget]), the backtracking matches took more than
// MaxPatternTime ([ErrPatternTime]), or a pattern in patternProperties
// timed out.
//
// Numbers past [MaxNumberDigits] or [MaxNumberExponent], or beyond the
// range of a float64 (which the conversation history holds numbers as),
// are violations found before the schema is applied. A panic inside the
// validator is returned as an error wrapping [ErrInternal] that names the
// location in the input.
func (s *Schema) Validate(ctx context.Context, input []byte) (vs []Violation, err error) {
	if len(input) == 0 {
		input = []byte("{}")
	}
	defer func() {
		if r := recover(); r != nil {
			vs, err = nil, fmt.Errorf("%w: %v", ErrInternal, r)
		}
	}()
	d, err := decodeJSON(input, maxNesting)
	if err != nil {
		return []Violation{{Expected: "valid JSON", Got: err.Error()}}, nil
	}
	if vs := numberViolations(d, true); len(vs) > 0 {
		// No keyword sees a number it cannot compare in bounded time.
		return sortViolations(vs), nil
	}
	for _, p := range d.dups {
		vs = append(vs, Violation{Pointer: p, Expected: "each key once in an object", Got: "the key " + quoteLimited(lastToken(p), maxGotRunes) + " again"})
	}
	vs = append(vs, s.caseVariants(d.value, nil)...)
	if len(vs) > 0 {
		// An input read two ways is not checked further: which reading
		// would the verdict be about?
		return sortViolations(vs), nil
	}
	return s.check(ctx, d.value)
}

// check validates v, decoded with numbers as json.Number, with the engine
// alone.
func (s *Schema) check(ctx context.Context, v any) ([]Violation, error) {
	b := jsonschema.Bounds{MaxSteps: MaxSteps, MaxWork: MaxWork, MaxPatternTime: MaxPatternTime, Now: s.now}
	if s.work != nil {
		b.Work = new(int)
		defer func() { s.work(*b.Work) }()
	}
	err := s.compiled.ValidateBounded(ctx, v, b)
	if err == nil {
		return nil, nil
	}
	if perr, ok := errors.AsType[*jsonschema.PanicError](err); ok {
		return nil, fmt.Errorf("%w at %s: %v", ErrInternal, displayPointer(pointer(perr.InstanceLocation)), perr.Value)
	}
	verr, ok := errors.AsType[*jsonschema.ValidationError](err)
	if !ok {
		return nil, err
	}
	e := explainer{root: v}
	e.explain(verr)
	return sortViolations(e.out), nil
}

// caseVariants reports the object keys, at any depth, that the schema does
// not declare but that differ only in case from a name it does.
func (s *Schema) caseVariants(v any, path []string) []Violation {
	var out []Violation
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if !s.names[k] {
				if name, ok := s.folded[fold(k)]; ok {
					out = append(out, Violation{
						Pointer:  pointer(append(path, k)),
						Expected: "the property name " + quoteLimited(name, maxExpectedRunes) + " spelt exactly",
						Got:      "the key " + quoteLimited(k, maxGotRunes) + ", which differs only in case",
					})
				}
			}
			out = append(out, s.caseVariants(v[k], append(path, k))...)
		}
	case []any:
		for i, item := range v {
			out = append(out, s.caseVariants(item, append(path, fmt.Sprint(i)))...)
		}
	}
	return out
}

// pointerUnescaper undoes pointerEscaper.
var pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")

func lastToken(p string) string {
	tok := p[strings.LastIndexByte(p, '/')+1:]
	return pointerUnescaper.Replace(tok)
}
