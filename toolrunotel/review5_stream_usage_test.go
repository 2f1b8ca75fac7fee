//go:build review5

package toolrunotel_test

import (
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolrunotel"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestReview5StreamRetryTokensOnSpans checks that the spans count what the
// run counts when a streamed response fails mid-stream and is retried:
// toolrun now adds the failed attempt's reported usage to Result.Usage (it
// was billed), but the observer counts tokens only from ResponseReceived,
// so the invoke_agent span's gen_ai.usage.input_tokens, and the chat spans,
// fall short of Result.Usage and of what the server billed, though the
// package doc says the token counts are those billed.
func TestReview5StreamRetryTokensOnSpans(t *testing.T) {
	rec := newRecorder(t)
	done := toolruntest.Message(toolruntest.Text("done"))
	broken := done
	broken.Fault.StreamErrorAfter = 3 // after message_start: the stream began, its input reported
	s := toolruntest.New(t, toolruntest.Script(broken, done))
	obs := toolrunotel.New(toolrunotel.Options{TracerProvider: rec.tp, MeterProvider: rec.mp})
	res, err := toolrun.New(s.Client(), userParams("Hi"), nil, &toolrun.Options{
		Logger: discard(), OnEvent: obs.Observe, Stream: true,
		StreamRetry: toolrun.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
	}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	counted := res.Usage.InputTokens + res.Usage.CacheReadInputTokens + res.Usage.CacheCreationInputTokens
	var runIn, chatIn int64
	for _, sp := range rec.ended(t, toolrunotel.ScopeName) {
		in, _ := sp.Attrs["gen_ai.usage.input_tokens"].(int64)
		switch sp.Attrs["gen_ai.operation.name"] {
		case "invoke_agent":
			runIn = in
		case "chat":
			chatIn += in
		}
	}
	if len(s.Requests()) != 2 {
		t.Fatalf("%d requests, want 2 (one failed attempt, one retry)", len(s.Requests()))
	}
	if runIn != counted || chatIn != counted {
		t.Errorf("invoke_agent span counts %d input tokens, chat spans %d; Result.Usage counts %d (the server billed %+v)",
			runIn, chatIn, counted, s.Usage())
	}
}
