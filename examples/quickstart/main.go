// Command quickstart is a whole toolrun program that runs offline: a Go
// function as a tool, a model that calls it, and the model's answer. The
// model is toolruntest's fake Messages API with a script, so no key and no
// network are needed.
package main

import (
	"context"
	"fmt"
	"log"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// WeatherIn is the input of get_weather; its JSON Schema is inferred from it.
type WeatherIn struct {
	City string `json:"city" jsonschema:"the city name"`
}

func main() {
	weather := toolrun.NewTool("get_weather", "Current weather for a city",
		func(ctx context.Context, in WeatherIn) (string, error) {
			return "sunny, 21°C in " + in.City, nil
		})

	// A fake Messages API whose model calls get_weather, then answers.
	fake := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_01", "get_weather", map[string]string{"city": "Paris"})),
		toolruntest.Message(toolruntest.Text("It is sunny in Paris, 21°C.")),
	))
	defer fake.Close()
	client := fake.Client()

	r := toolrun.New(client, anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages: []anthropic.BetaMessageParam{
			anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("What's the weather in Paris?")),
		},
	}, []toolrun.Tool{weather}, nil)

	res, err := r.Run(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text())
	fmt.Printf("stopped: %s after %d turns; tool calls: %d, failed: %d\n", res.StopReason, res.Turns, res.ToolCalls, res.ToolFailures)
}
