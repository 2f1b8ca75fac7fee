package toolruntest

// TB is the part of testing.TB that [New] needs. A *testing.T and a
// *testing.B satisfy it; taking this small interface instead of testing.TB
// keeps package testing out of programs that link toolruntest without being
// tests, such as the toolrun command's offline demo.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
}

// New starts a fake Messages API server on loopback, configured by opts: its
// replies come from the script opts.Replies, or from opts.Func, which
// computes each one from its request. With neither, the script is empty and
// every request is answered as one past its end, with [ErrScriptEnded].
// Setting both (a Func and a non-empty Replies) is a programming mistake,
// and New panics.
//
// With a non-nil tb, the server belongs to the test: it is closed when the
// test ends (tb.Cleanup), and the test then fails (tb.Errorf) for every
// request the server rejected or could not answer ([Server.Errors]), so a
// test that passes knows that every history the code under test sent was
// valid. With a nil tb, as in a program that is not a test, the caller must
// call [Server.Close] when finished, and reads [Server.Errors] itself.
//
// New copies opts, and the Replies slice with it; changing them afterwards
// does not change the server.
func New(tb TB, opts Options) *Server {
	if tb != nil {
		tb.Helper()
	}
	if opts.Func != nil && len(opts.Replies) > 0 {
		panic("toolruntest: New with both Options.Replies and Options.Func set; a server answers from a script or from a func, not both")
	}
	s := newServer(opts)
	if tb != nil {
		tb.Cleanup(func() {
			s.Close()
			for _, err := range s.Errors() {
				tb.Errorf("toolruntest: the fake server rejected a request: %v", err)
			}
		})
	}
	return s
}

// Script returns the Options of a server that answers the n-th valid request
// with replies[n]: the common case, as in New(t, Script(a, b)). Set other
// fields on the result to configure the server further.
func Script(replies ...Reply) Options {
	return Options{Replies: replies}
}
