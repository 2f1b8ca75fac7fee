package temporal

import (
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"
	"time"
	"unsafe"
)

// How a worker of this package stops (SIGTERM, a rolling restart).
//
// The Temporal SDK's worker, asked to stop, cancels the polls it has under
// way unless the server says (a namespace capability) that it completes
// them itself on shutdown; and a task the server had handed to a poll just
// as it was cancelled is lost: an activity task then waits out its
// heartbeat or start-to-close timeout, and its call is answered
// "interrupted" though it never started. Servers before 1.32 do not
// complete polls on shutdown, nor later ones unless their dynamic config
// frontend.enableCancelWorkerPollsOnShutdown is on. So every
// SDK worker given to [Register] (and so every one [NewWorker] builds) is
// switched to the SDK's own drain: on a stop it stops polling, lets the
// polls under way end, runs every task they bring, and then stops, as it
// does on a server that completes polls. The switch is the one the SDK
// sets from the capability, set on the worker rather than faked in the
// client's answers, so no client option is needed and the caller's other
// workers are left as they are.
//
// A server that ends a stopping worker's polls (the setting above) ends
// them once the SDK tells it the worker is stopping (its ShutdownWorker
// call, before the stop waits for the polls), after it has stopped handing
// them tasks: an idle worker stops at once, and nothing is lost. A poll
// the server does not end ends when a task comes or when the server
// answers it empty, at its long poll (a minute by default) after it began:
// an idle worker takes up to that minute to stop on such a server, and
// less on one whose long poll (matching.longPollExpirationInterval) is
// shorter. Shorter polls of the client's would stop it sooner, but the
// server answers a poll empty only a second before its deadline, so a
// task matched to a short poll on a busy server could reach it after the
// deadline and be lost, on every poll and not only on a stop; the SDK's
// polls leave ten seconds. The SDK's stop gives up at the worker's stop
// timeout and leaves the polls under way open, whose tasks the stopped
// worker drops: hence [MinWorkerStopTimeout], longer than the SDK's polls.
//
// The SDK exports no way to set the switch, so it is set as the SDK keeps
// it (through reflection); Register panics, naming what it did not find,
// given a worker of a version of the SDK that keeps it otherwise, rather
// than register with a worker that would lose tasks on its stop.

// drainWorker switches r, a worker built by the SDK (worker.New), to
// drain its polls on a stop (see above). It returns an error if r is a
// worker this toolrun cannot switch (not the SDK's, or of a version of
// the SDK that keeps the switch elsewhere); isWorker is false, with no
// error, for a Registry that is not a worker at all (a test environment).
func drainWorker(r Registry) (isWorker bool, err error) {
	v := reflect.ValueOf(r)
	if _, ok := r.(interface{ Start() error }); !ok {
		return false, nil
	}
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return true, fmt.Errorf("the worker (%T) is not one of worker.New", r)
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
