package toolrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// readPathTool answers "contents of <path>" and counts its calls.
func readPathTool(calls *counter) *toolrun.FuncTool {
	return toolrun.NewTool("read_file", "Read a file", func(ctx context.Context, in struct {
		Path string `json:"path"`
	}) (string, error) {
		calls.inc(in.Path)
		return "contents of " + in.Path, nil
	})
}

// awaitingState runs a turn of three calls to a stop awaiting approval: r1
// (read_file) runs, v1 (write_file with invalid input) is answered with a
// *ValidationError, w1 (write_file) is deferred to a person. It returns
// the runner and a copy of its state.
func awaitingState(t *testing.T, extra ...toolruntest.Reply) (*toolrun.Runner, *toolrun.State, *counter, *counter) {
	t.Helper()
	replies := append([]toolruntest.Reply{toolruntest.Message(
		toolruntest.ToolUse("r1", "read_file", map[string]any{"path": "/tmp/a"}),
		toolruntest.ToolUse("v1", "write_file", map[string]any{"path": 7, "text": "x"}),
		toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/one", Text: "1"}),
	)}, extra...)
	s := toolruntest.New(t, toolruntest.Script(replies...))
	var reads, writes counter
	w := writeTool(&writes)
	w.Policy = policy.RequireApproval("writes need a person")
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{readPathTool(&reads), w}, &toolrun.Options{Logger: discard()})
	res, _ := r.Run(t.Context())
	if res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("StopReason = %q, want awaiting_approval", res.StopReason)
	}
	return r, r.State(), &reads, &writes
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStateReadersShareNothing: what State.Calls and State.CallResult
// return is the caller's; writing into it (the input's bytes, a result's
// text, a decision's input) leaves the State as it was, since the turn in
// progress changes only through Decide and SetResult.
func TestStateReadersShareNothing(t *testing.T) {
	_, st, _, _ := awaitingState(t)
	before := mustJSON(t, st)

	for _, c := range st.Calls() {
		for i := range c.Input {
			c.Input[i] = ' '
		}
	}
	for _, id := range []string{"r1", "v1"} {
		res, ok := st.CallResult(id)
		if !ok {
			t.Fatalf("CallResult(%q) = no result, want one", id)
		}
		for i := range res.Call.Input {
			res.Call.Input[i] = ' '
		}
		for _, c := range res.Content {
			if c.OfText != nil {
				c.OfText.Text = "forged"
			}
		}
		for i := range res.Decision.Input {
			res.Decision.Input[i] = ' '
		}
	}
	after, err := json.Marshal(st)
	if err != nil {
		t.Fatalf("the State changed through what Calls and CallResult returned: it no longer encodes: %v", err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("the State changed through what Calls and CallResult returned:\nbefore %s\nafter  %s", before, after)
	}
}

// TestStateWritersKeepNoAlias: State.SetResult and State.Decide keep a copy
// of what they are given; the caller's later writes into its result or
// decision do not reach the State.
func TestStateWritersKeepNoAlias(t *testing.T) {
	_, st, _, _ := awaitingState(t)
	skip := policy.Skip(toolrun.Text("skipped by a person"))
	if err := st.Decide("w1", skip); err != nil {
		t.Fatal(err)
	}
	skip.Result[0].OfText.Text = "forged"
	got, _ := json.Marshal(st)
	if !strings.Contains(string(got), "skipped by a person") || strings.Contains(string(got), "forged") {
		t.Errorf("Decide kept the caller's Result, not a copy: %s", got)
	}

	_, st2, _, _ := awaitingState(t)
	res := &toolrun.ToolResult{Content: []toolrun.Content{toolrun.Text("ran elsewhere")}, Ran: true}
	if err := driver.SetResult(st2, "w1", res); err != nil {
		t.Fatal(err)
	}
	res.Content[0].OfText.Text = "forged"
	if r, _ := st2.CallResult("w1"); r == nil || r.Content[0].OfText.Text != "ran elsewhere" {
		t.Errorf("SetResult kept the caller's Content, not a copy: %+v", r)
	}
}

// TestRunnerStateIsACopy: a State taken from a runner shares nothing with
// it: the runner going on does not change the copy, and writes into the
// copy (fields and readers) do not change the run. Run with -race.
func TestRunnerStateIsACopy(t *testing.T) {
	r, st, reads, writes := awaitingState(t, toolruntest.Message(toolruntest.Text("done")))
	before := mustJSON(t, st)
	done := make(chan struct{})
	go func() {
		// Writes into the copy while the runner goes on.
		defer close(done)
		st.Params.Messages[0].OfUser.Content[0].OfText.Text = "forged"
		st.AlwaysAllow = append(st.AlwaysAllow, "read_file")
		for _, c := range st.Calls() {
			for i := range c.Input {
				c.Input[i] = ' '
			}
		}
		if res, ok := st.CallResult("r1"); ok {
			res.Content[0].OfText.Text = "forged"
		}
	}()
	if err := r.Decide("w1", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	<-done
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
	}
	if reads.get("/tmp/a") != 1 || writes.get("/tmp/one") != 1 {
		t.Errorf("reads, writes = %v, %v; want each call once", reads.n, writes.n)
	}
	got := toolruntest.ResultTexts(r.Messages())
	want := map[string]string{"r1": "contents of /tmp/a", "w1": "wrote /tmp/one"}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("model got %q for %s, want %q", got[id], id, w)
		}
	}
	if first := r.Messages()[0].OfUser.Content[0].OfText.Text; first != "go" {
		t.Errorf("history's first message = %q, want go", first)
	}
	var stWas toolrun.State
	if err := json.Unmarshal(before, &stWas); err != nil {
		t.Fatal(err)
	}
	if stWas.Turns != 1 || len(stWas.AwaitingApproval()) != 1 {
		t.Errorf("the copy taken before changed: turns %d, awaiting %v", stWas.Turns, stWas.AwaitingApproval())
	}
}

// TestResumePreviousVersionState: a State the previous version wrote
// (testdata/state/prev_v2_awaiting.json, format 2 with exported Pending,
// written by commit 5beb4c3^ from the turn awaitingState builds) decodes,
// encodes back to the same JSON, and resumes as the run would have: the
// answered calls are not run again and reach the model as they were, the
// deferred call awaits a person and runs once allowed.
// reencodes decodes the State in b, checks that it encodes again to the
// same JSON (compared as values), and returns it.
func reencodes(t *testing.T, b []byte) *toolrun.State {
	t.Helper()
	var st toolrun.State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	var want, got any
	json.Unmarshal(b, &want)
	json.Unmarshal(mustJSON(t, &st), &got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("re-encoded state differs from the previous version's (-prev +now):\n%s", diff)
	}
	return &st
}

// readPrevious returns the State the previous version wrote.
func readPrevious(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/state/prev_v2_awaiting.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// resumePrevious resumes st, a State of the previous version, with the
// tools it was written with (write_file needing a person), against a model
// that answers "done", and returns the runner, the model and the tools'
// counters.
func resumePrevious(t *testing.T, st *toolrun.State) (r *toolrun.Runner, s *toolruntest.Server, reads, writes *counter) {
	t.Helper()
	s = toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
	reads, writes = &counter{}, &counter{}
	w := writeTool(writes)
	w.Policy = policy.RequireApproval("writes need a person")
	r, err := toolrun.Resume(client(s), st, []toolrun.Tool{readPathTool(reads), w}, &toolrun.Options{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	return r, s, reads, writes
}

func TestResumePreviousVersionState(t *testing.T) {
	b := readPrevious(t)
	st := reencodes(t, b)
	if ids := st.Calls(); len(ids) != 3 {
		t.Fatalf("Calls = %v, want r1, v1, w1", ids)
	}
	if res, ok := st.CallResult("v1"); !ok || !res.IsError {
		t.Errorf("CallResult(v1) = %+v, %v; want the validation failure", res, ok)
	} else if ve := (*toolrun.ValidationError)(nil); !errors.As(res.Err, &ve) || ve.Tool != "write_file" {
		t.Errorf("v1's Err = %v, want a *ValidationError of write_file", res.Err)
	}

	r, _, reads, writes := resumePrevious(t, st)
	if res := r.Result(); res == nil || res.StopReason != toolrun.StopAwaitingApproval || len(res.Pending) != 1 || res.Pending[0].Call.ID != "w1" {
		t.Fatalf("Result after Resume = %+v, want awaiting approval of w1", res)
	}
	if err := r.Decide("w1", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
	}
	if reads.get("/tmp/a") != 0 || writes.get("/tmp/one") != 1 {
		t.Errorf("reads, writes = %v, %v; want r1 not run again and w1 once", reads.n, writes.n)
	}
	texts := toolruntest.ResultTexts(r.Messages())
	if texts["r1"] != "contents of /tmp/a" || texts["w1"] != "wrote /tmp/one" || !strings.Contains(texts["v1"], `expected type "string"`) {
		t.Errorf("the model received %q", texts)
	}
	if res.ToolCalls != 3 || res.ToolFailures != 1 {
		t.Errorf("ToolCalls, ToolFailures = %d, %d; want 3, 1", res.ToolCalls, res.ToolFailures)
	}
}

// TestToolResultJSONKeepsEveryField: a ToolResult's JSON keeps every field
// but Call and Decision (which the State keeps beside it, and which
// UnmarshalJSON leaves as the receiver had them), with the error's kind.
// A field added to ToolResult fails this test until the JSON keeps it or
// the test says why not.
func TestToolResultJSONKeepsEveryField(t *testing.T) {
	notKept := map[string]bool{"Call": true, "Decision": true}
	kept := map[string]bool{"Content": true, "IsError": true, "Err": true, "Duration": true, "Ran": true, "CacheControl": true, "Truncated": true}
	for f := range reflect.TypeFor[toolrun.ToolResult]().Fields() {
		if !notKept[f.Name] && !kept[f.Name] {
			t.Errorf("ToolResult.%s: neither kept by the JSON nor said not to be", f.Name)
		}
	}
	errs := []error{
		&toolrun.TimeoutError{Tool: "slow", After: 3 * time.Second},
		&toolrun.PanicError{Tool: "p", Value: "boom", Stack: []byte("stack")},
		&toolrun.ValidationError{Tool: "v"},
		toolrun.ErrDenied, toolrun.ErrNotRun, toolrun.ErrInterrupted, toolrun.ErrUnknownTool,
		errors.New("plain"),
	}
	for _, e := range errs {
		in := toolrun.ToolResult{
			Content: []toolrun.Content{toolrun.Text("a"), toolrun.Text("b")}, IsError: true, Err: e,
			Duration: 1500 * time.Millisecond, Ran: true, Truncated: true,
			CacheControl: anthropic.NewBetaCacheControlEphemeralParam(),
		}
		out := toolrun.ToolResult{Call: toolrun.ToolCall{ID: "keep"}, Decision: policy.Defer("keep")}
		if err := json.Unmarshal(mustJSON(t, in), &out); err != nil {
			t.Fatal(err)
		}
		if out.Call.ID != "keep" || out.Decision.Reason != "keep" {
			t.Errorf("UnmarshalJSON changed Call or Decision: %+v %+v", out.Call, out.Decision)
		}
		if !out.IsError || !out.Ran || !out.Truncated || out.Duration != in.Duration || len(out.Content) != 2 ||
			out.Content[1].OfText == nil || out.Content[1].OfText.Text != "b" || out.CacheControl.Type != in.CacheControl.Type {
			t.Errorf("round trip of %v lost a field: %+v", e, out)
		}
		if out.Err == nil || out.Err.Error() != e.Error() {
			t.Errorf("Err = %v, want %v", out.Err, e)
		}
		for _, target := range []error{toolrun.ErrDenied, toolrun.ErrNotRun, toolrun.ErrInterrupted, toolrun.ErrUnknownTool} {
			if errors.Is(out.Err, target) != errors.Is(e, target) {
				t.Errorf("errors.Is(%v, %v) = %v after the round trip", e, target, !errors.Is(e, target))
			}
		}
		var te *toolrun.TimeoutError
		var pe *toolrun.PanicError
		var ve *toolrun.ValidationError
		if errors.As(out.Err, &te) != errors.As(e, &te) || errors.As(out.Err, &pe) != errors.As(e, &pe) || errors.As(out.Err, &ve) != errors.As(e, &ve) {
			t.Errorf("the error's type of %v is lost: %T", e, out.Err)
		}
	}
}

// TestResumePreviousVersionEditedState: the previous version's "edited"
// key is read as it was written: the decoded State encodes it again, and a
// run resumed from it leaves the turn in progress out (the caller changed
// the history after it was handed out), so none of its calls runs.
func TestResumePreviousVersionEditedState(t *testing.T) {
	b := readPrevious(t)
	b = bytes.Replace(b, []byte(`"format": 2,`), []byte(`"format": 2, "edited": true,`), 1)
	st := reencodes(t, b)
	r, s, reads, writes := resumePrevious(t, st)
	if err := r.Decide("w1", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
	}
	if len(reads.n)+len(writes.n) != 0 {
		t.Errorf("reads, writes = %v, %v; want none: the edited turn is left out", reads.n, writes.n)
	}
	if n := len(s.Requests()[0].Conversation); n != 1 {
		t.Errorf("the request after Resume has %d messages, want 1 (the turn left out)", n)
	}
}

// TestSetResultOfAFailureIsAnError: SetResult records a result "as
// Runner.ExecuteCall would have": a result with Err and no content (a
// call the caller answers after its worker crashed) reaches the model as
// an is_error result with the error's text, and counts as a failure, not
// as an empty success.
func TestSetResultOfAFailureIsAnError(t *testing.T) {
	_, st, _, _ := awaitingState(t)
	if err := driver.SetResult(st, "w1", &toolrun.ToolResult{Err: errors.New("the worker running it crashed")}); err != nil {
		t.Fatal(err)
	}
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
	var reads, writes counter
	r, err := toolrun.Resume(client(s), st, []toolrun.Tool{readPathTool(&reads), writeTool(&writes)}, &toolrun.Options{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
	}
	var w1 *toolruntest.Block
	for _, b := range toolResults(s.Requests()[0]) {
		if b.ToolUseID == "w1" {
			w1 = &b
		}
	}
	if w1 == nil || !w1.IsError || !strings.Contains(w1.ResultText(), "the worker running it crashed") {
		t.Errorf("the model got %+v for w1, want an is_error result with the error's text", w1)
	}
	if res.ToolFailures != 2 || writes.get("/tmp/one") != 0 {
		t.Errorf("ToolFailures = %d, writes %v; want 2 (v1, w1) and no write", res.ToolFailures, writes.n)
	}
}

// TestExecuteCallResultSharesNothing: the result ExecuteCall returns
// is the runner's own (r.live), whose content blocks the State's result
// shares: writing into it after the fact, around AfterTool, changes what
// the model receives.
func TestExecuteCallResultSharesNothing(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/one", Text: "1"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	var writes counter
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{writeTool(&writes)}, &toolrun.Options{Logger: discard()})
	calls, err := driver.Advance(t.Context(), r)
	if err != nil || len(calls) != 1 {
		t.Fatalf("Advance = %v, %v; want w1", calls, err)
	}
	res, err := driver.ExecuteCall(t.Context(), r, "w1")
	if err != nil {
		t.Fatal(err)
	}
	res.Content[0].OfText.Text = "forged"
	for {
		calls, err := driver.Advance(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		if len(calls) == 0 && r.Result() != nil {
			break
		}
	}
	if got := toolruntest.ResultTexts(r.Messages())["w1"]; got != "wrote /tmp/one" {
		t.Errorf("the model got %q for w1, want the tool's own result", got)
	}
}
