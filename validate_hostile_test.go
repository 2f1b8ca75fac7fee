package toolrun_test

// Hostile numbers through a whole run: a number no validator step can
// hold must reach the model as an is_error result, never crash the host,
// and never leave a history that later requests cannot encode.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// hostileNumberCases are schemas with every numeric keyword, each with an
// input whose number a validator step once could not hold (a nil big.Rat
// panicked), or could hold only at great cost.
var hostileNumberCases = []struct {
	name, schema, input, wantText string
}{
	{"minimum, untyped", `{"type":"object","properties":{"lat":{"minimum":-90}}}`, `{"lat":1e1000001}`, "/lat: expected a number of at most 1000 digits"},
	{"maximum, number", `{"type":"object","properties":{"lat":{"type":"number","maximum":90}}}`, `{"lat":1e1000001}`, "/lat: expected a number of at most 1000 digits"},
	{"exclusiveMinimum", `{"type":"object","properties":{"lat":{"exclusiveMinimum":-90}}}`, `{"lat":-1e-1000001}`, "/lat: expected a number of at most 1000 digits"},
	{"exclusiveMaximum", `{"type":"object","properties":{"lat":{"exclusiveMaximum":90}}}`, `{"lat":1E+1000001}`, "/lat: expected a number of at most 1000 digits"},
	{"multipleOf, tiny", `{"type":"object","properties":{"lat":{"multipleOf":0.01}}}`, `{"lat":1e-1000001}`, "/lat: expected a number of at most 1000 digits"},
	{"multipleOf, long", `{"type":"object","properties":{"lat":{"multipleOf":0.01}}}`, `{"lat":0.` + strings.Repeat("1", 5000) + `}`, "/lat: expected a number of at most 1000 digits"},
	{"draft-04 exclusive", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"lat":{"minimum":0,"exclusiveMinimum":true}}}`, `{"lat":-1e-1000001}`, "/lat: expected a number of at most 1000 digits"},
	{"uniqueItems over 20 items", `{"type":"object","properties":{"xs":{"uniqueItems":true}}}`,
		`{"xs":[` + strings.Repeat("1,", 20) + `1e-1000001]}`, "/xs/20: expected a number of at most 1000 digits"},
	{"enum", `{"type":"object","properties":{"lat":{"enum":[1,2]}}}`, `{"lat":1e-1000001}`, "/lat: expected a number of at most 1000 digits"},
	{"beyond float64", `{"type":"object","properties":{"lat":{"maximum":90}}}`, `{"lat":1e309}`, "/lat: expected a number between -1.7976931348623157e308 and 1.7976931348623157e308"},
}

// TestHostileNumbersChild is the child process of
// TestHostileNumbersDoNotCrash; it does nothing in a normal run.
func TestHostileNumbersChild(t *testing.T) {
	if os.Getenv("TOOLRUN_HOSTILE_NUMBER_CHILD") == "" {
		t.Skip("helper process for TestHostileNumbersDoNotCrash")
	}
	for _, tt := range hostileNumberCases {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			tool, err := toolrun.NewRawTool("geo", "", []byte(tt.schema), func(ctx context.Context, in json.RawMessage) (string, error) {
				called = true
				return "ran", nil
			})
			if err != nil {
				t.Fatal(err)
			}
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("c1", "geo", json.RawMessage(tt.input))),
				toolruntest.Message(toolruntest.Text("done")),
			))
			res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{tool}, &toolrun.Options{Logger: discard()}).Run(t.Context())
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.StopReason != toolrun.StopEndTurn {
				t.Errorf("stop reason %q, want %q", res.StopReason, toolrun.StopEndTurn)
			}
			if called {
				t.Error("the tool ran with an input the validator could not check")
			}
			results := toolResults(s.Requests()[1])
			if len(results) != 1 || !results[0].IsError {
				t.Fatalf("got tool results %+v, want one is_error result", results)
			}
			if got := results[0].ResultText(); !strings.Contains(got, tt.wantText) {
				t.Errorf("tool result %q does not contain %q", got, tt.wantText)
			}
		})
	}
}

// TestHostileNumbersDoNotCrash: numbers past every limit, against every
// numeric keyword, end as is_error results and the run goes on. It runs
// in a child process, since the failure it guards against (a panic that
// escaped Run) ends the process.
func TestHostileNumbersDoNotCrash(t *testing.T) {
	if os.Getenv("TOOLRUN_HOSTILE_NUMBER_CHILD") != "" {
		t.Skip("in the child")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run", "^TestHostileNumbersChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "TOOLRUN_HOSTILE_NUMBER_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process failed: %v\n%s", err, out)
	}
	if got, want := strings.Count(string(out), "--- PASS: TestHostileNumbersChild/"), len(hostileNumberCases); got != want {
		t.Fatalf("child passed %d cases, want %d:\n%s", got, want, out)
	}
}

// TestNumberBeyondFloat64DoesNotWedge: an input holding 1e309, which the
// client decodes as +Inf, is refused before the call runs; the history
// keeps a tool_use that encodes, so the next request is sent and the
// state saves and resumes.
func TestNumberBeyondFloat64DoesNotWedge(t *testing.T) {
	called := 0
	tool := toolrun.NewTool("geo", "", func(ctx context.Context, in struct {
		Lat float64 `json:"lat"`
	}) (string, error) {
		called++
		return fmt.Sprint(in.Lat), nil
	})
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("c1", "geo", json.RawMessage(`{"lat":1e309}`))),
		toolruntest.Message(toolruntest.ToolUse("c2", "geo", json.RawMessage(`{"lat":45.5}`))),
		toolruntest.Message(toolruntest.Text("done")),
	))
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{tool}, &toolrun.Options{Logger: discard()})
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("stop reason %q, want %q", res.StopReason, toolrun.StopEndTurn)
	}
	if got, want := len(s.Requests()), 3; got != want {
		t.Fatalf("got %d requests, want %d", got, want)
	}
	first := toolResults(s.Requests()[1])
	if len(first) != 1 || !first[0].IsError || !strings.Contains(first[0].ResultText(), "/lat: expected a number between") {
		t.Fatalf("first result %+v, want an is_error result naming /lat", first)
	}
	second := toolResults(s.Requests()[2])
	if len(second) != 1 || second[0].IsError || second[0].ResultText() != "45.5" {
		t.Fatalf("second result %+v, want 45.5", second)
	}
	if called != 1 {
		t.Errorf("the tool ran %d times, want 1 (only the valid call)", called)
	}
	checkHistory(t, r.State().Params.Messages)

	// The state encodes and decodes to a history that encodes too.
	data, err := json.Marshal(r.State())
	if err != nil {
		t.Fatalf("State does not encode: %v", err)
	}
	var st toolrun.State
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	checkHistory(t, st.Params.Messages)
}
