package toolrunotel_test

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolrunotel"
	"github.com/toolrun/toolrun/toolruntest"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// setGlobal registers rec's providers as the global ones for the test.
func setGlobal(t *testing.T, rec *recorder) {
	t.Helper()
	prevTP, prevMP := otel.GetTracerProvider(), otel.GetMeterProvider()
	otel.SetTracerProvider(rec.tp)
	otel.SetMeterProvider(rec.mp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetMeterProvider(prevMP)
	})
}

// TestOneChatSpanPerRequest runs with a global tracer provider, as an
// application that has set up OpenTelemetry does, so that the anthropic
// client would emit spans of its own, and checks that every request the
// runner sends has exactly one chat span (of any scope), the Observer's,
// a child of the run span: over tool turns, a stream, no thread, and a
// request the client retried.
func TestOneChatSpanPerRequest(t *testing.T) {
	tools := []toolrun.Tool{weatherTool(), lookupTool()}
	tests := []struct {
		name    string
		replies []toolruntest.Reply
		opts    toolrun.Options
	}{
		{name: "two turns with tools", replies: twoTools},
		{name: "streamed", replies: twoTools, opts: toolrun.Options{Stream: true}},
		{name: "without a thread", replies: twoTools, opts: toolrun.Options{NoThread: true}},
		{name: "a request the client retried", replies: append([]toolruntest.Reply{toolruntest.Overloaded()}, twoTools...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t)
			setGlobal(t, rec)
			s := toolruntest.New(t, toolruntest.Script(tt.replies...))
			obs := toolrunotel.New(toolrunotel.Options{})
			var requests int
			opts := tt.opts
			opts.Logger = discard()
			opts.OnEvent = func(ctx context.Context, e toolrun.Event) {
				if rs, ok := e.(toolrun.RequestSent); ok && rs.Attempt <= 1 {
					requests++
				}
				obs.Observe(ctx, e)
			}
			client := s.Client(append(toolrunotel.ClientOptions(), option.WithMaxRetries(2))...)
			r := toolrun.New(client, userParams("Weather?"), tools, &opts)
			if _, err := r.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if requests != 2 {
				t.Fatalf("the runner sent %d requests, want 2", requests)
			}
			if got := countChats(t, rec, "invoke_agent"); got != requests {
				t.Errorf("%d chat spans for %d requests, want one each", got, requests)
			}
		})
	}
}

// TestClientSpansWithoutClientOptions shows what ClientOptions prevents:
// a client built without them, with a global provider registered, emits
// a chat span of its own for each request, outside the run span.
func TestClientSpansWithoutClientOptions(t *testing.T) {
	rec := newRecorder(t)
	setGlobal(t, rec)
	s := toolruntest.New(t, toolruntest.Script(twoTools...))
	obs := toolrunotel.New(toolrunotel.Options{})
	r := toolrun.New(s.Client(), userParams("Weather?"), []toolrun.Tool{weatherTool(), lookupTool()},
		&toolrun.Options{Logger: discard(), OnEvent: obs.Observe})
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	var chats []string
	for _, sp := range rec.spans.Ended() {
		if chatSpan(sp) {
			chats = append(chats, sp.Name())
		}
	}
	want := []string{"anthropic.messages.create", "chat claude-test", "anthropic.messages.create", "chat claude-test"}
	if diff := cmp.Diff(want, chats); diff != "" {
		t.Errorf("chat spans (-want +got):\n%s", diff)
	}
}

func chatSpan(sp sdktrace.ReadOnlySpan) bool {
	for _, kv := range sp.Attributes() {
		if kv.Key == "gen_ai.operation.name" && kv.Value.AsString() == "chat" {
			return true
		}
	}
	return false
}

// countChats returns the number of chat spans, of every instrumentation
// scope, and fails the test for one whose parent is not the span named
// run.
func countChats(t *testing.T, rec *recorder, run string) int {
	t.Helper()
	all := rec.spans.Ended()
	names := map[[8]byte]string{}
	for _, sp := range all {
		names[sp.SpanContext().SpanID()] = sp.Name()
	}
	n := 0
	for _, sp := range all {
		if !chatSpan(sp) {
			continue
		}
		n++
		if p := names[sp.Parent().SpanID()]; p != run {
			t.Errorf("chat span %q (scope %s) has parent %q, want %q", sp.Name(), sp.InstrumentationScope().Name, p, run)
		}
	}
	return n
}
