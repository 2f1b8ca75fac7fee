package schema

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"

	"github.com/invopop/jsonschema"
)

// The anthropic SDK's tools (toolrunner.NewBetaToolFromJSONSchema) infer
// their input schema with github.com/invopop/jsonschema, whose struct tags
// are a list of keywords: `jsonschema:"required,description=the city"`.
// toolrun.NewTool infers with github.com/google/jsonschema-go, whose
// jsonschema tag is a description and nothing else, and which refuses a tag
// that begins with "WORD=". A program moving over from the SDK keeps its
// input structs: a type tagged in the SDK's dialect gets the schema the SDK
// would have sent.

// sdkFlags are the keywords of the SDK's dialect that stand alone; a tag
// that begins with one is in that dialect.
var sdkFlags = map[string]bool{
	"required": true, "nullable": true, "-": true,
	"readOnly": true, "writeOnly": true, "uniqueItems": true,
}

// keywordPrefix matches a tag that begins with "WORD=", as the SDK's
// dialect writes keywords with a value, and which jsonschema-go refuses.
var keywordPrefix = regexp.MustCompile("^[^ \t\n]*=")

// SDKTag reports whether tag, the value of a jsonschema struct tag, is in
// the SDK's dialect: it begins with a keyword with a value ("WORD=") or
// with one that stands alone, such as "required".
func SDKTag(tag string) bool {
	first, _, _ := strings.Cut(tag, ",")
	return keywordPrefix.MatchString(tag) || sdkFlags[strings.TrimSpace(first)]
}

// UsesSDKTags reports whether t, or a type reachable from its fields,
// pointers, slices, arrays and maps, has a struct field tagged in the
// SDK's dialect: a jsonschema tag for which [SDKTag] is true, or a
// jsonschema_description or jsonschema_extras tag, which only that
// dialect has.
func UsesSDKTags(t reflect.Type) bool {
	return usesSDKTags(t, map[reflect.Type]bool{})
}

func usesSDKTags(t reflect.Type, seen map[reflect.Type]bool) bool {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			t = t.Elem()
			continue
		case reflect.Map:
			if usesSDKTags(t.Key(), seen) {
				return true
			}
			t = t.Elem()
			continue
		}
		break
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return false
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, ok := f.Tag.Lookup("jsonschema"); ok && SDKTag(tag) {
			return true
		}
		if _, ok := f.Tag.Lookup("jsonschema_description"); ok {
			return true
		}
		if _, ok := f.Tag.Lookup("jsonschema_extras"); ok {
			return true
		}
		if usesSDKTags(f.Type, seen) {
			return true
		}
	}
	return false
}

// ForSDKTags infers the JSON Schema of t as the SDK's
// toolrunner.NewBetaToolFromJSONSchema does, in its tag dialect: a field
// is required only when its tag says "required", additional properties
// are refused, and nested types are written in place rather than as
// references. The schema has no $id, which would name the Go package.
func ForSDKTags(t reflect.Type) (json.RawMessage, error) {
	r := jsonschema.Reflector{
		AllowAdditionalProperties:  false,
		RequiredFromJSONSchemaTags: true,
		DoNotReference:             true,
		Anonymous:                  true,
	}
	return json.Marshal(r.ReflectFromType(t))
}
