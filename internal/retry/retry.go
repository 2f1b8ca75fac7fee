// Package retry is the one classification of failed model requests: the
// runner's stream retries and the temporal module's activities both ask it
// whether a request may be sent again, so the two retry the same faults.
package retry

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// After reads the wait the server asked for, from the error event's
// response or the streamed response's headers.
func After(resp *http.Response, err error) (time.Duration, bool) {
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) && apiErr.Response != nil {
		resp = apiErr.Response
	}
	if resp == nil {
		return 0, false
	}
	if v := resp.Header.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return time.Duration(s * float64(time.Second)), true
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(0, time.Until(t)), true
		}
	}
	return 0, false
}

// Retryable reports whether a failed model request may succeed if it is
// sent again, and how long the API asked to wait first (zero if it did not
// say): what the anthropic client itself
// retries is retryable (408, 409, 429, 5xx, a dropped connection, a
// timeout, a stream cut short or idle), and so is an error event in a
// stream that began (status 200) whose type is overloaded_error,
// api_error, rate_limit_error or timeout_error. A bad request, a bad key or
// a refused permission is not.
func Retryable(err error) (bool, time.Duration) {
	var api *anthropic.Error
	if !errors.As(err, &api) {
		return true, 0
	}
	wait, _ := After(nil, err)
	switch s := api.StatusCode; {
	case s == http.StatusRequestTimeout, s == http.StatusConflict, s == http.StatusTooManyRequests, s >= 500:
		return true, wait
	case s >= 200 && s < 300:
		switch api.Type() {
		case "overloaded_error", "api_error", "rate_limit_error", "timeout_error", "":
			return true, wait
		}
	}
	return false, 0
}
