package toolruntest

// TB is the part of testing.TB that [Start] needs. A *testing.T and a
// *testing.B satisfy it; taking this small interface instead of testing.TB
// keeps package testing out of programs that link toolruntest without being
// tests, such as the toolrun command's offline demo.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
}

// Start starts a scripted server for the test tb. The server is closed when
// the test ends, and the test then fails for every request the server
// rejected or could not answer from its script ([Server.Errors]): a test
// that uses Start knows that every history the code under test sent was
// valid.
func Start(tb TB, replies ...Reply) *Server {
	tb.Helper()
	return started(tb, NewServer(replies...))
}

// StartFunc is [Start] for a server whose replies come from f.
func StartFunc(tb TB, f func(*Request) Reply) *Server {
	tb.Helper()
	return started(tb, NewServerFunc(f))
}

func started(tb TB, s *Server) *Server {
	tb.Cleanup(func() {
		s.Close()
		for _, err := range s.Errors() {
			tb.Errorf("toolruntest: the fake server rejected a request: %v", err)
		}
	})
	return s
}
