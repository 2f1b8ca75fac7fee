package temporal_test

import (
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	sdktemporal "go.temporal.io/sdk/temporal"
)

// TestModelOutage checks that the default retry of a step waits out a
// 15-minute outage of the API (on the test environment's clock), and that
// RunOptions.ModelRetryFor bounds the wait in time, whatever the attempts.
func TestModelOutage(t *testing.T) {
	tests := []struct {
		name        string
		retryFor    time.Duration
		wantStop    toolrun.StopReason
		minDuration time.Duration // of the run, on the test clock
	}{
		{name: "the default survives 15 minutes", wantStop: toolrun.StopEndTurn, minDuration: 15 * time.Minute},
		{name: "ModelRetryFor 5m gives up", retryFor: 5 * time.Minute, wantStop: toolrun.StopError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Overloaded for 24 requests: with the default policy (1s,
			// doubling up to 1m) that is more than 15 minutes.
			var replies []toolruntest.Reply
			for range 24 {
				replies = append(replies, toolruntest.Reply{Fault: toolruntest.Fault{Status: 529}})
			}
			replies = append(replies, toolruntest.Message(toolruntest.Text("Back.")))
			s := toolruntest.New(t, toolruntest.Script(replies...))
			env := newEnv(t, s, nil, nil)
			start := env.Now()
			// The default policy, but for its unlimited attempts: the test
			// environment caps those at 10 (a real server does not; see
			// TestDefaultModelRetry).
			ro := &temporal.RunOptions{
				ModelRetry:    &sdktemporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 1000},
				ModelRetryFor: tt.retryFor,
			}
			env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("hi"), ro))
			out := outcome(t, env)
			took := env.Now().Sub(start)
			if out.StopReason != tt.wantStop {
				t.Fatalf("got stop reason %q (%s) after %s, want %q", out.StopReason, out.Detail, took, tt.wantStop)
			}
			if took < tt.minDuration {
				t.Errorf("got a run of %s on the test clock, want at least %s", took, tt.minDuration)
			}
			if tt.wantStop == toolrun.StopError && (took > tt.retryFor+time.Minute || !strings.Contains(out.Detail, "step failed")) {
				t.Errorf("got %s (%s), want the step to give up within %s", took, out.Detail, tt.retryFor)
			}
		})
	}
}
