package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/toolrun/toolrun"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name  string
		fault bool
		want  []string // in this order in the output
	}{
		{"streams", false, []string{
			"claude: I'll look up both cities at once.",
			"(response complete: tool_use)",
			`→ get_weather {"city":"Paris"}`,
			`→ get_weather {"city":"Tokyo"}`,
			"← toolu_01: Paris: 21°C",
			"claude: Right now Paris is sunny",
			"stopped: end_turn after 2 turns, 2 tool calls",
		}},
		{"retries a broken stream", true, []string{
			"✗ the response broke off",
			"claude: I'll look up both cities at once.",
			`→ get_weather {"city":"Paris"}`,
			"stopped: end_turn after 2 turns, 2 tool calls",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			res, err := run(t.Context(), &out, &errOut, config{fault: tt.fault})
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			if res.StopReason != toolrun.StopEndTurn {
				t.Errorf("StopReason = %q, want end_turn", res.StopReason)
			}
			rest := out.String()
			for _, want := range tt.want {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("output lacks %q after what came before:\n%s", want, out.String())
				}
				rest = rest[i+len(want):]
			}
		})
	}
}
