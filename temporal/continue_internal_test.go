package temporal

import (
	"testing"

	"github.com/toolrun/toolrun"
)

// TestContinueNow checks the rule that decides when an execution
// continues as new, on its terms: the server's suggestion; the turns of
// RunOptions.ContinueAsNewAfter when set; the history's size against
// RunOptions.ContinueAsNewBytes and ContinueAsNewFactor times the state;
// no continue by size before the execution's first turn (its input alone
// may be past the bytes: it would continue as new for ever), the state's
// size from the input's before a step reports it; and, for an execution
// recorded before the size rule, every 20 turns.
func TestContinueNow(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name      string
		after     int  // RunOptions.ContinueAsNewAfter
		bySize    bool // versionContinueBySize
		turns     int  // turns of this execution
		history   int  // its history's bytes
		size      int  // the state's, as the last step reported it
		startSize int  // the history's the input carried
		suggested bool
		want      bool
	}{
		{name: "small history", bySize: true, turns: 500, history: mib - 1, size: 1000, want: false},
		{name: "history past the bytes, small state", bySize: true, turns: 3, history: mib, size: 1000, want: true},
		{name: "history past the bytes, not five times the state", bySize: true, turns: 60, history: 4 * mib, size: mib, want: false},
		{name: "history five times the state", bySize: true, turns: 60, history: 5 * mib, size: mib, want: true},
		{name: "no turn yet", bySize: true, turns: 0, history: 10 * mib, size: 0, want: false},
		{name: "before a step, the input's size", bySize: true, turns: 1, history: 4 * mib, startSize: mib, want: false},
		{name: "before a step, five times the input's", bySize: true, turns: 1, history: 5 * mib, startSize: mib, want: true},
		{name: "suggested", bySize: true, turns: 1, history: 10, size: 10, suggested: true, want: true},
		{name: "turns set and reached", bySize: true, after: 2, turns: 2, history: 10, size: 10, want: true},
		{name: "turns set, not reached", bySize: true, after: 3, turns: 2, history: 10, size: 10, want: false},
		{name: "old execution, default 20 turns", turns: 20, history: 10, size: 10, want: true},
		{name: "old execution, 19 turns of a large history", turns: 19, history: 100 * mib, size: 10, want: false},
		{name: "old execution, turns set", after: 2, turns: 2, history: 10, size: 10, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &run{state: &toolrun.State{Turns: 100 + tt.turns}, size: tt.size, startSize: tt.startSize, opts: RunOptions{ContinueAsNewAfter: tt.after}.withDefaults()}
			if got := w.continueNow(tt.history, tt.suggested, 100, tt.bySize); got != tt.want {
				t.Errorf("continueNow = %v, want %v", got, tt.want)
			}
		})
	}
}
