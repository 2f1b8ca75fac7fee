package temporal

import (
	"context"
	"log/slog"
	"reflect"
	"time"

	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
)

// DrainOnShutdown returns a gRPC dial option that makes the workers of a
// client stop without losing a task, for client.Options'
// ConnectionOptions.DialOptions:
//
//	c, err := client.Dial(client.Options{HostPort: addr,
//		ConnectionOptions: client.ConnectionOptions{
//			DialOptions: []grpc.DialOption{temporal.DrainOnShutdown()}}})
//
// A worker asked to stop cancels its polls at once unless the server
// advertises that it completes them on shutdown, and a task the server
// had handed to a cancelled poll is lost: an activity task then waits out
// its heartbeat or start-to-close timeout and its call is answered
// "interrupted" though it never started. With this option the worker
// treats the server as one that completes polls: it stops polling first,
// lets the polls under way end, runs every task they bring, and then
// stops. On a server that does advertise it, nothing changes; on one that
// does not, a stop takes up to the server's long-poll timeout (about a
// minute) longer, still within the worker's WorkerStopTimeout
// ([DefaultWorkerStopTimeout] with [NewWorker]), so give the deployment's
// shutdown grace period a little more than both.
//
// It marks the capability in every DescribeNamespace answer the client
// gets, the worker's and the caller's own.
func DrainOnShutdown() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err != nil || method != workflowservice.WorkflowService_DescribeNamespace_FullMethodName {
			return err
		}
		if r, ok := reply.(*workflowservice.DescribeNamespaceResponse); ok && r.GetNamespaceInfo() != nil {
			if r.NamespaceInfo.Capabilities == nil {
				r.NamespaceInfo.Capabilities = &namespacepb.NamespaceInfo_Capabilities{}
			}
			r.NamespaceInfo.Capabilities.WorkerPollCompleteOnShutdown = true
		}
		return nil
	})
}

// stopTimeout returns the WorkerStopTimeout of a worker built by the SDK
// (worker.New), read from its options as the SDK keeps them, and whether
// it could be read: the SDK does not export it.
func stopTimeout(r Registry) (time.Duration, bool) {
	v := reflect.ValueOf(r)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0, false
	}
	p := v.Elem().FieldByName("executionParams")
	if !p.IsValid() || p.Kind() != reflect.Struct {
		return 0, false
	}
	f := p.FieldByName("WorkerStopTimeout")
	if !f.IsValid() || f.Type() != reflect.TypeFor[time.Duration]() {
		return 0, false
	}
	return time.Duration(f.Int()), true
}

// warnStopTimeout logs a warning if r is a worker whose WorkerStopTimeout
// is 0: stopping it (SIGTERM) cancels the tools it is running at once, and
// a tool cancelled after its effect is answered "interrupted".
func warnStopTimeout(log *slog.Logger, r Registry) {
	if d, ok := stopTimeout(r); ok && d <= 0 {
		log.Warn("toolrun: the worker's WorkerStopTimeout is 0: a stop cancels its running tools at once; build it with temporal.NewWorker or set worker.Options.WorkerStopTimeout",
			"default", DefaultWorkerStopTimeout)
	}
}

// logger is the logger of a's Options, or slog's default when it has none.
func (a *Activities) logger() *slog.Logger {
	if a.opts.Logger != nil {
		return a.opts.Logger
	}
	return slog.Default()
}
