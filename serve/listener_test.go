package serve_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// These tests use real TCP connections on loopback, since what they test
// (deadlines on a connection's reads, descriptors held, connections
// refused) lives in the kernel and net/http, below anything a fake
// connection or testing/synctest reaches. The server's bound is short
// (bodyBound); a client waits far longer (clientPatience, minutes) before
// it calls the server stuck, so that the tests hold on a loaded machine.
const (
	bodyBound      = time.Second
	clientPatience = 5 * time.Minute
)

// listening serves h as "toolrun serve" does, on h.Listener over a
// loopback port (with TLS if tlsConfig is set), and returns its address.
func listening(t *testing.T, h *serve.Handler, tlsConfig *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(h.Listener(ln, tlsConfig))
	t.Cleanup(func() {
		h.Shutdown(context.Background())
		srv.Close()
	})
	return ln.Addr().String()
}

// networkFixture is a server without tokens on a real listener, with a
// body bound of bodyBound and the connection bounds of mutate.
func networkFixture(t *testing.T, mutate func(*serve.Config)) (*fixture, string) {
	t.Helper()
	f := newFixture(t, map[string][]toolruntest.Reply{
		"hi": {toolruntest.Message(toolruntest.Text("hello there"))},
	}, nil, func(c *serve.Config) {
		c.BodyReadTimeout = bodyBound
		if mutate != nil {
			mutate(c)
		}
	})
	return f, listening(t, f.h, nil)
}

// stalledRequest sends a POST to path whose headers promise 100 bytes of
// body and whose body is one byte, and returns the connection.
func stalledRequest(addr, path, typ string) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: 100\r\n\r\n{", path, typ)
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// released reads c's answer and then waits for the server to close c; it
// returns the answer's status line, "" if the server closed c without one.
func released(c net.Conn) (string, error) {
	c.SetReadDeadline(time.Now().Add(clientPatience))
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("no answer in %v (%w)", clientPatience, errors.Unwrap(err))
	}
	if _, err := io.Copy(io.Discard, br); err != nil && !isReset(err) {
		return status, fmt.Errorf("answered %q, then the connection was held (%w)", strings.TrimSpace(status), errors.Unwrap(err))
	}
	return strings.TrimSpace(status), nil
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"))
}

// TestStalledBodiesReleased: 1,000 clients that send their headers and one
// byte of a 100-byte body, on each endpoint that reads a body, are all
// answered 408 (or dropped) and their connections closed once the body
// bound passes. Before, each stalled connection was held for ever: the
// handler's 408 waited for net/http to read the rest of the body, with no
// deadline, before it was sent.
func TestStalledBodiesReleased(t *testing.T) {
	_, addr := networkFixture(t, func(c *serve.Config) { c.MaxConnsPerClient = 2000 })
	type endpoint struct{ path, typ string }
	endpoints := []endpoint{
		{"/agui", "application/json"},
		{"/api/interrupts/int_x/decision", "application/json"},
		{"/inbox/login", "application/x-www-form-urlencoded"},
	}
	const n = 1000
	var conns []net.Conn
	for i := range n {
		e := endpoints[i%len(endpoints)]
		c, err := stalledRequest(addr, e.path, e.typ)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			status, err := released(c)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				got[fmt.Sprintf("%s: %v", endpoints[i%len(endpoints)].path, err)]++
				return
			}
			got[status]++
		}()
	}
	wg.Wait()
	for k, v := range got {
		if k != "HTTP/1.1 408 Request Timeout" && k != "" {
			t.Errorf("%d connections: %s; want each answered 408 and closed", v, k)
		}
	}
}

// TestDribbledBodyAnsweredInTime: a client that sends its body a byte
// every 20 ms is answered 408 when the body bound passes, while it is
// still sending. Before, the deadline was the body's reads' and the 408
// came after the body's last byte.
func TestDribbledBodyAnsweredInTime(t *testing.T) {
	_, addr := networkFixture(t, nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size = 1000 // 20 s at one byte each 20 ms: far past the bound
	fmt.Fprintf(c, "POST /agui HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
	var sent atomic.Int64
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for range size {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
			sent.Add(1)
		}
	}()
	status, err := released(c)
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if status != "HTTP/1.1 408 Request Timeout" {
		t.Errorf("got %q, want a 408", status)
	}
	if n := sent.Load(); n >= size {
		t.Errorf("the answer came after the body's last byte (%d of %d sent), want it at the bound", n, size)
	}
}

// TestConnectionsBounded: past MaxConnsPerClient connections of one
// address a new connection is answered 503 too_many_connections and
// closed; one closed frees its place.
func TestConnectionsBounded(t *testing.T) {
	_, addr := networkFixture(t, func(c *serve.Config) { c.MaxConnsPerClient = 3 })
	// Three connections, each kept alive after a request.
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("connection within the bound: %d", resp.StatusCode)
		}
		held = append(held, c)
	}
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(clientPatience))
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("a connection past the bound: %v, want a 503", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "too_many_connections") {
		t.Errorf("a connection past the bound: %d %s, want 503 too_many_connections", resp.StatusCode, body)
	}
	// Closing one frees its place, once the server has seen it close.
	held[0].Close()
	deadline := time.Now().Add(clientPatience)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		c.SetReadDeadline(deadline)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err == nil && resp.StatusCode == 200 {
			break
		}
		if errors.Is(err, os.ErrDeadlineExceeded) || time.Now().After(deadline) {
			t.Fatalf("a connection after one was closed: %v (the server did not free the closed connection's place within %v)", err, clientPatience)
		}
	}
}
