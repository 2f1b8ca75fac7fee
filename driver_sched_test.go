package toolrun_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
)

// plan builds planned calls from "id:tool[:x][:pN]" specs: x marks an
// exclusive tool, pN a tool whose MaxParallel is N.
func plan(specs ...string) []driver.PlannedCall {
	var out []driver.PlannedCall
	for _, s := range specs {
		f := strings.Split(s, ":")
		p := driver.PlannedCall{Call: toolrun.ToolCall{ID: f[0], Name: f[1]}}
		for _, o := range f[2:] {
			switch {
			case o == "x":
				p.Exclusive = true
			case strings.HasPrefix(o, "p"):
				p.MaxParallel = int(o[1] - '0')
			}
		}
		out = append(out, p)
	}
	return out
}

// drain starts what the queue allows, then finishes the oldest running
// call, until nothing is left; it returns the waves of calls started
// together, and stops the queue after the call stopAfter is done.
func drain(q *driver.CallQueue, stopAfter string) [][]string {
	var waves [][]string
	var running []string
	for {
		var wave []string
		for {
			p, ok := q.Start()
			if !ok {
				break
			}
			wave = append(wave, p.Call.ID)
			running = append(running, p.Call.ID)
		}
		if len(wave) > 0 {
			waves = append(waves, wave)
		}
		if len(running) == 0 {
			return waves
		}
		done := running[0]
		running = running[1:]
		q.Done(done)
		if done == stopAfter {
			q.Stop()
		}
	}
}

func TestCallQueue(t *testing.T) {
	tests := []struct {
		name      string
		calls     []driver.PlannedCall
		limit     int
		stopAfter string
		want      [][]string
	}{
		{"all at once", plan("a:t", "b:t", "c:u"), 0, "", [][]string{{"a", "b", "c"}}},
		{"turn bound", plan("a:t", "b:t", "c:t"), 2, "", [][]string{{"a", "b"}, {"c"}}},
		{"exclusive alone", plan("a:t", "b:x:x", "c:t"), 0, "", [][]string{{"a"}, {"b"}, {"c"}}},
		{"tool bound lets others by", plan("a:t:p1", "b:t:p1", "c:u"), 0, "", [][]string{{"a", "c"}, {"b"}}},
		{"tool bound of two", plan("a:t:p2", "b:t:p2", "c:t:p2", "d:u"), 0, "", [][]string{{"a", "b", "d"}, {"c"}}},
		{"no call starts after a stop", plan("a:t", "b:t", "c:t"), 1, "a", [][]string{{"a"}}},
		{"no later group after a stop", plan("a:t", "b:x:x"), 0, "a", [][]string{{"a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := drain(driver.NewCallQueue(tt.calls, tt.limit), tt.stopAfter)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("waves (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallQueueKeepsCallersCalls(t *testing.T) {
	calls := plan("a:t:p1", "b:t:p1", "c:u")
	drain(driver.NewCallQueue(calls, 0), "")
	var got []string
	for _, p := range calls {
		got = append(got, p.Call.ID)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
		t.Errorf("the caller's calls changed (-want +got):\n%s", diff)
	}
}

func TestStopAfterCall(t *testing.T) {
	tests := []struct {
		name    string
		before  toolrun.StopReason
		reason  toolrun.StopReason
		want    toolrun.StopReason
		wantErr bool
	}{
		{"hook", "", toolrun.StopHook, toolrun.StopHook, false},
		{"error", "", toolrun.StopError, toolrun.StopError, false},
		{"payload", "", toolrun.StopPayloadTooLarge, toolrun.StopPayloadTooLarge, false},
		{"first stands", toolrun.StopHook, toolrun.StopError, toolrun.StopHook, false},
		{"refused", "", toolrun.StopMaxTurns, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &toolrun.State{StopReason: tt.before}
			err := driver.StopAfterCall(s, tt.reason, "why")
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if s.StopReason != tt.want {
				t.Errorf("got stop %q, want %q", s.StopReason, tt.want)
			}
		})
	}
}
