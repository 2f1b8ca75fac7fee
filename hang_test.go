package toolrun_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// hangingAPI is an in-memory Messages API for tests in a synctest bubble,
// where loopback sockets would keep the fake clock from moving: it answers
// every request by answer, and counts the attempts.
type hangingAPI struct {
	attempts atomic.Int32
	answer   func(*http.Request) (*http.Response, error)
}

func (h *hangingAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	h.attempts.Add(1)
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return h.answer(req)
}

// stalled never answers: the model hangs before its headers.
func stalled(req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// rateLimited answers 429 with a retry-after of after.
func rateLimited(after string) func(*http.Request) (*http.Response, error) {
	return func(req *http.Request) (*http.Response, error) {
		return &http.Response{
			StatusCode: http.StatusTooManyRequests,
			Header:     http.Header{"Content-Type": {"application/json"}, "Retry-After": {after}},
			Body:       io.NopCloser(strings.NewReader(`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)),
			Request:    req,
		}, nil
	}
}

// TestNothingHangs runs a turn against a model that stalls, or that asks
// for a day's pause, through the real client in fake time: each run ends
// with a typed error within the documented bound (Timeouts.Request, which
// is StreamIdle's 90 seconds by default; Timeouts.RetryAfter, 1 minute),
// after one attempt, whatever the client's own retries would have done.
func TestNothingHangs(t *testing.T) {
	tests := []struct {
		name     string
		answer   func(*http.Request) (*http.Response, error)
		stream   bool
		timeouts toolrun.Timeouts
		deadline time.Duration // of the run's context, if non-zero
		check    func(t *testing.T, err error)
		within   time.Duration
	}{
		{
			name: "stalled response not streamed", answer: stalled, within: 90 * time.Second,
			check: func(t *testing.T, err error) {
				var te *toolrun.TimeoutError
				if !errors.As(err, &te) || !te.Request || te.After != 90*time.Second {
					t.Errorf("err = %v, want a *TimeoutError of the request after 90s", err)
				}
			},
		},
		{
			name: "stalled response, Timeouts.Request set", answer: stalled, within: 20 * time.Second,
			timeouts: toolrun.Timeouts{Request: 20 * time.Second},
			check: func(t *testing.T, err error) {
				var te *toolrun.TimeoutError
				if !errors.As(err, &te) || te.After != 20*time.Second {
					t.Errorf("err = %v, want a *TimeoutError after 20s", err)
				}
			},
		},
		{name: "retry-after 86400, not streamed", answer: rateLimited("86400"), check: retryAfter(86400*time.Second, time.Minute)},
		{name: "retry-after 86400, streamed", answer: rateLimited("86400"), stream: true, check: retryAfter(86400*time.Second, time.Minute)},
		{
			name: "retry-after past the run's deadline", answer: rateLimited("30"), deadline: 10 * time.Second,
			check: retryAfter(30*time.Second, 0),
		},
		{
			name: "retry-after past a cap of 5s", answer: rateLimited("30"), stream: true,
			timeouts: toolrun.Timeouts{RetryAfter: 5 * time.Second},
			check:    retryAfter(30*time.Second, 5*time.Second),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := &hangingAPI{answer: tt.answer}
				c := anthropic.NewClient(option.WithAPIKey("test"), option.WithBaseURL("http://api.invalid"),
					option.WithHTTPClient(&http.Client{Transport: api}))
				r := toolrun.New(c, userParams("Hello?"), nil, &toolrun.Options{
					Logger: discard(), Stream: tt.stream, Timeouts: tt.timeouts,
				})
				ctx := t.Context()
				if tt.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.deadline)
					defer cancel()
				}
				start := time.Now()
				res, err := r.Run(ctx)
				took := time.Since(start)
				var turnErr *toolrun.TurnError
				if !errors.As(err, &turnErr) || res == nil {
					t.Fatalf("Run = %v, %v; want a Result and a *TurnError", res, err)
				}
				tt.check(t, err)
				if took > tt.within {
					t.Errorf("the run took %s, want at most %s", took, tt.within)
				}
				if n := api.attempts.Load(); n != 1 {
					t.Errorf("%d attempts, want 1", n)
				}
			})
		})
	}
}

// retryAfter checks that err is a *RetryAfterError naming after and cap.
func retryAfter(after, cap time.Duration) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var ra *toolrun.RetryAfterError
		if !errors.As(err, &ra) || ra.After != after || ra.Cap != cap {
			t.Errorf("err = %v, want a *RetryAfterError of %s (cap %s)", err, after, cap)
			return
		}
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
			t.Errorf("err = %v, want it to wrap the 429", err)
		}
	}
}

// TestRetryAfterWithinCapWaited checks that a retry-after within the cap is
// still waited by the client, and the run goes on.
func TestRetryAfterWithinCapWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi."}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":2}}`
		var api *hangingAPI
		api = &hangingAPI{answer: func(req *http.Request) (*http.Response, error) {
			if api.attempts.Load() == 1 {
				return rateLimited("30")(req)
			}
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(ok)), Request: req}, nil
		}}
		c := anthropic.NewClient(option.WithAPIKey("test"), option.WithBaseURL("http://api.invalid"),
			option.WithHTTPClient(&http.Client{Transport: api}))
		r := toolrun.New(c, userParams("Hello?"), nil, &toolrun.Options{Logger: discard(), NoThread: true})
		start := time.Now()
		res, err := r.Run(t.Context())
		if err != nil || res.StopReason != toolrun.StopEndTurn {
			t.Fatalf("Run = %v, %v; want end_turn", res, err)
		}
		if took := time.Since(start); took != 30*time.Second {
			t.Errorf("the run took %s, want the 30s the server asked for", took)
		}
	})
}

// TestStreamRetryAfterCapped checks toolrun's own retry of a stream that
// failed after it began: an error event whose response asks for a day's
// pause ends the turn with a *RetryAfterError, and is not sent again.
func TestStreamRetryAfterCapped(t *testing.T) {
	faulty := toolruntest.Message(toolruntest.Text("It is"), toolruntest.Text(" sunny."))
	faulty.Fault = toolruntest.Fault{StreamErrorAfter: 2, RetryAfter: 24 * time.Hour}
	s := toolruntest.New(t, toolruntest.Script(faulty))
	r := toolrun.New(client(s), userParams("Weather?"), nil, &toolrun.Options{
		Logger: discard(), Stream: true, StreamRetry: toolrun.RetryPolicy{InitialBackoff: time.Millisecond},
	})
	_, err := r.Run(bounded(t))
	var ra *toolrun.RetryAfterError
	if !errors.As(err, &ra) || ra.After != 24*time.Hour || ra.Cap != time.Minute {
		t.Errorf("err = %v, want a *RetryAfterError of 24h (cap 1m)", err)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// sseReply is a whole streamed response that says "Hi.".
const sseReply = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi.\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// stallsThenAnswers is an in-memory streamed Messages API whose first
// stalls attempts send their headers and then nothing, and whose later
// ones send sseReply; stalls < 0 stalls every attempt.
type stallsThenAnswers struct {
	stalls int
	// dropAfter, if positive, makes the first attempt send nothing for
	// this long and then drop the connection, instead of stalling.
	dropAfter time.Duration
	attempts  atomic.Int32
}

func (s *stallsThenAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	n := int(s.attempts.Add(1))
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	var body io.ReadCloser = io.NopCloser(strings.NewReader(sseReply))
	if s.stalls < 0 || n <= s.stalls {
		body = &stalledBody{ctx: req.Context()}
	}
	if n == 1 && s.dropAfter > 0 {
		body = &droppedBody{after: s.dropAfter}
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Request: req, Body: body}, nil
}

// droppedBody sends nothing for after, then fails as a dropped
// connection does.
type droppedBody struct{ after time.Duration }

func (b *droppedBody) Read(p []byte) (int, error) {
	time.Sleep(b.after)
	return 0, io.ErrUnexpectedEOF
}

func (b *droppedBody) Close() error { return nil }

// TestStreamStallsBoundedInAll checks Timeouts.StreamIdleTotal in fake
// time: a streamed model that stalls on every attempt ends the turn with a
// *TimeoutError whose Total is set, within the total, however many
// attempts StreamRetry allows; a stall and then a good attempt still
// answers; and no wait between attempts outlives the run's context,
// Budget.WallTime or the total.
func TestStreamStallsBoundedInAll(t *testing.T) {
	tests := []struct {
		name      string
		stalls    int
		dropAfter time.Duration // the first attempt's silence before it drops, if non-zero
		opts      toolrun.Options
		deadline  time.Duration // of the run's context, if non-zero
		wantStop  toolrun.StopReason
		wantTotal time.Duration // the *TimeoutError's Total; 0 for none expected
		wantErr   error         // errors.Is the run's error, if non-nil
		attempts  int32
		within    time.Duration // the run's time at most
		atLeast   time.Duration // and at least
	}{
		{
			name: "every attempt stalls, defaults", stalls: -1,
			wantStop: toolrun.StopError, wantTotal: 2 * time.Minute, attempts: 2,
			within: 2 * time.Minute, atLeast: 2*time.Minute - time.Second,
		},
		{
			name: "every attempt stalls, five attempts allowed", stalls: -1,
			opts: toolrun.Options{
				Timeouts:    toolrun.Timeouts{StreamIdle: 10 * time.Second, StreamIdleTotal: 25 * time.Second},
				StreamRetry: toolrun.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Second},
			},
			// 10 s, a wait of up to 1 s, 10 s, a wait of up to 2 s, and the
			// 2 to 3 s left.
			wantStop: toolrun.StopError, wantTotal: 25 * time.Second, attempts: 3,
			within: 25 * time.Second, atLeast: 24 * time.Second,
		},
		{
			// The first attempt's 80 s of silence count: the second has the
			// 40 s left (less the wait), not a whole StreamIdle.
			name: "a silent drop, then stalls", stalls: -1, dropAfter: 80 * time.Second,
			opts:     toolrun.Options{StreamRetry: toolrun.RetryPolicy{MaxAttempts: 5}},
			wantStop: toolrun.StopError, wantTotal: 2 * time.Minute, attempts: 2,
			within: 2 * time.Minute, atLeast: 2*time.Minute - time.Second,
		},
		{
			name: "a stall, then a good attempt", stalls: 1,
			wantStop: toolrun.StopEndTurn, attempts: 2,
			within: 91 * time.Second, atLeast: 90 * time.Second,
		},
		{
			name: "a wait longer than what is left of the total is not waited", stalls: -1,
			opts:     toolrun.Options{StreamRetry: toolrun.RetryPolicy{InitialBackoff: 5 * time.Minute, MaxBackoff: 5 * time.Minute}},
			wantStop: toolrun.StopError, wantTotal: 2 * time.Minute, attempts: 1,
			within: 90 * time.Second, atLeast: 90 * time.Second,
		},
		{
			name: "the wait ends with Budget.WallTime", stalls: -1,
			opts: toolrun.Options{
				Timeouts:    toolrun.Timeouts{StreamIdle: 10 * time.Second, StreamIdleTotal: time.Hour},
				StreamRetry: toolrun.RetryPolicy{InitialBackoff: 40 * time.Second, MaxBackoff: 40 * time.Second},
				Budget:      toolrun.Budget{WallTime: 20 * time.Second},
			},
			wantStop: toolrun.StopBudget, attempts: 1,
			within: 20 * time.Second, atLeast: 20 * time.Second,
		},
		{
			name: "the wait ends with the run's context", stalls: -1,
			opts: toolrun.Options{
				Timeouts:    toolrun.Timeouts{StreamIdle: 10 * time.Second, StreamIdleTotal: time.Hour},
				StreamRetry: toolrun.RetryPolicy{InitialBackoff: 40 * time.Second, MaxBackoff: 40 * time.Second},
			},
			deadline: 15 * time.Second, wantStop: toolrun.StopCanceled, wantErr: context.DeadlineExceeded, attempts: 1,
			within: 15 * time.Second, atLeast: 15 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := &stallsThenAnswers{stalls: tt.stalls, dropAfter: tt.dropAfter}
				c := anthropic.NewClient(option.WithAPIKey("test"), option.WithBaseURL("http://api.invalid"),
					option.WithHTTPClient(&http.Client{Transport: api}))
				opts := tt.opts
				opts.Logger, opts.Stream = discard(), true
				ctx := t.Context()
				if tt.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.deadline)
					defer cancel()
				}
				start := time.Now()
				res, err := toolrun.New(c, userParams("Hello?"), nil, &opts).Run(ctx)
				took := time.Since(start)
				if res == nil || res.StopReason != tt.wantStop {
					t.Fatalf("Run = %v, %v; want stop %q", res, err, tt.wantStop)
				}
				var te *toolrun.TimeoutError
				switch {
				case tt.wantStop == toolrun.StopEndTurn && err != nil:
					t.Errorf("Run's error = %v, want nil", err)
				case tt.wantTotal > 0 && (!errors.As(err, &te) || te.Total != tt.wantTotal):
					t.Errorf("Run's error = %v, want a *TimeoutError with Total %s", err, tt.wantTotal)
				case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
					t.Errorf("Run's error = %v, want %v", err, tt.wantErr)
				}
				if took > tt.within || took < tt.atLeast {
					t.Errorf("the run took %s, want %s to %s", took, tt.atLeast, tt.within)
				}
				if n := api.attempts.Load(); n != tt.attempts {
					t.Errorf("%d attempts, want %d", n, tt.attempts)
				}
			})
		})
	}
}
