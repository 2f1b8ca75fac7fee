package servetemporal_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun/temporal/servetemporal"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"google.golang.org/grpc"
)

// rpcCounter counts the gRPC calls of a Temporal client by method.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int // guarded by mu
}

func (c *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.n[method[strings.LastIndex(method, "/")+1:]]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *rpcCounter) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// TestPendingListRPCs: the list of every thread's pending calls, which
// the inbox polls, is one visibility request for five threads waiting:
// no request for each workflow.
func TestPendingListRPCs(t *testing.T) {
	f := newFixture(t)
	rpcs := &rpcCounter{n: map[string]int{}}
	addr := os.Getenv("TEMPORAL_ADDRESS")
	if addr == "" {
		addr = "127.0.0.1:7233"
	}
	c, err := client.Dial(client.Options{HostPort: addr, Logger: log.NewStructuredLogger(discard()),
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(rpcs.intercept)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ex := servetemporal.New(servetemporal.Config{Client: c, TaskQueue: f.queue, WorkflowIDPrefix: f.queue + "/"})

	var want []string
	for i := range 5 {
		thread := newName(fmt.Sprintf("thread%d", i))
		interruptID(t, f.run(t, input(thread, "r-"+thread, []map[string]any{user("u1", "pay")}, nil)))
		want = append(want, thread+" call_pay "+`{"amount":5}`)
	}
	slices.Sort(want)
	list := func() []string {
		calls, err := ex.Pending(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tc := range calls {
			got = append(got, tc.Thread+" "+tc.Call.Call.ID+" "+string(tc.Call.Call.Input))
		}
		slices.Sort(got)
		return got
	}
	// The visibility store lags a moment behind the workflows.
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Equal(list(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the list %v, want %v", list(), want)
		}
		time.Sleep(100 * time.Millisecond) // polling the Temporal server, not timing the code
	}
	rpcs.reset()
	if diff := cmp.Diff(want, list()); diff != "" {
		t.Fatalf("the list (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"ListWorkflowExecutions": 1}, rpcs.reset()); diff != "" {
		t.Errorf("the requests of one listing of every thread's calls (-want +got):\n%s", diff)
	}
}
