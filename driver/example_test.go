package driver_test

import (
	"context"
	"encoding/json"
	"fmt"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/toolruntest"
)

// ExampleAdvance runs a run's tool calls outside the runner, as a
// durable workflow does: Advance does everything but run tools, and each
// call runs with ExecuteCall on a runner resumed from the run's State.
func ExampleAdvance() {
	s := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "get_time", map[string]any{"zone": "UTC"})),
		toolruntest.Message(toolruntest.Text("It is noon.")),
	))
	defer s.Close()
	tools := []toolrun.Tool{toolrun.NewTool("get_time", "The time in a zone",
		func(ctx context.Context, in struct {
			Zone string `json:"zone"`
		}) (string, error) {
			return "12:00 " + in.Zone, nil
		})}
	ctx := context.Background()
	r := toolrun.New(s.Client(), anthropic.BetaMessageNewParams{
		Model: "claude-test", MaxTokens: 256,
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("What time is it?"))},
	}, tools, nil)
	for r.Result() == nil {
		calls, err := driver.Advance(ctx, r)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		state := r.State()
		for _, batch := range driver.Batches(calls) { // the calls of a batch may run at once
			for _, c := range batch {
				// Elsewhere: another goroutine, process or machine.
				worker, _ := toolrun.Resume(s.Client(), state, tools, nil)
				res, _ := driver.ExecuteCall(ctx, worker, c.Call.ID)
				fmt.Println("ran", c.Call.Name, "→", res.Content[0].OfText.Text)
				driver.SetResult(state, c.Call.ID, res)
			}
		}
		if len(calls) > 0 {
			r, _ = toolrun.Resume(s.Client(), state, tools, nil)
		}
	}
	fmt.Println(r.Result().StopReason, r.Result().Text())
	// Output:
	// ran get_time → 12:00 UTC
	// end_turn It is noon.
}

// ExampleChangeTools changes a run's tools in its State, with no runner,
// as a workflow holding the State does when the run's client declares
// other tools: get_location out, get_weather in.
func ExampleChangeTools() {
	location, _ := toolrun.NewRawTool("get_location", "Where the user is", []byte(`{"type":"object"}`),
		func(context.Context, json.RawMessage) (string, error) { return "Paris", nil })
	r := toolrun.New(anthropic.Client{}, anthropic.BetaMessageNewParams{}, nil, nil)
	if err := r.AddTools(location); err != nil {
		fmt.Println("error:", err)
		return
	}
	s := r.State()

	weather := anthropic.BetaToolParam{Name: "get_weather", Description: anthropic.String("The weather where the user is"),
		InputSchema: anthropic.BetaToolInputSchemaParam{Properties: map[string]any{}}}
	if err := driver.ChangeTools(s, []string{"get_location"}, anthropic.BetaToolUnionParam{OfTool: &weather}); err != nil {
		fmt.Println("error:", err)
		return
	}
	for _, d := range s.AddedTools() {
		fmt.Println("added:", d.OfTool.Name)
	}
	fmt.Println("removed:", s.Removed)
	// Output:
	// added: get_weather
	// removed: [get_location]
}
