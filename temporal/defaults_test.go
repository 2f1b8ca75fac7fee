package temporal

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun/driver"
	sdktemporal "go.temporal.io/sdk/temporal"
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
