package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
)

// FuzzStateDecode: any bytes either fail to decode as a State or give a
// State that Resume accepts or refuses with an error — never a panic.
func FuzzStateDecode(f *testing.F) {
	f.Add([]byte(`{"version":1,"params":{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}}`))
	f.Add([]byte(`{"version":1,"params":{"model":"m","max_tokens":10,"messages":[]},"pending":{"turn":1,"message":{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},"stop_reason":"tool_use","calls":[{"call":{"id":"t1","name":"x","input":{}},"deferred":true,"decision":{"kind":"defer","reason":"r"}}]},"stop_reason":"awaiting_approval"}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"pending":{"calls":[{"decision":{"kind":"bogus"}}]}}`))
	f.Add([]byte(`null`))
	tool := toolrun.NewTool("x", "", func(ctx context.Context, in struct{}) (string, error) { return "", nil })
	f.Fuzz(func(t *testing.T, data []byte) {
		var s toolrun.State
		if err := json.Unmarshal(data, &s); err != nil {
			return
		}
		r, err := toolrun.Resume(anthropic.NewClient(), &s, []toolrun.Tool{tool}, nil)
		if err != nil {
			return
		}
		// The resumed state round-trips.
		if _, err := json.Marshal(r.State()); err != nil {
			t.Fatalf("State of a resumed run does not encode: %v", err)
		}
	})
}

type fuzzIn struct {
	Name  string            `json:"name"`
	Count int               `json:"count,omitempty"`
	Tags  []string          `json:"tags,omitempty"`
	Meta  map[string]string `json:"meta,omitempty"`
	Inner *struct {
		Flag bool `json:"flag"`
	} `json:"inner,omitempty"`
}

// FuzzTypedInput: a typed tool decodes any input into its struct or returns a
// *ValidationError — never a panic, never a call with an undecodable input.
func FuzzTypedInput(f *testing.F) {
	f.Add([]byte(`{"name":"a","count":2,"tags":["x"],"meta":{"k":"v"},"inner":{"flag":true}}`))
	f.Add([]byte(`{"name":3}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"count":1e400}`))
	f.Add([]byte(`{"count":1e1000001}`))
	f.Add([]byte(`{"count":1e-1000001}`))
	f.Add([]byte(`{"name":"a","count":1e309}`))
	f.Add([]byte(``))
	called := 0
	tool := toolrun.NewTool("t", "", func(ctx context.Context, in fuzzIn) (fuzzIn, error) {
		called++
		return in, nil
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		before := called
		out, err := tool.Run(context.Background(), data)
		if err != nil {
			var ve *toolrun.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v is not a *ValidationError", err)
			}
			if called != before {
				t.Fatal("the function was called with input that did not decode")
			}
			return
		}
		if len(out) != 1 || out[0].OfText == nil {
			t.Fatalf("result = %+v, want one text block", out)
		}
	})
}

// FuzzRawToolSchema: any bytes as a raw schema either build a tool or give
// an error wrapping ErrInvalidSchema — never a panic, whatever the schema.
func FuzzRawToolSchema(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"q":{"type":"string","pattern":"^a+$"}}}`))
	f.Add([]byte(`{"$defs":{"a":{"$ref":"#/$defs/a"}}}`))
	f.Add([]byte(`{"properties":{"n":{"maximum":1e400}}}`))
	f.Add([]byte(`{"properties":{"n":{"minimum":1e1000001}}}`))
	f.Add([]byte(`{"properties":{"n":{"multipleOf":1e-1000001}}}`))
	f.Add([]byte(`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"n":{"maximum":1,"exclusiveMaximum":true}}}`))
	f.Add([]byte(`false`))
	f.Add([]byte(`[`))
	fn := func(ctx context.Context, in json.RawMessage) (string, error) { return "", nil }
	f.Fuzz(func(t *testing.T, schema []byte) {
		tool, err := toolrun.NewRawTool("t", "", schema, fn)
		if err != nil {
			if !errors.Is(err, toolrun.ErrInvalidSchema) {
				t.Fatalf("error %v does not wrap ErrInvalidSchema", err)
			}
			return
		}
		// A tool that was built is one a runner takes.
		toolrun.New(anthropic.NewClient(), anthropic.BetaMessageNewParams{}, []toolrun.Tool{tool}, nil)
	})
}
