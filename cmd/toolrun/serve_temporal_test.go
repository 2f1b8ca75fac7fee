package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// temporalAddress returns the Temporal server of TEMPORAL_ADDRESS (the dev
// server temporal/ci.sh starts), or skips the test when it is not set or
// nothing answers there, unless CI is set: CI runs these tests from
// temporal/ci.sh, where the server runs, so there it is a failure.
func temporalAddress(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("TEMPORAL_ADDRESS")
	var err error
	if addr == "" {
		err = fmt.Errorf("TEMPORAL_ADDRESS is not set")
	} else {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
			c.Close()
		}
	}
	if err != nil {
		msg := fmt.Sprintf("missing component: Temporal dev server (%v); run temporal/ci.sh, or start a dev server with the flags temporal/ci.sh gives its own, and set TEMPORAL_ADDRESS", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; CI is set")
		}
		t.Skip(msg)
	}
	return addr
}

// aguiNode returns node's path, or skips the test when node or
// @ag-ui/client is missing, unless CI is set.
func aguiNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(aguiDir, "node_modules", "@ag-ui", "client", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and node or @ag-ui/client is missing (%v); install them with: bash .ci/serve.sh", err)
		}
		t.Skipf("missing component: node or @ag-ui/client (%v); install them with: bash .ci/serve.sh", err)
	}
	return node
}

// uniqueName names what a test makes on a Temporal server that keeps what
// earlier tests made there: workflow ids and task queues.
func uniqueName(t *testing.T) string {
	return fmt.Sprintf("%s-%d-", strings.ToLower(t.Name()), time.Now().UnixNano())
}

// TestServeTemporalAGUIClient drives "toolrun serve --temporal" with the
// Node program that uses @ag-ui/client from npm, as TestServeAGUIClient
// drives the server in process: every scenario of drive.mjs, each thread
// a workflow on the dev server, run by the worker the server runs.
func TestServeTemporalAGUIClient(t *testing.T) {
	addr := temporalAddress(t)
	node := aguiNode(t)
	name := uniqueName(t)
	p := startServe(t, "--db", filepath.Join(t.TempDir(), "serve.db"), "--script", filepath.Join(aguiDir, "scenes.jsonl"),
		"--workdir", filepath.Join(aguiDir, "files"), "--require-approval", "read_file",
		"--temporal", addr, "--temporal-queue", name+"queue")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "drive.mjs", p.url, name)
	cmd.Dir = aguiDir
	out, err := cmd.CombinedOutput()
	t.Logf("drive.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("drive.mjs: %v", err)
	}
	if !strings.Contains(string(out), "agui-client: 9 scenarios ok") {
		t.Fatalf("drive.mjs did not report its 9 scenarios")
	}
	// SIGTERM drains the server, then stops its worker, which lets its
	// polls under way end first (temporal.NewWorker's drain): at once on
	// ci.sh's dev server, which ends them, but on a server that does not,
	// up to its long-poll timeout, about a minute, beyond p.wait's bound.
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Errorf("after SIGTERM: %v, want exit status 0", err)
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("the server did not exit after SIGTERM")
	}
}
