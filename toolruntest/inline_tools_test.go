package toolruntest_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun/toolruntest"
)

// inlineBody is a request whose tools are a and b, and whose conversation
// ends with the role "system" message system.
func inlineBody(system string) string {
	return `{"model":"m","max_tokens":10,
		"tools":[{"name":"a","input_schema":{"type":"object"}},{"name":"b","input_schema":{"type":"object"}}],
		"messages":[{"role":"user","content":"Hi"},` + system + `]}`
}

func TestInlineToolsValidation(t *testing.T) {
	t.Parallel()
	add := func(tool string) string {
		return `{"role":"system","content":[{"type":"tool_addition","tool":` + tool + `}]}`
	}
	def := func(name string) string {
		return `{"type":"tool_definition","definition":{"name":"` + name + `","input_schema":{"type":"object"}}}`
	}
	remove := func(name string) string {
		return `{"role":"system","content":[{"type":"tool_removal","tool":{"type":"tool_reference","name":"` + name + `"}}]}`
	}
	tests := []struct {
		name   string
		body   string
		noBeta bool
		want   string // a part of the error; "" for a request the API accepts
	}{
		{name: "addition", body: inlineBody(add(def("c")))},
		{name: "removal", body: inlineBody(remove("a"))},
		{name: "removal then addition by reference", body: inlineBody(remove("a") + `,` + add(`{"type":"tool_reference","name":"a"}`))},
		{name: "addition and removal in one message", body: inlineBody(`{"role":"system","content":[{"type":"tool_addition","tool":` + def("c") + `},{"type":"tool_removal","tool":{"type":"tool_reference","name":"c"}}]}`)},
		{name: "no beta", body: inlineBody(add(def("c"))), noBeta: true, want: "messages.1.content.0: this feature requires the anthropic-beta header inline-tools-2026-09-15"},
		{name: "addition of a tool the model has", body: inlineBody(add(def("a"))), want: `messages.1.content.0.tool: Tool names must be unique: "a" is available already`},
		{name: "removal of a tool the model lacks", body: inlineBody(remove("c")), want: `messages.1.content.0.tool.name: tool "c" is not available`},
		{name: "removal twice", body: inlineBody(remove("a") + `,` + remove("a")), want: `messages.2.content.0.tool.name: tool "a" is not available`},
		{name: "reference to an undefined tool", body: inlineBody(add(`{"type":"tool_reference","name":"z"}`)), want: `messages.1.content.0.tool.name: tool "z" is not defined`},
		{name: "no tool", body: inlineBody(`{"role":"system","content":[{"type":"tool_addition"}]}`), want: "messages.1.content.0.tool: Field required"},
		{name: "unknown block type", body: inlineBody(`{"role":"system","content":[{"type":"tool_swap","tool":{}}]}`), want: "messages.1.content.0.type: Input should be 'text', 'tool_addition' or 'tool_removal'"},
		{name: "definition in a removal", body: inlineBody(`{"role":"system","content":[{"type":"tool_removal","tool":` + def("a") + `}]}`), want: "messages.1.content.0.tool.type: Input should be 'tool_reference', 'mcp_tool_reference' or 'mcp_toolset_reference'"},
		{name: "extra field", body: inlineBody(`{"role":"system","content":[{"type":"tool_removal","tool":{"type":"tool_reference","name":"a"},"when":"now"}]}`), want: "messages.1.content.0.when: Extra inputs are not permitted"},
		{name: "reference without a name", body: inlineBody(`{"role":"system","content":[{"type":"tool_removal","tool":{"type":"tool_reference"}}]}`), want: "messages.1.content.0.tool.name: Field required"},
		{name: "definition with a bad schema", body: inlineBody(add(`{"type":"tool_definition","definition":{"name":"c","input_schema":{"type":"string"}}}`)), want: "messages.1.content.0.tool.definition.input_schema.type: Input should be 'object'"},
		{name: "content not a list", body: inlineBody(`{"role":"system","content":"Hi"}`), want: "messages.1.content: Input should be a valid list"},
		{
			name: "right after the model's turn",
			body: `{"model":"m","max_tokens":10,"tools":[{"name":"a","input_schema":{"type":"object"}}],
				"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Working"},` + remove("a") + `]}`,
			want: "messages.2: a `system` message cannot directly follow an `assistant` message",
		},
		{
			name: "between a tool_use and its result",
			body: `{"model":"m","max_tokens":10,"tools":[{"name":"a","input_schema":{"type":"object"}}],
				"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"a","input":{}}]},` + remove("a") + `,
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1"}]}]}`,
			want: "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A nil TB: the rejections are the point, not failures.
			s := toolruntest.New(nil, toolruntest.Script(toolruntest.Message(toolruntest.Text("Fine."))))
			defer s.Close()
			var opts []option.RequestOption
			if !tc.noBeta {
				opts = append(opts, option.WithHeader("anthropic-beta", "inline-tools-2026-09-15"))
			}
			var res anthropic.BetaMessage
			client := s.Client()
			err := client.Post(t.Context(), "v1/messages", json.RawMessage(tc.body), &res, opts...)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				return
			}
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("got error %v, want an *anthropic.Error", err)
			}
			if apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, tc.want) {
				t.Errorf("got %d %q, want 400 with %q", apiErr.StatusCode, apiErr.Message, tc.want)
			}
		})
	}
}

func TestRequestToolNames(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("Fine."))))
	body := inlineBody(`{"role":"system","content":[
		{"type":"tool_removal","tool":{"type":"tool_reference","name":"a"}},
		{"type":"tool_addition","tool":{"type":"tool_definition","definition":{"name":"c","input_schema":{"type":"object"}}}},
		{"type":"tool_addition","tool":{"type":"tool_definition","definition":{"type":"web_search_20250305","name":"web_search"}}}]}`)
	var res anthropic.BetaMessage
	client := s.Client()
	if err := client.Post(t.Context(), "v1/messages", json.RawMessage(body), &res,
		option.WithHeader("anthropic-beta", "inline-tools-2026-09-15")); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests, want 1", len(reqs))
	}
	if diff := cmp.Diff([]string{"b", "c", "web_search"}, reqs[0].ToolNames()); diff != "" {
		t.Errorf("ToolNames mismatch (-want +got):\n%s", diff)
	}
}
