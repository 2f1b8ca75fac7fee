package toolrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
)

type weatherInput struct {
	City  string `json:"city" jsonschema:"the city to report on"`
	Units string `json:"units,omitempty" jsonschema:"celsius or fahrenheit"`
	Days  int    `json:"days,omitempty" jsonschema:"how many days to forecast"`
}

type orderItem struct {
	Name string `json:"name"`
	Qty  int    `json:"qty"`
}

type orderInput struct {
	Customer string      `json:"customer"`
	Items    []orderItem `json:"items"`
	Note     *string     `json:"note,omitempty"`
}

// inferSchema infers the schema of T and lets edit add what struct tags
// cannot express.
func inferSchema[T any](t testing.TB, edit func(*jsonschema.Schema)) *jsonschema.Schema {
	t.Helper()
	s, err := jsonschema.For[T](nil)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(s)
	}
	return s
}

// parseSchema unmarshals a schema written as JSON, as a tool definition
// loaded from a file would be.
func parseSchema(t testing.TB, text string) *jsonschema.Schema {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		t.Fatalf("schema %s: %v", text, err)
	}
	return &s
}

func resolveSchema(t testing.TB, s *jsonschema.Schema) *jsonschema.Resolved {
	t.Helper()
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("resolving schema: %v", err)
	}
	return rs
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

func TestValidateInput(t *testing.T) {
	weather := inferSchema[weatherInput](t, func(s *jsonschema.Schema) {
		s.Properties["units"].Enum = []any{"celsius", "fahrenheit"}
		s.Properties["days"].Minimum = jsonschema.Ptr(1.0)
		s.Properties["days"].Maximum = jsonschema.Ptr(10.0)
	})
	order := inferSchema[orderInput](t, nil)
	object := &jsonschema.Schema{Type: "object"}
	long := strings.Repeat("a", 100)

	tests := []struct {
		name   string
		schema *jsonschema.Schema
		input  string
		want   []Violation
	}{
		{
			name:   "valid input",
			schema: weather,
			input:  `{"city":"Paris","units":"celsius","days":3}`,
		},
		{
			name:   "optional properties may be absent",
			schema: weather,
			input:  `{"city":"Paris"}`,
		},
		{
			name:   "empty input counts as an empty object",
			schema: weather,
			input:  ``,
			want:   []Violation{{Pointer: "/city", Expected: `required property "city"`, Got: "missing"}},
		},
		{
			name:   "empty input with nothing required",
			schema: object,
			input:  ``,
		},
		{
			name:   "every violation is reported",
			schema: weather,
			input:  `{"units":"kelvin","days":0}`,
			want: []Violation{
				{Pointer: "/city", Expected: `required property "city"`, Got: "missing"},
				{Pointer: "/days", Expected: "a number >= 1", Got: "0 (number)"},
				{Pointer: "/units", Expected: `one of ["celsius","fahrenheit"]`, Got: `"kelvin" (string)`},
			},
		},
		{
			name:   "additionalProperties false",
			schema: weather,
			input:  `{"city":"Paris","extra":1,"more":{}}`,
			want: []Violation{
				{Pointer: "/extra", Expected: "no additional properties", Got: `property "extra"`},
				{Pointer: "/more", Expected: "no additional properties", Got: `property "more"`},
			},
		},
		{
			name:   "integer accepts a zero fraction",
			schema: weather,
			input:  `{"city":"Paris","days":3.0}`,
		},
		{
			name:   "integer accepts an exponent",
			schema: weather,
			input:  `{"city":"Paris","days":0.1e2}`,
		},
		{
			name:   "integer rejects a fraction",
			schema: weather,
			input:  `{"city":"Paris","days":3.5}`,
			want:   []Violation{{Pointer: "/days", Expected: `type "integer"`, Got: "3.5 (number)"}},
		},
		{
			name:   "integer rejects a string",
			schema: weather,
			input:  `{"city":"Paris","days":"3"}`,
			want:   []Violation{{Pointer: "/days", Expected: `type "integer"`, Got: `"3" (string)`}},
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
		{
			name:   "nil slice and pointer accept null",
			schema: order,
			input:  `{"customer":"Ann","items":null,"note":null}`,
		},
		{
			name:   "no descent into a value of the wrong type",
			schema: order,
			input:  `{"customer":"Ann","items":{"name":7}}`,
			want: []Violation{
				{Pointer: "/items", Expected: `type "null" or "array"`, Got: `{"name":7} (object)`},
			},
		},
		{
			name:   "root of the wrong type",
			schema: weather,
			input:  `null`,
			want:   []Violation{{Pointer: "", Expected: `type "object"`, Got: "null"}},
		},
		{
			name: "pointer escaping",
			schema: &jsonschema.Schema{
				Type: "object",
				Properties: map[string]*jsonschema.Schema{
					"a/b": {Type: "integer"},
					"c~d": {Type: "string"},
				},
				Required: []string{"e/f~g"},
			},
			input: `{"a/b":"x","c~d":true}`,
			want: []Violation{
				{Pointer: "/a~1b", Expected: `type "integer"`, Got: `"x" (string)`},
				{Pointer: "/c~0d", Expected: `type "string"`, Got: "true (boolean)"},
				{Pointer: "/e~1f~0g", Expected: `required property "e/f~g"`, Got: "missing"},
			},
		},
		{
			name:   "invalid JSON",
			schema: weather,
			input:  `{"city":`,
			want:   []Violation{{Pointer: "", Expected: "valid JSON", Got: "unexpected end of JSON input at offset 8"}},
		},
		{
			name:   "invalid JSON character",
			schema: weather,
			input:  `{"city": Paris}`,
			want: []Violation{{
				Pointer:  "",
				Expected: "valid JSON",
				Got:      "invalid character 'P' looking for beginning of value at offset 10",
			}},
		},
		{
			name:   "data after the value",
			schema: weather,
			input:  `{"city":"Paris"} {}`,
			want: []Violation{{
				Pointer:  "",
				Expected: "valid JSON",
				Got:      "invalid character '{' after top-level value at offset 18",
			}},
		},
		{
			name:   "whitespace is not empty",
			schema: object,
			input:  " \n",
			want:   []Violation{{Pointer: "", Expected: "valid JSON", Got: "unexpected end of JSON input at offset 2"}},
		},
		{
			name:   "type list",
			schema: parseSchema(t, `{"type":["string","null"]}`),
			input:  `1`,
			want:   []Violation{{Pointer: "", Expected: `type "string" or "null"`, Got: "1 (number)"}},
		},
		{
			name:   "type list of three",
			schema: parseSchema(t, `{"type":["string","integer","null"]}`),
			input:  `[]`,
			want:   []Violation{{Pointer: "", Expected: `type "string", "integer" or "null"`, Got: "[] (array)"}},
		},
		{
			name:   "number accepts an integer",
			schema: parseSchema(t, `{"type":"number"}`),
			input:  `7`,
		},
		{
			name:   "long values are cut",
			schema: parseSchema(t, `{"enum":["short"]}`),
			input:  `"` + long + `"`,
			want: []Violation{{
				Pointer:  "",
				Expected: `one of ["short"]`,
				Got:      `"` + strings.Repeat("a", 59) + `…" (string)`,
			}},
		},
		{
			name:   "long objects are cut",
			schema: parseSchema(t, `{"type":"array"}`),
			input:  `{"k":"` + long + `"}`,
			want: []Violation{{
				Pointer:  "",
				Expected: `type "array"`,
				Got:      `{"k":"` + strings.Repeat("a", 53) + `… (object)`,
			}},
		},
		{
			name:   "enum of Go ints matches equal numbers",
			schema: &jsonschema.Schema{Enum: []any{1, int64(2), "x"}},
			input:  `2.0`,
		},
		{
			name:   "enum of Go ints",
			schema: &jsonschema.Schema{Enum: []any{1, int64(2), "x", nil}},
			input:  `3`,
			want:   []Violation{{Pointer: "", Expected: `one of [1,2,"x",null]`, Got: "3 (number)"}},
		},
		{
			name:   "const compares objects by value",
			schema: parseSchema(t, `{"const":{"a":[1,2],"b":null}}`),
			input:  `{"b":null,"a":[1.0,2e0]}`,
		},
		{
			name:   "const",
			schema: parseSchema(t, `{"const":{"a":[1,2]}}`),
			input:  `{"a":[2,1]}`,
			want:   []Violation{{Pointer: "", Expected: `exactly {"a":[1,2]}`, Got: `{"a":[2,1]} (object)`}},
		},
		{
			name:   "no descent into a value that fails its enum",
			schema: parseSchema(t, `{"enum":[{"a":1}],"properties":{"a":{"type":"string"}}}`),
			input:  `{"a":2}`,
			want:   []Violation{{Pointer: "", Expected: `one of [{"a":1}]`, Got: `{"a":2} (object)`}},
		},
		{
			name:   "string lengths count runes",
			schema: parseSchema(t, `{"minLength":5,"maxLength":5}`),
			input:  `"héllo"`,
		},
		{
			name:   "maxLength",
			schema: parseSchema(t, `{"maxLength":4}`),
			input:  `"héllo"`,
			want:   []Violation{{Pointer: "", Expected: "at most 4 characters", Got: `"héllo" (5 characters)`}},
		},
		{
			name:   "minLength",
			schema: parseSchema(t, `{"minLength":1}`),
			input:  `""`,
			want:   []Violation{{Pointer: "", Expected: "at least 1 character", Got: `"" (0 characters)`}},
		},
		{
			name:   "pattern",
			schema: parseSchema(t, `{"properties":{"id":{"type":"string","pattern":"^[a-z]+$"}}}`),
			input:  `{"id":"ABC"}`,
			want:   []Violation{{Pointer: "/id", Expected: `a value matching pattern "^[a-z]+$"`, Got: `"ABC" (string)`}},
		},
		{
			name:   "pattern matches anywhere",
			schema: parseSchema(t, `{"pattern":"b"}`),
			input:  `"abc"`,
		},
		{
			name:   "string keywords ignore other types",
			schema: parseSchema(t, `{"pattern":"^a$","minLength":3}`),
			input:  `12`,
		},
		{
			name:   "format is not asserted",
			schema: parseSchema(t, `{"type":"string","format":"email"}`),
			input:  `"not an email"`,
		},
		{
			name:   "number bounds",
			schema: parseSchema(t, `{"items":{"exclusiveMinimum":0,"exclusiveMaximum":1e21}}`),
			input:  `[0,1e21,-0,0.5,1e20]`,
			want: []Violation{
				{Pointer: "/0", Expected: "a number > 0", Got: "0 (number)"},
				{Pointer: "/1", Expected: "a number < 1e+21", Got: "1e21 (number)"},
				{Pointer: "/2", Expected: "a number > 0", Got: "-0 (number)"},
			},
		},
		{
			name:   "large integers keep their digits",
			schema: parseSchema(t, `{"type":"integer","maximum":9007199254740992}`),
			input:  `9007199254740993`,
			want:   []Violation{{Pointer: "", Expected: "a number <= 9007199254740992", Got: "9007199254740993 (number)"}},
		},
		{
			name:   "very large integer",
			schema: parseSchema(t, `{"type":"integer","minimum":0}`),
			input:  `123456789012345678901234567890123456789`,
		},
		{
			name:   "numbers beyond float64",
			schema: parseSchema(t, `{"items":{"type":"integer","minimum":-10,"maximum":10}}`),
			input:  `[1e999999,-1e99999999999999999999999,1e-999999,0e999999999999999999]`,
			want: []Violation{
				{Pointer: "/0", Expected: "a number <= 10", Got: "1e999999 (number)"},
				{Pointer: "/1", Expected: "a number >= -10", Got: "-1e99999999999999999999999 (number)"},
				{Pointer: "/2", Expected: `type "integer"`, Got: "1e-999999 (number)"},
			},
		},
		{
			name:   "tiny numbers are not zero",
			schema: parseSchema(t, `{"exclusiveMinimum":0,"maximum":0.5}`),
			input:  `1e-999999`,
		},
		{
			name:   "multipleOf reads the schema number as written",
			schema: parseSchema(t, `{"multipleOf":0.01}`),
			input:  `19.99`,
		},
		{
			name:   "multipleOf",
			schema: parseSchema(t, `{"items":{"multipleOf":0.01}}`),
			input:  `[19.995,1e999999,3e-999999,0]`,
			want: []Violation{
				{Pointer: "/0", Expected: "a multiple of 0.01", Got: "19.995 (number)"},
				{Pointer: "/2", Expected: "a multiple of 0.01", Got: "3e-999999 (number)"},
			},
		},
		{
			name:   "multipleOf of huge numbers",
			schema: parseSchema(t, `{"items":{"multipleOf":3}}`),
			input:  `[3e999999,1e999999,12e99999999999999999999]`,
			want:   []Violation{{Pointer: "/1", Expected: "a multiple of 3", Got: "1e999999 (number)"}},
		},
		{
			name:   "array lengths",
			schema: parseSchema(t, `{"properties":{"a":{"minItems":1},"b":{"maxItems":2}}}`),
			input:  `{"a":[],"b":[1,2,3]}`,
			want: []Violation{
				{Pointer: "/a", Expected: "at least 1 item", Got: "[] (0 items)"},
				{Pointer: "/b", Expected: "at most 2 items", Got: "[1,2,3] (3 items)"},
			},
		},
		{
			name:   "uniqueItems compares by value",
			schema: parseSchema(t, `{"uniqueItems":true}`),
			input:  `[1,"a",1.0,{"x":1,"y":[]},{"y":[],"x":1e0},"1",true,false]`,
			want: []Violation{
				{Pointer: "", Expected: "unique items", Got: "items 0 and 2 are equal"},
				{Pointer: "", Expected: "unique items", Got: "items 3 and 4 are equal"},
			},
		},
		{
			name: "prefixItems then items",
			schema: parseSchema(t, `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],
				"items":false}`),
			input: `[1,2,true]`,
			want: []Violation{
				{Pointer: "/0", Expected: `type "string"`, Got: "1 (number)"},
				{Pointer: "/2", Expected: "no value (the schema allows none here)", Got: "true (boolean)"},
			},
		},
		{
			name:   "a false property schema",
			schema: parseSchema(t, `{"properties":{"x":false}}`),
			input:  `{"x":0}`,
			want:   []Violation{{Pointer: "/x", Expected: "no value (the schema allows none here)", Got: "0 (number)"}},
		},
		{
			name:   "object sizes",
			schema: parseSchema(t, `{"items":{"minProperties":1,"maxProperties":1}}`),
			input:  `[{},{"a":1,"b":2},{"c":3}]`,
			want: []Violation{
				{Pointer: "/0", Expected: "at least 1 property", Got: "{} (0 properties)"},
				{Pointer: "/1", Expected: "at most 1 property", Got: `{"a":1,"b":2} (2 properties)`},
			},
		},
		{
			name:   "additionalProperties schema",
			schema: parseSchema(t, `{"properties":{"a":{}},"additionalProperties":{"type":"integer"}}`),
			input:  `{"a":"any","b":1,"c":"x"}`,
			want:   []Violation{{Pointer: "/c", Expected: `type "integer"`, Got: `"x" (string)`}},
		},
		{
			name: "patternProperties are not additional",
			schema: parseSchema(t, `{"patternProperties":{"^x_":{"type":"integer"}},
				"additionalProperties":false}`),
			input: `{"x_1":1}`,
		},
		{
			name:   "own violations take precedence over delegated keywords",
			schema: parseSchema(t, `{"required":["a"],"oneOf":[{"required":["b"]},{"required":["c"]}]}`),
			input:  `{}`,
			want:   []Violation{{Pointer: "/a", Expected: `required property "a"`, Got: "missing"}},
		},
		{
			name:   "a number too large for jsonschema-go",
			schema: parseSchema(t, `{"anyOf":[{"type":"number"}]}`),
			input:  `1e400`,
			want: []Violation{{
				Pointer:  "",
				Expected: "a value valid against the schema",
				Got:      "json: cannot unmarshal number 1e400 into Go value of type float64",
			}},
		},
		{
			name:   "draft-07 ignores prefixItems",
			schema: parseSchema(t, `{"$schema":"http://json-schema.org/draft-07/schema#","prefixItems":[{"type":"string"}]}`),
			input:  `[1]`,
		},
		{
			name: "draft-07 ignores the siblings of $ref",
			schema: parseSchema(t, `{"$schema":"http://json-schema.org/draft-07/schema#",
				"definitions":{"n":{"type":"integer"}},
				"properties":{"a":{"$ref":"#/definitions/n","minimum":5}}}`),
			input: `{"a":1}`,
		},
		{
			name: "2020-12 applies the siblings of $ref",
			schema: parseSchema(t, `{"$defs":{"n":{"type":"integer"}},
				"properties":{"a":{"$ref":"#/$defs/n","minimum":5}}}`),
			input: `{"a":1}`,
			want:  []Violation{{Pointer: "/a", Expected: "a number >= 5", Got: "1 (number)"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := resolveSchema(t, tt.schema)
			got := violationsOf(t, validateInput(rs, json.RawMessage(tt.input)))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("validateInput(%#q) violations mismatch (-want +got):\n%s", tt.input, diff)
			}
		})
	}
}

func TestValidateInputNilSchema(t *testing.T) {
	if err := validateInput(nil, json.RawMessage(`{"anything":[1]}`)); err != nil {
		t.Errorf("got %v, want nil", err)
	}
	got := violationsOf(t, validateInput(nil, json.RawMessage(`{`)))
	want := []Violation{{Expected: "valid JSON", Got: "unexpected end of JSON input at offset 1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("violations mismatch (-want +got):\n%s", diff)
	}
}

// TestValidateInputDelegates checks keywords that validateInput leaves to
// jsonschema-go: a failure is one violation at the root whose Got is
// jsonschema-go's error.
func TestValidateInputDelegates(t *testing.T) {
	oneOf := parseSchema(t, `{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`)
	tree := parseSchema(t, `{"$ref":"#/$defs/node","$defs":{"node":{"type":"object",
		"properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}}`)
	deep := &jsonschema.Schema{Type: "integer"}
	for range 100 {
		deep = &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"a": deep}}
	}
	nested := func(depth int, leaf string) string {
		return strings.Repeat(`{"a":`, depth) + leaf + strings.Repeat("}", depth)
	}
	tests := []struct {
		name      string
		schema    *jsonschema.Schema
		input     string
		wantValid bool
	}{
		{name: "oneOf string", schema: oneOf, input: `{"v":"x"}`, wantValid: true},
		{name: "oneOf integer", schema: oneOf, input: `{"v":1}`, wantValid: true},
		{name: "oneOf none", schema: oneOf, input: `{"v":true}`},
		{name: "oneOf number", schema: oneOf, input: `{"v":1.5}`},
		{name: "recursive $ref valid", schema: tree, input: `{"name":"a","children":[{"children":[{"name":"c"}]}]}`, wantValid: true},
		{name: "recursive $ref invalid", schema: tree, input: `{"name":"a","children":[{"children":[{"name":3}]}]}`},
		{name: "deeper than the walk valid", schema: deep, input: nested(100, "1"), wantValid: true},
		{name: "deeper than the walk invalid", schema: deep, input: nested(100, `"x"`)},
		{name: "unsupported draft", schema: parseSchema(t, `{"$schema":"http://json-schema.org/draft-04/schema#"}`), input: `{}`},
		{name: "not", schema: parseSchema(t, `{"not":{"type":"string"}}`), input: `"s"`},
		{name: "if then", schema: parseSchema(t, `{"if":{"required":["a"]},"then":{"required":["b"]}}`), input: `{"a":1}`},
		{name: "dependentRequired", schema: parseSchema(t, `{"dependentRequired":{"a":["b"]}}`), input: `{"a":1,"b":2}`, wantValid: true},
		{name: "contains", schema: parseSchema(t, `{"contains":{"const":2}}`), input: `[1,3]`},
		{
			name: "a schema that makes jsonschema-go panic",
			schema: &jsonschema.Schema{
				Minimum: jsonschema.Ptr(math.Inf(-1)),
				AllOf:   []*jsonschema.Schema{{}},
			},
			input: `1`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := resolveSchema(t, tt.schema)
			got := violationsOf(t, validateInput(rs, json.RawMessage(tt.input)))
			if tt.wantValid {
				if got != nil {
					t.Fatalf("got violations %+v, want none", got)
				}
				return
			}
			var plain any
			if err := json.Unmarshal([]byte(tt.input), &plain); err != nil {
				t.Fatal(err)
			}
			verr := validateRecovered(rs, plain)
			if verr == nil {
				t.Fatalf("jsonschema-go accepts %s; the test wants an invalid input", tt.input)
			}
			want := []Violation{{Pointer: "", Expected: "a value valid against the schema", Got: oneLine(verr.Error(), 500)}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("violations mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidationErrorError pins the text the model receives.
func TestValidationErrorError(t *testing.T) {
	weather := inferSchema[weatherInput](t, func(s *jsonschema.Schema) {
		s.Properties["units"].Enum = []any{"celsius", "fahrenheit"}
	})
	err := validateInput(resolveSchema(t, weather), json.RawMessage(`{"units":"kelvin","extra":true}`))
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
			name: "from validateInput",
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

func TestCompiledPattern(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		wantNil bool
	}{
		{name: "valid", pattern: "^[a-z]+$"},
		{name: "does not compile", pattern: "(", wantNil: true},
		{name: "lookahead is not RE2", pattern: "(?=a)", wantNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			re := compiledPattern(tt.pattern)
			if got := re == nil; got != tt.wantNil {
				t.Fatalf("compiledPattern(%q) == nil is %v, want %v", tt.pattern, got, tt.wantNil)
			}
			if again := compiledPattern(tt.pattern); again != re {
				t.Errorf("second compiledPattern(%q) = %p, want the cached %p", tt.pattern, again, re)
			}
		})
	}
}

// fuzzSchemaSupported uses only keywords validateInput checks itself. Its
// numbers are exact in binary, and its multipleOf is 1, so that float64
// arithmetic in jsonschema-go agrees with exact arithmetic here.
const fuzzSchemaSupported = `{
	"type": "object",
	"required": ["name"],
	"additionalProperties": false,
	"properties": {
		"name": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z]+$"},
		"n": {"type": "integer", "minimum": 0, "exclusiveMaximum": 100, "multipleOf": 1},
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
}`

// fuzzSchemaDelegated mixes supported keywords with ones left to
// jsonschema-go.
const fuzzSchemaDelegated = `{
	"$defs": {"node": {"type": "object", "properties": {
		"v": {"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]},
		"next": {"$ref": "#/$defs/node"}}}},
	"type": "object",
	"properties": {
		"node": {"$ref": "#/$defs/node"},
		"any": {"anyOf": [{"type": "boolean"}, {"type": "array", "contains": {"const": 1}}]},
		"p": {"patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": false},
		"d": {"dependentRequired": {"a": ["b"]}, "not": {"required": ["z"]}}
	}
}`

// FuzzValidateInput checks that validateInput never panics, returns nil or
// a *ValidationError with sorted violations, and agrees with jsonschema-go
// on validity.
func FuzzValidateInput(f *testing.F) {
	for _, seed := range []string{
		``,
		`{}`,
		`null`,
		`[]`,
		`{"name":"abc"}`,
		`{"name":"abc","n":5,"x":1.5,"tags":["a","b"],"pair":["s",true,null],"kind":2.5,"c":{"k":[1,"x"]},"opt":null,"meta":{"a":1}}`,
		`{"name":"ABC","n":5.5,"x":-2,"tags":["a","a","d","b"],"pair":[1,"t",0],"kind":"b","c":{"k":[1]},"opt":3,"meta":{},"no":1,"extra":0}`,
		`{"name":"abc","n":1e2,"x":1e-400,"kind":{"k":true},"tags":[]}`,
		`{"name":"abc","n":99.0000000000000001,"x":1.5000000000000001}`,
		`{"name":"abcdefghi","n":9007199254740993,"kind":[1.0]}`,
		`{"node":{"v":"s","next":{"v":-1,"next":{"v":1.5}}}}`,
		`{"any":[0,1],"p":{"x1":1,"y":2},"d":{"a":1,"z":1}}`,
		`{"any":true,"p":{"x1":"s"},"d":{"a":1,"b":2}}`,
		`{"name":"a","n":1e999999,"x":-1e999999}`,
		`{"name":`,
		`{"name":"a"} x`,
		`{"a~b/c":[[[[[[[[[[1]]]]]]]]]]}`,
		"\"\xff\"",
	} {
		f.Add([]byte(seed))
	}
	var schemas []*jsonschema.Resolved
	for _, text := range []string{fuzzSchemaSupported, fuzzSchemaDelegated} {
		schemas = append(schemas, resolveSchema(f, parseSchema(f, text)))
	}

	f.Fuzz(func(t *testing.T, input []byte) {
		// jsonschema-go wants numbers as float64, so compare verdicts on
		// the input as it sees it: decoded once, then re-encoded so that
		// every number is exactly the float64 jsonschema-go checks.
		var plain any
		var canonical []byte
		decoded := true
		if len(input) == 0 {
			plain, canonical = map[string]any{}, []byte(`{}`)
		} else if err := json.Unmarshal(input, &plain); err != nil {
			decoded = false
		} else if canonical, err = json.Marshal(plain); err != nil {
			t.Fatalf("re-encoding %q: %v", input, err)
		}

		for i, rs := range schemas {
			err := validateInput(rs, input)
			if err != nil {
				var ve *ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("schema %d: got error %T, want *ValidationError", i, err)
				}
				if len(ve.Violations) == 0 {
					t.Fatalf("schema %d: got *ValidationError with no violations", i)
				}
				sorted := slices.IsSortedFunc(ve.Violations, func(a, b Violation) int {
					if c := strings.Compare(a.Pointer, b.Pointer); c != 0 {
						return c
					}
					return strings.Compare(a.Expected, b.Expected)
				})
				if !sorted {
					t.Errorf("schema %d: violations not sorted: %+v", i, ve.Violations)
				}
				if ve.Error() == "" {
					t.Errorf("schema %d: empty Error()", i)
				}
			}
			if !decoded {
				continue
			}
			gotErr := validateInput(rs, canonical)
			wantErr := rs.Validate(plain)
			if (gotErr == nil) != (wantErr == nil) {
				t.Errorf("schema %d, input %s:\nvalidateInput: %v\njsonschema-go: %v", i, canonical, gotErr, wantErr)
			}
		}
	})
}

func BenchmarkValidateInput(b *testing.B) {
	rs := resolveSchema(b, inferSchema[orderInput](b, nil))
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
				_ = validateInput(rs, input)
			}
		})
	}
}
