package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/mcptool"
	"github.com/toolrun/toolrun/toolruntest"
)

// manyTools returns an MCP server with n tools, t0 to t(n-1), each with a
// schema of about schemaBytes bytes.
func manyTools(n, schemaBytes int) *mcp.Server {
	s := newMCPServer("many", nil)
	desc := strings.Repeat("x", max(schemaBytes-60, 0))
	for i := range n {
		schema := json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"q":{"type":"string","description":%q}}}`, desc))
		s.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%d", i), InputSchema: schema}, returns(text("ok")))
	}
	return s
}

// TestListingBounded lists a server that lists more tools, or larger
// schemas, than the limits allow: the excess is left out with one log
// record, and the rest is kept.
func TestListingBounded(t *testing.T) {
	tests := []struct {
		name      string
		server    *mcp.Server
		opts      mcptool.Options
		wantTools int
		wantLog   string
	}{
		{
			name:      "default count",
			server:    manyTools(mcptool.DefaultMaxTools+20, 0),
			wantTools: mcptool.DefaultMaxTools,
			wantLog:   "mcptool: MCP tools left out: the server lists more tools than Options.MaxTools",
		},
		{
			name:      "count",
			server:    manyTools(5, 0),
			opts:      mcptool.Options{MaxTools: 3},
			wantTools: 3,
			wantLog:   "mcptool: MCP tools left out: the server lists more tools than Options.MaxTools",
		},
		{
			name:      "no count limit",
			server:    manyTools(mcptool.DefaultMaxTools+1, 0),
			opts:      mcptool.Options{MaxTools: -1},
			wantTools: mcptool.DefaultMaxTools + 1,
		},
		{
			name:      "default bytes",
			server:    manyTools(10, 600_000),
			wantTools: 6,
			wantLog:   "mcptool: MCP tools left out: their input schemas pass Options.MaxSchemaBytes",
		},
		{
			name:      "bytes",
			server:    manyTools(4, 1000),
			opts:      mcptool.Options{MaxSchemaBytes: 2500},
			wantTools: 2,
			wantLog:   "mcptool: MCP tools left out: their input schemas pass Options.MaxSchemaBytes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, logs := newLogger()
			tt.opts.Logger = log
			s := connect(t, "m", mcptool.InMemory(tt.server), &tt.opts)
			ts := tools(t, s)
			if len(ts) != tt.wantTools {
				t.Errorf("got %d tools, want %d", len(ts), tt.wantTools)
			}
			seen := map[string]bool{}
			for _, tool := range ts {
				seen[tool.Name()] = true
			}
			if len(seen) != len(ts) {
				t.Errorf("tools %v: want %d names apart", names(ts), len(ts))
			}
			for _, msg := range []string{
				"mcptool: MCP tools left out: the server lists more tools than Options.MaxTools",
				"mcptool: MCP tools left out: their input schemas pass Options.MaxSchemaBytes",
			} {
				want := 0
				if msg == tt.wantLog {
					want = 1
				}
				if got := len(logs.records(t, msg)); got != want {
					t.Errorf("%d records %q, want %d", got, msg, want)
				}
			}
		})
	}
}

// TestCollision gives a run the tools of two servers whose names collide
// once prefixed: "a" with "b__c" and "a__b" with "c" are both "a__b__c".
// AllTools refuses them with an error naming both, and builds no runner
// that would panic.
func TestCollision(t *testing.T) {
	one := newMCPServer("one", nil)
	addTool(one, "b__c", returns(text("one")))
	addTool(one, "x", returns(text("x")))
	two := newMCPServer("two", nil)
	addTool(two, "c", returns(text("two")))
	a := connect(t, "a", mcptool.InMemory(one), nil)
	ab := connect(t, "a__b", mcptool.InMemory(two), nil)

	ts, err := mcptool.AllTools(t.Context(), a, ab)
	var ce *mcptool.CollisionError
	if !errors.As(err, &ce) {
		t.Fatalf("AllTools: got %d tools, %v; want a *CollisionError", len(ts), err)
	}
	want := &mcptool.CollisionError{Name: "a__b__c", Servers: [2]string{"a", "a__b"}, Tools: [2]string{"b__c", "c"}}
	if diff := cmp.Diff(want, ce); diff != "" {
		t.Errorf("CollisionError (-want +got):\n%s", diff)
	}
	if msg := err.Error(); !strings.Contains(msg, `tool "b__c" of MCP server "a"`) || !strings.Contains(msg, `tool "c" of MCP server "a__b"`) {
		t.Errorf("error %q: want it to name both tools and servers", msg)
	}
	if ts != nil {
		t.Errorf("AllTools: got tools %v with the error, want none", names(ts))
	}

	// A Go tool of the name of an MCP tool collides too.
	one2 := newMCPServer("one", nil)
	addTool(one2, "x", returns(text("x")))
	mcpTools := tools(t, connect(t, "a", mcptool.InMemory(one2), nil))
	goTool := toolrun.NewTool("a__x", "A Go tool.", func(context.Context, struct{}) (string, error) { return "", nil })
	err = mcptool.CheckNames(append(mcpTools, goTool))
	want = &mcptool.CollisionError{Name: "a__x", Servers: [2]string{"a", ""}, Tools: [2]string{"x", "a__x"}}
	if !errors.As(err, &ce) || !cmp.Equal(ce, want) {
		t.Errorf("CheckNames with a Go tool: got %v, want %v", err, want)
	}
	if err := mcptool.CheckNames(mcpTools); err != nil {
		t.Errorf("CheckNames without a collision: got %v, want nil", err)
	}
}

// TestAllTools runs a model's call through the tools of two servers that
// AllTools gathered.
func TestAllTools(t *testing.T) {
	one := newMCPServer("one", nil)
	addTool(one, "ping", returns(text("pong from one")))
	two := newMCPServer("two", nil)
	addTool(two, "ping", returns(text("pong from two")))
	ts, err := mcptool.AllTools(t.Context(), connect(t, "one", mcptool.InMemory(one), nil), connect(t, "two", mcptool.InMemory(two), nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"one__ping", "two__ping"}, names(ts)); diff != "" {
		t.Fatalf("names (-want +got):\n%s", diff)
	}
	fake := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "two__ping", nil)),
		toolruntest.Message(toolruntest.Text("done")),
	))
	defer fake.Close()
	if _, err := toolrun.New(client(fake), userParams("ping two"), ts, &toolrun.Options{Logger: discardLogger()}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := results(fake.Requests()[1]); !cmp.Equal(got, []result{{Text: "pong from two"}}) {
		t.Errorf("results: got %+v, want pong from two", got)
	}
}

// TestToolListChanged logs a change of the tool list at Info only when it
// changes a list that Tools has returned, once until the next listing: a
// server that adds its tools as it starts, before any listing, is logged at
// Debug.
func TestToolListChanged(t *testing.T) {
	const msg = "mcptool: MCP server's tool list changed; call Tools again for a new run to see it"
	srv := newMCPServer("grow", nil)
	addTool(srv, "t0", returns(text("0")))
	log, logs := newLogger()
	s := connect(t, "g", mcptool.InMemory(srv), &mcptool.Options{Logger: log})
	add := func(name string) {
		t.Helper()
		changed := logs.await(msg)
		addTool(srv, name, returns(text(name)))
		<-changed
	}
	add("t1") // before any listing
	tools(t, s)
	add("t2")
	add("t3") // before the next listing
	tools(t, s)
	add("t4")
	var levels []string
	for _, r := range logs.records(t, msg) {
		levels = append(levels, r["level"].(string))
	}
	if diff := cmp.Diff([]string{"DEBUG", "INFO", "DEBUG", "INFO"}, levels); diff != "" {
		t.Errorf("levels of the records (-want +got):\n%s", diff)
	}
}
