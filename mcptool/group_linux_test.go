package mcptool_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/toolrun/toolrun/mcptool"
)

// everythingNPX returns the argv that runs server-everything through npx,
// as the README's example does, but offline: npx finds the package that
// .ci/mcp.sh installed under its prefix. Without npx or the package the
// test is skipped, or fails when CI is set.
func everythingNPX(t *testing.T) []string {
	t.Helper()
	npx, err := exec.LookPath("npx")
	if err == nil {
		_, err = os.Stat(everythingJS)
	}
	if err != nil {
		msg := "the process group tests run @modelcontextprotocol/server-everything through npx, and need npx and the server (" + err.Error() + "); install them with: bash .ci/mcp.sh"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	prefix, err := filepath.Abs(filepath.Join("testdata", "everything"))
	if err != nil {
		t.Fatal(err)
	}
	return []string{npx, "--offline", "--prefix", prefix, "mcp-server-everything", "stdio"}
}

// proc is a process as /proc/PID/stat describes it.
type proc struct {
	pid, ppid, pgid int
	state           string // R, S, Z…
	cmdline         string
}

// procs lists the processes of the system.
func procs(t *testing.T) []proc {
	t.Helper()
	dir, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []proc
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		i := bytes.LastIndexByte(b, ')')
		f := bytes.Fields(b[i+1:])
		if i < 0 || len(f) < 3 {
			continue
		}
		p := proc{pid: pid, state: string(f[0])}
		p.ppid, _ = strconv.Atoi(string(f[1]))
		p.pgid, _ = strconv.Atoi(string(f[2]))
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		p.cmdline = strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")
		out = append(out, p)
	}
	return out
}

// self returns the process pid.
func self(t *testing.T, pid int) proc {
	t.Helper()
	for _, p := range procs(t) {
		if p.pid == pid {
			return p
		}
	}
	t.Fatalf("no process %d", pid)
	return proc{}
}

// descendants returns the processes that pid started, and theirs.
func descendants(t *testing.T, pid int) []proc {
	t.Helper()
	all := procs(t)
	var out []proc
	parents := map[int]bool{pid: true}
	for changed := true; changed; {
		changed = false
		for _, p := range all {
			if parents[p.ppid] && !parents[p.pid] {
				parents[p.pid] = true
				out = append(out, p)
				changed = true
			}
		}
	}
	return out
}

// living returns the processes of ps, and of the group pgid, that still
// run. A zombie does not: it has exited, and waits only for a parent to
// reap it, which some containers' init never does.
func living(t *testing.T, ps []proc, pgid int) []proc {
	t.Helper()
	want := map[int]bool{}
	for _, p := range ps {
		want[p.pid] = true
	}
	var out []proc
	for _, p := range procs(t) {
		if (want[p.pid] || p.pgid == pgid) && p.state != "Z" && p.state != "X" {
			out = append(out, p)
		}
	}
	if err := syscall.Kill(-pgid, 0); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(-%d, 0): %v, want nil or ESRCH", pgid, err)
	}
	return out
}

// TestCloseStopsGroup starts server-everything through npx, which runs npm,
// a shell and node, and closes it: no process that the command started is
// left, and its process group is empty. The stubborn case adds a process
// that ignores its standard input and SIGTERM, which only the group's
// SIGKILL stops.
func TestCloseStopsGroup(t *testing.T) {
	npx := everythingNPX(t)
	node, js := nodeEverything(t)
	tests := []struct {
		name string
		argv []string
	}{
		{"npx", npx},
		{"stubborn", []string{"sh", "-c", `(trap '' TERM; exec sleep 600) </dev/null >/dev/null 2>&1 & exec "$0" "$1" stdio`, node, js}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := mcptool.Connect(t.Context(), "ev", mcptool.Command(tt.argv[0], tt.argv[1:]...), &mcptool.Options{
				Logger: discardLogger(),
				Env:    []string{"npm_config_update_notifier=false", "npm_config_fund=false"},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tools(t, s) // node answers: the whole tree is up
			leader := mcptool.ProcessOf(s)
			tree := append(descendants(t, leader.Pid), self(t, leader.Pid))
			found := false
			for _, p := range tree {
				found = found || strings.Contains(p.cmdline, "everything")
			}
			if len(tree) < 2 || !found {
				t.Fatalf("the command started no child that runs server-everything; its processes: %+v", tree)
			}
			for _, p := range tree {
				if pgid, err := syscall.Getpgid(p.pid); err != nil || pgid != leader.Pid {
					t.Errorf("process %d (%s): group %d (%v), want the command's own group %d", p.pid, p.cmdline, pgid, err, leader.Pid)
				}
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close() = %v, want nil", err)
			}
			if left := living(t, tree, leader.Pid); len(left) > 0 {
				for _, p := range left {
					syscall.Kill(p.pid, syscall.SIGKILL)
				}
				t.Errorf("after Close, still running: %+v", left)
			}
		})
	}
}

// nodeEverything returns node and server-everything's script, or skips
// the test (fails it when CI is set) without them.
func nodeEverything(t *testing.T) (node, js string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		js, err = filepath.Abs(everythingJS)
	}
	if err != nil {
		msg := "the process group tests need node and server-everything (" + err.Error() + "); install them with: bash .ci/mcp.sh"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node, js
}
