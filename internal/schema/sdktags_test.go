package schema

import (
	"reflect"
	"strings"
	"testing"
)

func TestSDKTag(t *testing.T) {
	tests := []struct {
		name string
		tag  string
		want bool
	}{
		{"a description", "the city name", false},
		{"a description with commas", "the city, such as Paris", false},
		{"a description with an equals sign later", "a ratio, as in x = y/2", false},
		{"required alone", "required", true},
		{"required and a description", "required,description=the city", true},
		{"a keyword with a value", "minimum=1,maximum=7", true},
		{"an enum", "enum=celsius,enum=fahrenheit", true},
		{"ignored", "-", true},
		{"nullable, spaced", " nullable , description=x", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SDKTag(tt.tag); got != tt.want {
				t.Errorf("SDKTag(%q) = %v, want %v", tt.tag, got, tt.want)
			}
		})
	}
}

func TestUsesSDKTags(t *testing.T) {
	type plain struct {
		City string `json:"city" jsonschema:"the city name"`
	}
	type sdk struct {
		City string `json:"city" jsonschema:"required"`
	}
	type described struct {
		City string `json:"city" jsonschema_description:"the city"`
	}
	type nested struct {
		Stops []map[string]*sdk `json:"stops"`
	}
	type cyclic struct {
		Next *cyclic `json:"next" jsonschema:"the next one"`
	}
	type mixed struct {
		City string `json:"city" jsonschema:"required"`
		Note plain  `json:"note"`
	}
	tests := []struct {
		name    string
		t       reflect.Type
		want    bool
		wantErr string // in the error, "" for none
	}{
		{"toolrun's dialect", reflect.TypeFor[plain](), false, ""},
		{"no tags", reflect.TypeFor[struct{ A int }](), false, ""},
		{"the SDK's dialect", reflect.TypeFor[sdk](), true, ""},
		{"jsonschema_description", reflect.TypeFor[described](), true, ""},
		{"nested in slices, maps and pointers", reflect.TypeFor[nested](), true, ""},
		{"a cycle without the SDK's tags", reflect.TypeFor[cyclic](), false, ""},
		{"both dialects", reflect.TypeFor[mixed](), false, "schema.plain.City is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := UsesSDKTags(tt.t)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "description=") {
					t.Errorf("UsesSDKTags(%v) error = %v, want one naming %q and saying how to write the tag", tt.t, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("UsesSDKTags(%v) = %v, %v; want %v, nil", tt.t, got, err, tt.want)
			}
		})
	}
}
