// Command streaming prints a toolrun run live in the terminal: the model's
// text as it streams in, each tool call once its response is whole, the
// tools running in parallel, their results, and how the run ended.
//
// Without ANTHROPIC_API_KEY the model is a scripted one on a local fake
// server that streams slowly, so the example runs offline; with it, the same
// tool and prompt go to the Anthropic API.
//
//	go run ./examples/streaming                # offline, 40ms between events
//	go run ./examples/streaming -delay 150ms   # slower still
//	go run ./examples/streaming -fault         # the first response breaks mid-stream and is retried
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

func main() {
	delay := flag.Duration("delay", 40*time.Millisecond, "the wait before each streamed event of the offline model")
	fault := flag.Bool("fault", false, "break the offline model's first response mid-stream, to show the retry")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	live := os.Getenv("ANTHROPIC_API_KEY") != ""
	res, err := run(ctx, os.Stdout, os.Stderr, config{live: live, delay: *delay, fault: *fault})
	if err != nil {
		fmt.Fprintln(os.Stderr, "streaming:", err)
		stop()
		os.Exit(1)
	}
	if res.StopReason != toolrun.StopEndTurn {
		stop()
		os.Exit(1)
	}
}

// config says how to run the example.
type config struct {
	live  bool          // use the Anthropic API, not the offline script
	delay time.Duration // between the offline model's events
	fault bool          // break the offline model's first response
}

const prompt = "What's the weather in Paris and in Tokyo right now?"

type weatherIn struct {
	City string `json:"city" jsonschema:"the city name"`
}

// weather is the example's tool. It takes a while, longer for far-away
// cities, so that the calls running in parallel show.
func weather() toolrun.Tool {
	return toolrun.NewTool("get_weather", "Reports the current weather in a city.",
		func(ctx context.Context, in weatherIn) (string, error) {
			wait := 300 * time.Millisecond
			if in.City == "Tokyo" {
				wait = 600 * time.Millisecond
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return "", ctx.Err()
			}
			switch in.City {
			case "Paris":
				return "Paris: 21°C, sunny, light wind from the west", nil
			case "Tokyo":
				return "Tokyo: 17°C, light rain, humidity 84%", nil
			}
			return in.City + ": 15°C, overcast", nil
		})
}

// script is the model's side of the offline run, streamed with delay
// between events; with fault, the first response breaks after its first
// tool call and is streamed again.
func script(delay time.Duration, fault bool) []toolruntest.Reply {
	calls := toolruntest.Message(
		toolruntest.Text("I'll look up both cities at once."),
		toolruntest.ToolUse("toolu_01", "get_weather", map[string]any{"city": "Paris"}),
		toolruntest.ToolUse("toolu_02", "get_weather", map[string]any{"city": "Tokyo"}),
	)
	calls.Fault.EventDelay = delay
	answer := toolruntest.Message(toolruntest.Text(
		"Right now Paris is sunny at 21°C with a light westerly wind, " +
			"while Tokyo is cooler at 17°C with light rain and high humidity. " +
			"Take sunglasses to Paris and an umbrella to Tokyo."))
	answer.Fault.EventDelay = delay
	if !fault {
		return []toolruntest.Reply{calls, answer}
	}
	broken := calls
	// message_start, ping, the text block (start, three deltas, stop), the
	// first tool_use block (start, deltas, stop) and the second's start.
	broken.Fault.StreamErrorAfter = 12
	return []toolruntest.Reply{broken, calls, answer}
}

// run runs the example, printing the run to out and warnings to errOut.
func run(ctx context.Context, out, errOut io.Writer, cfg config) (*toolrun.Result, error) {
	var client anthropic.Client
	if cfg.live {
		client = anthropic.NewClient() // reads ANTHROPIC_API_KEY
	} else {
		s := toolruntest.New(nil, toolruntest.Script(script(cfg.delay, cfg.fault)...))
		defer s.Close()
		client = s.Client()
	}
	r := toolrun.New(client, anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(prompt))},
	}, []toolrun.Tool{weather()}, &toolrun.Options{
		Logger:      slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelError})),
		Stream:      true,
		StreamRetry: toolrun.RetryPolicy{InitialBackoff: 200 * time.Millisecond},
	})
	fmt.Fprintf(out, "user: %s\n", prompt)
	start := time.Now()
	since := func() string { return fmt.Sprintf("%5.2fs", time.Since(start).Seconds()) }
	midLine := false // text was printed and the line not ended
	newline := func() {
		if midLine {
			fmt.Fprintln(out)
			midLine = false
		}
	}
	for e, err := range r.Events(ctx) {
		if err != nil {
			newline()
			return r.Result(), err
		}
		switch e := e.(type) {
		case toolrun.RequestSent:
			if e.Attempt > 1 { // a stream asked for again: drop what it showed
				newline()
				var te *toolrun.TurnError
				events := 0
				if errors.As(e.Err, &te) {
					events = te.Events
				}
				fmt.Fprintf(out, "%s   ✗ the response broke off after %d events; discarded it and retried after %s\n",
					since(), events, e.Delay.Round(time.Millisecond))
			}
			fmt.Fprintf(out, "%s claude: ", since())
			midLine = true
		case toolrun.Delta:
			fmt.Fprint(out, e.Text)
		case toolrun.ToolDecided:
			newline()
			fmt.Fprintf(out, "%s   → %s %s\n", since(), e.Call.Name, e.Call.Input)
		case toolrun.ToolStarted:
			fmt.Fprintf(out, "%s     %s started\n", since(), e.Call.ID)
		case toolrun.ResponseReceived:
			newline()
			fmt.Fprintf(out, "%s   (response complete: %s)\n", since(), e.Message.StopReason)
		case toolrun.ToolFinished:
			fmt.Fprintf(out, "%s   ← %s: %s\n", since(), e.Result.Call.ID, text(e.Result))
		case toolrun.RunStopped:
			newline()
			res := e.Result
			fmt.Fprintf(out, "%s stopped: %s after %d turns, %d tool calls, %d input and %d output tokens\n",
				since(), res.StopReason, res.Turns, res.ToolCalls, res.Usage.InputTokens, res.Usage.OutputTokens)
		}
	}
	return r.Result(), nil
}

// text returns a result's text, or its error.
func text(res *toolrun.ToolResult) string {
	if errors.Is(res.Err, toolrun.ErrInterrupted) {
		return "cancelled, as its response broke off"
	}
	if res.Err != nil {
		return "error: " + res.Err.Error()
	}
	var parts []string
	for _, c := range res.Content {
		if c.OfText != nil {
			parts = append(parts, c.OfText.Text)
		}
	}
	return strings.Join(parts, " ")
}
