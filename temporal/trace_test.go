package temporal_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestTraceAcrossActivitiesOnServer runs a run of two turns, with a call
// each, on clients built with TracePropagator: the spans that the step
// and tool activities record from their contexts (one per event, as
// toolrunotel records them) are of one trace, the trace of the span the
// run was started in. Without a span at the start, they are still of one
// trace, the run's own.
func TestTraceAcrossActivitiesOnServer(t *testing.T) {
	for _, withSpan := range []bool{true, false} {
		name := "started in a span"
		if !withSpan {
			name = "started with no span"
		}
		t.Run(name, func(t *testing.T) {
			dialTemporal(t) // skips with no server, fails with CI set
			c, err := client.Dial(client.Options{HostPort: temporalAddress(), Logger: nopLogger, ContextPropagators: []workflow.ContextPropagator{temporal.TracePropagator()}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			defer tp.Shutdown(context.Background())
			tracer := tp.Tracer("toolrun-test")
			queue := newQueue("toolrun-trace")
			model := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
				toolruntest.Message(toolruntest.ToolUse("t2", "write_file", writeIn{Path: "/b"})),
				toolruntest.Message(toolruntest.Text("Done.")),
			))
			var calls counter
			opts := &toolrun.Options{Logger: discard(), OnEvent: func(ctx context.Context, e toolrun.Event) {
				_, span := tracer.Start(ctx, "event")
				span.End()
			}}
			w := temporal.NewWorker(c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{writeTool(&calls, nil)}, opts), worker.Options{WorkerStopTimeout: 5 * time.Second})
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var want trace.TraceID
			if withSpan {
				var root trace.Span
				ctx, root = tracer.Start(ctx, "start")
				want = root.SpanContext().TraceID()
				root.End()
			}
			run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := run.Get(ctx, nil); err != nil {
				t.Fatal(err)
			}
			traces := map[trace.TraceID]int{}
			events := 0
			for _, s := range exp.GetSpans() {
				traces[s.SpanContext.TraceID()]++
				if s.Name == "event" {
					events++
				}
			}
			if events < 6 { // ToolDecided, ToolStarted, ToolFinished of two calls, at least
				t.Fatalf("got %d event spans, want at least 6", events)
			}
			if len(traces) != 1 {
				t.Errorf("the run's spans are of %d traces, want 1: %v", len(traces), traces)
			}
			if withSpan {
				if _, ok := traces[want]; !ok {
					t.Errorf("the run's spans are not of the start's trace %s: %v", want, traces)
				}
			}
		})
	}
}
