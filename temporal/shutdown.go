package temporal

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
)

// How a worker of this package stops (SIGTERM, a rolling restart).
//
// The Temporal SDK's worker, asked to stop, cancels the polls it has under
// way unless the server says (a namespace capability) that it completes
// them itself on shutdown; and a task the server had handed to a poll just
// as it was cancelled is lost: an activity task then waits out its
// heartbeat or start-to-close timeout, and its call is answered
// "interrupted" though it never started. Server 1.29 (the CLI's dev
// server) does not complete polls on shutdown, nor says it does. So every
// SDK worker given to [Register] (and every one [NewWorker] builds) is
// switched to the SDK's own drain: on a stop it stops polling, lets the
// polls under way end, runs every task they bring, and then stops, as it
// does on a server that completes polls. The switch is the one the SDK
// sets from the capability, set on the worker rather than faked in the
// client's answers, so no client option is needed and the caller's other
// workers are left as they are.
//
// A poll the server does not complete ends when a task comes or at the
// poll's deadline, which the SDK sets at 70 s (the server answers empty a
// minute in): an idle worker would take a minute to stop. [NewWorker]
// therefore builds its worker on a copy of the client whose polls ask for
// at most [drainPoll], so that an idle worker stops within that. A
// worker of worker.New given to Register keeps the SDK's long polls and
// may take up to a minute to stop when idle.
//
// The SDK exports neither the switch nor a way to wrap a ready client's
// connection, so both are set as the SDK keeps them (read and written
// through reflection); NewWorker and Register panic, naming what they
// did not find, if a version of the SDK keeps them otherwise, rather than
// build a worker that would lose tasks on its stop.

// drainPoll is how long a poll of a worker built by [NewWorker] asks the
// server to wait for a task: the longest an idle worker takes to stop.
// The server answers a poll with no task a second before its deadline and
// logs a warning for deadlines under 10 s, so it is a little more.
const drainPoll = 12 * time.Second

// drainWorker switches w, a worker built by the SDK (worker.New), to
// drain its polls on a stop (see above). It returns an error if w is not
// such a worker, or one of a version of the SDK that keeps the switch
// elsewhere; ok is false, with no error, for a Registry that is not a
// worker at all (a test environment).
func drainWorker(r Registry) (ok bool, err error) {
	v := reflect.ValueOf(r)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false, nil
	}
	if _, isWorker := r.(interface{ Start() error }); !isWorker {
		return false, nil
	}
	f := v.Elem().FieldByName("workerPollCompleteOnShutdown")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*atomic.Bool]() {
		return true, fmt.Errorf("the worker (%s) is not one this toolrun can switch to drain on a stop: not a worker of worker.New, or one of a version of the Temporal SDK that keeps its drain switch (workerPollCompleteOnShutdown) elsewhere", v.Type())
	}
	b := *(**atomic.Bool)(unsafe.Pointer(f.UnsafeAddr()))
	if b == nil {
		return true, fmt.Errorf("the worker (%s) has no drain switch set up", v.Type())
	}
	b.Store(true)
	return true, nil
}

// drainingClient returns a client of the same connection, namespace,
// identity, data converter, interceptors and everything else as c, whose
// polls for tasks ask the server to wait at most [drainPoll]: the client
// that [NewWorker] builds its worker on. c itself is left as it is. It
// returns an error if c is not a client of the SDK (client.Dial,
// client.NewLazyClient, client.NewClientFromExisting) as this toolrun
// knows it.
func drainingClient(c client.Client) (client.Client, error) {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("the client (%T) is not one of the Temporal SDK (client.Dial)", c)
	}
	t := v.Elem().Type()
	field := func(s reflect.Value, name string, want reflect.Type) (unsafe.Pointer, error) {
		f := s.FieldByName(name)
		if !f.IsValid() || f.Type() != want {
			return nil, fmt.Errorf("the client (%s) keeps no %s of type %s where this toolrun looks for it: a version of the Temporal SDK it was not built for?", t, name, want)
		}
		return unsafe.Pointer(f.UnsafeAddr()), nil
	}
	src := v.Elem()
	capLock, err := field(src, "capabilitiesLock", reflect.TypeFor[sync.RWMutex]())
	if err != nil {
		return nil, err
	}
	nsLock, err := field(src, "namespaceDataLock", reflect.TypeFor[sync.RWMutex]())
	if err != nil {
		return nil, err
	}
	// The two fields the client writes after it is built are written
	// under these locks: hold them for the copy.
	(*sync.RWMutex)(capLock).RLock()
	(*sync.RWMutex)(nsLock).RLock()
	cp := reflect.New(t)
	cp.Elem().Set(src)
	(*sync.RWMutex)(nsLock).RUnlock()
	(*sync.RWMutex)(capLock).RUnlock()
	dst := cp.Elem()
	for _, name := range []string{"capabilitiesLock", "namespaceDataLock"} {
		p, _ := field(dst, name, reflect.TypeFor[sync.RWMutex]())
		*(*sync.RWMutex)(p) = sync.RWMutex{} // copied held for reading
	}
	svc, err := field(dst, "workflowService", reflect.TypeFor[workflowservice.WorkflowServiceClient]())
	if err != nil {
		return nil, err
	}
	s := (*workflowservice.WorkflowServiceClient)(svc)
	*s = shortPolls{*s}
	out, ok := cp.Interface().(client.Client)
	if !ok {
		return nil, fmt.Errorf("the client (%s) copied is not a client.Client", t)
	}
	return out, nil
}

// shortPolls is a WorkflowService whose polls for tasks ask the server to
// wait at most [drainPoll]; every other call is the service's own.
type shortPolls struct {
	workflowservice.WorkflowServiceClient
}

// short returns ctx with a deadline at most drainPoll away.
func short(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= drainPoll {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, drainPoll)
}

func (s shortPolls) PollWorkflowTaskQueue(ctx context.Context, in *workflowservice.PollWorkflowTaskQueueRequest, opts ...grpc.CallOption) (*workflowservice.PollWorkflowTaskQueueResponse, error) {
	ctx, cancel := short(ctx)
	defer cancel()
	return s.WorkflowServiceClient.PollWorkflowTaskQueue(ctx, in, opts...)
}

func (s shortPolls) PollActivityTaskQueue(ctx context.Context, in *workflowservice.PollActivityTaskQueueRequest, opts ...grpc.CallOption) (*workflowservice.PollActivityTaskQueueResponse, error) {
	ctx, cancel := short(ctx)
	defer cancel()
	return s.WorkflowServiceClient.PollActivityTaskQueue(ctx, in, opts...)
}

func (s shortPolls) PollNexusTaskQueue(ctx context.Context, in *workflowservice.PollNexusTaskQueueRequest, opts ...grpc.CallOption) (*workflowservice.PollNexusTaskQueueResponse, error) {
	ctx, cancel := short(ctx)
	defer cancel()
	return s.WorkflowServiceClient.PollNexusTaskQueue(ctx, in, opts...)
}

// dataConverterOf returns the data converter c was built with
// (client.Options.DataConverter, or the SDK's default when none was
// given), as the SDK keeps it, or nil if c is not a client of the SDK as
// this toolrun knows it.
func dataConverterOf(c client.Client) converter.DataConverter {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("dataConverter")
	if !f.IsValid() || f.Type() != reflect.TypeFor[converter.DataConverter]() {
		return nil
	}
	return *(*converter.DataConverter)(unsafe.Pointer(f.UnsafeAddr()))
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

// logger is the logger of a's Options, or slog's default when it has none.
func (a *Activities) logger() *slog.Logger {
	if a.opts.Logger != nil {
		return a.opts.Logger
	}
	return slog.Default()
}
