//go:build unix && !linux

package mcptool

// onlyZombies reports false: outside Linux, a group with a process that
// has exited and awaits its reaping counts as alive, and is signalled.
func onlyZombies(int) bool { return false }
