package toolrun_test

import (
	"encoding/json"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
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
				Policy: policy.RequireApproval("a person looks first")}
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

// TestCallerContainerKept checks that a container the caller chose is
// never replaced by another a response reports, and that the caller's
// container params without an id get the reported id with their skills
// kept, as the official runner does.
func TestCallerContainerKept(t *testing.T) {
	skill := anthropic.BetaSkillParams{SkillID: "pptx", Type: anthropic.BetaSkillParamsTypeAnthropic}
	tests := []struct {
		name       string
		container  anthropic.BetaMessageNewParamsContainerUnion
		wantID     string
		wantSkills int
	}{
		{"string id", anthropic.BetaMessageNewParamsContainerUnion{OfString: anthropic.String("container_mine")}, "container_mine", 0},
		{"params with id", anthropic.BetaMessageNewParamsContainerUnion{OfContainer: &anthropic.BetaContainerParams{
			ID: anthropic.String("container_mine"), Skills: []anthropic.BetaSkillParams{skill}}}, "container_mine", 1},
		{"params without id", anthropic.BetaMessageNewParamsContainerUnion{OfContainer: &anthropic.BetaContainerParams{
			Skills: []anthropic.BetaSkillParams{skill}}}, "container_theirs", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls counter
			first := toolruntest.Message(toolruntest.ToolUse("toolu_1", "get_weather", map[string]any{"city": "Paris"}))
			first.Container = "container_theirs"
			s := toolruntest.New(t, toolruntest.Script(first, toolruntest.Message(toolruntest.Text("Done."))))
			params := userParams("Weather?")
			params.Container = tt.container
			r := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{Logger: discard(), NoThread: true})
			if _, err := r.Run(bounded(t)); err != nil {
				t.Fatal(err)
			}
			reqs := s.Requests()
			if len(reqs) != 2 {
				t.Fatalf("got %d requests, want 2", len(reqs))
			}
			if got := sentContainer(t, reqs[1]); got != tt.wantID {
				t.Errorf("second request's container = %q, want %q", got, tt.wantID)
			}
			var obj struct {
				Skills []json.RawMessage `json:"skills"`
			}
			json.Unmarshal(reqs[1].Params.Raw["container"], &obj)
			if got := len(obj.Skills); got != tt.wantSkills {
				t.Errorf("second request's container has %d skills, want %d (%s)", got, tt.wantSkills, reqs[1].Params.Raw["container"])
			}
		})
	}
}
