// Command from-sdk is a program written for the anthropic SDK's
// BetaToolRunner, moved over to toolrun line for line. Both versions are
// here, side by side, with the same tools: run it to see that they give
// the model the same tools and get the same answer.
//
// The tools stay as they were written for the SDK: a struct tagged in the
// SDK's dialect (`jsonschema:"required,description=..."`) goes to
// toolrun.NewTool unchanged, and an anthropic.BetaTool built by
// toolrunner.NewBetaToolFromJSONSchema goes to toolrun.NewSDKTool.
//
// Without ANTHROPIC_API_KEY the model is a scripted one on a local fake
// server, so the example runs offline; with it, both go to the Anthropic API.
//
//	go run ./examples/from-sdk
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/toolrunner"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

func main() {
	live := os.Getenv("ANTHROPIC_API_KEY") != ""
	if err := run(context.Background(), os.Stdout, live); err != nil {
		fmt.Fprintln(os.Stderr, "from-sdk:", err)
		os.Exit(1)
	}
}

// weatherIn is the input of get_weather, tagged as the SDK's tools are.
type weatherIn struct {
	City  string `json:"city" jsonschema:"required,description=the city name"`
	Units string `json:"units,omitempty" jsonschema:"enum=celsius,enum=fahrenheit"`
}

func weather(ctx context.Context, in weatherIn) (string, error) {
	if in.Units == "fahrenheit" {
		return in.City + ": 70°F, sunny", nil
	}
	return in.City + ": 21°C, sunny", nil
}

// timeIn is the input of local_time.
type timeIn struct {
	City string `json:"city" jsonschema:"required,description=the city name"`
}

// localTime is a tool as the SDK's runner takes it: an anthropic.BetaTool.
func localTime() (anthropic.BetaTool, error) {
	return toolrunner.NewBetaToolFromJSONSchema("local_time", "The local time in a city",
		func(ctx context.Context, in timeIn) (anthropic.BetaToolResultBlockParamContentUnion, error) {
			return anthropic.BetaToolResultBlockParamContentUnion{
				OfText: &anthropic.BetaTextBlockParam{Text: in.City + ": 14:05"},
			}, nil
		})
}

const prompt = "What's the weather and the local time in Paris?"

func params() anthropic.BetaMessageNewParams {
	return anthropic.BetaMessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(prompt))},
	}
}

// withSDK is the program as written for the SDK's runner.
func withSDK(ctx context.Context, client anthropic.Client) (string, error) {
	getWeather, err := toolrunner.NewBetaToolFromJSONSchema("get_weather", "Current weather for a city",
		func(ctx context.Context, in weatherIn) (anthropic.BetaToolResultBlockParamContentUnion, error) {
			s, err := weather(ctx, in)
			return anthropic.BetaToolResultBlockParamContentUnion{OfText: &anthropic.BetaTextBlockParam{Text: s}}, err
		})
	if err != nil {
		return "", err
	}
	clock, err := localTime()
	if err != nil {
		return "", err
	}
	runner := client.Beta.Messages.NewToolRunner([]anthropic.BetaTool{getWeather, clock}, anthropic.BetaToolRunnerParams{
		BetaMessageNewParams: params(),
		MaxIterations:        10,
	})
	msg, err := runner.RunToCompletion(ctx)
	if err != nil {
		return "", err
	}
	return text(msg), nil
}

// withToolrun is the same program on toolrun, line for line.
func withToolrun(ctx context.Context, client anthropic.Client) (string, error) {
	// The tool function returns what it computes; toolrun makes the block.
	getWeather := toolrun.NewTool("get_weather", "Current weather for a city", weather)
	// An SDK tool, kept as it is.
	sdkClock, err := localTime()
	if err != nil {
		return "", err
	}
	clock, err := toolrun.NewSDKTool(sdkClock)
	if err != nil {
		return "", err
	}
	r := toolrun.New(client, params(), []toolrun.Tool{getWeather, clock}, &toolrun.Options{
		MaxTurns: 10, // BetaToolRunnerParams.MaxIterations
		Logger:   slog.New(slog.DiscardHandler),
	})
	res, err := r.Run(ctx) // runner.RunToCompletion(ctx)
	if err != nil {
		return "", err
	}
	return text(res.Message), nil
}

// script is the offline model: both tools in one turn, then the answer.
func script() []toolruntest.Reply {
	return []toolruntest.Reply{
		toolruntest.Message(
			toolruntest.ToolUse("toolu_01", "get_weather", map[string]any{"city": "Paris"}),
			toolruntest.ToolUse("toolu_02", "local_time", map[string]any{"city": "Paris"}),
		),
		toolruntest.Message(toolruntest.Text("In Paris it is 21°C and sunny, and the time is 14:05.")),
	}
}

// run runs both versions and prints what each answered.
func run(ctx context.Context, out io.Writer, live bool) error {
	for _, v := range []struct {
		name string
		run  func(context.Context, anthropic.Client) (string, error)
	}{
		{"BetaToolRunner", withSDK},
		{"toolrun", withToolrun},
	} {
		var client anthropic.Client
		if live {
			client = anthropic.NewClient() // reads ANTHROPIC_API_KEY
		} else {
			s := toolruntest.New(nil, toolruntest.Script(script()...))
			defer s.Close()
			client = s.Client()
		}
		answer, err := v.run(ctx, client)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		fmt.Fprintf(out, "%s: %s\n", v.name, answer)
	}
	return nil
}

// text is the text of msg.
func text(msg *anthropic.BetaMessage) string {
	var s string
	for _, b := range msg.Content {
		if b.Type == "text" {
			s += b.Text
		}
	}
	return s
}
