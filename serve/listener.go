package serve

import (
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"
)

// refusalTimeout bounds how long a refused connection may take to receive
// its refusal (with TLS, its handshake too) before it is closed.
const refusalTimeout = 5 * time.Second

// maxRefusing bounds the refusals being written at once; past it a
// connection over the limits is closed without one, so that refusing
// cannot itself hold the server's descriptors.
const maxRefusing = 64

// tooManyConns is the answer of a connection over the limits: a complete
// HTTP/1.1 response, sent before any request is read.
const tooManyConns = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: application/json\r\n" +
	"Connection: close\r\n" +
	"Retry-After: 1\r\n" +
	"Content-Length: %d\r\n\r\n%s"

// Listener returns ln bounded by [Config.MaxConns] and
// [Config.MaxConnsPerClient], and serving TLS with tlsConfig if it is not
// nil. A connection past either bound is answered 503 with the code
// too_many_connections (with TLS, after its handshake) and closed, and is
// never handed to the server. A connection counts from its accept to its
// close, idle keep-alive connections and event streams included. Serve the
// handler on it with an [http.Server] that bounds the time headers take to
// arrive (ReadHeaderTimeout): the handler bounds bodies and streams itself.
func (h *Handler) Listener(ln net.Listener, tlsConfig *tls.Config) net.Listener {
	l := &limitListener{Listener: ln, total: h.cfg.MaxConns, perClient: h.cfg.MaxConnsPerClient, byAddr: map[string]int{}, log: h, tls: tlsConfig}
	if tlsConfig == nil {
		return l
	}
	return tls.NewListener(l, tlsConfig)
}

// limitListener is the listener of [Handler.Listener].
type limitListener struct {
	net.Listener
	total, perClient int
	log              *Handler
	tls              *tls.Config // for refusals, which the TLS listener above never sees

	mu       sync.Mutex // guards the fields below
	open     int
	byAddr   map[string]int
	refusing int
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := clientAddr(c)
		l.mu.Lock()
		why := ""
		switch {
		case l.open >= l.total:
			why = "the server has as many connections open as it takes"
		case l.byAddr[addr] >= l.perClient:
			why = "this client address has as many connections open as the server takes from one"
		}
		if why == "" {
			l.open++
			l.byAddr[addr]++
			l.mu.Unlock()
			return &limitConn{Conn: c, l: l, addr: addr}, nil
		}
		refuse := l.refusing < maxRefusing
		if refuse {
			l.refusing++
		}
		l.mu.Unlock()
		if !refuse {
			c.Close()
			continue
		}
		go l.refuse(c, why)
	}
}

// refuse answers c 503 and closes it.
func (l *limitListener) refuse(c net.Conn, why string) {
	defer func() {
		l.mu.Lock()
		l.refusing--
		l.mu.Unlock()
	}()
	defer c.Close()
	body := `{"error":{"code":"too_many_connections","message":"` + why + `; close one or try again later"}}` + "\n"
	c.SetDeadline(time.Now().Add(refusalTimeout))
	if l.tls != nil {
		c = tls.Server(c, l.tls)
	}
	if _, err := fmt.Fprintf(c, tooManyConns, len(body), body); err != nil {
		l.log.log.Debug("serve: refusing a connection", "err", err)
	}
}

// release forgets a closed connection of addr.
func (l *limitListener) release(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byAddr[addr]--; l.byAddr[addr] <= 0 {
		delete(l.byAddr, addr)
	}
}

// clientAddr is the address c is counted under: its IP, or the whole
// remote address if it has no port.
func clientAddr(c net.Conn) string {
	a := c.RemoteAddr()
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// limitConn is a counted connection: its close releases its place once.
type limitConn struct {
	net.Conn
	l    *limitListener
	addr string
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr) })
	return err
}
