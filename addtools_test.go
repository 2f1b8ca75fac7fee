package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// inlineParams are userParams with the inline-tools beta.
func inlineParams(text string) anthropic.BetaMessageNewParams {
	p := userParams(text)
	p.Betas = []anthropic.AnthropicBeta{anthropic.AnthropicBetaInlineTools2026_09_15}
	return p
}

// toolNamesPerRequest lists, for each request s received, the tools the
// model had.
func toolNamesPerRequest(s *toolruntest.Server) [][]string {
	var out [][]string
	for _, req := range s.Requests() {
		out = append(out, req.ToolNames())
	}
	return out
}

// systemMessages returns the role "system" messages of the request's
// body, as sent.
func systemMessages(t *testing.T, req *toolruntest.Request) []string {
	t.Helper()
	var body struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range body.Messages {
		var role struct {
			Role string `json:"role"`
		}
		json.Unmarshal(m, &role)
		if role.Role == "system" {
			out = append(out, string(m))
		}
	}
	return out
}

// lastResults returns the tool_result blocks of the last user message of
// req's conversation with any.
func lastResults(req *toolruntest.Request) []toolruntest.Block {
	for i := len(req.Conversation) - 1; i >= 0; i-- {
		var out []toolruntest.Block
		for _, b := range req.Conversation[i].Content {
			if b.Type == "tool_result" {
				out = append(out, b)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// threadType returns the type of the request's thread field, "" for none.
func threadType(req *toolruntest.Request) string {
	if req.Params.Thread == nil {
		return ""
	}
	return req.Params.Thread.Type
}

func TestAddToolsMidRun(t *testing.T) {
	for _, inline := range []bool{false, true} {
		name := "tool list"
		if inline {
			name = "inline-tools beta"
		}
		t.Run(name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
				toolruntest.Message(toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/tmp/x", Text: "y"})),
				toolruntest.Message(toolruntest.Text("ok")),
			))
			var writes, weather counter
			params := userParams("go")
			if inline {
				params = inlineParams("go")
			}
			r := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&weather)}, &toolrun.Options{Logger: discard()})
			for turn, err := range r.Turns(t.Context()) {
				if err != nil {
					t.Fatal(err)
				}
				if turn.Number == 1 {
					if err := r.AddTools(writeTool(&writes)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := writes.get("/tmp/x"); got != 1 {
				t.Errorf("the added tool ran %d times, want 1", got)
			}
			want := [][]string{{"get_weather"}, {"get_weather", "write_file"}, {"get_weather", "write_file"}}
			if diff := cmp.Diff(want, toolNamesPerRequest(s)); diff != "" {
				t.Errorf("tools per request mismatch (-want +got):\n%s", diff)
			}
			reqs := s.Requests()
			sys := systemMessages(t, reqs[1])
			if inline {
				// The tool list is the one the run began with, so the thread
				// goes on; the tool goes in a system message shaped as the
				// SDK's BetaToolRunner sends it.
				if string(reqs[1].Tools) != string(reqs[0].Tools) {
					t.Errorf("tools changed under the beta: got %s, want %s", reqs[1].Tools, reqs[0].Tools)
				}
				if got := threadType(reqs[1]); got != "continue" {
					t.Errorf("request 2 thread = %q, want continue", got)
				}
				def := r.State().AddedTools()
				if len(def) != 1 {
					t.Fatalf("AddedTools = %d, want 1", len(def))
				}
				sdk, err := json.Marshal(anthropic.BetaMessageParam{OfSystem: &anthropic.BetaSystemMessageParam{Content: []anthropic.BetaSystemMessageParamContentUnion{{
					OfToolAddition: &anthropic.BetaRequestToolAdditionBlockParam{Tool: anthropic.BetaRequestToolAdditionBlockToolUnionParam{
						OfToolDefinition: &anthropic.BetaToolChangeToolDefinitionParam{Definition: def[0]}}},
				}}}})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]string{string(sdk)}, sys); diff != "" {
					t.Errorf("system messages mismatch (-want +got):\n%s", diff)
				}
				if !strings.HasPrefix(sys[0], `{"content":[{"tool":{"definition":{"input_schema":`) || !strings.Contains(sys[0], `"name":"write_file","description":"Write a file"},"type":"tool_definition"},"type":"tool_addition"}],"role":"system"}`) {
					t.Errorf("system message = %s, want the SDK's tool_addition", sys[0])
				}
			} else {
				if len(sys) != 0 {
					t.Errorf("system messages without the beta: %v", sys)
				}
				if got := threadType(reqs[1]); got != "create" {
					t.Errorf("request 2 thread = %q, want create: the tool list changed", got)
				}
			}
			checkHistory(t, r.Result().Messages)
		})
	}
}

func TestAddThenRemoveTool(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "tool list", true: "inline-tools beta"}[inline], func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
				toolruntest.Message(toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/a", Text: "y"})),
				toolruntest.Message(toolruntest.ToolUse("t3", "write_file", writeIn{Path: "/b", Text: "y"})),
				toolruntest.Message(toolruntest.Text("ok")),
			))
			var writes, weather counter
			params := userParams("go")
			if inline {
				params = inlineParams("go")
			}
			r := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&weather)}, &toolrun.Options{Logger: discard()})
			for turn, err := range r.Turns(t.Context()) {
				if err != nil {
					t.Fatal(err)
				}
				switch turn.Number {
				case 1:
					if err := r.AddTools(writeTool(&writes)); err != nil {
						t.Fatal(err)
					}
				case 3:
					// Before the turn's call runs: it is answered as unknown.
					r.RemoveTools("write_file")
				}
			}
			if diff := cmp.Diff(map[string]int{"/a": 1}, writes.n); diff != "" {
				t.Errorf("writes mismatch (-want +got):\n%s", diff)
			}
			want := [][]string{{"get_weather"}, {"get_weather", "write_file"}, {"get_weather", "write_file"}, {"get_weather"}}
			if diff := cmp.Diff(want, toolNamesPerRequest(s)); diff != "" {
				t.Errorf("tools per request mismatch (-want +got):\n%s", diff)
			}
			reqs := s.Requests()
			results := lastResults(reqs[3])
			if len(results) != 1 || !strings.Contains(results[0].ResultText(), `unknown tool "write_file"`) {
				t.Errorf("result = %+v, want an unknown-tool error", results)
			}
			if inline {
				// Sent on the thread: the new messages only, the removal last.
				sys := systemMessages(t, reqs[3])
				want := `{"content":[{"tool":{"name":"write_file","type":"tool_reference"},"type":"tool_removal"}],"role":"system"}`
				if len(sys) != 1 || sys[0] != want {
					t.Errorf("system messages of request 4 = %v, want %s", sys, want)
				}
				if got := threadType(reqs[3]); got != "continue" {
					t.Errorf("request 4 thread = %q, want continue", got)
				}
			}
			if got := r.State().AddedTools(); len(got) != 0 {
				t.Errorf("AddedTools after removal = %d, want 0", len(got))
			}
			// Added again, it is the model's once more.
			if err := r.AddTools(writeTool(&writes)); err != nil {
				t.Errorf("adding a removed tool again: %v", err)
			}
		})
	}
}

func TestAddedToolSurvivesResume(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "tool list", true: "inline-tools beta"}[inline], func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
				toolruntest.Message(toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/x", Text: "y"})),
				toolruntest.Message(toolruntest.Text("ok")),
			))
			var writes, weather counter
			w := writeTool(&writes)
			w.Policy = policy.RequireApproval("writes")
			params := userParams("go")
			if inline {
				params = inlineParams("go")
			}
			r := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&weather)}, &toolrun.Options{Logger: discard()})
			for turn, err := range r.Turns(t.Context()) {
				if err != nil {
					t.Fatal(err)
				}
				if turn.Number == 1 {
					if err := r.AddTools(w); err != nil {
						t.Fatal(err)
					}
				}
			}
			res := r.Result()
			if res.StopReason != toolrun.StopAwaitingApproval || writes.get("/x") != 0 {
				t.Fatalf("StopReason = %q with %d writes, want awaiting_approval: the added tool's policy holds", res.StopReason, writes.get("/x"))
			}
			data, err := json.Marshal(r.State())
			if err != nil {
				t.Fatal(err)
			}
			var st toolrun.State
			if err := json.Unmarshal(data, &st); err != nil {
				t.Fatal(err)
			}

			_, err = toolrun.Resume(client(s), &st, []toolrun.Tool{weatherTool(&weather)}, &toolrun.Options{Logger: discard()})
			if !errors.Is(err, toolrun.ErrAddedToolMissing) || !strings.Contains(err.Error(), "write_file") {
				t.Errorf("Resume without the added tool: got %v, want ErrAddedToolMissing naming write_file", err)
			}

			r2, err := toolrun.Resume(client(s), &st, []toolrun.Tool{weatherTool(&weather), w}, &toolrun.Options{Logger: discard()})
			if err != nil {
				t.Fatal(err)
			}
			if err := r2.Decide("t2", toolrun.Decision{}); err != nil {
				t.Fatal(err)
			}
			if _, err := r2.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := writes.get("/x"); got != 1 {
				t.Errorf("the added tool ran %d times after Resume, want 1", got)
			}
			reqs := s.Requests()
			if diff := cmp.Diff([]string{"get_weather", "write_file"}, reqs[2].ToolNames()); diff != "" {
				t.Errorf("tools after Resume mismatch (-want +got):\n%s", diff)
			}
			if inline && string(reqs[2].Tools) != string(reqs[0].Tools) {
				t.Errorf("tools after Resume under the beta: got %s, want %s", reqs[2].Tools, reqs[0].Tools)
			}
			if !inline && string(reqs[2].Tools) != string(reqs[1].Tools) {
				t.Errorf("tools after Resume: got %s, want %s", reqs[2].Tools, reqs[1].Tools)
			}
			checkHistory(t, r2.Result().Messages)
		})
	}
}

// TestAddedToolQueuedAcrossResume: an addition made while the history
// ends with a paused turn waits for the next user message, and a State
// taken meanwhile keeps it.
func TestAddedToolQueuedAcrossResume(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Reply{Content: []toolruntest.Block{toolruntest.Text("Searching")}, StopReason: "pause_turn"},
		toolruntest.Message(toolruntest.Text("found it")),
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/x", Text: "y"})),
		toolruntest.Message(toolruntest.Text("ok")),
	))
	var writes counter
	r := toolrun.New(client(s), inlineParams("go"), nil, &toolrun.Options{Logger: discard()})
	for turn, err := range r.Turns(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if turn.Number == 1 {
			if err := r.AddTools(writeTool(&writes)); err != nil {
				t.Fatal(err)
			}
			// Taken and resumed with the addition still queued.
			r2, err := toolrun.Resume(client(s), r.State(), []toolrun.Tool{writeTool(&writes)}, &toolrun.Options{Logger: discard()})
			if err != nil {
				t.Fatal(err)
			}
			r = r2
			break
		}
	}
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.AppendMessages(anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("now write")))
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := writes.get("/x"); got != 1 {
		t.Errorf("the added tool ran %d times, want 1", got)
	}
	want := [][]string{nil, nil, {"write_file"}, {"write_file"}}
	if diff := cmp.Diff(want, toolNamesPerRequest(s)); diff != "" {
		t.Errorf("tools per request mismatch (-want +got):\n%s", diff)
	}
}

func TestAddedToolValidated(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
		toolruntest.Message(toolruntest.ToolUse("t2", "write_file", map[string]any{"path": 7})),
		toolruntest.Message(toolruntest.Text("ok")),
	))
	var writes, weather counter
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&weather)}, &toolrun.Options{Logger: discard()})
	for turn, err := range r.Turns(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if turn.Number == 1 {
			if err := r.AddTools(writeTool(&writes)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(writes.n) != 0 {
		t.Errorf("the added tool ran with invalid input: %v", writes.n)
	}
	results := lastResults(s.Requests()[2])
	if len(results) != 1 || !results[0].IsError || !strings.Contains(results[0].ResultText(), "/path") {
		t.Errorf("result = %+v, want an is_error validation result naming /path", results)
	}
}

// rawSchemaTool is a Tool whose schema is given as is.
type rawSchemaTool struct{ schema string }

func (rawSchemaTool) Name() string                   { return "hostile" }
func (rawSchemaTool) Description() string            { return "" }
func (t rawSchemaTool) InputSchema() json.RawMessage { return json.RawMessage(t.schema) }
func (rawSchemaTool) Config() toolrun.ToolConfig     { return toolrun.ToolConfig{} }
func (rawSchemaTool) Run(context.Context, json.RawMessage) ([]toolrun.Content, error) {
	return nil, nil
}

func TestAddToolsRefuses(t *testing.T) {
	var weather, writes counter
	tests := []struct {
		name   string
		add    func(r *toolrun.Runner) error
		wantIs error
		want   string
	}{
		{"not JSON", func(r *toolrun.Runner) error { return r.AddTools(rawSchemaTool{`{"type":`}) }, toolrun.ErrInvalidSchema, `"hostile"`},
		{"not an object schema", func(r *toolrun.Runner) error { return r.AddTools(rawSchemaTool{`{"type":"string"}`}) }, toolrun.ErrInvalidSchema, `"hostile"`},
		{"unresolvable $ref", func(r *toolrun.Runner) error {
			return r.AddTools(rawSchemaTool{`{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}`})
		}, toolrun.ErrInvalidSchema, `"hostile"`},
		{"a name of New's tools", func(r *toolrun.Runner) error { return r.AddTools(weatherTool(&weather)) }, toolrun.ErrToolExists, `"get_weather"`},
		{"a name of the params' tools", func(r *toolrun.Runner) error {
			return r.AddToolParams(anthropic.BetaToolUnionParam{OfWebSearchTool20250305: &anthropic.BetaWebSearchTool20250305Param{}})
		}, toolrun.ErrToolExists, `"web_search"`},
		{"one name twice", func(r *toolrun.Runner) error { return r.AddTools(writeTool(&writes), writeTool(&writes)) }, toolrun.ErrToolExists, `"write_file"`},
		{"a client tool as a param", func(r *toolrun.Runner) error {
			return r.AddToolParams(anthropic.BetaToolUnionParam{OfTool: &anthropic.BetaToolParam{Name: "x"}})
		}, nil, "NewRawTool"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("ok"))))
			params := userParams("go")
			params.Tools = []anthropic.BetaToolUnionParam{{OfWebSearchTool20250305: &anthropic.BetaWebSearchTool20250305Param{}}}
			r := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&weather)}, &toolrun.Options{Logger: discard()})
			err := tc.add(r)
			if err == nil || (tc.wantIs != nil && !errors.Is(err, tc.wantIs)) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error wrapping %v with %s", err, tc.wantIs, tc.want)
			}
			if got := r.State().AddedTools(); len(got) != 0 {
				t.Errorf("a refused AddTools added %d tools", len(got))
			}
			if _, err := r.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"web_search", "get_weather"}, s.Requests()[0].ToolNames()); diff != "" {
				t.Errorf("tools mismatch (-want +got):\n%s", diff)
			}
		})
	}
	// The schemas AddTools refuses are those New panics on.
	for _, schema := range []string{`{"type":"string"}`, `{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}`} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New with schema %s did not panic", schema)
				}
			}()
			toolrun.New(anthropic.Client{}, userParams("go"), []toolrun.Tool{rawSchemaTool{schema}}, nil)
		}()
	}
}

func TestAddToolParams(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "tool list", true: "inline-tools beta"}[inline], func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
				toolruntest.Message(toolruntest.Text("ok")),
			))
			var weather counter
			params := userParams("go")
			if inline {
				params = inlineParams("go")
			}
			r := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&weather)}, &toolrun.Options{Logger: discard()})
			for turn, err := range r.Turns(t.Context()) {
				if err != nil {
					t.Fatal(err)
				}
				if turn.Number == 1 {
					if err := r.AddToolParams(anthropic.BetaToolUnionParam{OfWebSearchTool20250305: &anthropic.BetaWebSearchTool20250305Param{}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if diff := cmp.Diff([][]string{{"get_weather"}, {"get_weather", "web_search"}}, toolNamesPerRequest(s)); diff != "" {
				t.Errorf("tools per request mismatch (-want +got):\n%s", diff)
			}
			if got := r.State().AddedTools(); len(got) != 1 || got[0].OfWebSearchTool20250305 == nil {
				t.Errorf("AddedTools = %+v, want the web search tool", got)
			}
		})
	}
}

// TestAddedToolRetoldAfterCompaction: under the inline-tools beta the
// tool changes are messages of the history, so a compaction, which
// replaces the history, would take them away; they are told again after it.
func TestAddedToolRetoldAfterCompaction(t *testing.T) {
	var after [][]string
	s := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		msgs := req.Conversation
		if msgs[0].Role == "assistant" { // after the compaction
			after = append(after, req.ToolNames())
			return toolruntest.Message(toolruntest.Text("done"))
		}
		r := toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("t%d", len(msgs)), "write_file", writeIn{Path: fmt.Sprintf("/%d", len(msgs))}))
		r.Usage = &toolruntest.Usage{InputTokens: int64(1000 * len(msgs)), OutputTokens: 10}
		return r
	}})
	var writes, weather counter
	r := toolrun.New(client(s), inlineParams("write"), []toolrun.Tool{weatherTool(&weather)}, &toolrun.Options{
		Logger:     discard(),
		Compaction: toolrun.Compaction{Threshold: 3000},
	})
	if err := r.AddTools(writeTool(&writes)); err != nil {
		t.Fatal(err)
	}
	r.RemoveTools("get_weather")
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != toolrun.StopEndTurn || len(writes.n) == 0 {
		t.Fatalf("stop %q after %d writes, want end_turn after some", res.StopReason, len(writes.n))
	}
	if diff := cmp.Diff([][]string{{"write_file"}}, after); diff != "" {
		t.Errorf("tools after the compaction (-want +got):\n%s", diff)
	}
}

// TestAddedToolSurvivesStore: a tool added mid-run is in the state the run
// saves to its Store, and a runner opened on it later runs the tool.
func TestAddedToolSurvivesStore(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"})),
		toolruntest.Message(toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/x", Text: "y"})),
		toolruntest.Message(toolruntest.Text("ok")),
	))
	var writes, weather counter
	w := writeTool(&writes)
	w.Policy = policy.RequireApproval("writes")
	opts := &toolrun.Options{Logger: discard(), Store: &filestore.Store{Dir: t.TempDir()}, RunID: "run-1"}
	r, err := toolrun.Open(t.Context(), client(s), userParams("go"), []toolrun.Tool{weatherTool(&weather)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for turn, err := range r.Turns(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if turn.Number == 1 {
			if err := r.AddTools(w); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := r.Result().StopReason; got != toolrun.StopAwaitingApproval {
		t.Fatalf("StopReason = %q, want awaiting_approval", got)
	}
	// Another process: the same store, the tools again, the added one among them.
	r2, err := toolrun.Open(t.Context(), client(s), userParams("ignored: the saved run is resumed"), []toolrun.Tool{weatherTool(&weather), w}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"write_file"}, func() []string {
		var names []string
		for _, d := range r2.State().AddedTools() {
			names = append(names, d.OfTool.Name)
		}
		return names
	}()); diff != "" {
		t.Errorf("added tools after Open (-want +got):\n%s", diff)
	}
	if err := r2.Decide("t2", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := writes.get("/x"); got != 1 {
		t.Errorf("the added tool ran %d times after Open, want 1", got)
	}
	_, err = toolrun.Open(t.Context(), client(s), userParams("go"), []toolrun.Tool{weatherTool(&weather)}, opts)
	if !errors.Is(err, toolrun.ErrAddedToolMissing) {
		t.Errorf("Open without the added tool: got %v, want ErrAddedToolMissing", err)
	}
}
