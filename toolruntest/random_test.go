package toolruntest

import (
	"math/rand/v2"
	"testing"
)

// TestRandomFault: a seed gives the same faults again, and a thousand
// draws meet every kind of fault of the documented mix.
func TestRandomFault(t *testing.T) {
	reply := Message(Text("a"), ToolUse("toolu_1", "t", nil))
	kinds := func(seed uint64) map[string]int {
		rnd := rand.New(rand.NewPCG(seed, 0))
		got := map[string]int{}
		for i := range 1000 {
			r := RandomFault(rnd, i%2 == 0, reply)
			f := r.Fault
			switch {
			case len(r.Content) == 3:
				got["repeated id"]++
			case f.Status != 0:
				got["status"]++
			case f.StallAfter > 0:
				got["stall"]++
			case f.DropAfter > 0:
				got["drop"]++
			case f.StreamErrorAfter > 0:
				got["error event"]++
			case f.EventDelay > 0:
				got["slow"]++
			default:
				got["none"]++
			}
		}
		return got
	}
	a, b := kinds(7), kinds(7)
	for _, k := range []string{"none", "status", "error event", "drop", "slow", "stall", "repeated id"} {
		if a[k] == 0 {
			t.Errorf("1000 draws gave no %q fault: %v", k, a)
		}
		if a[k] != b[k] {
			t.Errorf("seed 7 gave %d then %d %q faults", a[k], b[k], k)
		}
	}
	if len(reply.Content) != 2 {
		t.Errorf("RandomFault changed the reply it was given: %d blocks", len(reply.Content))
	}
}
