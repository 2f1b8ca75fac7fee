package temporal

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
)

// largestStep records the most bytes a coroutine of the workflow took
// without blocking, through workTaken.
type largestStep struct {
	mu       sync.Mutex // guards cur, max
	cur, max int
}

func (l *largestStep) see(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n < 0 {
		l.cur = 0
		return
	}
	l.cur += n
	l.max = max(l.max, l.cur)
}

func (l *largestStep) get() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.max
}

// TestWorkflowTakesValuesInSteps counts the bytes the workflow's code
// takes (decodes and measures) between two points where it blocks: a
// flood of signals delivered at once is taken in steps of at most
// stepWork and one decision, so that no workflow task runs a coroutine
// long enough for the SDK's deadlock detector however many arrive. It
// counts the work rather than timing it. (The test environment delivers
// activity results one at a time, so the same pacing of a turn's results
// is not exercised here.)
func TestWorkflowTakesValuesInSteps(t *testing.T) {
	page := strings.Repeat("lorem ipsum ", 1<<10/12)
	tests := []struct {
		name    string
		replies []toolruntest.Reply
		signals int    // decisions sent at once, for calls that do not exist
		reason  string // each one's reason
		largest int    // the largest value taken
	}{
		{
			name:    "300 signals of 10 KB",
			replies: []toolruntest.Reply{toolruntest.Message(toolruntest.ToolUse("w1", "read", struct{}{})), toolruntest.Message(toolruntest.Text("Done."))},
			signals: 300,
			reason:  strings.Repeat("r", 10<<10),
			largest: 11 << 10,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen largestStep
			workTaken = seen.see
			t.Cleanup(func() { workTaken = nil })

			s := toolruntest.New(t, toolruntest.Script(tt.replies...))
			tool := toolrun.NewTool("read", "Reads a page", func(ctx context.Context, in struct{}) (string, error) { return page, nil })
			tool.Idempotent = true
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
			env := suite.NewTestWorkflowEnvironment()
			env.SetTestTimeout(10 * time.Minute) // only a hang takes this long
			Register(env, NewActivities(s.Client(), []toolrun.Tool{tool}, &toolrun.Options{Logger: slog.New(slog.DiscardHandler)}))
			env.RegisterDelayedCallback(func() {
				for i := range tt.signals {
					env.SignalWorkflow(DecideSignal, Approval{ToolUseID: fmt.Sprintf("bogus-%d", i), Decision: policy.Deny(tt.reason)})
				}
			}, 0)
			params := anthropic.BetaMessageNewParams{Model: "claude-test", MaxTokens: 1024, Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))}}
			ro := RunOptions{ContinueAsNewAfter: 100}
			env.ExecuteWorkflow(WorkflowName, NewInput(params, &ro))
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var out Outcome
			if err := env.GetWorkflowResult(&out); err != nil {
				t.Fatal(err)
			}
			if out.StopReason != toolrun.StopEndTurn {
				t.Fatalf("got stop reason %q (%s), want %q", out.StopReason, out.Detail, toolrun.StopEndTurn)
			}
			if got, want := seen.get(), stepWork+tt.largest; got > want || got == 0 {
				t.Errorf("a coroutine took %d bytes without blocking, want 1 to %d (stepWork and one value)", got, want)
			}
		})
	}
}
