//go:build !unix

package mcptool

import (
	"errors"
	"os/exec"
	"syscall"
)

// ownGroup does nothing here: this system has no process groups to
// signal, and a command is stopped alone; the processes it started are
// not (see [Server.Close]).
func ownGroup(*exec.Cmd) {}

// signalGroup fails: there is no group to signal.
func signalGroup(int, syscall.Signal) error { return errors.ErrUnsupported }

// groupAlive reports false: there is no group to wait for.
func groupAlive(int) bool { return false }
