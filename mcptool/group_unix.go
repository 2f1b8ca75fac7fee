//go:build unix

package mcptool

import (
	"os/exec"
	"syscall"
)

// ownGroup makes cmd start in a new process group, whose ID is its process
// ID, so that the group can be signalled as a whole. A command that starts
// a session of its own (Setsid) has a new group already.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if !cmd.SysProcAttr.Setsid {
		cmd.SysProcAttr.Setpgid = true
		cmd.SysProcAttr.Pgid = 0
	}
}

// signalGroup sends sig to every process of the group pgid.
func signalGroup(pgid int, sig syscall.Signal) error {
	return syscall.Kill(-pgid, sig)
}

// groupAlive reports whether a process of the group pgid is still running.
// A process that has exited but is not reaped yet, a zombie, is not: where
// the parent an orphan is given to does not reap, zombies stay.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
		return false
	}
	return !onlyZombies(pgid)
}
