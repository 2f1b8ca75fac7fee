package temporal_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
)

// faulty returns a reply of text with fault f.
func faulty(text string, f toolruntest.Fault) toolruntest.Reply {
	r := toolruntest.Message(toolruntest.Text(text))
	r.Fault = f
	return r
}

// TestStreamFaults runs the faults of a streamed response through the
// workflow: each is retried as it is in process, first by the runner within
// the step (Options.StreamRetry), then, once those attempts are spent, by
// the step's retry policy, with the same classification; only an error that
// would fail again stops the run.
func TestStreamFaults(t *testing.T) {
	tests := []struct {
		name         string
		replies      []toolruntest.Reply
		streamRetry  toolrun.RetryPolicy
		wantStop     toolrun.StopReason
		wantDetail   string
		wantRequests int
	}{
		{
			name: "overloaded_error mid-stream, retried within the step",
			replies: []toolruntest.Reply{
				faulty("lost", toolruntest.Fault{StreamErrorAfter: 3}),
				toolruntest.Message(toolruntest.Text("Hello.")),
			},
			wantStop:     toolrun.StopEndTurn,
			wantRequests: 2,
		},
		{
			name: "overloaded_error mid-stream, retried by the step's retry policy",
			replies: []toolruntest.Reply{
				faulty("lost", toolruntest.Fault{StreamErrorAfter: 3}),
				toolruntest.Message(toolruntest.Text("Hello.")),
			},
			streamRetry:  toolrun.RetryPolicy{MaxAttempts: 1},
			wantStop:     toolrun.StopEndTurn,
			wantRequests: 2,
		},
		{
			name: "api_error mid-stream with retry-after",
			replies: []toolruntest.Reply{
				faulty("lost", toolruntest.Fault{StreamErrorAfter: 2, ErrorType: "api_error", RetryAfter: time.Millisecond}),
				toolruntest.Message(toolruntest.Text("Hello.")),
			},
			streamRetry:  toolrun.RetryPolicy{MaxAttempts: 1},
			wantStop:     toolrun.StopEndTurn,
			wantRequests: 2,
		},
		{
			name: "connection dropped mid-stream",
			replies: []toolruntest.Reply{
				faulty("lost", toolruntest.Fault{DropAfter: 3}),
				faulty("lost again", toolruntest.Fault{DropAfter: 2}),
				toolruntest.Message(toolruntest.Text("Hello.")),
			},
			streamRetry:  toolrun.RetryPolicy{MaxAttempts: 1},
			wantStop:     toolrun.StopEndTurn,
			wantRequests: 3,
		},
		{
			name: "invalid_request_error mid-stream is not retried",
			replies: []toolruntest.Reply{
				faulty("bad", toolruntest.Fault{StreamErrorAfter: 2, ErrorType: "invalid_request_error"}),
				toolruntest.Message(toolruntest.Text("Hello.")),
			},
			streamRetry:  toolrun.RetryPolicy{MaxAttempts: 1},
			wantStop:     toolrun.StopError,
			wantDetail:   "step failed",
			wantRequests: 1,
		},
		{
			name: "overloaded before the stream began",
			replies: []toolruntest.Reply{
				{Fault: toolruntest.Fault{Status: 529}},
				toolruntest.Message(toolruntest.Text("Hello.")),
			},
			wantStop:     toolrun.StopEndTurn,
			wantRequests: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(tt.replies...))
			opts := &toolrun.Options{Stream: true, StreamRetry: tt.streamRetry}
			opts.StreamRetry.InitialBackoff = 1
			env := newEnv(t, s, nil, opts)
			env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("hi"), &fastRetries))
			out := outcome(t, env)
			if out.StopReason != tt.wantStop || !strings.Contains(out.Detail, tt.wantDetail) {
				t.Errorf("got outcome %q (%s), want %q (%s)", out.StopReason, out.Detail, tt.wantStop, tt.wantDetail)
			}
			if tt.wantStop == toolrun.StopEndTurn && out.Text != "Hello." {
				t.Errorf("got text %q, want %q", out.Text, "Hello.")
			}
			if diff := cmp.Diff(tt.wantRequests, len(s.Requests())); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}
