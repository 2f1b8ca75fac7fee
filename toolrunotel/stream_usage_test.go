package toolrunotel_test

import (
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolrunotel"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestStreamRetryTokensOnSpans checks that the spans count what the run
// counts when a streamed response fails mid-stream: toolrun adds the failed
// attempt's reported usage to Result.Usage (it was billed) and carries it
// on the attempt's *toolrun.TurnError, which the observer adds to the chat
// span and the invoke_agent span, whether a retry answers or the attempts
// are spent and the run fails with that error.
func TestStreamRetryTokensOnSpans(t *testing.T) {
	done := toolruntest.Message(toolruntest.Text("done"))
	broken := done
	broken.Fault.StreamErrorAfter = 3 // after message_start: the stream began, its input reported
	tests := []struct {
		name    string
		replies []toolruntest.Reply
		wantErr bool
	}{
		{name: "retried", replies: []toolruntest.Reply{broken, done}},
		{name: "attempts spent", replies: []toolruntest.Reply{broken, broken}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t)
			s := toolruntest.New(t, toolruntest.Script(tt.replies...))
			obs := toolrunotel.New(toolrunotel.Options{TracerProvider: rec.tp, MeterProvider: rec.mp})
			res, err := toolrun.New(s.Client(), userParams("Hi"), nil, &toolrun.Options{
				Logger: discard(), OnEvent: obs.Observe, Stream: true,
				StreamRetry: toolrun.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
			}).Run(t.Context())
			if (err != nil) != tt.wantErr {
				t.Fatalf("Run = %q, %v; want an error: %v", res.StopReason, err, tt.wantErr)
			}
			if len(s.Requests()) != 2 {
				t.Fatalf("%d requests, want 2 (one failed attempt, one more)", len(s.Requests()))
			}
			counted := res.Usage.InputTokens + res.Usage.CacheReadInputTokens + res.Usage.CacheCreationInputTokens
			var runIn, chatIn, runOut, chatOut int64
			for _, sp := range rec.ended(t, toolrunotel.ScopeName) {
				in, _ := sp.Attrs["gen_ai.usage.input_tokens"].(int64)
				out, _ := sp.Attrs["gen_ai.usage.output_tokens"].(int64)
				switch sp.Attrs["gen_ai.operation.name"] {
				case "invoke_agent":
					runIn, runOut = in, out
				case "chat":
					chatIn, chatOut = chatIn+in, chatOut+out
				}
			}
			if billed := s.Usage(); counted != billed.InputTokens {
				t.Errorf("Result.Usage counts %d input tokens, the server billed %d", counted, billed.InputTokens)
			}
			if runIn != counted || chatIn != counted {
				t.Errorf("invoke_agent span counts %d input tokens, chat spans %d; Result.Usage counts %d (the server billed %+v)",
					runIn, chatIn, counted, s.Usage())
			}
			if runOut != res.Usage.OutputTokens || chatOut != res.Usage.OutputTokens {
				t.Errorf("invoke_agent span counts %d output tokens, chat spans %d; Result.Usage counts %d", runOut, chatOut, res.Usage.OutputTokens)
			}
		})
	}
}
