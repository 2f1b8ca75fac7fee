package mcptool

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestScratch(t *testing.T) {
	ctx := context.Background()
	cmd := exec.Command("/tmp/crashsrv")
	tr := &mcp.CommandTransport{Command: cmd}
	c := mcp.NewClient(&mcp.Implementation{Name: "x", Version: "v"}, nil)
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- cs.Wait() }()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope"})
	var je *jsonrpc.Error
	t.Logf("nope: as jsonrpc %v %+v", errors.As(err, &je), je)
	cmd.Process.Kill()
	select {
	case err := <-done:
		t.Logf("wait returned by itself: %v", err)
	case <-time.After(2 * time.Second):
		t.Logf("wait did not return")
		cs.Close()
		t.Logf("after close: %v", <-done)
	}
}
