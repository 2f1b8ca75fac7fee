package toolrunotel_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolrunotel"
	"github.com/toolrun/toolrun/toolruntest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The spans of a run with one tool call. An application would configure
// the OpenTelemetry SDK with an exporter; here the spans are kept in memory
// and the model is the fake server of toolruntest.
func Example() {
	s := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "get_weather", map[string]any{"city": "Paris"})),
		toolruntest.Message(toolruntest.Text("It is sunny in Paris.")),
	))
	defer s.Close()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))

	type weatherIn struct {
		City string `json:"city"`
	}
	weather := toolrun.NewTool("get_weather", "Current weather for a city",
		func(ctx context.Context, in weatherIn) (string, error) { return "sunny in " + in.City, nil })

	obs := toolrunotel.New(toolrunotel.Options{TracerProvider: tp, AgentName: "weather-bot"})
	r := toolrun.New(s.Client(toolrunotel.ClientOptions()...), anthropic.BetaMessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Weather in Paris?"))},
	}, []toolrun.Tool{weather}, &toolrun.Options{
		OnEvent: obs.Observe,
		Logger:  slog.New(slog.DiscardHandler),
	})
	if _, err := r.Run(context.Background()); err != nil {
		log.Fatal(err)
	}

	// The run span ends last; its children in the order they ended.
	ended := spans.Ended()
	fmt.Println(ended[len(ended)-1].Name())
	for _, span := range ended[:len(ended)-1] {
		fmt.Println("  " + span.Name())
	}
	// Output:
	// invoke_agent weather-bot
	//   chat claude-sonnet-4-5
	//   execute_tool get_weather
	//   chat claude-sonnet-4-5
}
