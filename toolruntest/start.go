package toolruntest

import "testing"

// Start starts a scripted server for the test tb. The server is closed when
// the test ends, and the test then fails for every request the server
// rejected or could not answer from its script ([Server.Errors]): a test
// that uses Start knows that every history the code under test sent was
// valid.
func Start(tb testing.TB, replies ...Reply) *Server {
	tb.Helper()
	return started(tb, NewServer(replies...))
}

// StartFunc is [Start] for a server whose replies come from f.
func StartFunc(tb testing.TB, f func(*Request) Reply) *Server {
	tb.Helper()
	return started(tb, NewServerFunc(f))
}

func started(tb testing.TB, s *Server) *Server {
	tb.Cleanup(func() {
		s.Close()
		for _, err := range s.Errors() {
			tb.Errorf("toolruntest: the fake server rejected a request: %v", err)
		}
	})
	return s
}
