package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/mcptool"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

func TestToolName(t *testing.T) {
	long := strings.Repeat("x", 130)
	tests := []struct {
		name, server, tool, want string
	}{
		{name: "plain", server: "github", tool: "search", want: "github__search"},
		{name: "dashes kept", server: "my-server", tool: "get-issue", want: "my-server__get-issue"},
		{name: "others replaced", server: "files.v2", tool: "read file/ü", want: "files_v2__read_file__"},
		{name: "long", server: "s", tool: long, want: "s__" + strings.Repeat("x", 128-3-17) + "_" + "HASH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mcptool.ToolName(tt.server, tt.tool)
			if strings.HasSuffix(tt.want, "HASH") {
				if len(got) != 128 || !strings.HasPrefix(got, strings.TrimSuffix(tt.want, "HASH")) {
					t.Errorf("ToolName(%q, %q) = %q, want 128 characters beginning %q", tt.server, tt.tool, got, strings.TrimSuffix(tt.want, "HASH"))
				}
				if other := mcptool.ToolName(tt.server, long+"y"); other == got {
					t.Errorf("two long names both became %q", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("ToolName(%q, %q) = %q, want %q", tt.server, tt.tool, got, tt.want)
			}
		})
	}
}

func TestToolsAllPages(t *testing.T) {
	srv := newMCPServer("many", &mcp.ServerOptions{PageSize: 2})
	var want []string
	for i := range 5 {
		name := fmt.Sprintf("tool%d", i)
		addTool(srv, name, returns(text(name)))
		want = append(want, "many__"+name)
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "typed", Title: "Typed tool"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			City string `json:"city" jsonschema:"the city"`
		}) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		})
	want = append(want, "many__typed")
	s := connect(t, "many", mcptool.InMemory(srv), nil)
	ts := tools(t, s)
	check(t, "tool names", names(ts), want)

	typed := find(t, ts, "many__typed")
	if got, want := typed.Description(), "Typed tool"; got != want {
		t.Errorf("Description() = %q, want the title %q", got, want)
	}
	b, err := json.Marshal(typed.InputSchema())
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	check(t, "input schema", schema, map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"city": map[string]any{"type": "string", "description": "the city"}},
		"required":             []any{"city"},
		"additionalProperties": false,
	})
	if got := typed.(*mcptool.Tool).Definition().Name; got != "typed" {
		t.Errorf("Definition().Name = %q, want the MCP name %q", got, "typed")
	}
}

// TestTwoServers runs two servers that both have a search tool: each call
// reaches its own server.
func TestTwoServers(t *testing.T) {
	var all []toolrun.Tool
	for _, name := range []string{"docs", "code"} {
		srv := newMCPServer(name, nil)
		addTool(srv, "search", returns(text("found in "+name)))
		all = append(all, tools(t, connect(t, name, mcptool.InMemory(srv), nil))...)
	}
	check(t, "tool names", names(all), []string{"docs__search", "code__search"})

	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "code__search", nil), toolruntest.ToolUse("t2", "docs__search", nil)),
		toolruntest.Message(toolruntest.Text("done")),
	))
	if _, err := toolrun.New(client(model), userParams("search"), all, nil).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	check(t, "tool results", results(model.Requests()[1]), []result{{Text: "found in code"}, {Text: "found in docs"}})
}

func TestToolsNameErrors(t *testing.T) {
	tests := []struct {
		name   string
		tools  []string
		rename func(string) string
		want   string
	}{
		{
			name:  "clash after cleaning",
			tools: []string{"get.user", "get_user"},
			want:  `mcptool: MCP server "s": tools "get.user" and "get_user" would both be named "s__get_user"; set Options.Rename to tell them apart`,
		},
		{
			name:   "invalid rename",
			tools:  []string{"search"},
			rename: func(tool string) string { return "s." + tool },
			want:   `mcptool: MCP server "s": tool "search" would be named "s.search", which does not match ^[a-zA-Z0-9_-]{1,128}$`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newMCPServer("s", nil)
			for _, name := range tt.tools {
				addTool(srv, name, returns(text("")))
			}
			s := connect(t, "s", mcptool.InMemory(srv), &mcptool.Options{Rename: tt.rename})
			_, err := s.Tools(t.Context())
			if err == nil || err.Error() != tt.want {
				t.Errorf("Tools() error = %v, want %s", err, tt.want)
			}
		})
	}
}

func TestRename(t *testing.T) {
	srv := newMCPServer("s", nil)
	addTool(srv, "search", returns(text("")))
	s := connect(t, "s", mcptool.InMemory(srv), &mcptool.Options{Rename: func(tool string) string { return tool }})
	check(t, "tool names", names(tools(t, s)), []string{"search"})
}

// TestUnusableSchemaLeftOut: a tool whose schema the runner could not
// validate safely is not offered, an Error log says which and why, and the
// server's other tools still are. Before issue 14, a $ref cycle ended the
// process with a stack overflow, and an ECMAScript pattern dropped a tool
// that works.
func TestUnusableSchemaLeftOut(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		offered bool
		why     string // a substring of the logged error
	}{
		{name: "remote", schema: `{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}}}`, why: "references outside the schema are not allowed"},
		{name: "cyclic", schema: `{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}}}`, why: "reference cycle"},
		{name: "draft3", schema: `{"$schema":"http://json-schema.org/draft-03/schema#","type":"object"}`, why: "unsupported $schema"},
		{name: "zod", schema: `{"type":"object","properties":{"user":{"type":"string","pattern":"^(?!admin)\\w+$"}}}`, offered: true},
		{name: "draft4", schema: `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"maximum":1,"exclusiveMaximum":true}}}`, offered: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newMCPServer("s", nil)
			addTool(srv, "good", returns(text("")))
			srv.AddTool(&mcp.Tool{Name: tt.name, InputSchema: json.RawMessage(tt.schema)}, returns(text("")))
			log, logs := newLogger()
			s := connect(t, "s", mcptool.InMemory(srv), &mcptool.Options{Logger: log})
			want := []string{"s__good"}
			if tt.offered {
				want = append(want, "s__"+tt.name)
			}
			slices.Sort(want) // the server lists its tools by name
			check(t, "tool names", names(tools(t, s)), want)
			recs := logs.records(t, "mcptool: MCP tool left out: its input schema cannot be used")
			if tt.offered {
				if len(recs) != 0 {
					t.Errorf("got log records %v, want none", recs)
				}
				return
			}
			if len(recs) != 1 || recs[0]["tool"] != tt.name || recs[0]["server"] != "s" || recs[0]["level"] != "ERROR" ||
				!strings.Contains(fmt.Sprint(recs[0]["error"]), tt.why) {
				t.Errorf("got log records %v, want one error record for server s, tool %s, saying %q", recs, tt.name, tt.why)
			}
		})
	}
}

// TestResults runs every kind of MCP result through the runner and checks
// the tool_result blocks the model receives.
func TestResults(t *testing.T) {
	png := []byte("\x89PNG fake")
	pdf := []byte("%PDF-1.4 fake")
	tests := []struct {
		name    string
		res     *mcp.CallToolResult
		want    string // the tool_result's content as sent
		isError bool
	}{
		{
			name: "text",
			res:  text("hello"),
			want: `[{"type":"text","text":"hello"}]`,
		},
		{
			name: "text and image",
			res:  &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a chart"}, &mcp.ImageContent{MIMEType: "image/png", Data: png}}},
			want: `[{"type":"text","text":"a chart"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORyBmYWtl"}}]`,
		},
		{
			name: "unsupported image",
			res:  &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/bmp", Data: png}}},
			want: `[{"type":"text","text":"[an image (image/bmp, 9 bytes) left out: the model accepts only JPEG, PNG, GIF and WebP images]"}]`,
		},
		{
			name: "audio",
			res:  &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")}}},
			want: `[{"type":"text","text":"[audio (audio/wav, 4 bytes) left out: the model does not accept audio]"}]`,
		},
		{
			name: "text resource",
			res:  &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "remember"}}}},
			want: `[{"type":"text","text":"Resource file:///notes.txt:\nremember"}]`,
		},
		{
			name: "PDF resource",
			res:  &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///r.pdf", MIMEType: "application/pdf", Blob: pdf}}}},
			want: `[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQgZmFrZQ=="}}]`,
		},
		{
			name: "image resource",
			res:  &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///p.png", MIMEType: "image/png", Blob: png}}}},
			want: `[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORyBmYWtl"}}]`,
		},
		{
			name: "text blob resource",
			res:  &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a.csv", MIMEType: "text/csv; charset=utf-8", Blob: []byte("a,b")}}}},
			want: `[{"type":"text","text":"Resource file:///a.csv:\na,b"}]`,
		},
		{
			name: "other blob resource",
			res:  &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a.zip", MIMEType: "application/zip", Blob: []byte("PK")}}}},
			want: `[{"type":"text","text":"[resource file:///a.zip (application/zip, 2 bytes) left out: the model accepts only text, images and PDFs]"}]`,
		},
		{
			name: "resource link",
			res:  &mcp.CallToolResult{Content: []mcp.Content{&mcp.ResourceLink{URI: "https://example.com/r", Name: "report", MIMEType: "text/html", Description: "the full report"}}},
			want: `[{"type":"text","text":"Resource link: https://example.com/r (report), text/html: the full report"}]`,
		},
		{
			name: "structured content only",
			res:  &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: map[string]any{"count": 3}},
			want: `[{"type":"text","text":"{\"count\":3}"}]`,
		},
		{
			name:    "tool error",
			res:     &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such city"}}},
			want:    `[{"type":"text","text":"no such city"}]`,
			isError: true,
		},
		{
			name:    "tool error without text",
			res:     &mcp.CallToolResult{IsError: true, Content: []mcp.Content{}},
			want:    `[{"type":"text","text":"MCP tool \"tool error without text\" of server \"s\" failed without a message"}]`,
			isError: true,
		},
	}
	srv := newMCPServer("s", nil)
	var calls []toolruntest.Block
	for i, tt := range tests {
		addTool(srv, tt.name, returns(tt.res))
		calls = append(calls, toolruntest.ToolUse(fmt.Sprintf("t%d", i), mcptool.ToolName("s", tt.name), nil))
	}
	log, logs := newLogger()
	s := connect(t, "s", mcptool.InMemory(srv), nil)
	model := toolruntest.New(t, toolruntest.Script(toolruntest.Message(calls...), toolruntest.Message(toolruntest.Text("done"))))
	var toolErrs []*mcptool.ToolError
	opts := &toolrun.Options{Logger: log, AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
		if te := (*mcptool.ToolError)(nil); errors.As(r.Err, &te) {
			toolErrs = append(toolErrs, te)
		}
		return nil
	}, MaxParallelTools: 1}
	if _, err := toolrun.New(client(model), userParams("go"), tools(t, s), opts).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := toolResults(model.Requests()[1])
	if len(got) != len(tests) {
		t.Fatalf("got %d tool results, want %d", len(got), len(tests))
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotContent, wantContent any
			if err := json.Unmarshal(got[i].Content, &gotContent); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &wantContent); err != nil {
				t.Fatal(err)
			}
			check(t, "content", gotContent, wantContent)
			if got[i].IsError != tt.isError {
				t.Errorf("is_error = %t, want %t", got[i].IsError, tt.isError)
			}
		})
	}
	// The tool's own error reaches hooks as a *ToolError, and the log as a
	// failed call, as a Go tool's error does.
	if len(toolErrs) != 2 || toolErrs[0].Tool != "tool error" || toolErrs[0].Server != "s" || toolErrs[0].Text != "no such city" {
		t.Errorf("ToolErrors = %+v, want the two tool errors", toolErrs)
	}
	if recs := logs.records(t, "toolrun: tool call failed"); len(recs) != 2 || recs[0]["tool"] != "s__tool_error" {
		t.Errorf("failure records = %v, want one for each tool error", recs)
	}
}

// TestRunnerConfig shows that approval policies and timeouts apply to MCP
// tools as they do to Go tools.
func TestRunnerConfig(t *testing.T) {
	var deletes atomic.Int32
	srv := newMCPServer("s", nil)
	addTool(srv, "list", returns(text("a, b")))
	addTool(srv, "delete", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		deletes.Add(1)
		return text("deleted"), nil
	})
	addTool(srv, "slow", blocks)
	s := connect(t, "s", mcptool.InMemory(srv), &mcptool.Options{
		ConfigFor: func(tool *mcp.Tool) toolrun.ToolConfig {
			switch tool.Name {
			case "delete":
				return toolrun.ToolConfig{Policy: policy.RequireApproval("deletes files")}
			case "slow":
				return toolrun.ToolConfig{Timeout: 50 * time.Millisecond}
			}
			return toolrun.ToolConfig{}
		},
	})
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "s__list", nil), toolruntest.ToolUse("t2", "s__slow", nil), toolruntest.ToolUse("t3", "s__delete", nil)),
		toolruntest.Message(toolruntest.Text("done")),
	))
	r := toolrun.New(client(model), userParams("clean up"), tools(t, s), &toolrun.Options{Logger: discardLogger()})
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != toolrun.StopAwaitingApproval || len(res.Pending) != 1 || res.Pending[0].Call.Name != "s__delete" || res.Pending[0].Reason != "deletes files" {
		t.Fatalf("StopReason = %q, Pending = %+v; want s__delete awaiting approval", res.StopReason, res.Pending)
	}
	if n := deletes.Load(); n != 0 {
		t.Errorf("delete ran %d times before approval", n)
	}
	if err := r.Decide("t3", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	if res, err = r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run after approval = %v, %v; want end_turn", res.StopReason, err)
	}
	if n := deletes.Load(); n != 1 {
		t.Errorf("delete ran %d times after approval, want 1", n)
	}
	check(t, "tool results", results(model.Requests()[1]), []result{
		{Text: "a, b"},
		{Text: `tool "s__slow" timed out after 50ms and was cancelled`, IsError: true},
		{Text: "deleted"},
	})
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
