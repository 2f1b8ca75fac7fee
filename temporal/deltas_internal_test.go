package temporal

import (
	"fmt"
	"runtime"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
)

// TestTakeStepCostsWhatTheStepAdded counts the work of the workflow task
// that takes a step's result without a Store: the bytes it allocates to
// put the step's messages after the history it holds. They must not grow
// with the history, or a long run's workflow tasks grow until the
// deadlock detector (1 s a task) fires under load: a step of a run of
// 4,000 messages costs about what a step of a run of 40 does.
func TestTakeStepCostsWhatTheStepAdded(t *testing.T) {
	perStep := func(history int) float64 {
		w := &run{state: &toolrun.State{Params: anthropic.BetaMessageNewParams{Model: "claude-test", Messages: messages(0, history)}}, deltas: true}
		const steps = 200
		res := make([]*StepResult, steps)
		for i := range res {
			res[i] = &StepResult{State: &toolrun.State{Params: anthropic.BetaMessageNewParams{Model: "claude-test", Messages: messages(history+2*i, 2)}}, Base: history + 2*i}
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, r := range res {
			if err := w.takeStep(StepInput{Deltas: true}, r); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		if got, want := len(w.state.Params.Messages), history+2*steps; got != want {
			t.Fatalf("got %d messages after the steps, want %d", got, want)
		}
		return float64(after.TotalAlloc-before.TotalAlloc) / steps
	}
	short, long := perStep(40), perStep(4000)
	if long > 3*short {
		t.Errorf("got %.0f bytes allocated a step with 4,000 messages of history, %.0f with 40: want about the same (at most 3×); the workflow copies the history each step", long, short)
	}
}

// messages returns n messages, user and assistant in turn, numbered from
// first.
func messages(first, n int) []anthropic.BetaMessageParam {
	out := make([]anthropic.BetaMessageParam, n)
	for i := range out {
		text := anthropic.NewBetaTextBlock(fmt.Sprintf("message %d", first+i))
		if (first+i)%2 == 0 {
			out[i] = anthropic.NewBetaUserMessage(text)
		} else {
			out[i] = anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{text}}}
		}
	}
	return out
}
