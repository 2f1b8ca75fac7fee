package retry

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// apiError is an *anthropic.Error as the client returns it: status,
// headers and the error body whose type Type reads.
func apiError(status int, errType string, header http.Header) error {
	e := &anthropic.Error{StatusCode: status, Response: &http.Response{StatusCode: status, Header: header}}
	if err := e.UnmarshalJSON(fmt.Appendf(nil, `{"type":"error","error":{"type":%q,"message":"m"}}`, errType)); err != nil {
		panic(err)
	}
	return e
}

// TestRetryable is the classification the runner's stream retries and the
// temporal module's activities share.
func TestRetryable(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		want     bool
		wantWait time.Duration
	}{
		{"dropped connection", io.ErrUnexpectedEOF, true, 0},
		{"429 with retry-after", apiError(429, "rate_limit_error", http.Header{"Retry-After": {"3"}}), true, 3 * time.Second},
		{"529 with retry-after-ms", apiError(529, "overloaded_error", http.Header{"Retry-After-Ms": {"250"}}), true, 250 * time.Millisecond},
		{"500", apiError(500, "api_error", nil), true, 0},
		{"408", apiError(408, "timeout_error", nil), true, 0},
		{"409", apiError(409, "api_error", nil), true, 0},
		{"overloaded mid-stream (status 200)", apiError(200, "overloaded_error", nil), true, 0},
		{"api_error mid-stream", apiError(200, "api_error", nil), true, 0},
		{"invalid request mid-stream", apiError(200, "invalid_request_error", nil), false, 0},
		{"400", apiError(400, "invalid_request_error", nil), false, 0},
		{"401", apiError(401, "authentication_error", nil), false, 0},
		{"403", apiError(403, "permission_error", nil), false, 0},
		{"wrapped 400", fmt.Errorf("turn 1: %w", apiError(400, "invalid_request_error", nil)), false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, wait := Retryable(tt.err)
			if got != tt.want || wait != tt.wantWait {
				t.Errorf("Retryable = %v, %v; want %v, %v", got, wait, tt.want, tt.wantWait)
			}
		})
	}
	if _, ok := After(nil, errors.New("no response")); ok {
		t.Error("After found a wait without a response")
	}
}
