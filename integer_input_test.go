package toolrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// intInput is a typed tool's input with integers of several widths, nested
// and in a slice, beside fields that must see the model's numbers as given.
type intInput struct {
	N     int              `json:"n"`
	Small int8             `json:"small,omitempty"`
	U     uint16           `json:"u,omitempty"`
	List  []int64          `json:"list,omitempty"`
	Inner *struct{ K int } `json:"inner,omitempty"`
	F     float64          `json:"f,omitempty"`
	S     string           `json:"s,omitempty"`
}

// TestTypedToolIntegralNumbers: JSON Schema counts 1.0 and 1E2 as integers,
// so the schema lets them through to a typed tool's int field, where
// encoding/json used to refuse them with an is_error the model could not
// make sense of. They decode as 1 and 100; a fraction or a value the Go type
// cannot hold is refused, saying which (by the schema where it bounds the
// field, by the decoder for an int64's range), and the tool does not run.
func TestTypedToolIntegralNumbers(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    *intInput // nil: refused
		wantErr []string  // substrings of the refusal
	}{
		{name: "1.0", input: `{"n":1.0}`, want: &intInput{N: 1}},
		{name: "1E2", input: `{"n":1E2}`, want: &intInput{N: 100}},
		{name: "2.50e1 and -3.0", input: `{"n":2.50e1,"small":-3.0}`, want: &intInput{N: 25, Small: -3}},
		{name: "nested and in a slice", input: `{"n":0.0,"list":[1e0,2.0,3],"inner":{"K":7.000}}`, want: &intInput{List: []int64{1, 2, 3}, Inner: &struct{ K int }{7}}},
		{name: "-0.0", input: `{"n":-0.0}`, want: &intInput{}},
		{name: "others left alone", input: `{"n":1.0,"f":2.5,"s":"1.0 and 1E2"}`, want: &intInput{N: 1, F: 2.5, S: "1.0 and 1E2"}},
		{name: "max int64 as exponent", input: `{"n":1,"list":[9.223372036854775807E18]}`, want: &intInput{N: 1, List: []int64{9223372036854775807}}},
		{name: "1.5", input: `{"n":1,"list":[1.5]}`, wantErr: []string{"/list/0", `expected type "integer"`, "got 1.5 (number)"}},
		{name: "almost 1", input: `{"n":1.0000000000000000001}`, wantErr: []string{"/n", `expected type "integer"`, "got 1.0000000000000000001"}},
		{name: "1E30", input: `{"n":1E30}`, wantErr: []string{"/n", "an integer from -9223372036854775808 to 9223372036854775807 (Go int)", "1E30"}},
		{name: "2^63", input: `{"n":9223372036854775808}`, wantErr: []string{"/n", "an integer from -9223372036854775808 to 9223372036854775807 (Go int)", "9223372036854775808"}},
		{name: "1E400", input: `{"n":1E400}`, wantErr: []string{"/n", "got 1E400"}},
		{name: "int8 128.0", input: `{"n":1,"small":128.0}`, wantErr: []string{"/small", "<= 127", "got 128.0"}},
		{name: "uint16 -1", input: `{"n":1,"u":-1}`, wantErr: []string{"/u", ">= 0", "got -1"}},
		{name: "uint16 65536.0", input: `{"n":1,"u":6.5536e4}`, wantErr: []string{"/u", "<= 65535", "got 6.5536e4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *intInput
			tool := toolrun.NewTool("t", "", func(_ context.Context, in intInput) (string, error) {
				got = &in
				return "ran", nil
			})
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("c1", "t", json.RawMessage(tt.input))),
				toolruntest.Message(toolruntest.Text("done")),
			))
			res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{tool}, &toolrun.Options{Logger: discard()}).Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
			}
			result := toolResults(s.Requests()[1])[0]
			if tt.want != nil {
				if result.IsError {
					t.Fatalf("result is an error: %s", result.ResultText())
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("decoded input (-want +got):\n%s", diff)
				}
				return
			}
			if got != nil {
				t.Errorf("the tool ran with %+v, want it refused", *got)
			}
			if !result.IsError {
				t.Fatalf("result %q is not an error", result.ResultText())
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(result.ResultText(), w) {
					t.Errorf("result %q does not say %q", result.ResultText(), w)
				}
			}
		})
	}
}

// TestTypedToolIntegralNumbersLinear: an input with 20,000 integral numbers
// written as 1.0 decodes whole.
func TestTypedToolIntegralNumbersLinear(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"n":1.0,"list":[`)
	const n = 20000
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d.0", i)
	}
	b.WriteString(`]}`)
	var got intInput
	tool := toolrun.NewTool("t", "", func(_ context.Context, in intInput) (string, error) {
		got = in
		return "ran", nil
	})
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("c1", "t", json.RawMessage(b.String()))),
		toolruntest.Message(toolruntest.Text("done")),
	))
	if _, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{tool}, &toolrun.Options{Logger: discard()}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(got.List) != n || got.List[n-1] != n-1 {
		t.Errorf("got %d items, want %d", len(got.List), n)
	}
}
