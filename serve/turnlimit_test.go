package serve_test

import (
	"testing"

	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestTurnLimitPerRun: Options.MaxTurns bounds each AG-UI run of a
// thread, counted by the runner from the turns the thread's State had
// when the run began: a thread whose turns in all pass the limit goes
// on, and a run that would take more turns than the limit stops at it.
func TestTurnLimitPerRun(t *testing.T) {
	pay := func(id string) toolruntest.Reply {
		return toolruntest.Message(toolruntest.ToolUse(id, "pay", map[string]any{"amount": 1}))
	}
	f := newFixture(t, map[string][]toolruntest.Reply{
		"one":   {pay("c1"), toolruntest.Message(toolruntest.Text("paid once"))},
		"two":   {pay("c2"), toolruntest.Message(toolruntest.Text("paid twice"))},
		"three": {pay("c3"), pay("c4"), pay("c5"), toolruntest.Message(toolruntest.Text("never"))},
	}, nil, func(c *serve.Config) { c.Options.MaxTurns = 2 })
	for _, tc := range []struct {
		name, text, want string
	}{
		{"first run, 2 turns", "one", "RUN_FINISHED"},
		{"second run, 2 more turns", "two", "RUN_FINISHED"},
		{"third run, past its 2 turns", "three", "RUN_ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, evs, body := post(t, f.url, input("t1", "r_"+tc.text, []map[string]any{user("u_"+tc.text, tc.text)}, nil))
			if evs == nil {
				t.Fatal(body)
			}
			got := last(evs)
			if got["type"] != tc.want {
				t.Fatalf("the run ended with %v, want %s", got, tc.want)
			}
			if tc.want == "RUN_ERROR" && got["code"] != "max_turns" {
				t.Errorf("code %v, want max_turns", got["code"])
			}
		})
	}
	// The third run's second turn is its last: its call is left pending,
	// not run.
	if got := len(f.calls.got()); got != 3 {
		t.Errorf("%d calls ran, want 3", got)
	}
}
