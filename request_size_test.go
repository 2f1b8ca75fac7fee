package toolrun_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestLargeResultFitsRequestLimit checks that a tool result that would
// take the request past the API's 32 MB limit (a 30 MiB image, 40 MiB in
// base64, or 34 MiB of text that JSON escapes to six times as much) is cut
// to fit with a note that tells the model, streamed or
// not, and that the fake, which refuses a larger body with 413 as the API
// does, accepts what is sent.
func TestLargeResultFitsRequestLimit(t *testing.T) {
	image := []toolrun.Content{toolrun.Text("the screen:"), toolrun.Image("image/png", bytes.Repeat([]byte{0x89}, 30<<20))}
	text := []toolrun.Content{toolrun.Text("the screen: " + strings.Repeat("<", 34<<20))}
	for _, tt := range []struct {
		name    string
		stream  bool
		content []toolrun.Content
		note    string
	}{
		{"whole", false, image, "left out of this result"},
		{"streamed", true, image, "left out of this result"},
		{"text", false, text, "to keep the request within the API's 32 MB limit"},
	} {
		stream := tt.stream
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("toolu_1", "screenshot", nil)),
				toolruntest.Message(toolruntest.Text("I could not see it.")),
			))
			shot := toolrun.NewTool("screenshot", "Takes a screenshot", func(context.Context, struct{}) ([]toolrun.Content, error) {
				return tt.content, nil
			})
			// No text bound of the tool's own: the size limit alone cuts.
			// A response (streamed or not) is waited for as long as
			// the run's bound (bounded's 10 minutes), not the default 90 s:
			// the fake reads and checks a 32 MB body, which under the race
			// detector on a loaded machine takes longer than that.
			opts := &toolrun.Options{Logger: discard(), Stream: stream, MaxResultBytes: -1, Timeouts: toolrun.Timeouts{Request: 10 * time.Minute, StreamIdle: 10 * time.Minute}}
			r := toolrun.New(client(s), userParams("Look."), []toolrun.Tool{shot}, opts)
			res, err := r.Run(bounded(t))
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run = %v, %v; want end_turn", res, err)
			}
			if errs := s.Errors(); len(errs) > 0 {
				t.Fatalf("the fake refused a request: %v", errs)
			}
			reqs := s.Requests()
			if len(reqs) != 2 {
				t.Fatalf("got %d requests, want 2", len(reqs))
			}
			if n := len(reqs[1].Body); n > toolruntest.MaxRequestBytes {
				t.Errorf("second request is %d bytes, want at most %d", n, toolruntest.MaxRequestBytes)
			}
			conv := reqs[1].Conversation
			got := conv[len(conv)-1].Content[0].ResultText()
			if !strings.HasPrefix(got, "the screen:") || !strings.Contains(got, tt.note) {
				t.Errorf("the result the model saw = %.200q…, want the text and a note with %q", got, tt.note)
			}
		})
	}
}

// TestRequestTooLarge checks that a request that cannot be cut to fit (the
// caller's own message is over the limit) stops the run with
// ErrRequestTooLarge before it is sent.
func TestRequestTooLarge(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("unused"))))
	params := userParams(strings.Repeat("x", toolruntest.MaxRequestBytes))
	r := toolrun.New(client(s), params, nil, &toolrun.Options{Logger: discard()})
	res, err := r.Run(bounded(t))
	if !errors.Is(err, toolrun.ErrRequestTooLarge) {
		t.Errorf("Run error = %v, want ErrRequestTooLarge", err)
	}
	if res.StopReason != toolrun.StopError {
		t.Errorf("StopReason = %q, want %q", res.StopReason, toolrun.StopError)
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("the server got %d requests, want none", n)
	}
}

// TestFakeRefusesOversizedRequest checks that the fake answers a body over
// the API's limit with 413 request_too_large, as the API does.
func TestFakeRefusesOversizedRequest(t *testing.T) {
	s := toolruntest.New(nil, toolruntest.Script()) // the refusal is the point
	defer s.Close()
	c := s.Client()
	params := userParams(strings.Repeat("x", toolruntest.MaxRequestBytes))
	_, err := c.Beta.Messages.New(context.Background(), params)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("error = %v, want a 413", err)
	}
	if !strings.Contains(apiErr.RawJSON(), "request_too_large") {
		t.Errorf("error body = %s, want request_too_large", apiErr.RawJSON())
	}
	if n := len(s.Errors()); n != 1 {
		t.Errorf("the server recorded %d errors, want the refusal", n)
	}
}
