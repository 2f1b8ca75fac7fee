package toolruntest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// TestEventDelayCancel checks that a handler waiting out an EventDelay ends
// as soon as its client goes away, without help from Close.
func TestEventDelayCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream bool
	}{
		{"stream", true},
		{"json", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			entered := make(chan struct{})
			s := New(nil, Options{Func: func(*Request) Reply {
				close(entered)
				return Reply{
					Content: []Block{Text("Never")},
					Fault:   Fault{EventDelay: time.Hour},
				}
			}})
			defer s.Close()
			ctx, cancel := context.WithCancel(t.Context())
			params := anthropic.BetaMessageNewParams{
				Model:     "claude-sonnet-4-5",
				MaxTokens: 1024,
				Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Hi"))},
			}
			client := s.Client()
			go func() {
				<-entered
				cancel()
			}()
			var err error
			if tc.stream {
				stream := client.Beta.Messages.NewStreaming(ctx, params)
				for stream.Next() {
				}
				err = stream.Err()
				stream.Close()
			} else {
				_, err = client.Beta.Messages.New(ctx, params)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("got error %v, want context.Canceled", err)
			}

			// The handler must end on its own, long before the hour is up.
			ended := make(chan struct{})
			go func() {
				s.serving.Wait()
				close(ended)
			}()
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Fatal("handler still waiting after its client went away")
			}
		})
	}
}
