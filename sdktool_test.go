package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/toolrunner"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// forecastIn is an input struct written for the SDK's runner, in its tag
// dialect.
type forecastIn struct {
	City  string `json:"city" jsonschema:"required,description=the city name"`
	Days  int    `json:"days" jsonschema:"required,minimum=1,maximum=7"`
	Units string `json:"units,omitempty" jsonschema:"enum=celsius,enum=fahrenheit"`
	Place struct {
		Country string `json:"country" jsonschema_description:"ISO 3166 code"`
	} `json:"place"`
}

func forecast(ctx context.Context, in forecastIn) (string, error) {
	return fmt.Sprintf("%d days of sun in %s", in.Days, in.City), nil
}

// sdkForecast is the same tool as the SDK's runner builds it.
func sdkForecast(t *testing.T) anthropic.BetaTool {
	t.Helper()
	tool, err := toolrunner.NewBetaToolFromJSONSchema("forecast", "The forecast for a city",
		func(ctx context.Context, in forecastIn) (anthropic.BetaToolResultBlockParamContentUnion, error) {
			if in.City == "Atlantis" {
				return anthropic.BetaToolResultBlockParamContentUnion{}, errors.New("no such city")
			}
			s, _ := forecast(ctx, in)
			return anthropic.BetaToolResultBlockParamContentUnion{OfText: &anthropic.BetaTextBlockParam{Text: s}}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// forecastCalls is a turn with a valid call, a call whose input breaks the
// schema (days above its maximum, no city), and a call the tool refuses,
// then an answer.
var forecastCalls = []toolruntest.Reply{
	toolruntest.Message(
		toolruntest.ToolUse("ok", "forecast", map[string]any{"city": "Oslo", "days": 3}),
		toolruntest.ToolUse("bad", "forecast", map[string]any{"days": 9}),
		toolruntest.ToolUse("refused", "forecast", map[string]any{"city": "Atlantis", "days": 1}),
	),
	toolruntest.Message(toolruntest.Text("Sunny.")),
}

// sentSchema returns the input schema of the tool named name in the first
// request s received, as the API would see it.
func sentSchema(t *testing.T, s *toolruntest.Server, name string) map[string]any {
	t.Helper()
	var body struct {
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(s.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	for _, tool := range body.Tools {
		if tool.Name == name {
			return tool.InputSchema
		}
	}
	t.Fatalf("no tool %q in the request", name)
	return nil
}

// sdkSchema returns the input schema the SDK's runner sends for tool, as
// a JSON value, without its $id and $schema: unknown to the API, they
// differ with the way the tool was built (the $id names the Go package)
// and toolrun leaves $schema out of what it sends.
func sdkSchema(t *testing.T, tool anthropic.BetaTool) map[string]any {
	t.Helper()
	raw, err := json.Marshal(tool.InputSchema())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return withoutIDs(m)
}

func withoutIDs(m map[string]any) map[string]any {
	delete(m, "$id")
	delete(m, "$schema")
	return m
}

// TestSDKTools runs the tools a program written for the SDK's runner has,
// brought over each way, through a Runner and the fake server: each sends
// the schema the SDK would have sent, validates the model's input against
// it, and answers each call as the SDK's runner would.
func TestSDKTools(t *testing.T) {
	want := map[string]string{
		"ok":      "3 days of sun in Oslo",
		"refused": "no such city",
	}
	tests := []struct {
		name string
		tool func(t *testing.T) toolrun.Tool
	}{
		{"NewTool with the SDK's tags", func(t *testing.T) toolrun.Tool {
			return toolrun.NewTool("forecast", "The forecast for a city", func(ctx context.Context, in forecastIn) (string, error) {
				if in.City == "Atlantis" {
					return "", errors.New("no such city")
				}
				return forecast(ctx, in)
			})
		}},
		{"NewSDKTool", func(t *testing.T) toolrun.Tool {
			tool, err := toolrun.NewSDKTool(sdkForecast(t))
			if err != nil {
				t.Fatal(err)
			}
			return tool
		}},
		{"NewRawTool of a BetaToolParam", func(t *testing.T) toolrun.Tool {
			sdk := sdkForecast(t)
			p := anthropic.BetaToolParam{Name: sdk.Name(), Description: anthropic.String(sdk.Description()), InputSchema: sdk.InputSchema()}
			schema, err := json.Marshal(p.InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			tool, err := toolrun.NewRawTool(p.Name, p.Description.Value, schema, sdk.Execute)
			if err != nil {
				t.Fatal(err)
			}
			return tool
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(forecastCalls...))
			r := toolrun.New(s.Client(), userParams("Forecast?"), []toolrun.Tool{tt.tool(t)},
				&toolrun.Options{Logger: slog.New(slog.DiscardHandler)})
			if _, err := r.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(sdkSchema(t, sdkForecast(t)), withoutIDs(sentSchema(t, s, "forecast"))); diff != "" {
				t.Errorf("schema sent (-the SDK's +got):\n%s", diff)
			}
			got := toolruntest.ResultTexts(r.Messages())
			bad := got["bad"]
			delete(got, "bad")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			// The invalid call never reached the tool: the model is told
			// what the schema wants.
			if !strings.Contains(bad, "city") || !strings.Contains(bad, "7") {
				t.Errorf("result of the invalid call = %q, want it to name the missing city and the maximum of days", bad)
			}
		})
	}
}

// TestNewToolSDKTagsRequired checks the SDK dialect's rule for required
// fields: only those tagged "required", whatever their json tag says,
// where toolrun's own dialect requires every field without omitempty.
func TestNewToolSDKTagsRequired(t *testing.T) {
	tool := toolrun.NewTool("forecast", "", forecast)
	var got struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(tool.InputSchema(), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"city", "days"}, got.Required); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
}

// TestNewSDKToolNil checks that a nil tool is an error, not a tool that
// panics when the model calls it.
func TestNewSDKToolNil(t *testing.T) {
	if _, err := toolrun.NewSDKTool(nil); err == nil {
		t.Error("NewSDKTool(nil): got no error")
	}
}

// A tool written for the SDK's runner, run by toolrun as it is.
func ExampleNewSDKTool() {
	type timeIn struct {
		City string `json:"city" jsonschema:"required,description=the city name"`
	}
	sdkTool, err := toolrunner.NewBetaToolFromJSONSchema("local_time", "The local time in a city",
		func(ctx context.Context, in timeIn) (anthropic.BetaToolResultBlockParamContentUnion, error) {
			return anthropic.BetaToolResultBlockParamContentUnion{OfText: &anthropic.BetaTextBlockParam{Text: in.City + ": 14:05"}}, nil
		})
	if err != nil {
		panic(err)
	}
	tool, err := toolrun.NewSDKTool(sdkTool)
	if err != nil {
		panic(err)
	}

	s := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "local_time", map[string]any{"city": "Paris"})),
		toolruntest.Message(toolruntest.Text("It is 14:05 in Paris.")),
	))
	defer s.Close()
	r := toolrun.New(s.Client(), userParams("What time is it in Paris?"), []toolrun.Tool{tool},
		&toolrun.Options{Logger: slog.New(slog.DiscardHandler)})
	res, err := r.Run(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println(toolruntest.ResultTexts(res.Messages)["toolu_1"])
	fmt.Println(res.StopReason)
	// Output:
	// Paris: 14:05
	// end_turn
}

// TestNewToolMixedDialects checks that a struct mixing toolrun's tag
// dialect with the SDK's is refused with a message saying how to write
// the tags, rather than read in one dialect and lose the other's
// descriptions.
func TestNewToolMixedDialects(t *testing.T) {
	type mixedIn struct {
		City string `json:"city" jsonschema:"required,description=the city name"`
		Note string `json:"note" jsonschema:"a note for the forecaster"`
	}
	defer func() {
		msg := fmt.Sprint(recover())
		for _, want := range []string{"toolrun: tool \"mixed\"", "mixedIn.City", "mixedIn.Note", "description="} {
			if !strings.Contains(msg, want) {
				t.Errorf("panic %q, want it to say %q", msg, want)
			}
		}
	}()
	toolrun.NewTool("mixed", "", func(ctx context.Context, in mixedIn) (string, error) { return "", nil })
}
