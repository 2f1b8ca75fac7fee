package toolrunotel_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func userParams(text string) anthropic.BetaMessageNewParams {
	return anthropic.BetaMessageNewParams{
		Model:     "claude-test",
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(text))},
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// recorder holds the SDK providers of a test and what they recorded.
type recorder struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	r.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		ctx := context.Background()
		if err := r.tp.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := r.mp.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return r
}

// span is what the tests compare of an ended span.
type span struct {
	Name string
	// Parent is the parent's label: its name, with "#n" for the n-th span
	// of that name in end order when several have it; "" for a root span.
	Parent string
	Kind   string
	// Status is the status code, and its description if any.
	Status string
	Attrs  map[string]any
	// Events are "name" or, with an exception.message, "name: message".
	Events []string
}

// ended returns the ended spans in end order, without the spans of
// scopes other than scope. In texts, each old string of replace is replaced
// by its new one, as strings.NewReplacer does.
func (r *recorder) ended(t *testing.T, scope string, replace ...string) []span {
	t.Helper()
	all := r.spans.Ended()
	count := map[string]int{}
	for _, s := range all {
		count[s.Name()]++
	}
	labels := map[[8]byte]string{}
	seen := map[string]int{}
	for _, s := range all {
		label := s.Name()
		if count[label] > 1 {
			seen[label]++
			label = fmt.Sprintf("%s#%d", label, seen[label])
		}
		labels[s.SpanContext().SpanID()] = label
	}
	clean := strings.NewReplacer(replace...).Replace
	var out []span
	for _, s := range all {
		if s.InstrumentationScope().Name != scope {
			continue
		}
		got := span{Name: s.Name(), Kind: s.SpanKind().String(), Attrs: attrMap(s.Attributes())}
		if p := s.Parent(); p.IsValid() {
			got.Parent = labels[p.SpanID()]
			if got.Parent == "" {
				got.Parent = "?"
			}
			if p.TraceID() != s.SpanContext().TraceID() {
				t.Errorf("span %q is in another trace than its parent", s.Name())
			}
		}
		if st := s.Status(); st.Code != codes.Unset {
			got.Status = st.Code.String()
			if st.Description != "" {
				got.Status += ": " + clean(st.Description)
			}
		}
		for _, e := range s.Events() {
			ev := e.Name
			for _, kv := range e.Attributes {
				if kv.Key == "exception.message" {
					ev += ": " + clean(kv.Value.AsString())
				}
			}
			got.Events = append(got.Events, ev)
		}
		for k, v := range got.Attrs {
			if s, ok := v.(string); ok {
				got.Attrs[k] = clean(s)
			}
		}
		out = append(out, got)
	}
	return out
}

// positive stands for a time-dependent value that is above zero.
const positive = "positive"

func attrMap(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		v := kv.Value.AsInterface()
		if kv.Key == "gen_ai.response.time_to_first_chunk" {
			if f, ok := v.(float64); ok && f > 0 {
				v = positive
			}
		}
		m[string(kv.Key)] = v
	}
	return m
}

// point is what the tests compare of a histogram's data point.
type point struct {
	Metric string
	Attrs  string // sorted key=value pairs
	Count  uint64
	Sum    int64 // for integer histograms only: float sums are times
}

// points collects the metrics and returns the data points of the
// histograms, sorted.
func (r *recorder) points(t *testing.T) []point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{Metric: m.Name, Attrs: attrString(dp.Attributes), Count: dp.Count, Sum: dp.Sum})
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{Metric: m.Name, Attrs: attrString(dp.Attributes), Count: dp.Count})
				}
			default:
				t.Errorf("metric %s is a %T, want a histogram", m.Name, m.Data)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Metric != out[j].Metric {
			return out[i].Metric < out[j].Metric
		}
		return out[i].Attrs < out[j].Attrs
	})
	return out
}

func attrString(set attribute.Set) string {
	var parts []string
	for _, kv := range set.ToSlice() {
		parts = append(parts, fmt.Sprintf("%s=%v", kv.Key, kv.Value.AsInterface()))
	}
	return strings.Join(parts, " ")
}
