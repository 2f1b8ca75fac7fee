package toolrunotel

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
)

// TestRequestErrorType: a request that timed out and a stream that sent
// nothing for Timeouts.StreamIdle (a *toolrun.TimeoutError in the
// *toolrun.TurnError) are both error.type "timeout", not "_OTHER".
func TestRequestErrorType(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&toolrun.TurnError{Turn: 1, Attempt: 2, Events: 3, Err: &toolrun.TimeoutError{After: time.Minute}}, "timeout"},
		{&toolrun.TurnError{Turn: 1, Attempt: 1, Err: fmt.Errorf("post: %w", context.DeadlineExceeded)}, "timeout"},
		{&toolrun.TurnError{Turn: 1, Attempt: 1, Err: fmt.Errorf("connection reset")}, "_OTHER"},
	} {
		if got := runErrorType(tt.err); got != tt.want {
			t.Errorf("runErrorType(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
