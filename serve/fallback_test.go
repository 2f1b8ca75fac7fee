package serve_test

import (
	"net/http"
	"testing"

	"github.com/toolrun/toolrun/toolruntest"
)

// TestFallbackDeclinedCallNotAnnounced: a response whose first attempt a
// server-side fallback declined holds that attempt's tool_use before the
// fallback block. The runner neither runs nor answers it, so the client
// must not see it as a tool call either (it would wait for a result that
// never comes); the call after the fallback block is announced and run.
func TestFallbackDeclinedCallNotAnnounced(t *testing.T) {
	f := newFixture(t, map[string][]toolruntest.Reply{
		"pay": {
			toolruntest.Message(
				toolruntest.ToolUse("call_declined", "refund", map[string]any{"amount": 1}),
				toolruntest.Fallback("claude-a", "claude-b"),
				toolruntest.ToolUse("call_pay", "pay", map[string]any{"amount": 5}),
			),
			toolruntest.Message(toolruntest.Text("paid")),
		},
	}, nil, nil)
	st, evs, body := post(t, f.url, input("t1", "r1", []map[string]any{user("u1", "pay")}, nil))
	if st != http.StatusOK {
		t.Fatalf("status %d: %s", st, body)
	}
	var announced []string
	for _, e := range evs {
		if e["type"] == "TOOL_CALL_START" {
			announced = append(announced, e["toolCallId"].(string))
		}
	}
	if len(announced) != 1 || announced[0] != "call_pay" {
		t.Errorf("tool calls announced %q, want only [call_pay]", announced)
	}
	if got := f.calls.got(); len(got) != 1 || got[0] != `pay{"amount":5}` {
		t.Errorf("tools run %q, want only pay{\"amount\":5}", got)
	}
}
