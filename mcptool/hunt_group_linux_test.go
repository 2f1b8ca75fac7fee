//go:build hunt && linux

package mcptool_test

import (
	"syscall"
	"testing"

	"github.com/toolrun/toolrun/mcptool"
)

// TestHuntCloseStopsSetsidDaemon is a server whose launcher starts a
// helper in a session of its own (setsid, as a daemonizing helper does):
// the helper leaves the command's process group, so Close, which signals
// the group, leaves it running with parent PID 1, as the process groups
// were meant to stop.
func TestHuntCloseStopsSetsidDaemon(t *testing.T) {
	crash := buildCrashServer(t)
	const marker = "6013"
	s, err := mcptool.Connect(t.Context(), "ev", mcptool.Command("sh", "-c", `(setsid sleep `+marker+` </dev/null >/dev/null 2>&1 &); exec "$0"`, crash), &mcptool.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tools(t, s)
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v, want nil", err)
	}
	for _, p := range procs(t) {
		if p.cmdline == "sleep "+marker && p.state != "Z" {
			syscall.Kill(p.pid, syscall.SIGKILL)
			t.Errorf("after Close, the server's setsid helper still runs: %+v", p)
		}
	}
}
