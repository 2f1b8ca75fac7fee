package mcptool_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun/mcptool"
)

// everythingJS is where .ci/mcp.sh installs the reference MCP server
// @modelcontextprotocol/server-everything.
var everythingJS = filepath.Join("testdata", "everything", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")

// everything returns a Dial that runs server-everything over stdio. Without
// node or the server, the test is skipped, or fails under CI=true.
func everything(t *testing.T) mcptool.Dial {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(everythingJS)
	}
	if err != nil {
		msg := "missing component: node and @modelcontextprotocol/server-everything (" + err.Error() + "); install them with: bash .ci/mcp.sh"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	js, err := filepath.Abs(everythingJS)
	if err != nil {
		t.Fatal(err)
	}
	return mcptool.Command(node, js, "stdio")
}

// TestEverything runs toolrun's MCP client against the reference server of
// the MCP project, a third party's implementation of the protocol.
func TestEverything(t *testing.T) {
	dial := everything(t)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-api03-NotForTheChild_000")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "not-for-the-child-either")
	t.Setenv("SERVICE_PASSWORD", "hunter2-hunter2")
	t.Setenv("SERVICE_TOKEN", "svc-token-value")
	log, logs := newLogger()
	s := connect(t, "ev", dial, &mcptool.Options{Logger: log, Restart: mcptool.RestartPolicy{MaxRestarts: 1}, PassEnv: []string{"SERVICE_TOKEN"}})
	ts := tools(t, s)

	t.Run("list", func(t *testing.T) {
		got := names(ts)
		for _, want := range []string{"ev__echo", "ev__get-sum", "ev__get-tiny-image", "ev__get-env", "ev__trigger-long-running-operation"} {
			if !slices.Contains(got, want) {
				t.Errorf("tools %v: got no %s, want it", got, want)
			}
		}
		var schema struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		}
		raw := find(t, ts, "ev__get-sum").InputSchema()
		if err := json.Unmarshal(raw, &schema); err != nil || schema.Properties["a"].Type != "number" {
			t.Errorf("get-sum schema: got %s (%v), want a number a", raw, err)
		}
	})

	t.Run("call", func(t *testing.T) {
		tests := []struct {
			tool, input, want string
		}{
			{"ev__echo", `{"message":"hi"}`, "Echo: hi"},
			{"ev__get-sum", `{"a":2,"b":40}`, "The sum of 2 and 40 is 42."},
		}
		for _, tt := range tests {
			content, err := find(t, ts, tt.tool).Run(t.Context(), json.RawMessage(tt.input))
			if err != nil || len(content) != 1 || content[0].OfText == nil {
				t.Errorf("%s: got %+v, %v; want one text", tt.tool, content, err)
				continue
			}
			check(t, tt.tool, content[0].OfText.Text, tt.want)
		}
	})

	t.Run("image", func(t *testing.T) {
		content, err := find(t, ts, "ev__get-tiny-image").Run(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, c := range content {
			switch {
			case c.OfText != nil:
				kinds = append(kinds, "text")
			case c.OfImage != nil && c.OfImage.Source.OfBase64 != nil:
				kinds = append(kinds, "image "+string(c.OfImage.Source.OfBase64.MediaType))
				if len(c.OfImage.Source.OfBase64.Data) < 100 {
					t.Errorf("image data: got %d bytes of base64, want an image", len(c.OfImage.Source.OfBase64.Data))
				}
			default:
				kinds = append(kinds, "other")
			}
		}
		check(t, "blocks", kinds, []string{"text", "image image/png", "text"})
	})

	t.Run("errors", func(t *testing.T) {
		_, err := find(t, ts, "ev__get-sum").Run(t.Context(), json.RawMessage(`{"a":"two"}`))
		var te *mcptool.ToolError
		if !errors.As(err, &te) || !strings.Contains(te.Text, "expected number") {
			t.Errorf("get-sum with a string: got %v, want a *ToolError about the number", err)
		}
	})

	t.Run("progress", func(t *testing.T) {
		progressed := logs.await("mcptool: MCP tool progress")
		content, err := find(t, ts, "ev__trigger-long-running-operation").Run(t.Context(), json.RawMessage(`{"duration":1,"steps":2}`))
		if err != nil || len(content) != 1 || !strings.HasPrefix(content[0].OfText.Text, "Long running operation completed.") {
			t.Fatalf("got %+v, %v; want the operation completed", content, err)
		}
		// The notifications come before the result, but are handled
		// concurrently with it.
		select {
		case <-progressed:
		case <-time.After(10 * time.Second):
			t.Fatal("no progress record 10s after the result")
		}
		r := logs.records(t, "mcptool: MCP tool progress")[0]
		check(t, "progress record", map[string]any{"call": strings.Split(r["call"].(string), "#")[0], "progress": r["progress"], "total": r["total"]},
			map[string]any{"call": "trigger-long-running-operation", "progress": 1.0, "total": 2.0})
	})

	t.Run("environment", func(t *testing.T) {
		content, err := find(t, ts, "ev__get-env").Run(t.Context(), nil)
		if err != nil || len(content) != 1 {
			t.Fatalf("got %+v, %v; want one text", content, err)
		}
		var env map[string]string
		if err := json.Unmarshal([]byte(content[0].OfText.Text), &env); err != nil {
			t.Fatal(err)
		}
		for name := range env {
			if strings.HasPrefix(name, "ANTHROPIC_") || name == "SERVICE_PASSWORD" {
				t.Errorf("the child has %s; want it left out", name)
			}
		}
		check(t, "SERVICE_TOKEN", env["SERVICE_TOKEN"], "svc-token-value")
		if env["PATH"] == "" {
			t.Error("the child has no PATH; want it passed")
		}
	})

	t.Run("SIGKILL and restart", func(t *testing.T) {
		p := mcptool.ProcessOf(s)
		if p == nil {
			t.Fatal("no process")
		}
		exited := logs.await("mcptool: MCP server exited")
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Fatal("no exit record 30s after SIGKILL")
		}
		rec := logs.records(t, "mcptool: MCP server exited")
		check(t, "exit", rec[len(rec)-1]["exit"], any("signal: killed"))
		content, err := find(t, ts, "ev__echo").Run(t.Context(), json.RawMessage(`{"message":"back"}`))
		if err != nil || len(content) != 1 || content[0].OfText.Text != "Echo: back" {
			t.Fatalf("echo after the restart: got %+v, %v; want Echo: back", content, err)
		}
		if q := mcptool.ProcessOf(s); q == nil || q.Pid == p.Pid {
			t.Errorf("process after restart: got %v, want a new one", q)
		}
	})

	t.Run("close", func(t *testing.T) {
		start := time.Now()
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v, want nil", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Close took %s, want under 1s", d)
		}
	})
}
