package toolrun

// This file is the engine's way to a tool's input schema. The engine calls
// two functions, and nothing else here:
//
//   - compileTool(t) checks and compiles t's input schema and builds the
//     definition sent to the API, once per tool ([FuncTool] caches it; the
//     runner caches it for other tools).
//   - (*toolSchema).validate(ctx, input) checks one call's input and returns
//     nil, a *ValidationError for the model, or ctx's error.
//
// The validator itself lives in internal/schema, on one engine (a fork of
// santhosh-tekuri/jsonschema in internal/jsonschema) that gives every
// verdict.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun/internal/schema"
)

func compileSchema(raw json.RawMessage) (*schema.Schema, error) {
	s, err := schema.Compile(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, err)
	}
	return s, nil
}

// toolSchema is a tool's compiled input schema, safe for concurrent use.
type toolSchema struct {
	tool   string
	schema *schema.Schema
}

// compileTool checks and compiles t's input schema and builds the tool's
// definition as sent in a request.
func compileTool(t Tool) (*toolSchema, anthropic.BetaToolUnionParam, error) {
	raw := t.InputSchema()
	s, err := compileSchema(raw)
	if err != nil {
		return nil, anthropic.BetaToolUnionParam{}, fmt.Errorf("toolrun: tool %q: %w", t.Name(), err)
	}
	param, err := toolParam(t, raw)
	if err != nil {
		return nil, anthropic.BetaToolUnionParam{}, fmt.Errorf("toolrun: tool %q: %w: %w", t.Name(), ErrInvalidSchema, err)
	}
	return &toolSchema{tool: t.Name(), schema: s}, param, nil
}

// validate checks input, the raw JSON the model sent as the tool's input.
// It returns nil if the input is valid; a *ValidationError listing every
// violation, sorted by Pointer, then Expected, then Got; or ctx's error if
// ctx ended first. A zero-length input counts as {}.
//
// Numbers are checked exactly (3.0 is an integer, 19.99 is a multiple of
// 0.01, integers beyond 2^53 keep every digit). Input with a key twice in
// one object, or with a key that differs only in case from a property the
// schema names, is rejected before the schema is applied: Go's decoder and
// many policies match keys without regard to case or keep the last of two,
// and a call must not be read one way when it is decided and another when
// it runs.
//
// A validation keeps to the limits documented on [ValidationError], so no
// schema and no input can hold a run past its deadline or crash it.
func (ts *toolSchema) validate(ctx context.Context, input json.RawMessage) error {
	vs, err := ts.schema.Validate(ctx, input)
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, schema.ErrBudget):
		vs = []schema.Violation{{
			Expected: "an input the schema can check in at most " + strconv.Itoa(schema.MaxSteps) + " steps and " + strconv.Itoa(schema.MaxWork) + " units of work",
			Got:      "an input that needs more, as the schema applies its keywords to it many times over; send a smaller or simpler input",
		}}
	case errors.Is(err, schema.ErrPatternTime):
		vs = []schema.Violation{{
			Expected: "an input whose strings the schema's patterns can match in at most " + schema.MaxPatternTime.String() + " in total",
			Got:      "strings that take longer to match; send shorter or fewer strings",
		}}
	case errors.Is(err, schema.ErrInternal):
		vs = []schema.Violation{{Expected: "an input the validator can check", Got: oneLine(err.Error(), 500)}}
	case err != nil:
		vs = []schema.Violation{{Expected: "an input the schema can decide", Got: oneLine(err.Error(), 500)}}
	}
	if len(vs) == 0 {
		return nil
	}
	out := make([]Violation, len(vs))
	for i, v := range vs {
		out[i] = Violation(v)
	}
	return &ValidationError{Tool: ts.tool, Violations: out}
}

// ValidationError reports every way a tool input breaks its schema. Its Error
// text is what the model receives in the is_error tool_result, so it is
// written for the model: one line per violation, each naming the JSON Pointer
// of the failing value, what the schema expects and what was given.
//
// # Limits of validation
//
// No input crashes the host or holds a run past its deadline; these limits
// make it so, and an input past one gets a violation saying which:
//
//   - Numbers are compared exactly, with at most 1000 digits before the
//     exponent and an exponent (as written) between -1000 and 1000, in the
//     input and in the schema (a schema past them is refused with
//     [ErrInvalidSchema]). An input number must also lie within the range
//     of a float64 (about ±1.8e308): the client holds the history's numbers
//     as float64, and 1e309 would make every later request fail to encode.
//     Such an input is refused before the call runs, and the history keeps
//     {} for that tool_use's input.
//   - One validation evaluates a schema against a value at most 100,000
//     times (nested anyOf cannot take exponential time), and does at most
//     1,000,000 units of work, each about a microsecond of CPU at most: an
//     evaluation and each item or property of its value, a value compared
//     or hashed (const, enum, uniqueItems), a KiB of string, the runes a
//     pattern reads times the size of its program. So with no deadline
//     one validation of any schema and input under 1 MB costs at most
//     about a second of CPU.
//   - A pattern RE2 compiles to at most 20,000 instructions is matched by
//     RE2, charged as it reads. Another (lookaround, backreferences, huge
//     bounded repeats) runs on a backtracking engine with a timeout of
//     100 ms a match, or less as the deadline, the budget or the 1 s for
//     one validation's backtracking matches in all run out (up to about
//     twice that, as the engine's clock is coarse).
//   - enum values are looked up by hash, so there is no limit on enum size
//     beyond the schema's 1 MiB.
//   - The context is read after every 256 units of work, so validation
//     returns within a few milliseconds of its context ending. A
//     backtracking match under way is not waited for; it ends by itself
//     within its timeout.
//   - A panic inside the validator becomes a violation naming where in the
//     input it happened, never a crash.
type ValidationError struct {
	// Tool is the name of the tool whose input was rejected. It may be
	// empty.
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

// Violation is one failing value of a tool input.
type Violation struct {
	// Pointer is the RFC 6901 JSON Pointer to the failing value in the
	// input, "" for the root. For a missing required property it points at
	// where the property should be.
	Pointer string
	// Expected says what the schema wants, such as `type "integer"`,
	// `one of ["celsius","fahrenheit"]` or, for the options of an anyOf,
	// `type "integer" or type "null"`.
	Expected string
	// Got says what was given, as JSON, such as `"abc" (string)` or
	// `missing`. Long values are cut to about 60 characters and end with
	// "…".
	Got string
}

// oneLine joins the lines of s with "; " and cuts it to at most n bytes, so
// that it fits on one line of Error.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

// sendableInputs returns m with every tool_use input that would not encode
// as JSON replaced by {}: the client decodes a response's numbers as
// float64, so a number beyond its range (1e309) becomes an infinity that
// would make every later request, and the saved state, fail to encode. The
// call itself keeps its input as sent, and validation refuses it with a
// message naming the number, so the model learns what it sent. m is not
// changed.
func sendableInputs(m anthropic.BetaMessageParam) anthropic.BetaMessageParam {
	return blankInputs(m, func(input any) bool { return !finiteJSON(input) })
}

// blankInputs returns m with the input of every tool_use that bad names
// replaced by {}, in copies of the message and its blocks: m is not
// changed, and an m with none to replace is returned as it is.
//
// The thinking blocks of m after the first such tool_use are left out. The
// API binds a thinking block to everything before it (thinking's
// block_binding), and what came before those is no longer what the model
// wrote: sent back, each would fail the check, and the request with it
// (prefix_mismatch_behavior "error"), or be dropped by the API
// ("drop_block"). Leaving them out is what the API would do in the second
// case, and lets the first go on; the thinking blocks before the tool_use
// keep their prefix and are sent back unchanged.
func blankInputs(m anthropic.BetaMessageParam, bad func(input any) bool) anthropic.BetaMessageParam {
	if m.OfAssistant == nil {
		return m
	}
	var content []anthropic.BetaContentBlockParamUnion
	for i, b := range m.OfAssistant.Content {
		if b.OfToolUse == nil || !bad(b.OfToolUse.Input) {
			continue
		}
		if content == nil {
			content = slices.Clone(m.OfAssistant.Content)
		}
		tu := *b.OfToolUse
		tu.Input = map[string]any{}
		content[i].OfToolUse = &tu
	}
	if content == nil {
		return m
	}
	blanked := false
	kept := content[:0]
	for i, b := range content {
		if blanked && (b.OfThinking != nil || b.OfRedactedThinking != nil) {
			continue
		}
		if b.OfToolUse != nil && b.OfToolUse != m.OfAssistant.Content[i].OfToolUse {
			blanked = true
		}
		kept = append(kept, b)
	}
	a := *m.OfAssistant
	a.Content = kept
	m.OfAssistant = &a
	return m
}

// finiteJSON reports whether v, a value as the client decodes JSON into,
// holds no infinite or NaN float, without allocating. Other kinds of value
// are taken as encodable: the client decodes JSON into these alone.
func finiteJSON(v any) bool {
	switch v := v.(type) {
	case float64:
		return !math.IsInf(v, 0) && !math.IsNaN(v)
	case map[string]any:
		for _, e := range v {
			if !finiteJSON(e) {
				return false
			}
		}
	case []any:
		for _, e := range v {
			if !finiteJSON(e) {
				return false
			}
		}
	}
	return true
}
