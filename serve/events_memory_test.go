package serve_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// heapInUse returns the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestStalledReadersOfALargeRun: 40 clients that open the event stream of
// a run with a 12 MB answer and stop reading cost the server a bounded
// heap each, a plain run completes while they hold, and their memory is
// the server's again once they go. The answer is sent once, in its text
// message, not again as RUN_FINISHED's result. Before, each stalled stream
// held the 12 MB event twice (read whole, and copied to be written): 40 of
// them about 1 GB.
func TestStalledReadersOfALargeRun(t *testing.T) {
	const (
		answerBytes = 12 << 20
		readers     = 40
		// perReader is the bound a stalled stream may cost: a page of
		// events and a part of a large one (see events.go), with room.
		perReader = 3 << 20
	)
	answer := strings.Repeat("a", answerBytes)
	f := newFixture(t, map[string][]toolruntest.Reply{
		"big": {toolruntest.Message(toolruntest.Text(answer))},
		"hi":  {toolruntest.Message(toolruntest.Text("hello there"))},
	}, nil, func(c *serve.Config) { c.StreamWriteTimeout = time.Hour })
	addr := listening(t, f.h, nil)
	status, evs, body := post(t, "http://"+addr, input("t1", "r1", []map[string]any{user("u1", "big")}, nil))
	if status != 200 {
		t.Fatalf("the large run: %d %s", status, body)
	}
	if r, ok := last(evs)["result"]; ok {
		t.Errorf("RUN_FINISHED carries a result of %d bytes, want the answer sent once, in its message", len(fmt.Sprint(r)))
	}
	answer, evs = "", nil
	before := heapInUse()

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range readers {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetReadBuffer(4 << 10) // a client that takes little, and then nothing
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /runs/r1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		// Read into the large event, so the server is writing it, then
		// stop reading.
		c.SetReadDeadline(time.Now().Add(clientPatience))
		if _, err := io.CopyN(io.Discard, bufio.NewReader(c), 64<<10); err != nil {
			t.Fatalf("reading the start of the stream: %v", err)
		}
	}

	// A plain run completes while the 40 hold.
	if status, evs, body := post(t, "http://"+addr, input("t2", "r2", []map[string]any{user("u1", "hi")}, nil)); status != 200 || last(evs)["type"] != "RUN_FINISHED" {
		t.Fatalf("a plain run while %d readers stall: %d %s %v", readers, status, body, types(evs))
	}
	held := heapInUse()
	if grew := int64(held) - int64(before); grew > readers*perReader {
		t.Errorf("%d stalled readers grew the heap by %d MiB, want at most %d MiB (%d MiB each)", readers, grew>>20, readers*perReader>>20, perReader>>20)
	}

	for _, c := range conns {
		c.Close()
	}
	conns = nil
	// The streams end at their next write, which fails on the closed
	// connections; then their memory is the server's again.
	deadline := time.Now().Add(clientPatience)
	for {
		after := heapInUse()
		if int64(after)-int64(before) <= 4<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after the readers went the heap is %d MiB above what it was before them, want it back: their streams hang on to it", clientPatience, (int64(after)-int64(before))>>20)
		}
		runtime.Gosched()
	}
}
