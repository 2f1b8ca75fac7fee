package temporal

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
