package mcptool

import (
	"bytes"
	"os"
	"strconv"
)

// onlyZombies reports whether every process of the group pgid has exited
// and awaits its reaping, from /proc/PID/stat: the state (Z, X) and the
// group are the first and third fields after the command's name.
func onlyZombies(pgid int) bool {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range dir {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || string(f[2]) != strconv.Itoa(pgid) {
			continue
		}
		if state := string(f[0]); state != "Z" && state != "X" {
			return false
		}
	}
	return true
}
