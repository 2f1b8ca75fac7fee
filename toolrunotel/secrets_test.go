package toolrunotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolrunotel"
	"github.com/toolrun/toolrun/toolruntest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestNoSecretsRecorded runs a credential through every place where text of
// a tool, the model or a hook reaches the observer, and checks that no span
// name, status, attribute or event, nor any metric attribute, holds it. The
// package promises that tool results are never recorded, and error
// messages only redacted, as the runner's log has them.
func TestNoSecretsRecorded(t *testing.T) {
	const secret = "sk-ant-api03-LEAKEDLEAKEDLEAKEDLEAKED-AAAAAAAA"
	readEnv := toolrun.NewTool("read_env", "Reads the environment",
		func(ctx context.Context, in struct{}) (string, error) { return "ANTHROPIC_API_KEY=" + secret, nil })
	failing := toolrun.NewTool("login", "Logs in",
		func(ctx context.Context, in struct{}) (string, error) {
			return "", errors.New("login failed with key " + secret)
		})
	tests := []struct {
		name string
		call string // the tool the model calls
		opts toolrun.Options
		// wantStatus is the status of the span of the call, or of the run
		// span if wantRunErr.
		wantStatus string
		wantRunErr bool
	}{
		{
			// The hook flags the result (the way the Options docs suggest
			// withholding one): its text must not become the status.
			name: "result a hook marked as error",
			call: "read_env",
			opts: toolrun.Options{AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
				for _, c := range r.Content {
					if c.OfText != nil && strings.Contains(c.OfText.Text, "API_KEY") {
						r.IsError = true
					}
				}
				return nil
			}},
			wantStatus: "Error: result marked as error",
		},
		{
			name:       "tool error",
			call:       "login",
			wantStatus: "Error: login failed with key sk-ant-[REDACTED]",
		},
		{
			name:       "unknown tool named by the model",
			call:       secret,
			wantStatus: "Error: unknown tool \"sk-ant-[REDACTED]\"; available tools: login, read_env",
		},
		{
			name: "hook error",
			call: "read_env",
			opts: toolrun.Options{AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
				return errors.New("audit store refused " + secret)
			}},
			wantRunErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t)
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Reply{ID: "msg_1", Content: []toolruntest.Block{toolruntest.ToolUse("t1", tt.call, nil)}},
				toolruntest.Reply{ID: "msg_2", Content: []toolruntest.Block{toolruntest.Text("Done.")}},
			))
			obs := toolrunotel.New(toolrunotel.Options{TracerProvider: rec.tp, MeterProvider: rec.mp})
			opts := tt.opts
			opts.Logger, opts.OnEvent = discard(), obs.Observe
			r := toolrun.New(s.Client(option.WithMaxRetries(0)), userParams("Env?"), []toolrun.Tool{readEnv, failing}, &opts)
			_, err := r.Run(t.Context())
			if (err != nil) != tt.wantRunErr {
				t.Fatalf("Run: error = %v, want one: %t", err, tt.wantRunErr)
			}
			if tt.wantRunErr && !strings.Contains(err.Error(), secret) {
				t.Fatalf("Run: error = %v; the test needs the secret in the run's error", err)
			}
			spans := rec.ended(t, toolrunotel.ScopeName)
			var status string
			for _, sp := range spans {
				if tt.wantRunErr && strings.HasPrefix(sp.Name, "invoke_agent") ||
					!tt.wantRunErr && strings.HasPrefix(sp.Name, "execute_tool") {
					status = sp.Status
				}
			}
			if !tt.wantRunErr && status != tt.wantStatus {
				t.Errorf("status of the call's span = %q, want %q", status, tt.wantStatus)
			}
			if tt.wantRunErr && !strings.Contains(status, "audit store refused") {
				t.Errorf("status of the run span = %q, want the hook's error, redacted", status)
			}
			for _, sp := range rec.spans.Ended() {
				if strings.Contains(sp.Name(), secret) {
					t.Errorf("span name %q holds the secret", sp.Name())
				}
				if d := sp.Status().Description; strings.Contains(d, secret) {
					t.Errorf("span %q: status description %q holds the secret", sp.Name(), d)
				}
				for _, kv := range sp.Attributes() {
					if strings.Contains(kv.Value.Emit(), secret) {
						t.Errorf("span %q: attribute %s = %q holds the secret", sp.Name(), kv.Key, kv.Value.Emit())
					}
				}
				for _, e := range sp.Events() {
					for _, kv := range e.Attributes {
						if strings.Contains(kv.Value.Emit(), secret) {
							t.Errorf("span %q: event %s: attribute %s = %q holds the secret", sp.Name(), e.Name, kv.Key, kv.Value.Emit())
						}
					}
				}
			}
			var rm metricdata.ResourceMetrics
			if err := rec.reader.Collect(t.Context(), &rm); err != nil {
				t.Fatal(err)
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					h, ok := m.Data.(metricdata.Histogram[float64])
					if !ok {
						continue
					}
					for _, dp := range h.DataPoints {
						for _, kv := range dp.Attributes.ToSlice() {
							if strings.Contains(kv.Value.Emit(), secret) {
								t.Errorf("metric %s: attribute %s = %q holds the secret", m.Name, kv.Key, kv.Value.Emit())
							}
						}
					}
				}
			}
		})
	}
}
