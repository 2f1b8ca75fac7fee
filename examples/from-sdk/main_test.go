package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun/toolruntest"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), &out, false); err != nil {
		t.Fatal(err)
	}
	const answer = "In Paris it is 21°C and sunny, and the time is 14:05."
	want := "BetaToolRunner: " + answer + "\ntoolrun: " + answer + "\n"
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// seen is what the model saw of a run: the tools offered and the results
// of its calls.
type seen struct {
	Tools   map[string]any    // by name: description and input schema
	Results map[string]string // by tool_use id; "error: " before an is_error one
}

func observe(t *testing.T, program func(context.Context, anthropic.Client) (string, error)) seen {
	t.Helper()
	s := toolruntest.New(t, toolruntest.Script(script()...))
	if _, err := program(t.Context(), s.Client()); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	var got seen
	got.Tools = map[string]any{}
	for _, tool := range reqs[0].Params.Tools {
		var schema map[string]any
		if err := json.Unmarshal(tool.InputSchema, &schema); err != nil {
			t.Fatalf("tool %s: input schema %s: %v", tool.Name, tool.InputSchema, err)
		}
		// Unknown to the API, and not the same by construction: the $id
		// names the Go package of the SDK's reflection.
		delete(schema, "$id")
		delete(schema, "$schema")
		got.Tools[tool.Name] = map[string]any{"description": tool.Description, "input_schema": schema}
	}
	got.Results = map[string]string{}
	last := reqs[len(reqs)-1].Conversation
	for _, m := range last {
		for _, b := range m.Content {
			if b.Type != "tool_result" {
				continue
			}
			text := b.ResultText()
			if b.IsError {
				text = "error: " + text
			}
			got.Results[b.ToolUseID] = text
		}
	}
	return got
}

// TestSameToModel checks that the program moved over gives the model what
// the SDK's version gave it: the same tools, with the same schemas, and the
// same results of its calls.
func TestSameToModel(t *testing.T) {
	sdk, moved := observe(t, withSDK), observe(t, withToolrun)
	if len(sdk.Tools) != 2 || len(sdk.Results) != 2 || sdk.Tools["get_weather"].(map[string]any)["input_schema"].(map[string]any)["required"] == nil {
		t.Fatalf("the SDK's version offered %v and answered %v, want 2 tools with their schemas and 2 results", sdk.Tools, sdk.Results)
	}
	if diff := cmp.Diff(sdk, moved); diff != "" {
		t.Errorf("what the model saw (-BetaToolRunner +toolrun):\n%s", diff)
	}
}
