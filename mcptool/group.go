package mcptool

import (
	"context"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// groupTransport runs a command, as an *mcp.CommandTransport does, but in
// a process group of its own (see ownGroup), so that stopping it stops
// every process it started: a package runner such as npx or uvx, or a
// shell, starts the real server as its child, which outlives a signal sent
// to the runner alone.
type groupTransport struct {
	cmd   *exec.Cmd
	grace time.Duration
}

// Connect starts the command and connects to it over its standard input
// and output.
func (t *groupTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	ownGroup(t.cmd)
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	// The connection is closed by closing the command's standard input,
	// never its output, which the command may still be writing.
	tr := &mcp.IOTransport{Reader: io.NopCloser(stdout), Writer: &stopper{stdin: stdin, cmd: t.cmd, grace: t.grace}}
	return tr.Connect(ctx)
}

// stopper writes to a command's standard input, and its Close stops the
// command and its process group.
type stopper struct {
	stdin io.WriteCloser
	cmd   *exec.Cmd
	grace time.Duration

	once sync.Once
	err  error // the command's Wait error
}

func (s *stopper) Write(p []byte) (int, error) { return s.stdin.Write(p) }

// Close stops the command, once: see stop.
func (s *stopper) Close() error {
	s.once.Do(func() { s.err = s.stop() })
	return s.err
}

// pollGroup is how often stop looks whether a process group is empty:
// the system tells no one when the last process of a group exits.
const pollGroup = 10 * time.Millisecond

// stop closes the command's standard input, as the MCP specification asks
// of a client, and waits for the command to exit and its process group to
// empty. What is still running after the grace period is sent SIGTERM, the
// group as a whole, and after as long again SIGKILL. stop returns when the
// command has been reaped, with the error of its Wait.
func (s *stopper) stop() error {
	s.stdin.Close()
	pgid := s.cmd.Process.Pid
	waited := make(chan error, 1)
	go func() { waited <- s.cmd.Wait() }()
	var (
		err    error
		reaped bool
	)
	// over waits up to d for the command to be reaped and its group to
	// empty, and reports whether both happened.
	over := func(d time.Duration) bool {
		deadline := time.NewTimer(d)
		defer deadline.Stop()
		tick := time.NewTicker(pollGroup)
		defer tick.Stop()
		for {
			if reaped && !groupAlive(pgid) {
				return true
			}
			select {
			case err = <-waited:
				reaped = true
				continue
			case <-tick.C:
				continue
			case <-deadline.C:
			}
			return reaped && !groupAlive(pgid)
		}
	}
	if over(s.grace) {
		return err
	}
	if signalGroup(pgid, syscall.SIGTERM) != nil && !reaped {
		// No group to signal (not on this system): the command alone.
		s.cmd.Process.Signal(syscall.SIGTERM)
	}
	if over(s.grace) {
		return err
	}
	signalGroup(pgid, syscall.SIGKILL)
	if !reaped {
		s.cmd.Process.Kill()
		// The command's WaitDelay bounds this wait, should a process
		// outside the group hold its standard error open.
		err = <-waited
		reaped = true
	}
	over(s.grace)
	return err
}
