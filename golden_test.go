package toolrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got); run go test -update if the change is intended:\n%s", path, diff)
	}
}

// TestGoldenTwoTurnRun pins what goes on the wire in a two-turn run: both
// request bodies, with the tool definitions, the assistant turn sent back
// and the tool results (one failed), and the summary of the result; on a
// message thread (the default) and with the whole history (NoThread).
func TestGoldenTwoTurnRun(t *testing.T) {
	tests := []struct {
		name, file string
		noThread   bool
	}{
		{name: "thread", file: "two_turn_run_thread.golden"},
		{name: "no thread", file: "two_turn_run.golden", noThread: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(
					toolruntest.Text("Checking both."),
					toolruntest.ToolUse("toolu_01", "get_weather", map[string]any{"city": "Paris", "units": "celsius"}),
					toolruntest.ToolUse("toolu_02", "get_weather", map[string]any{"units": "kelvin"}),
				),
				toolruntest.Message(toolruntest.Text("Paris is sunny; I need a city for the second.")),
			))
			var calls counter
			res, err := toolrun.New(client(s), userParams("Weather in Paris, and somewhere else?"), []toolrun.Tool{weatherTool(&calls)},
				&toolrun.Options{Logger: discard(), NoThread: tc.noThread}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			for _, req := range s.Requests() {
				var v any
				if err := json.Unmarshal(req.Body, &v); err != nil {
					t.Fatal(err)
				}
				b, _ := json.MarshalIndent(v, "", "  ")
				out.Write(b)
				out.WriteString("\n")
			}
			summary, _ := json.MarshalIndent(map[string]any{
				"stop_reason": res.StopReason, "turns": res.Turns, "tool_calls": res.ToolCalls,
				"tool_failures": res.ToolFailures, "usage": res.Usage, "text": res.Text(),
			}, "", "  ")
			out.Write(summary)
			out.WriteString("\n")
			golden(t, tc.file, out.Bytes())
		})
	}
}
