package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolrun/toolrun/internal/schema"
)

type orderItem struct {
	Name string `json:"name"`
	Qty  int    `json:"qty"`
}

type orderInput struct {
	Customer string      `json:"customer"`
	Items    []orderItem `json:"items"`
	Note     *string     `json:"note,omitempty"`
}

// weatherSchema is the schema of a get_weather tool as NewTool would infer
// it, with the enum and bounds struct tags cannot express.
const weatherSchema = `{"type":"object","required":["city"],"additionalProperties":false,
	"properties":{"city":{"type":"string"},"units":{"type":"string","enum":["celsius","fahrenheit"]},
	"days":{"type":"integer","minimum":1,"maximum":10}}}`

// inferJSON returns the schema NewTool infers for T, as JSON.
func inferJSON[T any](t testing.TB) string {
	t.Helper()
	s, err := jsonschema.For[T](nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rawTool is a Tool with a given schema, as a custom implementation or an
// integration would write it.
type rawTool struct {
	ToolConfig
	name   string
	schema json.RawMessage
}

func (t rawTool) Name() string                 { return t.name }
func (t rawTool) Description() string          { return "" }
func (t rawTool) InputSchema() json.RawMessage { return t.schema }
func (t rawTool) Run(ctx context.Context, input json.RawMessage) ([]Content, error) {
	return nil, nil
}

func compileFor(t testing.TB, schemaText string) *toolSchema {
	t.Helper()
	ts, _, err := compileTool(rawTool{name: "t", schema: json.RawMessage(schemaText)})
	if err != nil {
		t.Fatalf("compileTool(%s): %v", schemaText, err)
	}
	return ts
}

// violationsOf returns the violations in err, or nil if err is nil.
func violationsOf(t *testing.T, err error) []Violation {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got error %T (%v), want *ValidationError", err, err)
	}
	if len(ve.Violations) == 0 {
		t.Fatalf("got *ValidationError with no violations")
	}
	return ve.Violations
}

func TestValidate(t *testing.T) {
	order := inferJSON[orderInput](t)
	object := `{"type":"object"}`
	long := strings.Repeat("a", 100)
	nested := func(depth int, leaf string) string {
		return strings.Repeat(`{"a":`, depth) + leaf + strings.Repeat("}", depth)
	}

	tests := []struct {
		name   string
		schema string
		input  string
		want   []Violation
	}{
		{name: "valid input", schema: weatherSchema, input: `{"city":"Paris","units":"celsius","days":3}`},
		{name: "optional properties may be absent", schema: weatherSchema, input: `{"city":"Paris"}`},
		{
			name:   "empty input counts as an empty object",
			schema: weatherSchema,
			input:  ``,
			want:   []Violation{{Pointer: "/city", Expected: `required property "city"`, Got: "missing"}},
		},
		{name: "empty input with nothing required", schema: object, input: ``},
		{name: "nil schema accepts any object", schema: ``, input: `{"anything":[1]}`},
		{
			name:   "every violation is reported",
			schema: weatherSchema,
			input:  `{"units":"kelvin","days":0}`,
			want: []Violation{
				{Pointer: "/city", Expected: `required property "city"`, Got: "missing"},
				{Pointer: "/days", Expected: "a number >= 1", Got: "0 (number)"},
				{Pointer: "/units", Expected: `one of ["celsius","fahrenheit"]`, Got: `"kelvin" (string)`},
			},
		},
		{
			name:   "additionalProperties false",
			schema: weatherSchema,
			input:  `{"city":"Paris","extra":1,"more":{}}`,
			want: []Violation{
				{Pointer: "/extra", Expected: "no additional properties", Got: `property "extra"`},
				{Pointer: "/more", Expected: "no additional properties", Got: `property "more"`},
			},
		},
		{name: "integer accepts a zero fraction", schema: weatherSchema, input: `{"city":"Paris","days":3.0}`},
		{name: "integer accepts an exponent", schema: weatherSchema, input: `{"city":"Paris","days":0.1e2}`},
		{
			name:   "integer rejects a fraction",
			schema: weatherSchema,
			input:  `{"city":"Paris","days":3.5}`,
			want:   []Violation{{Pointer: "/days", Expected: `type "integer"`, Got: "3.5 (number)"}},
		},
		{
			name:   "nested arrays and objects",
			schema: order,
			input:  `{"customer":"Ann","items":[{"name":"tea","qty":1},{"name":"jam","qty":2},{"qty":"3"}]}`,
			want: []Violation{
				{Pointer: "/items/2/name", Expected: `required property "name"`, Got: "missing"},
				{Pointer: "/items/2/qty", Expected: `type "integer"`, Got: `"3" (string)`},
			},
		},
		{name: "nil slice and pointer accept null", schema: order, input: `{"customer":"Ann","items":null,"note":null}`},
		{
			name:   "root of the wrong type",
			schema: weatherSchema,
			input:  `null`,
			want:   []Violation{{Pointer: "", Expected: `type "object"`, Got: "null"}},
		},
		{
			name: "pointer escaping",
			schema: `{"type":"object","properties":{"a/b":{"type":"integer"},"c~d":{"type":"string"}},
				"required":["e/f~g"]}`,
			input: `{"a/b":"x","c~d":true}`,
			want: []Violation{
				{Pointer: "/a~1b", Expected: `type "integer"`, Got: `"x" (string)`},
				{Pointer: "/c~0d", Expected: `type "string"`, Got: "true (boolean)"},
				{Pointer: "/e~1f~0g", Expected: `required property "e/f~g"`, Got: "missing"},
			},
		},
		{
			name:   "invalid JSON",
			schema: weatherSchema,
			input:  `{"city":`,
			want:   []Violation{{Pointer: "", Expected: "valid JSON", Got: "unexpected end of JSON input at offset 8"}},
		},
		{
			name:   "data after the value",
			schema: weatherSchema,
			input:  `{"city":"Paris"} {}`,
			want:   []Violation{{Pointer: "", Expected: "valid JSON", Got: "invalid character '{' after top-level value at offset 18"}},
		},
		{
			name:   "type list",
			schema: `{"properties":{"v":{"type":["string","null"]}}}`,
			input:  `{"v":1}`,
			want:   []Violation{{Pointer: "/v", Expected: `type "null" or "string"`, Got: "1 (number)"}},
		},
		{
			name:   "long values are cut",
			schema: `{"properties":{"v":{"enum":["short"]}}}`,
			input:  `{"v":"` + long + `"}`,
			want:   []Violation{{Pointer: "/v", Expected: `one of ["short"]`, Got: `"` + strings.Repeat("a", 59) + `…" (string)`}},
		},
		{name: "enum compares numbers by value", schema: `{"properties":{"v":{"enum":[1,2,"x"]}}}`, input: `{"v":2.0}`},
		{
			name:   "const compares objects by value",
			schema: `{"properties":{"v":{"const":{"a":[1,2],"b":null}}}}`,
			input:  `{"v":{"b":null,"a":[1.0,2e0]}}`,
		},
		{
			name:   "const",
			schema: `{"properties":{"v":{"const":{"a":[1,2]}}}}`,
			input:  `{"v":{"a":[2,1]}}`,
			want:   []Violation{{Pointer: "/v", Expected: `exactly {"a":[1,2]}`, Got: `{"a":[2,1]} (object)`}},
		},
		{
			name:   "string lengths count runes",
			schema: `{"properties":{"v":{"maxLength":4}}}`,
			input:  `{"v":"héllo"}`,
			want:   []Violation{{Pointer: "/v", Expected: "at most 4 characters", Got: `"héllo" (5 characters)`}},
		},
		{
			name:   "pattern",
			schema: `{"properties":{"id":{"type":"string","pattern":"^[a-z]+$"}}}`,
			input:  `{"id":"ABC"}`,
			want:   []Violation{{Pointer: "/id", Expected: `a value matching pattern "^[a-z]+$"`, Got: `"ABC" (string)`}},
		},
		{name: "format is not asserted", schema: `{"properties":{"v":{"type":"string","format":"email"}}}`, input: `{"v":"not an email"}`},
		{
			name:   "format is not asserted in draft-07",
			schema: `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"v":{"format":"email"}}}`,
			input:  `{"v":"not an email"}`,
		},
		{
			name:   "number bounds",
			schema: `{"properties":{"v":{"items":{"exclusiveMinimum":0,"exclusiveMaximum":1e21}}}}`,
			input:  `{"v":[0,1e21,0.5]}`,
			want: []Violation{
				{Pointer: "/v/0", Expected: "a number > 0", Got: "0 (number)"},
				{Pointer: "/v/1", Expected: "a number < 1000000000000000000000", Got: "1e21 (number)"},
			},
		},
		{
			name:   "large integers keep their digits",
			schema: `{"properties":{"v":{"type":"integer","maximum":9007199254740992}}}`,
			input:  `{"v":9007199254740993}`,
			want:   []Violation{{Pointer: "/v", Expected: "a number <= 9007199254740992", Got: "9007199254740993 (number)"}},
		},
		{name: "multipleOf reads numbers exactly", schema: `{"properties":{"p":{"multipleOf":0.01}}}`, input: `{"p":19.99}`},
		{
			// Issue 14: the fallback validator rejected this input as soon
			// as another field used anyOf.
			name: "multipleOf beside anyOf: one verdict",
			schema: `{"type":"object","properties":{"p":{"type":"number","multipleOf":0.01},
				"q":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`,
			input: `{"p":19.99,"q":"x"}`,
		},
		{
			name:   "multipleOf",
			schema: `{"properties":{"p":{"multipleOf":0.01}}}`,
			input:  `{"p":19.995}`,
			want:   []Violation{{Pointer: "/p", Expected: "a multiple of 0.01", Got: "19.995 (number)"}},
		},
		{
			name:   "uniqueItems compares by value",
			schema: `{"properties":{"v":{"uniqueItems":true}}}`,
			input:  `{"v":[1,"a",1.0]}`,
			want:   []Violation{{Pointer: "/v", Expected: "unique items", Got: "items 0 and 2 are equal"}},
		},
		{
			name: "anyOf items name every failing item",
			schema: `{"type":"object","properties":{"ids":{"type":"array",
				"items":{"anyOf":[{"type":"integer"},{"type":"null"}]}}}}`,
			input: `{"ids":[1,"x",2,"y"]}`,
			want: []Violation{
				{Pointer: "/ids/1", Expected: `type "integer" or type "null"`, Got: `"x" (string)`},
				{Pointer: "/ids/3", Expected: `type "integer" or type "null"`, Got: `"y" (string)`},
			},
		},
		{
			name: "oneOf options explained by their leaves",
			schema: `{"type":"object","properties":{"c":{"oneOf":[{"required":["x"]},
				{"properties":{"y":{"type":"string"}}}]}}}`,
			input: `{"c":{"y":1}}`,
			want: []Violation{
				{Pointer: "/c/x", Expected: `required property "x" (oneOf option 1 of 2)`, Got: "missing"},
				{Pointer: "/c/y", Expected: `type "string" (oneOf option 2 of 2)`, Got: "1 (number)"},
			},
		},
		{
			name:   "oneOf matching twice",
			schema: `{"properties":{"v":{"oneOf":[{"type":"integer"},{"minimum":0}]}}}`,
			input:  `{"v":3}`,
			want:   []Violation{{Pointer: "/v", Expected: "exactly one oneOf option to match", Got: "3 (number), which matches options 1 and 2"}},
		},
		{
			name: "$ref explained by the leaves it reaches",
			schema: `{"$defs":{"phone":{"type":"string","pattern":"^[0-9]+$"}},
				"properties":{"contact":{"type":"object","properties":{"phone":{"$ref":"#/$defs/phone"}}}}}`,
			input: `{"contact":{"phone":5}}`,
			want:  []Violation{{Pointer: "/contact/phone", Expected: `type "string"`, Got: "5 (number)"}},
		},
		{
			name:   "if then",
			schema: `{"if":{"required":["a"]},"then":{"required":["b"]}}`,
			input:  `{"a":1}`,
			want:   []Violation{{Pointer: "/b", Expected: `required property "b"`, Got: "missing"}},
		},
		{
			name:   "dependentRequired",
			schema: `{"dependentRequired":{"a":["b"]}}`,
			input:  `{"a":1}`,
			want:   []Violation{{Pointer: "/b", Expected: `required property "b" (since "a" is present)`, Got: "missing"}},
		},
		{
			name:   "not",
			schema: `{"properties":{"v":{"not":{"type":"string"}}}}`,
			input:  `{"v":"s"}`,
			want:   []Violation{{Pointer: "/v", Expected: `a value that does not match the "not" schema`, Got: `"s" (string)`}},
		},
		{
			name:   "allOf names each failing leaf",
			schema: `{"properties":{"a":{"allOf":[{"minimum":3},{"multipleOf":2}]}}}`,
			input:  `{"a":1}`,
			want: []Violation{
				{Pointer: "/a", Expected: "a multiple of 2", Got: "1 (number)"},
				{Pointer: "/a", Expected: "a number >= 3", Got: "1 (number)"},
			},
		},
		{
			name:   "unevaluatedProperties",
			schema: `{"allOf":[{"properties":{"a":true}}],"unevaluatedProperties":false}`,
			input:  `{"a":1,"b":2}`,
			want:   []Violation{{Pointer: "/b", Expected: "no value (the schema allows none here)", Got: "2 (number)"}},
		},
		{
			name:   "propertyNames",
			schema: `{"propertyNames":{"maxLength":2}}`,
			input:  `{"abc":1,"ab":2}`,
			want:   []Violation{{Pointer: "/abc", Expected: "a property name that is at most 2 characters", Got: `property "abc"`}},
		},
		{
			name:   "minContains",
			schema: `{"properties":{"l":{"contains":{"const":1},"minContains":2}}}`,
			input:  `{"l":[1,2]}`,
			want:   []Violation{{Pointer: "/l", Expected: `at least 2 items valid against "contains"`, Got: "[1,2] (array), with 1 such"}},
		},
		{
			name:   "draft-07 additionalItems",
			schema: `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"l":{"items":[{"type":"string"}],"additionalItems":false}}}`,
			input:  `{"l":["a",2,3]}`,
			want:   []Violation{{Pointer: "/l", Expected: "at most 1 item (no additional items)", Got: `["a",2,3] (3 items)`}},
		},
		{
			name:   "recursive $ref",
			schema: `{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}}`,
			input:  `{"name":"a","children":[{"children":[{"name":3}]}]}`,
			want:   []Violation{{Pointer: "/children/0/children/0/name", Expected: `type "string"`, Got: "3 (number)"}},
		},
		{
			name:   "deep schemas",
			schema: strings.Repeat(`{"properties":{"a":`, 60) + `{"type":"integer"}` + strings.Repeat(`}}`, 60),
			input:  nested(60, `"x"`),
			want:   []Violation{{Pointer: strings.Repeat("/a", 60), Expected: `type "integer"`, Got: `"x" (string)`}},
		},
		{
			name: "2020-12 applies the siblings of $ref",
			schema: `{"$defs":{"n":{"type":"integer"}},
				"properties":{"a":{"$ref":"#/$defs/n","minimum":5}}}`,
			input: `{"a":1}`,
			want:  []Violation{{Pointer: "/a", Expected: "a number >= 5", Got: "1 (number)"}},
		},
		{
			name: "draft-07 ignores the siblings of $ref",
			schema: `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"n":{"type":"integer"}},
				"properties":{"a":{"$ref":"#/definitions/n","minimum":5}}}`,
			input: `{"a":1}`,
		},
		{
			name:   "draft-07 ignores prefixItems",
			schema: `{"$schema":"http://json-schema.org/draft-07/schema","properties":{"a":{"prefixItems":[{"type":"string"}]}}}`,
			input:  `{"a":[1]}`,
		},
		{
			name:   "draft-04 boolean exclusiveMaximum",
			schema: `{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"n":{"maximum":5,"exclusiveMaximum":true}}}`,
			input:  `{"n":5}`,
			want:   []Violation{{Pointer: "/n", Expected: "a number < 5", Got: "5 (number)"}},
		},
		{
			name:   "2019-09 $recursiveRef",
			schema: `{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,"properties":{"child":{"$recursiveRef":"#"},"n":{"type":"integer"}}}`,
			input:  `{"child":{"child":{"n":"x"}}}`,
			want:   []Violation{{Pointer: "/child/child/n", Expected: `type "integer"`, Got: `"x" (string)`}},
		},
		{
			name:   "values are rendered as JSON",
			schema: `{"properties":{"contact":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`,
			input:  `{"contact":{"phone":5}}`,
			want:   []Violation{{Pointer: "/contact", Expected: `type "string" or type "null"`, Got: `{"phone":5} (object)`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := compileFor(t, tt.schema)
			got := violationsOf(t, ts.validate(t.Context(), json.RawMessage(tt.input)))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("validate(%#q) violations mismatch (-want +got):\n%s", tt.input, diff)
			}
		})
	}
}

// TestValidateOneView: a raw or MCP tool's input that two decoders could
// read two ways is rejected (issue 13): a case-insensitive policy decoder
// would see one path and the tool another.
func TestValidateOneView(t *testing.T) {
	pathSchema := `{"type":"object","properties":{"path":{"type":"string"},"opts":{"type":"object","properties":{"mode":{"type":"string"}}}}}`
	tests := []struct {
		name  string
		input string
		want  []Violation
	}{
		{
			name:  "duplicate keys",
			input: `{"path":"/sandbox/notes.txt","path":"/etc/shadow"}`,
			want:  []Violation{{Pointer: "/path", Expected: "each key once in an object", Got: `the key "path" again`}},
		},
		{
			name:  "duplicate keys deep inside",
			input: `{"opts":{"list":[{"k":1,"k":2}]}}`,
			want:  []Violation{{Pointer: "/opts/list/0/k", Expected: "each key once in an object", Got: `the key "k" again`}},
		},
		{
			name:  "a key differing only in case",
			input: `{"path":"/etc/shadow","PATH":"/sandbox/notes.txt"}`,
			want:  []Violation{{Pointer: "/PATH", Expected: `the property name "path" spelt exactly`, Got: `the key "PATH", which differs only in case`}},
		},
		{
			name:  "a case variant alone, nested",
			input: `{"opts":{"Mode":"x"}}`,
			want:  []Violation{{Pointer: "/opts/Mode", Expected: `the property name "mode" spelt exactly`, Got: `the key "Mode", which differs only in case`}},
		},
		{name: "an unrelated extra key is the schema's business", input: `{"path":"a","other":1}`},
	}
	ts := compileFor(t, pathSchema)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := violationsOf(t, ts.validate(t.Context(), json.RawMessage(tt.input)))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("validate(%#q) violations mismatch (-want +got):\n%s", tt.input, diff)
			}
		})
	}
}

// TestValidatePatterns: JSON Schema patterns are ECMA-262. One RE2 lacks is
// matched by an ECMAScript engine, never dropped, and a match that
// backtracks too long is a violation, not a hang.
func TestValidatePatterns(t *testing.T) {
	// zod emits lookahead for "not starting with".
	zod := compileFor(t, `{"type":"object","properties":{"user":{"type":"string","pattern":"^(?!admin)\\w+$"}}}`)
	backtrack := compileFor(t, `{"type":"object","properties":{"s":{"type":"string","pattern":"^(?=a)(a+)+$"}}}`)
	tests := []struct {
		name   string
		schema *toolSchema
		input  string
		want   []Violation
	}{
		{name: "lookahead accepts", schema: zod, input: `{"user":"alice"}`},
		{
			name:   "lookahead rejects",
			schema: zod,
			input:  `{"user":"admin2"}`,
			want:   []Violation{{Pointer: "/user", Expected: `a value matching pattern "^(?!admin)\\w+$"`, Got: `"admin2" (string)`}},
		},
		{name: "backtracking pattern on a short input", schema: backtrack, input: `{"s":"aaaa"}`},
		{
			name:   "backtracking pattern times out",
			schema: backtrack,
			input:  `{"s":"` + strings.Repeat("a", 40) + `!"}`,
			want: []Violation{{
				Pointer:  "/s",
				Expected: `a value matching pattern "^(?=a)(a+)+$"`,
				Got:      `"` + strings.Repeat("a", 40) + `!" (string), which the pattern could not decide: the match took longer than 100ms`,
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := violationsOf(t, tt.schema.validate(t.Context(), json.RawMessage(tt.input)))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("validate(%#q) violations mismatch (-want +got):\n%s", tt.input, diff)
			}
		})
	}
}

// nestedAnyOf returns issue 14's schema: depth levels of anyOf whose two
// options both lead to the next level, so that an input failing at the
// bottom is tried 2^depth ways.
func nestedAnyOf(depth int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","$ref":"#/$defs/d0","$defs":{`)
	for i := range depth {
		fmt.Fprintf(&b, `"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d","minProperties":0}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"d%d":{"required":["never"]}}}`, depth)
	return b.String()
}

// TestValidateBounded: no schema holds a run past its deadline. The nested
// anyOf of depth 20 took 19 s, and of depth 40 never finished.
func TestValidateBounded(t *testing.T) {
	for _, depth := range []int{20, 40} {
		t.Run(fmt.Sprint("depth ", depth), func(t *testing.T) {
			ts := compileFor(t, nestedAnyOf(depth))
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := ts.validate(ctx, json.RawMessage(`{}`))
			if err == nil {
				t.Fatal("got nil, want an error")
			}
			if ctx.Err() != nil {
				t.Fatalf("validation ran past its deadline: %v", err)
			}
			got := violationsOf(t, err)
			if len(got) != 1 || !strings.Contains(got[0].Expected, "steps") {
				t.Errorf("got %+v, want one violation about the step budget", got)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ts := compileFor(t, nestedAnyOf(40))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := ts.validate(ctx, json.RawMessage(`{}`)); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	})
}

// TestNewRawToolSchema: every schema a tool may use is checked once, when
// the tool is built, and refused there with a clear error, never a panic.
func TestNewRawToolSchema(t *testing.T) {
	tests := []struct {
		name       string
		schema     string
		wantErr    string // a substring; "" for none
		wantUnsafe bool
	}{
		{name: "nil", schema: ``},
		{name: "true", schema: `true`},
		{name: "empty object", schema: `{}`},
		{name: "false", schema: `false`, wantErr: "the schema is false, so no input would ever be valid"},
		{name: "not an object schema", schema: `{"type":"array"}`, wantErr: `the schema's type is "array"; a tool's input schema must have "type": "object"`},
		{name: "not JSON", schema: `{"type":`, wantErr: "the schema is not valid JSON"},
		{name: "draft 2020-12", schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`},
		{name: "draft 2019-09", schema: `{"$schema":"https://json-schema.org/draft/2019-09/schema#"}`},
		{name: "draft-07 with #", schema: `{"$schema":"http://json-schema.org/draft-07/schema#"}`},
		{name: "draft-07 without #", schema: `{"$schema":"http://json-schema.org/draft-07/schema"}`},
		{name: "draft-06", schema: `{"$schema":"http://json-schema.org/draft-06/schema#"}`},
		{name: "draft-04", schema: `{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"n":{"maximum":1,"exclusiveMaximum":true}}}`},
		{name: "draft-03", schema: `{"$schema":"http://json-schema.org/draft-03/schema#"}`, wantErr: `unsupported $schema "http://json-schema.org/draft-03/schema#"`},
		{name: "unknown $schema", schema: `{"$schema":"https://example.com/my-meta"}`, wantErr: `unsupported $schema "https://example.com/my-meta"`},
		{
			name:       "cyclic $ref",
			schema:     `{"$defs":{"a":{"$ref":"#/$defs/a"}}}`,
			wantErr:    "the schema at #/$defs/a refers back to itself without reaching into the input",
			wantUnsafe: true,
		},
		{
			name:       "cycle through allOf",
			schema:     `{"$ref":"#/$defs/a","$defs":{"a":{"allOf":[{"$ref":"#/$defs/b"}]},"b":{"anyOf":[{"$ref":"#/$defs/a"}]}}}`,
			wantErr:    "refers back to itself",
			wantUnsafe: true,
		},
		{name: "recursion through properties makes progress", schema: `{"$ref":"#/$defs/n","$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}}}`},
		{name: "remote $ref", schema: `{"properties":{"a":{"$ref":"https://example.com/s.json"}}}`, wantErr: "references outside the schema are not allowed"},
		{name: "file $ref", schema: `{"properties":{"a":{"$ref":"file:///etc/passwd"}}}`, wantErr: "references outside the schema are not allowed"},
		{name: "pattern no engine compiles", schema: `{"properties":{"a":{"pattern":"(("}}}`, wantErr: "the schema cannot be used"},
		{name: "ECMAScript pattern", schema: `{"properties":{"a":{"pattern":"^(?!admin)\\w+$"}}}`},
		{name: "too deep", schema: strings.Repeat(`{"properties":{"a":`, 70) + `{}` + strings.Repeat(`}}`, 70), wantErr: "nested more than 128 levels", wantUnsafe: true},
		{name: "too large", schema: `{"description":"` + strings.Repeat("x", 1<<20) + `"}`, wantErr: "more than 1048576", wantUnsafe: true},
		{name: "repeated key", schema: `{"type":"object","type":"array"}`, wantErr: "the schema repeats the key at /type"},
		{name: "number beyond float64", schema: `{"type":"object","properties":{"n":{"maximum":1e400}}}`, wantErr: "decoding its input schema"},
	}
	fn := func(ctx context.Context, in json.RawMessage) (string, error) { return "", nil }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRawTool("t", "", []byte(tt.schema), fn)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalidSchema) {
				t.Errorf("got %v, want it to wrap ErrInvalidSchema", err)
			}
			if got := errors.Is(err, schema.ErrUnsafe); got != tt.wantUnsafe {
				t.Errorf("errors.Is(err, schema.ErrUnsafe) = %v, want %v", got, tt.wantUnsafe)
			}
		})
	}
}

// TestCompileToolRoot: a custom Tool whose schema is true, false or {}
// gets a clear answer, not a panic about unmarshalling a bool.
func TestCompileToolRoot(t *testing.T) {
	tests := []struct {
		schema  string
		wantErr string
		want    string // the input_schema sent to the API
	}{
		{schema: ``, want: `{"properties":{},"type":"object"}`},
		{schema: `true`, want: `{"properties":{},"type":"object"}`},
		{schema: `{}`, want: `{"properties":{},"type":"object"}`},
		{schema: `false`, wantErr: `toolrun: tool "t": toolrun: invalid input schema: the schema is false, so no input would ever be valid`},
		{
			schema: `{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"n":{"maximum":1.50,"exclusiveMaximum":true}},"required":["n"]}`,
			want:   `{"properties":{"n":{"exclusiveMaximum":true,"maximum":1.5}},"required":["n"],"type":"object"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			_, param, err := compileTool(rawTool{name: "t", schema: json.RawMessage(tt.schema)})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(param.OfTool.InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got input_schema %s, want %s", got, tt.want)
			}
		})
	}
}

// TestToolConstructorErrors: NewRawTool returns an error for a bad name
// or schema (data), NewTool panics for one (a mistake in the program).
func TestToolConstructorErrors(t *testing.T) {
	fn := func(ctx context.Context, in json.RawMessage) (string, error) { return "", nil }
	if _, err := NewRawTool("bad name", "", nil, fn); err == nil || !strings.Contains(err.Error(), "must match") {
		t.Errorf("NewRawTool with a bad name: got %v, want an error about the name", err)
	}
	if _, err := NewRawTool[string]("t", "", nil, nil); err == nil || err.Error() != `toolrun: tool "t": nil function` {
		t.Errorf("NewRawTool with a nil function: got %v, want an error saying so", err)
	}
	tool := NewTool("t", "", func(ctx context.Context, in orderInput) (string, error) { return in.Customer, nil })
	if _, err := NewRawTool("t", "", tool.InputSchema(), fn); err != nil {
		t.Errorf("the inferred schema: %v", err)
	}
	for _, tt := range []struct {
		name string
		new  func()
		want string
	}{
		{name: "non-struct input", new: func() {
			NewTool("t", "", func(ctx context.Context, in int) (string, error) { return "", nil })
		}, want: `toolrun: tool "t": input type int must be a struct, so its schema is an object`},
		{name: "bad name", new: func() {
			NewTool("bad name", "", func(ctx context.Context, in struct{}) (string, error) { return "", nil })
		}, want: `toolrun: tool name "bad name" must match ^[a-zA-Z0-9_-]{1,128}$`},
		{name: "nil function", new: func() {
			NewTool[struct{}, string]("t", "", nil)
		}, want: `toolrun: tool "t": nil function`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if got := fmt.Sprint(recover()); got != tt.want {
					t.Errorf("panic = %q, want %q", got, tt.want)
				}
			}()
			tt.new()
		})
	}
}

// TestValidationErrorError pins the text the model receives.
func TestValidationErrorError(t *testing.T) {
	err := compileFor(t, weatherSchema).validate(t.Context(), json.RawMessage(`{"units":"kelvin","extra":true}`))
	var fromValidate *ValidationError
	if !errors.As(err, &fromValidate) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	fromValidate.Tool = "get_weather"

	many := &ValidationError{Tool: "t"}
	for i := range 52 {
		many.Violations = append(many.Violations, Violation{Pointer: fmt.Sprintf("/%02d", i), Expected: "x", Got: "y"})
	}
	var manyWant strings.Builder
	manyWant.WriteString(`invalid input for tool "t": 52 problems:`)
	for i := range 50 {
		fmt.Fprintf(&manyWant, "\n- /%02d: expected x, got y", i)
	}
	manyWant.WriteString("\n- and 2 more")

	tests := []struct {
		name string
		err  *ValidationError
		want string
	}{
		{
			name: "from validate",
			err:  fromValidate,
			want: `invalid input for tool "get_weather": 3 problems:
- /city: expected required property "city", got missing
- /extra: expected no additional properties, got property "extra"
- /units: expected one of ["celsius","fahrenheit"], got "kelvin" (string)`,
		},
		{
			name: "root and no tool",
			err:  &ValidationError{Violations: []Violation{{Expected: "valid JSON", Got: "unexpected end of JSON input at offset 1"}}},
			want: "invalid input: 1 problem:\n- (root): expected valid JSON, got unexpected end of JSON input at offset 1",
		},
		{
			name: "no violations",
			err:  &ValidationError{Tool: "t"},
			want: `invalid input for tool "t"`,
		},
		{
			name: "control characters in a pointer",
			err:  &ValidationError{Violations: []Violation{{Pointer: "/a\nb", Expected: "x", Got: "y"}}},
			want: "invalid input: 1 problem:\n- \"/a\\nb\": expected x, got y",
		},
		{
			name: "long lists are cut",
			err:  many,
			want: manyWant.String(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.err.Error()); diff != "" {
				t.Errorf("Error() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// fuzzSchemas are the schemas FuzzValidateInput checks inputs against: one
// with the simple keywords, one with the composite ones, one in draft-04.
var fuzzSchemas = []string{`{
	"type": "object",
	"required": ["name"],
	"additionalProperties": false,
	"properties": {
		"name": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z]+$"},
		"n": {"type": "integer", "minimum": 0, "exclusiveMaximum": 100, "multipleOf": 0.5},
		"x": {"type": "number", "maximum": 1.5, "exclusiveMinimum": -2},
		"tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]},
			"uniqueItems": true, "minItems": 1, "maxItems": 3},
		"pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}],
			"items": {"type": "null"}},
		"kind": {"enum": ["a", 1, null, 2.5, [1], {"k": true}]},
		"c": {"const": {"k": [1, "x"]}},
		"opt": {"type": ["string", "null"]},
		"meta": {"type": "object", "additionalProperties": {"type": "integer"},
			"minProperties": 1, "maxProperties": 2},
		"no": false
	}
}`, `{
	"$defs": {"node": {"type": "object", "properties": {
		"v": {"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]},
		"next": {"$ref": "#/$defs/node"}}}},
	"type": "object",
	"properties": {
		"node": {"$ref": "#/$defs/node"},
		"any": {"anyOf": [{"type": "boolean"}, {"type": "array", "contains": {"const": 1}}]},
		"p": {"patternProperties": {"^x": {"type": "integer"}, "^(?!y)z": {"type": "string"}}, "additionalProperties": false},
		"d": {"dependentRequired": {"a": ["b"]}, "not": {"required": ["z"]}},
		"u": {"allOf": [{"properties": {"a": true}}], "unevaluatedProperties": false}
	}
}`, `{
	"$schema": "http://json-schema.org/draft-04/schema#",
	"definitions": {"pos": {"type": "number", "minimum": 0, "exclusiveMinimum": true}},
	"properties": {"p": {"$ref": "#/definitions/pos"}, "q": {"items": [{"type": "string"}], "additionalItems": false}}
}`}

// FuzzValidateInput checks that validation never panics and returns nil or
// a *ValidationError with sorted violations and a non-empty text.
func FuzzValidateInput(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`,
		`{"name":"abc"}`,
		`{"name":"abc","n":5,"x":1.5,"tags":["a","b"],"pair":["s",true,null],"kind":2.5,"c":{"k":[1,"x"]},"opt":null,"meta":{"a":1}}`,
		`{"name":"ABC","n":5.5,"x":-2,"tags":["a","a","d","b"],"pair":[1,"t",0],"kind":"b","c":{"k":[1]},"opt":3,"meta":{},"no":1,"extra":0}`,
		`{"name":"abc","n":1e2,"x":1e-400,"kind":{"k":true},"tags":[]}`,
		`{"name":"abcdefghi","n":9007199254740993,"kind":[1.0]}`,
		`{"node":{"v":"s","next":{"v":-1,"next":{"v":1.5}}}}`,
		`{"any":[0,1],"p":{"x1":1,"y":2,"zz":3},"d":{"a":1,"z":1},"u":{"a":1,"b":2}}`,
		`{"p":0,"q":["a",1]}`,
		`{"name":"a","n":1e999999,"x":-1e999999}`,
		`{"name":"a","NAME":"b","name":"c"}`,
		`{"name":`,
		"\"\xff\"",
	} {
		f.Add([]byte(seed))
	}
	var schemas []*toolSchema
	for _, text := range fuzzSchemas {
		schemas = append(schemas, compileFor(f, text))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		for i, ts := range schemas {
			err := ts.validate(context.Background(), input)
			if err == nil {
				continue
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("schema %d: got error %T (%v), want *ValidationError", i, err, err)
			}
			if len(ve.Violations) == 0 {
				t.Fatalf("schema %d: got *ValidationError with no violations", i)
			}
			sorted := slices.IsSortedFunc(ve.Violations, func(a, b Violation) int {
				return strings.Compare(a.Pointer+"\x00"+a.Expected, b.Pointer+"\x00"+b.Expected)
			})
			if !sorted {
				t.Errorf("schema %d: violations not sorted: %+v", i, ve.Violations)
			}
			if ve.Error() == "" {
				t.Errorf("schema %d: empty Error()", i)
			}
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	ts := compileFor(b, inferJSON[orderInput](b))
	inputs := []struct {
		name  string
		input string
	}{
		{name: "valid", input: `{"customer":"Ann","items":[{"name":"tea","qty":1},{"name":"jam","qty":2}],"note":"by noon"}`},
		{name: "invalid", input: `{"customer":7,"items":[{"name":"tea","qty":1.5},{"qty":2}],"extra":true}`},
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			input := json.RawMessage(in.input)
			b.ReportAllocs()
			for b.Loop() {
				_ = ts.validate(context.Background(), input)
			}
		})
	}
}
