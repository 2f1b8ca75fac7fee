package mcptool

import "os"

// ProcessOf returns the process of the live connection of s, or nil: for
// the tests that kill a server behind its back.
func ProcessOf(s *Server) *os.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil || s.conn.cmd == nil {
		return nil
	}
	return s.conn.cmd.Process
}
