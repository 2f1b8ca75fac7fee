package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serverProc is a process of an MCP server's tree.
type serverProc struct {
	pid, ppid, pgid int
	state, cmdline  string
}

// allProcs lists the processes of the system, from /proc.
func allProcs() []serverProc {
	dir, _ := os.ReadDir("/proc")
	var out []serverProc
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		i := bytes.LastIndexByte(b, ')')
		if err != nil || i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 {
			continue
		}
		p := serverProc{pid: pid, state: string(f[0])}
		p.ppid, _ = strconv.Atoi(string(f[1]))
		p.pgid, _ = strconv.Atoi(string(f[2]))
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		p.cmdline = strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
		out = append(out, p)
	}
	return out
}

// treeOf returns the processes that pid started, and theirs.
func treeOf(pid int) []serverProc {
	all := allProcs()
	in := map[int]bool{pid: true}
	var out []serverProc
	for changed := true; changed; {
		changed = false
		for _, p := range all {
			if in[p.ppid] && !in[p.pid] {
				in[p.pid] = true
				out = append(out, p)
				changed = true
			}
		}
	}
	return out
}

// stillRunning returns the processes of tree, and of the groups they lead, that
// run: a zombie does not, as it has exited and waits only to be reaped,
// which some containers' init never does. It kills what it finds, so that
// a failing test leaves nothing behind.
func stillRunning(t *testing.T, tree []serverProc) []serverProc {
	t.Helper()
	pids := map[int]bool{}
	for _, p := range tree {
		pids[p.pid] = true
	}
	var out []serverProc
	for _, p := range allProcs() {
		// A group is the tree's if one of its processes leads it.
		if (pids[p.pid] || pids[p.pgid]) && p.state != "Z" && p.state != "X" {
			out = append(out, p)
			syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	return out
}

// npxEverything returns the --mcp value that runs server-everything through
// npx, offline, from the package .ci/mcp.sh installs. Without npx or the
// package the test is skipped, or fails when CI is set.
func npxEverything(t *testing.T) string {
	t.Helper()
	prefix, err := filepath.Abs(filepath.Join("..", "..", "mcptool", "testdata", "everything"))
	if err == nil {
		_, err = exec.LookPath("npx")
	}
	if err == nil {
		_, err = os.Stat(filepath.Join(prefix, "node_modules", ".bin", "mcp-server-everything"))
	}
	if err != nil {
		msg := "this test runs @modelcontextprotocol/server-everything through npx, and needs npx and the server (" + err.Error() + "); install them with: bash .ci/mcp.sh"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return "ev=npx --offline --prefix " + prefix + " mcp-server-everything stdio"
}

// waitFor polls cond until it holds, for at most 5 minutes: a bound a
// loaded machine does not trip, which only a hang reaches.
func waitFor(t *testing.T, what string, cond func() bool) bool {
	t.Helper()
	const patience = 5 * time.Minute
	for deadline := time.Now().Add(patience); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	t.Errorf("gave up waiting for %s after %v: it hangs", what, patience)
	return false
}

// TestSIGINTStopsServerGroup sends SIGINT to "toolrun run" while a call of
// server-everything, started through npx, runs: toolrun exits 130, and no
// process of the server's tree (npm, sh, node) or of its group is left.
func TestSIGINTStopsServerGroup(t *testing.T) {
	mcp := npxEverything(t)
	dir := t.TempDir()
	script := writeScript(t, dir,
		`{"content":[{"type":"tool_use","id":"toolu_01","name":"ev__trigger-long-running-operation","input":{"duration":600,"steps":600}}]}`,
		textReply("never sent"))
	rec := filepath.Join(dir, "run.jsonl")
	var tree []serverProc
	got, _ := bin{dir: dir, args: []string{"run", "--script", script, "--mcp", mcp, "--approve", "auto", "--tool-timeout", "0", "--record", rec,
		"--mcp-env", "npm_config_update_notifier=false", "--mcp-timeout", "2m", "wait"},
		during: func(p *os.Process) {
			if waitFor(t, "the call to start", func() bool {
				b, _ := os.ReadFile(rec)
				return bytes.Contains(b, []byte(`"type":"tool_started"`))
			}) {
				tree = treeOf(p.Pid)
			}
			p.Signal(syscall.SIGINT)
		}}.run(t)
	if got.code != exitInterrupted {
		t.Errorf("exit status %d, want %d; stderr:\n%s", got.code, exitInterrupted, got.stderr)
	}
	node := false
	for _, p := range tree {
		node = node || strings.HasPrefix(p.cmdline, "node") && strings.Contains(p.cmdline, "mcp-server-everything")
	}
	if !node {
		t.Fatalf("no node process of server-everything ran during the call; toolrun's processes: %+v", tree)
	}
	if left := stillRunning(t, tree); len(left) > 0 {
		t.Errorf("after toolrun exited, still running: %+v", left)
	}
}

// TestSIGINTDuringConnect sends SIGINT to "toolrun run" while an MCP server
// starts and never answers: toolrun exits 130, says it was interrupted, and
// leaves no process of the server behind.
func TestSIGINTDuringConnect(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, textReply("never sent"))
	var tree []serverProc
	got, _ := bin{dir: dir, args: []string{"run", "--script", script, "--mcp", "mute=sh -c 'sleep 600; true'", "--approve", "auto", "hi"},
		during: func(p *os.Process) {
			if waitFor(t, "the server to start", func() bool {
				tree = treeOf(p.Pid)
				for _, q := range tree {
					if strings.HasPrefix(q.cmdline, "sleep") {
						return true
					}
				}
				return false
			}) {
				p.Signal(syscall.SIGINT)
			}
		}}.run(t)
	if got.code != exitInterrupted {
		t.Errorf("exit status %d, want %d; stderr:\n%s", got.code, exitInterrupted, got.stderr)
	}
	if !strings.Contains(got.stderr, "interrupted while it started") || strings.Contains(got.stdout, "stopped:") {
		t.Errorf("stderr does not say the start was interrupted; got:\n%s\nstdout:\n%s", got.stderr, got.stdout)
	}
	if left := stillRunning(t, tree); len(left) > 0 {
		t.Errorf("after toolrun exited, still running: %+v", left)
	}
}

// TestMCPTimeout gives a server that never answers a --mcp-timeout: the run
// fails at once with a message naming the flag, and the server is stopped.
func TestMCPTimeout(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, textReply("never sent"))
	pidFile := filepath.Join(dir, "pid")
	got, _ := bin{dir: dir, args: []string{"run", "--script", script, "--mcp", "mute=sh -c 'echo $$ > " + pidFile + "; sleep 600; true'", "--mcp-timeout", "300ms", "hi"}}.run(t)
	if got.code != exitError {
		t.Errorf("exit status %d, want %d; stderr:\n%s", got.code, exitError, got.stderr)
	}
	if want := "did not start, answer and list its tools within 300ms; give it longer with --mcp-timeout"; !strings.Contains(got.stderr, want) {
		t.Errorf("stderr does not say %q; got:\n%s", want, got.stderr)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if left := stillRunning(t, []serverProc{{pid: pid, pgid: pid}}); len(left) > 0 {
		t.Errorf("after toolrun exited, still running: %+v", left)
	}
}
