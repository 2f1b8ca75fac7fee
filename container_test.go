package toolrun_test

import (
	"encoding/json"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// sentContainer is the container field a request sent, "" for none.
func sentContainer(t *testing.T, req *toolruntest.Request) string {
	t.Helper()
	raw, ok := req.Params.Raw["container"]
	if !ok {
		return ""
	}
	var id string
	if json.Unmarshal(raw, &id) == nil {
		return id
	}
	var obj struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("container %s: %v", raw, err)
	}
	return obj.ID
}

// TestContainerCarried checks that the container a response reports is
// sent on every later request of the run, streamed or not, on a thread or
// not, and after State/Resume.
func TestContainerCarried(t *testing.T) {
	for _, mode := range []struct {
		name             string
		stream, noThread bool
	}{{"thread", false, false}, {"no thread", false, true}, {"streamed", true, false}} {
		t.Run(mode.name, func(t *testing.T) {
			var calls counter
			first := toolruntest.Message(toolruntest.ToolUse("toolu_1", "get_weather", map[string]any{"city": "Paris"}))
			first.Container = "container_011"
			s := toolruntest.New(t, toolruntest.Script(
				first,
				toolruntest.Message(toolruntest.ToolUse("toolu_2", "get_weather", map[string]any{"city": "Rome"})),
				toolruntest.Message(toolruntest.Text("Done.")),
			))
			opts := &toolrun.Options{Logger: discard(), Stream: mode.stream, NoThread: mode.noThread,
				Policy: toolrun.RequireApproval("a person looks first")}
			r := toolrun.New(client(s), userParams("Weather?"), []toolrun.Tool{weatherTool(&calls)}, opts)
			if res, err := r.Run(bounded(t)); err != nil || res.StopReason != toolrun.StopAwaitingApproval {
				t.Fatalf("Run = %v, %v; want awaiting_approval", res, err)
			}
			// The rest of the run, in a runner resumed from the state.
			st := r.State()
			if err := st.Decide("toolu_1", toolrun.Decision{}); err != nil {
				t.Fatal(err)
			}
			opts.Policy = nil
			r2, err := toolrun.Resume(client(s), st, []toolrun.Tool{weatherTool(&calls)}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if res, err := r2.Run(bounded(t)); err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("resumed Run = %v, %v; want end_turn", res, err)
			}
			var got []string
			for _, req := range s.Requests() {
				got = append(got, sentContainer(t, req))
			}
			want := []string{"", "container_011", "container_011"}
			if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
				t.Errorf("containers sent = %q, want %q", got, want)
			}
		})
	}
}
