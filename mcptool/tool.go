package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"mime"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolrun/toolrun"
)

// maxNameLen is the longest tool name the API accepts.
const maxNameLen = 128

// errSchemaBudget is the error of inputSchema for a schema that does not
// fit in what is left of Options.MaxSchemaBytes.
var errSchemaBudget = errors.New("the schema does not fit in Options.MaxSchemaBytes")

// nameRE is the API's rule for client tool names.
var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// ToolName returns the name the model sees for the tool named tool of the
// server named server, when [Options.Rename] is nil: the server's name, two
// underscores, and the tool's name, so that the search tools of servers
// "github" and "jira" become "github__search" and "jira__search". Each
// character the API does not allow in a name (it allows ASCII letters,
// digits, '_' and '-') becomes '_'. A name longer than the API's limit of
// 128 characters is cut short and ends with a hash of the whole, so that
// it stays unique.
func ToolName(server, tool string) string {
	name := clean(server) + "__" + clean(tool)
	if len(name) <= maxNameLen {
		return name
	}
	h := fnv.New64a()
	h.Write([]byte(server + "\x00" + tool))
	sum := fmt.Sprintf("%016x", h.Sum64())
	return name[:maxNameLen-len(sum)-1] + "_" + sum
}

// clean replaces each character that a tool name may not have with '_'.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

// Tool is one tool of an MCP server, as a [toolrun.Tool]: its name is the
// one the model sees, its description and input schema are the server's,
// and Run calls the tool on the server. Its Config is the configuration
// from [Options]. Get the tools of a server with [Server.Tools].
type Tool struct {
	server *Server
	def    *mcp.Tool
	name   string
	schema json.RawMessage
	config toolrun.ToolConfig
}

// Name returns the name the model sees; see [ToolName].
func (t *Tool) Name() string { return t.name }

// Description returns the server's description of the tool, or its title
// if it has no description.
func (t *Tool) Description() string {
	if t.def.Description != "" {
		return t.def.Description
	}
	return t.def.Title
}

// InputSchema returns the server's input schema of the tool.
func (t *Tool) InputSchema() json.RawMessage { return t.schema }

// Config returns the tool's runner configuration, from [Options.Config] or
// [Options.ConfigFor].
func (t *Tool) Config() toolrun.ToolConfig { return t.config }

// Definition returns the tool as the server listed it. The caller must not
// change it.
func (t *Tool) Definition() *mcp.Tool { return t.def }

// Server returns the server of the tool.
func (t *Tool) Server() *Server { return t.server }

// Run calls the tool on its server with input and returns the result
// converted to content blocks:
//
//   - text as text;
//   - a JPEG, PNG, GIF or WebP image as an image; an image of another type,
//     or audio, as a text that says what was left out;
//   - an embedded resource with text as a text that begins with its URI; a
//     PDF or image blob as a document or image; a text blob as text; any
//     other blob as a text that says what was left out;
//   - a resource link as a text with its URI, name and description;
//   - structured content, when there is no other, as JSON text.
//
// A result marked isError is returned as a [*ToolError]. A failure of the
// server — it exited, hung, is down, or rejected the call — is returned as
// a [*ServerError] or, for a rejected call, an error with the server's
// message; it never re-runs the call. A server that exited or hung is
// restarted, or not, by the next call, as [Options.Restart] says.
func (t *Tool) Run(ctx context.Context, input json.RawMessage) ([]toolrun.Content, error) {
	s, tool := t.server, t.def.Name
	c, callCtx, done, err := s.begin(ctx, tool)
	if err != nil {
		return nil, err
	}
	defer done()
	if d := s.opts.CallTimeout; d > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeoutCause(callCtx, d, errCallTimeout)
		defer cancel()
	}
	params := &mcp.CallToolParams{Name: tool}
	// A progress token asks the server for progress notifications, which
	// are logged at Debug; it names the call in them.
	params.SetProgressToken(fmt.Sprintf("%s#%d", tool, s.calls.Add(1)))
	if len(input) > 0 {
		params.Arguments = input
	}
	res, err := c.session.CallTool(callCtx, params)
	if err == nil {
		s.healthy(c)
		content := convert(res)
		if res.IsError {
			return nil, &ToolError{Server: s.name, Tool: tool, Text: errorText(res), Content: content}
		}
		return content, nil
	}
	return nil, s.callFailed(ctx, callCtx, c, tool, err)
}

// begin returns a live connection with a call of tool registered on it,
// and the call's context. The caller must call done when the call is over.
func (s *Server) begin(ctx context.Context, tool string) (c *conn, callCtx context.Context, done func(), err error) {
	for {
		if c, err = s.acquire(ctx, tool); err != nil {
			return nil, nil, nil, err
		}
		if callCtx, id, ok := c.begin(ctx, tool); ok {
			return c, callCtx, func() { c.finish(id) }, nil
		}
		// The connection ended before the call was sent: the call goes to
		// the next one, if the restart policy allows.
		<-c.ended
	}
}

// callFailed classifies the failure err of a call of tool on c.
func (s *Server) callFailed(ctx, callCtx context.Context, c *conn, tool string, err error) error {
	cause := context.Cause(callCtx)
	var wire *jsonrpc.Error
	switch {
	case ctx.Err() != nil:
		// Cancelled by the caller, or its deadline passed: the runner
		// reports that in its own words.
		return fmt.Errorf("MCP server %q: call of %q: %w", s.name, tool, ctx.Err())
	case errors.Is(cause, ErrClosed):
		return s.closedError(tool)
	case errors.Is(cause, errCallTimeout):
		return s.noAnswer(ctx, c, tool)
	case c.hasEnded(), errors.Is(cause, errConnEnded):
		return s.endError(s.end(c, errConnEnded, ""), tool)
	case errors.As(err, &wire):
		// The server answered with a JSON-RPC error: it is alive, but
		// would not run the call (an unknown tool, invalid arguments).
		s.healthy(c)
		return fmt.Errorf("MCP server %q rejected the call of %q: %s", s.name, tool, wire.Message)
	}
	// The transport failed: the connection cannot be trusted any more.
	return s.endError(s.end(c, err, ""), tool)
}

// noAnswer handles a call of tool that c did not answer within
// CallTimeout: if c does not answer a ping either, the server is hung.
func (s *Server) noAnswer(ctx context.Context, c *conn, tool string) error {
	d := s.opts.CallTimeout
	pingCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := c.session.Ping(pingCtx, nil)
	switch {
	case err == nil:
		return &ServerError{Server: s.name, Tool: tool, Kind: ErrNoAnswer,
			msg: fmt.Sprintf("MCP server %q did not answer the call of %q within %s; the call was cancelled", s.name, tool, d)}
	case ctx.Err() != nil:
		return fmt.Errorf("MCP server %q: call of %q: %w", s.name, tool, ctx.Err())
	case c.hasEnded():
		return s.endError(s.end(c, errConnEnded, ""), tool)
	}
	return s.endError(s.end(c, errHung, tool), tool)
}

// Tools lists the server's tools, following the list's pages to the end,
// and returns them as toolrun tools (each a [*Tool]) in the server's order.
// Their names are as [Options.Rename] (or [ToolName]) makes them.
//
// A tool whose input schema the runner could not use (not an object, or
// with a reference it cannot resolve) is left out and logged at Error, as
// are the tools past [Options.MaxTools] and those whose schemas do not fit
// in [Options.MaxSchemaBytes]. Two tools that would have the same name, or
// a name the API does not allow, are an error. For the tools of several
// servers, whose names may collide too, see [AllTools].
//
// Tools restarts the server first if it needs to and its policy allows, as
// a call does. Call Tools again after a restart to see a changed list.
func (s *Server) Tools(ctx context.Context) ([]toolrun.Tool, error) {
	c, err := s.acquire(ctx, "")
	if err != nil {
		return nil, err
	}
	defs, err := s.list(ctx, c)
	if err != nil {
		return nil, err
	}
	s.healthy(c)
	maxTools := limit(s.opts.MaxTools, DefaultMaxTools)
	if maxTools >= 0 && len(defs) > maxTools {
		s.log.ErrorContext(ctx, "mcptool: MCP tools left out: the server lists more tools than Options.MaxTools", "server", s.name,
			"listed_at_least", len(defs), "max_tools", maxTools, "first_left_out", defs[maxTools].Name)
		defs = defs[:maxTools]
	}
	budget := limit(s.opts.MaxSchemaBytes, DefaultMaxSchemaBytes)
	var tooBig []string // tools left out for the size of their schemas
	var tools []toolrun.Tool
	byName := map[string]string{} // model name -> MCP name
	for _, def := range defs {
		name := ToolName(s.name, def.Name)
		if s.opts.Rename != nil {
			name = s.opts.Rename(def.Name)
		}
		if !nameRE.MatchString(name) {
			return nil, fmt.Errorf("mcptool: MCP server %q: tool %q would be named %q, which does not match %s", s.name, def.Name, name, nameRE)
		}
		if other, dup := byName[name]; dup {
			return nil, fmt.Errorf("mcptool: MCP server %q: tools %q and %q would both be named %q; set Options.Rename to tell them apart", s.name, other, def.Name, name)
		}
		schema, err := inputSchema(name, def.InputSchema, budget)
		if errors.Is(err, errSchemaBudget) {
			tooBig = append(tooBig, def.Name)
			continue
		}
		if err != nil {
			s.log.ErrorContext(ctx, "mcptool: MCP tool left out: its input schema cannot be used", "server", s.name, "tool", def.Name, "error", err.Error())
			continue
		}
		byName[name] = def.Name
		if budget > 0 {
			budget -= len(schema)
		}
		config := s.opts.Config
		if s.opts.ConfigFor != nil {
			config = s.opts.ConfigFor(def)
		}
		tools = append(tools, &Tool{server: s, def: def, name: name, schema: schema, config: config})
	}
	if len(tooBig) > 0 {
		s.log.ErrorContext(ctx, "mcptool: MCP tools left out: their input schemas pass Options.MaxSchemaBytes", "server", s.name,
			"left_out", len(tooBig), "first_left_out", tooBig[:min(len(tooBig), 10)],
			"max_schema_bytes", limit(s.opts.MaxSchemaBytes, DefaultMaxSchemaBytes))
	}
	s.listed.Store(true)
	return tools, nil
}

// CollisionError is the error of [AllTools] and [CheckNames] for two tools
// that would have the same name: the model could not tell them apart, and
// a runner cannot be built with both.
type CollisionError struct {
	// Name is the name both tools would have.
	Name string
	// Servers are the names of the tools' servers, as given to [Connect];
	// "" for a tool that is not an MCP server's.
	Servers [2]string
	// Tools are the tools' names: for an MCP tool its name at its server,
	// for another tool its Name.
	Tools [2]string
}

// Error says which tools collide, and how to tell them apart.
func (e *CollisionError) Error() string {
	return fmt.Sprintf("mcptool: %s and %s would both be named %q; name the servers apart, or set Options.Rename",
		describe(e.Servers[0], e.Tools[0]), describe(e.Servers[1], e.Tools[1]), e.Name)
}

func describe(server, tool string) string {
	if server == "" {
		return fmt.Sprintf("tool %q", tool)
	}
	return fmt.Sprintf("tool %q of MCP server %q", tool, server)
}

// CheckNames reports the tools of tools that would have the same name, as
// a [*CollisionError] for each pair, joined; nil if there are none. The
// tools of two servers can collide, as "a" with "b__c" and "a__b" with
// "c" both give "a__b__c", and so can an MCP tool and a Go tool.
func CheckNames(tools []toolrun.Tool) error {
	type origin struct{ server, tool string }
	first := map[string]origin{}
	var errs []error
	for _, t := range tools {
		o := origin{tool: t.Name()}
		if mt, ok := t.(*Tool); ok {
			o = origin{server: mt.server.name, tool: mt.def.Name}
		}
		if f, dup := first[t.Name()]; dup {
			errs = append(errs, &CollisionError{Name: t.Name(), Servers: [2]string{f.server, o.server}, Tools: [2]string{f.tool, o.tool}})
			continue
		}
		first[t.Name()] = o
	}
	return errors.Join(errs...)
}

// AllTools lists the tools of each of servers with [Server.Tools], and
// returns them together, in the order of servers. Two tools that would
// have the same name are an error, from [CheckNames], and AllTools then
// returns no tools: a run must not start with one tool in the place of
// another, and the model would not know which it called.
func AllTools(ctx context.Context, servers ...*Server) ([]toolrun.Tool, error) {
	var all []toolrun.Tool
	for _, s := range servers {
		tools, err := s.Tools(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, tools...)
	}
	if err := CheckNames(all); err != nil {
		return nil, err
	}
	return all, nil
}

// list lists the tools of c, page after page, and stops when it has more
// than Options.MaxTools.
func (s *Server) list(ctx context.Context, c *conn) ([]*mcp.Tool, error) {
	maxTools := limit(s.opts.MaxTools, DefaultMaxTools)
	var defs []*mcp.Tool
	seen := map[string]bool{}
	params := &mcp.ListToolsParams{}
	for {
		res, err := c.session.ListTools(ctx, params)
		if err != nil {
			var wire *jsonrpc.Error
			switch {
			case ctx.Err() != nil:
				return nil, fmt.Errorf("mcptool: listing the tools of MCP server %q: %w", s.name, ctx.Err())
			case errors.As(err, &wire):
				return nil, fmt.Errorf("mcptool: MCP server %q would not list its tools: %s", s.name, wire.Message)
			}
			return nil, s.endError(s.end(c, err, ""), "")
		}
		defs = append(defs, res.Tools...)
		if res.NextCursor == "" || maxTools >= 0 && len(defs) > maxTools {
			return defs, nil
		}
		if seen[res.NextCursor] {
			return nil, fmt.Errorf("mcptool: MCP server %q sent the tools cursor %q twice; its list does not end", s.name, res.NextCursor)
		}
		seen[res.NextCursor] = true
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

// inputSchema converts an MCP input schema to one the runner can use, or
// says why it cannot, with the error [toolrun.NewRawTool] gives for it
// (wrapping [toolrun.ErrInvalidSchema]). MCP schemas are JSON Schema, so
// every draft the runner validates is kept as the server wrote it; a
// schema without a type is taken as an object schema. name is the tool's
// model name, already checked. A schema longer than budget, unless budget
// is negative, fails with errSchemaBudget before it is compiled.
func inputSchema(name string, v any, budget int) (json.RawMessage, error) {
	raw := json.RawMessage(`{"type":"object"}`)
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		raw = b
	}
	if budget >= 0 && len(raw) > budget {
		return nil, errSchemaBudget
	}
	// The tool NewRawTool builds is only a check: a [Tool] calls the server.
	if _, err := toolrun.NewRawTool(name, "", raw, func(context.Context, json.RawMessage) (string, error) { return "", nil }); err != nil {
		return nil, err
	}
	return raw, nil
}

// convert returns the content of res as result blocks.
func convert(res *mcp.CallToolResult) []toolrun.Content {
	var out []toolrun.Content
	for _, c := range res.Content {
		if b, ok := block(c); ok {
			out = append(out, b)
		}
	}
	if len(out) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			out = append(out, toolrun.Text(string(b)))
		}
	}
	return out
}

// block converts one MCP content item. It reports false for an empty
// text, which the API does not accept.
func block(c mcp.Content) (toolrun.Content, bool) {
	switch v := c.(type) {
	case *mcp.TextContent:
		return toolrun.Text(v.Text), v.Text != ""
	case *mcp.ImageContent:
		if imageType(v.MIMEType) {
			return toolrun.Image(v.MIMEType, v.Data), true
		}
		return note("an image", v.MIMEType, len(v.Data), "the model accepts only JPEG, PNG, GIF and WebP images"), true
	case *mcp.AudioContent:
		return note("audio", v.MIMEType, len(v.Data), "the model does not accept audio"), true
	case *mcp.ResourceLink:
		var b strings.Builder
		fmt.Fprintf(&b, "Resource link: %s", v.URI)
		if v.Name != "" {
			fmt.Fprintf(&b, " (%s)", v.Name)
		}
		if v.MIMEType != "" {
			fmt.Fprintf(&b, ", %s", v.MIMEType)
		}
		if v.Description != "" {
			fmt.Fprintf(&b, ": %s", v.Description)
		}
		return toolrun.Text(b.String()), true
	case *mcp.EmbeddedResource:
		if v.Resource == nil {
			return toolrun.Content{}, false
		}
		return resource(v.Resource), true
	}
	return toolrun.Text(fmt.Sprintf("[MCP content of type %T left out: it cannot be sent to the model]", c)), true
}

// resource converts an embedded resource.
func resource(r *mcp.ResourceContents) toolrun.Content {
	mediaType, _, _ := mime.ParseMediaType(r.MIMEType)
	switch {
	case r.Blob == nil:
		return toolrun.Text(fmt.Sprintf("Resource %s:\n%s", r.URI, r.Text))
	case mediaType == "application/pdf":
		return toolrun.PDF(r.Blob)
	case imageType(mediaType):
		return toolrun.Image(mediaType, r.Blob)
	case strings.HasPrefix(mediaType, "text/") && utf8.Valid(r.Blob):
		return toolrun.Text(fmt.Sprintf("Resource %s:\n%s", r.URI, r.Blob))
	}
	return note("resource "+r.URI, r.MIMEType, len(r.Blob), "the model accepts only text, images and PDFs")
}

func imageType(mediaType string) bool {
	switch mediaType {
	case "image/jpeg", "image/png", "image/gif", "image/webp":
		return true
	}
	return false
}

// note returns a text that says what was left out of a result, and why.
func note(what, mediaType string, size int, why string) toolrun.Content {
	if mediaType == "" {
		mediaType = "unknown type"
	}
	return toolrun.Text(fmt.Sprintf("[%s (%s, %d bytes) left out: %s]", what, mediaType, size, why))
}

// errorText returns the text of an isError result.
func errorText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok && t.Text != "" {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}
