package mcptool_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolrun/toolrun/mcptool"
)

func TestStreamableHTTP(t *testing.T) {
	srv := newMCPServer("web", nil)
	addTool(srv, "ping", returns(text("pong")))
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := connect(t, "web", mcptool.StreamableHTTP(ts.URL), nil)
	runSteps(t, tools(t, s), "web", []step{{tool: "ping", want: "pong"}, {tool: "ping", want: "pong"}})
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
}
