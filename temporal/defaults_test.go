package temporal

import (
	"log/slog"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
)

// TestDefaultModelRetry pins the default retry of a step: unlimited
// attempts, bounded in time by ModelRetryFor (30 minutes), so that a
// 15-minute outage of the API is waited out (TestModelOutage).
func TestDefaultModelRetry(t *testing.T) {
	o := RunOptions{}.withDefaults()
	want := &sdktemporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute}
	if diff := cmp.Diff(want, o.ModelRetry); diff != "" {
		t.Errorf("default ModelRetry (-want +got):\n%s", diff)
	}
	if o.ModelRetryFor != 30*time.Minute {
		t.Errorf("got ModelRetryFor %s, want 30m", o.ModelRetryFor)
	}
}

// TestToolActivityOptions checks that a call's activity honours its tool's
// timeout as its start-to-close timeout (with a grace for the tool's own
// timeout to fire first), and is attempted once unless its tool is
// idempotent.
func TestToolActivityOptions(t *testing.T) {
	w := &run{opts: RunOptions{}.withDefaults()}
	tests := []struct {
		name        string
		call        driver.PlannedCall
		wantTimeout time.Duration
		wantTries   int32
	}{
		{name: "a tool's timeout", call: driver.PlannedCall{Timeout: 10 * time.Second}, wantTimeout: 10*time.Second + toolGrace, wantTries: 1},
		{name: "no timeout", call: driver.PlannedCall{}, wantTimeout: DefaultToolTimeout, wantTries: 1},
		{name: "idempotent", call: driver.PlannedCall{Idempotent: true, Timeout: time.Minute}, wantTimeout: time.Minute + toolGrace, wantTries: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := w.toolOptions(tt.call)
			if o.StartToCloseTimeout != tt.wantTimeout || o.RetryPolicy.MaximumAttempts != tt.wantTries {
				t.Errorf("got timeout %s, %d attempts; want %s, %d", o.StartToCloseTimeout, o.RetryPolicy.MaximumAttempts, tt.wantTimeout, tt.wantTries)
			}
		})
	}
}

// field returns the field name of the struct *v points to, unexported or
// not, as the SDK keeps it.
func field(t *testing.T, v any, name string) reflect.Value {
	t.Helper()
	e := reflect.ValueOf(v).Elem()
	f := e.FieldByName(name)
	if !f.IsValid() {
		t.Fatalf("%s has no field %s", e.Type(), name)
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// lazyClient returns a client of the SDK that connects to nothing until
// it is used.
func lazyClient(t *testing.T, opts client.Options) client.Client {
	t.Helper()
	opts.HostPort, opts.Logger = "127.0.0.1:1", sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	c, err := client.NewLazyClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestWorkersDrain: the worker NewWorker builds, and one of worker.New
// once given to Register, have the SDK's drain switch on (a stop lets
// their polls under way end and runs what they bring).
func TestWorkersDrain(t *testing.T) {
	c := lazyClient(t, client.Options{})
	acts := func() *Activities {
		return NewActivities(anthropic.Client{}, nil, &toolrun.Options{Logger: slog.New(slog.DiscardHandler)})
	}
	drains := func(w worker.Worker) bool {
		return field(t, w, "workerPollCompleteOnShutdown").Interface().(*atomic.Bool).Load()
	}

	w := NewWorker(c, "q", acts(), worker.Options{})
	if !drains(w) {
		t.Error("NewWorker's worker does not drain")
	}

	plain := worker.New(c, "q", worker.Options{WorkerStopTimeout: MinWorkerStopTimeout})
	if drains(plain) {
		t.Fatal("a worker of worker.New drains before Register: the test shows nothing")
	}
	Register(plain, acts())
	if !drains(plain) {
		t.Error("a worker of worker.New given to Register does not drain")
	}
}
