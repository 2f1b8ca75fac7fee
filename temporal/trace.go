package temporal

import (
	"context"
	"crypto/rand"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// TraceHeader is the Temporal header under which [TracePropagator]
// carries a run's OpenTelemetry trace context (W3C traceparent and
// tracestate).
const TraceHeader = "toolrun-trace"

// TracePropagator returns a context propagator that carries the
// OpenTelemetry trace context of a run from the client that starts it,
// through the workflow, to every activity: the spans that toolrunotel (or
// any OpenTelemetry instrumentation) records in the step and tool
// activities of one run, on any worker, are then spans of one trace. Give
// it to client.Options.ContextPropagators of the clients that start runs
// and of the workers' clients.
//
// The trace is the one of the span in the context given to [Start]; with
// no span there, the propagator starts a trace of its own for the run, so
// that its spans still form one trace. The workflow only passes the
// context on, so it stays deterministic.
func TracePropagator() workflow.ContextPropagator { return tracePropagator{} }

type tracePropagator struct{}

// traceKey is the workflow context's key for the carried trace context.
type traceKey struct{}

var traceFormat = propagation.TraceContext{}

// Inject writes the trace context of ctx's span, or of a new trace if
// ctx has none, into the header of what a client sends.
func (tracePropagator) Inject(ctx context.Context, w workflow.HeaderWriter) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		sc = newTrace()
		ctx = trace.ContextWithSpanContext(ctx, sc)
	}
	carrier := propagation.MapCarrier{}
	traceFormat.Inject(ctx, carrier)
	return setTrace(w, carrier)
}

// Extract puts the trace context of the header, if any, into the
// activity's context, as the remote parent of the spans started there.
func (tracePropagator) Extract(ctx context.Context, r workflow.HeaderReader) (context.Context, error) {
	carrier, err := getTrace(r)
	if err != nil || carrier == nil {
		return ctx, err
	}
	return traceFormat.Extract(ctx, carrier), nil
}

// InjectFromWorkflow passes the trace context the workflow received on to
// what it schedules (activities, a continue-as-new).
func (tracePropagator) InjectFromWorkflow(ctx workflow.Context, w workflow.HeaderWriter) error {
	carrier, _ := ctx.Value(traceKey{}).(propagation.MapCarrier)
	if carrier == nil {
		return nil
	}
	return setTrace(w, carrier)
}

// ExtractToWorkflow keeps the trace context of the workflow's header in
// its context.
func (tracePropagator) ExtractToWorkflow(ctx workflow.Context, r workflow.HeaderReader) (workflow.Context, error) {
	carrier, err := getTrace(r)
	if err != nil || carrier == nil {
		return ctx, err
	}
	return workflow.WithValue(ctx, traceKey{}, carrier), nil
}

func setTrace(w workflow.HeaderWriter, carrier propagation.MapCarrier) error {
	p, err := converter.GetDefaultDataConverter().ToPayload(map[string]string(carrier))
	if err != nil {
		return err
	}
	w.Set(TraceHeader, p)
	return nil
}

func getTrace(r workflow.HeaderReader) (propagation.MapCarrier, error) {
	p, ok := r.Get(TraceHeader)
	if !ok {
		return nil, nil
	}
	var m map[string]string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &m); err != nil {
		return nil, err
	}
	return propagation.MapCarrier(m), nil
}

// newTrace returns the span context of a new trace, sampled, as the
// remote parent of a run's spans.
func newTrace() trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	rand.Read(tid[:])
	rand.Read(sid[:])
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}
