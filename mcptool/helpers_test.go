package mcptool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/mcptool"
	"github.com/toolrun/toolrun/toolruntest"
)

func client(s *toolruntest.Server) anthropic.Client {
	return s.Client(option.WithMaxRetries(0))
}

func userParams(text string) anthropic.BetaMessageNewParams {
	return anthropic.BetaMessageNewParams{
		Model:     "claude-test",
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(text))},
	}
}

// toolResults returns the tool_result blocks of the last message of req.
func toolResults(req *toolruntest.Request) []toolruntest.Block {
	msgs := req.Conversation
	var out []toolruntest.Block
	for _, b := range msgs[len(msgs)-1].Content {
		if b.Type == "tool_result" {
			out = append(out, b)
		}
	}
	return out
}

// result is a tool_result block reduced to what the tests compare.
type result struct {
	Text    string
	IsError bool
}

func results(req *toolruntest.Request) []result {
	var out []result
	for _, b := range toolResults(req) {
		out = append(out, result{Text: b.ResultText(), IsError: b.IsError})
	}
	return out
}

// connect connects to an MCP server and closes it at the end of the test.
func connect(t *testing.T, name string, dial mcptool.Dial, opts *mcptool.Options) *mcptool.Server {
	t.Helper()
	if opts == nil {
		opts = &mcptool.Options{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := mcptool.Connect(t.Context(), name, dial, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tools lists the tools of s, or fails the test.
func tools(t *testing.T, s *mcptool.Server) []toolrun.Tool {
	t.Helper()
	ts, err := s.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// find returns the tool of ts named name, or fails the test.
func find(t *testing.T, ts []toolrun.Tool, name string) toolrun.Tool {
	t.Helper()
	for _, tool := range ts {
		if tool.Name() == name {
			return tool
		}
	}
	t.Fatalf("no tool named %q", name)
	return nil
}

func names(ts []toolrun.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name())
	}
	return out
}

// objectSchema is the input schema of tools that take no input.
var objectSchema = &jsonschema.Schema{Type: "object"}

// addTool adds a tool with a raw handler to s.
func addTool(s *mcp.Server, name string, h mcp.ToolHandler) {
	s.AddTool(&mcp.Tool{Name: name, Description: "The " + name + " tool.", InputSchema: objectSchema}, h)
}

// returns is a tool handler that returns res.
func returns(res *mcp.CallToolResult) mcp.ToolHandler {
	return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return res, nil }
}

// blocks is a tool handler that returns only when its call is cancelled.
func blocks(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func newMCPServer(name string, opts *mcp.ServerOptions) *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: name, Version: "v1"}, opts)
}

// logBuffer is a concurrency-safe buffer of JSON log lines that signals
// each record with a given message.
type logBuffer struct {
	mu     sync.Mutex // guards buf, notify
	buf    bytes.Buffer
	notify map[string]chan struct{}
}

func newLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{notify: map[string]chan struct{}{}}
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var rec struct{ Msg string }
	if json.Unmarshal(p, &rec) == nil {
		if ch, ok := b.notify[rec.Msg]; ok {
			close(ch)
			delete(b.notify, rec.Msg)
		}
	}
	return b.buf.Write(p)
}

// await returns a channel that is closed when a record with msg is next
// written.
func (b *logBuffer) await(msg string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan struct{})
	b.notify[msg] = ch
	return ch
}

// records returns the records with msg, decoded.
func (b *logBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(b.buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// faulty dials an MCP server over in-memory transports whose server side
// the test can break: close, as if the server crashed, or freeze, as if it
// hung.
type faulty struct {
	server *mcp.Server

	mu      sync.Mutex // guards dials, last, dialErr
	dials   int
	last    *faultyConn
	dialErr error // if set, dial fails with it
}

func (f *faulty) dial(ctx context.Context) (mcp.Transport, error) {
	client, server := mcp.NewInMemoryTransports()
	f.mu.Lock()
	f.dials++
	err := f.dialErr
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if _, err := f.server.Connect(ctx, &faultyTransport{f: f, inner: server}, nil); err != nil {
		return nil, err
	}
	return client, nil
}

func (f *faulty) dialCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dials
}

func (f *faulty) failDials(err error) {
	f.mu.Lock()
	f.dialErr = err
	f.mu.Unlock()
}

// conn returns the server side of the last connection.
func (f *faulty) conn() *faultyConn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

type faultyTransport struct {
	f     *faulty
	inner mcp.Transport
}

func (t *faultyTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	fc := &faultyConn{Connection: c}
	t.f.mu.Lock()
	t.f.last = fc
	t.f.mu.Unlock()
	return fc, nil
}

// faultyConn is the server side of a connection.
type faultyConn struct {
	mcp.Connection

	mu     sync.Mutex // guards frozen
	frozen bool
}

// Read drops every message once the connection is frozen: the server
// answers nothing, not even pings.
func (c *faultyConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		c.mu.Lock()
		frozen := c.frozen
		c.mu.Unlock()
		if err != nil || !frozen {
			return msg, err
		}
	}
}

func (c *faultyConn) freeze() {
	c.mu.Lock()
	c.frozen = true
	c.mu.Unlock()
}

// check compares got and want, naming what.
func check[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// String returns every record written so far.
func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
