package toolruntest_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/toolruntest"
)

// body returns a request body with the given messages and extra top-level
// fields, written as JSON.
func body(messages string, extra ...string) string {
	fields := append([]string{`"model":"claude-sonnet-4-5"`, `"max_tokens":1024`, `"messages":` + messages}, extra...)
	return "{" + strings.Join(fields, ",") + "}"
}

// Message fragments for the table below.
const (
	userHi      = `{"role":"user","content":"Hi"}`
	askTwoTools = `{"role":"assistant","content":[{"type":"text","text":"Checking."},` +
		`{"type":"tool_use","id":"toolu_01","name":"a","input":{}},{"type":"tool_use","id":"toolu_02","name":"b","input":{"x":1}}]}`
	answerBoth = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"one"},` +
		`{"type":"tool_result","tool_use_id":"toolu_02","content":[{"type":"text","text":"two"}],"is_error":true}]}`
	schema = `"input_schema":{"type":"object","properties":{}}`

	askFromCode = `{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_01","name":"code_execution","input":{"code":"a()"}},` +
		`{"type":"tool_use","id":"toolu_01","name":"a","input":{},"caller":{"type":"code_execution_20260120","tool_id":"srvtoolu_01"}}]}`
	answerFromCode = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"one"}]}`
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want string // the error message, or "" for a valid body
	}{
		// Valid bodies.
		{"string content", body(`[` + userHi + `]`), ""},
		{"system string", body(`[`+userHi+`]`, `"system":"Be brief."`), ""},
		{"system blocks", body(`[`+userHi+`]`, `"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}]`), ""},
		{"tool conversation", body(`[` + userHi + `,` + askTwoTools + `,` + answerBoth + `,{"role":"assistant","content":"Done."}]`), ""},
		{"results then text", body(`[` + userHi + `,` + askTwoTools + `,{"role":"user","content":[` +
			`{"type":"tool_result","tool_use_id":"toolu_01"},{"type":"tool_result","tool_use_id":"toolu_02"},{"type":"text","text":"Go on."}]}]`), ""},
		{"consecutive user messages after results", body(`[` + userHi + `,` + askTwoTools + `,` + answerBoth + `,` + userHi + `]`), ""},
		{"trailing assistant with tool_use", body(`[` + userHi + `,` + askTwoTools + `]`), ""},
		{"trailing empty assistant", body(`[` + userHi + `,{"role":"assistant","content":[]}]`), ""},
		{"thinking and image", body(`[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}},{"type":"text","text":"What is it?"}]},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm.","signature":"sig"},{"type":"text","text":"A dot."}]},` + userHi + `]`), ""},
		{"tools", body(`[`+userHi+`]`, `"tools":[{"name":"get_weather","description":"Weather.",`+schema+`},{"type":"web_search_20250305","name":"web_search"}]`), ""},
		{"stream", body(`[`+userHi+`]`, `"stream":true`), ""},

		// Rule 1: the body and its required fields.
		{"not JSON", `{"model":`, "request body is not a valid JSON object: unexpected end of JSON input"},
		{"array body", `[]`, "request body is not a valid JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage"},
		{"no model", `{"max_tokens":1,"messages":[` + userHi + `]}`, "model: Field required"},
		{"model not a string", `{"model":7,"max_tokens":1,"messages":[` + userHi + `]}`, "model: Input should be a valid string"},
		{"empty model", `{"model":"","max_tokens":1,"messages":[` + userHi + `]}`, "model: String should have at least 1 character"},
		{"no max_tokens", `{"model":"m","messages":[` + userHi + `]}`, "max_tokens: Field required"},
		{"fractional max_tokens", `{"model":"m","max_tokens":1.5,"messages":[` + userHi + `]}`, "max_tokens: Input should be a valid integer"},
		{"negative max_tokens", `{"model":"m","max_tokens":-1,"messages":[` + userHi + `]}`, "max_tokens: Input should be greater than or equal to 1"},
		{"no messages", `{"model":"m","max_tokens":1}`, "messages: Field required"},
		{"messages not a list", `{"model":"m","max_tokens":1,"messages":{}}`, "messages: Input should be a valid list"},
		{"empty messages", body(`[]`), "messages: at least one message is required"},
		{"stream not a bool", body(`[`+userHi+`]`, `"stream":"yes"`), "stream: Input should be a valid boolean"},
		{"system not text", body(`[`+userHi+`]`, `"system":[{"type":"image"}]`), "system.0.type: Input should be 'text'"},

		// Rule 2: roles.
		{"no role", body(`[{"content":"Hi"}]`), "messages.0.role: Field required"},
		{"bad role", body(`[{"role":"robot","content":"Hi"}]`), "messages.0.role: Input should be 'user', 'assistant' or 'system'"},
		{"system message with string content", body(`[{"role":"user","content":"Hi"},{"role":"system","content":"Hi"}]`), "messages.1.content: Input should be a valid list"},
		{"assistant first", body(`[{"role":"assistant","content":"Hi"}]`), `messages: first message must use the "user" role`},

		// Rule 3: tool_use answered right after, results first.
		{"tool_use unanswered", body(`[` + userHi + `,` + askTwoTools + `,` + userHi + `]`),
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01, toolu_02. Each `tool_use` block must have a corresponding `tool_result` block in the next message."},
		{"tool_use half answered", body(`[` + userHi + `,` + askTwoTools + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_02"}]}]`),
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01. Each `tool_use` block must have a corresponding `tool_result` block in the next message."},
		{"text before results", body(`[` + userHi + `,` + askTwoTools + `,{"role":"user","content":[{"type":"text","text":"Here."},` +
			`{"type":"tool_result","tool_use_id":"toolu_01"},{"type":"tool_result","tool_use_id":"toolu_02"}]}]`),
			"messages.2.content.1: `tool_result` blocks must come before any other content in the message that answers `tool_use` blocks, but content.0 is a text block"},

		// Rule 4: tool_result ids.
		{"result without tool_use", body(`[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_09"}]}]`),
			"messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_09. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."},
		{"result for an older tool_use", body(`[` + userHi + `,` + askTwoTools + `,` + answerBoth + `,{"role":"assistant","content":"So."},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01"}]}]`),
			"messages.4.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_01. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."},
		{"answered twice", body(`[` + userHi + `,` + askTwoTools + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01"},` +
			`{"type":"tool_result","tool_use_id":"toolu_02"},{"type":"tool_result","tool_use_id":"toolu_01"}]}]`),
			"messages.2.content.2: each `tool_use` must have a single result. Found multiple `tool_result` blocks with id: toolu_01"},
		{"tool_use id reused", body(`[` + userHi + `,` + askTwoTools + `,` + answerBoth + `,` + askTwoTools + `]`),
			"messages.3.content.1: `tool_use` ids must be unique: toolu_01 appears more than once"},
		{"bad tool_use id", body(`[` + userHi + `,{"role":"assistant","content":[{"type":"tool_use","id":"toolu 01","name":"a","input":{}}]}]`),
			"messages.1.content.0.id: String should match pattern '^[a-zA-Z0-9_-]+$'"},
		{"tool_use input not an object", body(`[` + userHi + `,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"a","input":[]}]}]`),
			"messages.1.content.0.input: Input should be a valid dictionary"},
		{"tool_use input a string", body(`[` + userHi + `,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"a","input":"Paris"}]}]`),
			"messages.1.content.0.input: Input should be a valid dictionary"},
		{"tool_use input null", body(`[` + userHi + `,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"a","input":null}]}]`),
			"messages.1.content.0.input: Input should be a valid dictionary"},
		{"tool_use from the user", body(`[{"role":"user","content":[{"type":"tool_use","id":"toolu_01","name":"a","input":{}}]}]`),
			"messages.0.content.0: `tool_use` blocks can only be in `assistant` messages"},
		{"no tool_use_id", body(`[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]`), "messages.0.content.0.tool_use_id: Field required"},

		// Rule 5: a message in between breaks the pairing.
		{"assistant in between", body(`[` + userHi + `,` + askTwoTools + `,{"role":"assistant","content":"Wait."},` + answerBoth + `]`),
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01, toolu_02. Each `tool_use` block must have a corresponding `tool_result` block in the next message."},
		{"user in between", body(`[` + userHi + `,` + askTwoTools + `,` + userHi + `,` + answerBoth + `]`),
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01, toolu_02. Each `tool_use` block must have a corresponding `tool_result` block in the next message."},

		// Rule 6: empty content.
		{"empty content", body(`[{"role":"user","content":[]}]`), "messages.0: all messages must have non-empty content except for the optional final assistant message"},
		{"empty string content", body(`[{"role":"user","content":""}]`), "messages.0: all messages must have non-empty content except for the optional final assistant message"},
		{"empty assistant in the middle", body(`[` + userHi + `,{"role":"assistant","content":[]},` + userHi + `]`), "messages.1: all messages must have non-empty content except for the optional final assistant message"},
		{"empty text block", body(`[{"role":"user","content":[{"type":"text","text":""}]}]`), "messages.0.content.0: text content blocks must be non-empty"},
		{"blank text block", body(`[{"role":"user","content":[{"type":"text","text":" \n"}]}]`), "messages.0.content.0: text content blocks must contain non-whitespace text"},
		{"trailing whitespace in prefill", body(`[` + userHi + `,{"role":"assistant","content":"The answer is "}]`), "messages: final assistant content cannot end with trailing whitespace"},
		{"null content", body(`[{"role":"user","content":null}]`), "messages.0.content: Input should be a valid string or a list of content blocks"},
		{"block without type", body(`[{"role":"user","content":[{"text":"Hi"}]}]`), "messages.0.content.0.type: Field required"},
		{"text not a string", body(`[{"role":"user","content":[{"type":"text","text":5}]}]`), "messages.0.content.0.text: Input should be a valid string"},

		// Rule 7: tools.
		{"tool without name", body(`[`+userHi+`]`, `"tools":[{`+schema+`}]`), "tools.0.name: Field required"},
		{"bad tool name", body(`[`+userHi+`]`, `"tools":[{"name":"get.weather",`+schema+`}]`), "tools.0.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'"},
		{"long tool name", body(`[`+userHi+`]`, `"tools":[{"name":"`+strings.Repeat("a", 129)+`",`+schema+`}]`), "tools.0.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'"},
		{"no schema", body(`[`+userHi+`]`, `"tools":[{"name":"a"}]`), "tools.0.input_schema: Field required"},
		{"schema not an object", body(`[`+userHi+`]`, `"tools":[{"name":"a","input_schema":"object"}]`), "tools.0.input_schema: Input should be a valid dictionary"},
		{"schema without type", body(`[`+userHi+`]`, `"tools":[{"name":"a","input_schema":{"properties":{}}}]`), "tools.0.input_schema.type: Input should be 'object'"},
		{"duplicate tool names", body(`[`+userHi+`]`, `"tools":[{"name":"a",`+schema+`},{"name":"b",`+schema+`},{"name":"a",`+schema+`}]`), `tools: Tool names must be unique: "a" appears more than once`},

		// Rule 10: the user turn answering programmatic calls.
		{"programmatic results alone", body(`[` + userHi + `,` + askFromCode + `,` + answerFromCode + `]`), ""},
		{"programmatic results then text", body(`[` + userHi + `,` + askFromCode + `,{"role":"user","content":[` +
			`{"type":"tool_result","tool_use_id":"toolu_01","content":"one"},{"type":"text","text":"Go on."}]}]`),
			"messages.2.content.1: when answering programmatic tool calls (`tool_use` blocks whose `caller` is a code execution tool), the user turn must contain only `tool_result` blocks, but this is a text block"},
		{"programmatic results then a user message", body(`[` + userHi + `,` + askFromCode + `,` + answerFromCode + `,` + userHi + `]`),
			"messages.3.content.0: when answering programmatic tool calls (`tool_use` blocks whose `caller` is a code execution tool), the user turn must contain only `tool_result` blocks, but this is a text block"},
		{"direct caller then text", body(`[` + userHi + `,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"a","input":{},"caller":{"type":"direct"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01"},{"type":"text","text":"Go on."}]}]`), ""},

		// Rule 11: toolset entries.
		{"toolset entry", body(`[`+userHi+`]`, `"tools":[{"type":"browser_toolset_20260801"},{"name":"navigate",`+schema+`}]`), ""},
		{"tool named like a toolset", body(`[`+userHi+`]`, `"tools":[{"type":"browser_toolset_20260801"},{"name":"browser",`+schema+`}]`), `tools: Tool names must be unique: "browser" appears more than once`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got string
			if err := toolruntest.Validate([]byte(tc.body)); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Validate(%s) mismatch (-want +got):\n%s", tc.body, diff)
			}
		})
	}
}

// FuzzValidate checks that Validate never panics, whatever the body.
func FuzzValidate(f *testing.F) {
	for _, b := range []string{
		body(`[` + userHi + `]`),
		body(`[` + userHi + `,` + askTwoTools + `,` + answerBoth + `]`),
		body(`[`+userHi+`,`+askTwoTools+`]`, `"tools":[{"name":"a",`+schema+`},{"type":"web_search_20250305","name":"s"}]`, `"system":[{"type":"text","text":"x"}]`),
		body(`[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"}]}]}]`),
		body(`[{"role":"user","content":null},{"role":7}]`),
		body(`[{"role":"assistant","content":[{"type":"tool_use"}]}]`),
		body(`[` + userHi + `,{"role":"assistant","content":[]}]`),
		`{"model":null,"max_tokens":null,"messages":null,"tools":null,"system":null}`,
		`{}`, `null`, `[]`, `"x"`, ``,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		toolruntest.Validate(b)
	})
}
