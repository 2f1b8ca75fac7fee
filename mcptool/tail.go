package mcptool

import (
	"strings"
	"sync"
)

// tailSize bounds the standard error kept of a command.
const tailSize = 4 << 10

// tail keeps the last tailSize bytes written to it: the end of a command's
// standard error, for the log record of its exit.
type tail struct {
	mu      sync.Mutex // guards buf, dropped
	buf     []byte
	dropped bool // bytes were dropped from the front
}

// Write keeps the end of p.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) > tailSize {
		p = p[len(p)-tailSize:]
		t.dropped = true
	}
	if over := len(t.buf) + len(p) - tailSize; over > 0 {
		t.buf = t.buf[:copy(t.buf, t.buf[over:])]
		t.dropped = true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String returns what t kept, from the start of a line when bytes were
// dropped, without the final newline. A nil tail keeps nothing.
func (t *tail) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.buf)
	if t.dropped {
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
		s = "…" + s
	}
	return strings.TrimRight(s, "\n")
}

// lastLine returns the last line of s.
func lastLine(s string) string {
	return s[strings.LastIndexByte(s, '\n')+1:]
}
