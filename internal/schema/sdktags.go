package schema

import (
	"encoding/json"
	"fmt"
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
//
// A type that mixes the dialects, a field in the SDK's beside a field
// whose jsonschema tag is a plain description, is an error that names
// the field: read in the SDK's dialect, the description would be lost.
func UsesSDKTags(t reflect.Type) (bool, error) {
	var w tagWalk
	w.walk(t, map[reflect.Type]bool{})
	if w.sdk != "" && w.plain != "" {
		return false, fmt.Errorf("field %s is tagged in the anthropic SDK's dialect and field %s is not: write each jsonschema tag as the SDK does, a description as `jsonschema:\"description=...\"`, or each as a description alone", w.sdk, w.plain)
	}
	return w.sdk != "", nil
}

// tagWalk finds the first field tagged in each dialect.
type tagWalk struct {
	sdk, plain string // Type.Field of the first field in each, if any
}

func (w *tagWalk) walk(t reflect.Type, seen map[reflect.Type]bool) {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			t = t.Elem()
			continue
		case reflect.Map:
			w.walk(t.Key(), seen)
			t = t.Elem()
			continue
		}
		break
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		at := t.String() + "." + f.Name
		tag, ok := f.Tag.Lookup("jsonschema")
		_, desc := f.Tag.Lookup("jsonschema_description")
		_, extras := f.Tag.Lookup("jsonschema_extras")
		switch {
		case ok && SDKTag(tag), desc, extras:
			if w.sdk == "" {
				w.sdk = at
			}
		case ok && tag != "":
			if w.plain == "" {
				w.plain = at
			}
		}
		w.walk(f.Type, seen)
	}
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
