package transcript_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
	"github.com/toolrun/toolrun/transcript"
)

func weather(answer string) toolrun.Tool {
	return toolrun.NewTool("get_weather", "Current weather for a city", func(ctx context.Context, in struct {
		City string `json:"city"`
	}) (string, error) {
		return answer + " in " + in.City, nil
	})
}

// exampleRun records a two-turn run with the weather tool into buf.
func exampleRun(buf *bytes.Buffer, tool toolrun.Tool) {
	server := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "get_weather", map[string]string{"city": "Paris"})),
		toolruntest.Message(toolruntest.Text("It is sunny in Paris.")),
	))
	defer server.Close()

	rec := transcript.NewRecorder(buf, &transcript.RecorderOptions{Meta: map[string]string{"name": "weather"}})
	r := toolrun.New(server.Client(), anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Weather in Paris?"))},
	}, []toolrun.Tool{tool}, &toolrun.Options{
		Logger: slog.New(slog.DiscardHandler),
		// To feed other observers too, call them one after the other in a
		// func of your own.
		OnEvent: rec.Observe,
	})
	r.Run(context.Background())
}

func ExampleRecorder() {
	var buf bytes.Buffer
	exampleRun(&buf, weather("sunny"))

	t, err := transcript.Read(&buf)
	if err != nil {
		panic(err)
	}
	fmt.Println(t.Header.Format, t.Header.Version, t.Header.Meta["name"])
	for _, e := range t.Entries {
		switch e.Type {
		case transcript.TypeToolFinished:
			fmt.Printf("%d %s %s %q\n", e.Turn, e.Type, e.Tool, e.OutputText())
		case transcript.TypeRunStopped:
			fmt.Printf("%d %s %s\n", e.Turn, e.Type, e.StopReason)
		default:
			fmt.Println(e.Turn, e.Type)
		}
	}
	// Output:
	// toolrun.transcript 1 weather
	// 1 request
	// 1 response
	// 1 decision
	// 1 tool_started
	// 1 tool_finished get_weather "sunny in Paris"
	// 1 turn_finished
	// 2 request
	// 2 response
	// 2 turn_finished
	// 2 run_stopped end_turn
}

func ExampleReplay() {
	var buf bytes.Buffer
	exampleRun(&buf, weather("sunny"))
	t, err := transcript.Read(&buf)
	if err != nil {
		panic(err)
	}

	// The same run, its model turns served from the transcript, with a tool
	// that now answers otherwise.
	report, err := transcript.Replay(context.Background(), t, []toolrun.Tool{weather("rainy")}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(report.Diverged())
	fmt.Print(report)
	// Output:
	// true
	// replay DIVERGED from the recording: 1 tool calls
	// ! turn 1  toolu_1  get_weather: output differs
	//       recorded: output: "sunny in Paris"
	//       replayed: output: "rainy in Paris"
	//   stop: recorded end_turn, replayed end_turn
}

func ExampleWriteHTML() {
	var buf bytes.Buffer
	exampleRun(&buf, weather("sunny"))
	t, err := transcript.Read(&buf)
	if err != nil {
		panic(err)
	}

	var page strings.Builder
	if err := transcript.WriteHTML(&page, t); err != nil {
		panic(err)
	}
	fmt.Println(strings.Count(page.String(), `<a class="model-bar"`), "model requests,",
		strings.Count(page.String(), `<a class="tool-bar ok"`), "tool call")
	// Output:
	// 2 model requests, 1 tool call
}
