package toolrun_test

import (
	"context"
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// sandboxPolicy allows every write_file call with its path moved under
// /sandbox: a runner-wide rule that edits input instead of denying it.
func sandboxPolicy() toolrun.Policy {
	return toolrun.PolicyFunc(func(ctx context.Context, in writeIn) toolrun.Decision {
		if strings.HasPrefix(in.Path, "/sandbox/") {
			return toolrun.Decision{}
		}
		in.Path = "/sandbox/" + path.Base(in.Path)
		b, _ := json.Marshal(in)
		return toolrun.Decision{Kind: toolrun.Allow, Input: b}
	})
}

// TestPersonEditStillEditedByPolicy: a person's Allow with input of its
// own is the input the policies see (Policy, step 2), and an Allow with
// Input from Options.Policy replaces it "for the policies after this one
// and for the run" (Decision.Input): the call runs with the policy's edit
// of the person's input, never with the person's input around the policy,
// in process and after Resume.
func TestPersonEditStillEditedByPolicy(t *testing.T) {
	for _, resume := range []bool{false, true} {
		name := map[bool]string{false: "in process", true: "after Resume"}[resume]
		t.Run(name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/one", Text: "1"})),
				toolruntest.Message(toolruntest.Text("done")),
			))
			var writes counter
			w := writeTool(&writes)
			w.Policy = toolrun.RequireApproval("writes need a person")
			opts := &toolrun.Options{Logger: discard(), Policy: sandboxPolicy()}
			r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{w}, opts)
			res, _ := r.Run(t.Context())
			if res.StopReason != toolrun.StopAwaitingApproval {
				t.Fatalf("StopReason = %q, want awaiting_approval", res.StopReason)
			}
			person := toolrun.Decision{Kind: toolrun.Allow, Input: json.RawMessage(`{"path":"/etc/passwd","text":"x"}`)}
			if resume {
				st := r.State()
				if err := st.Decide("w1", person); err != nil {
					t.Fatal(err)
				}
				w2 := writeTool(&writes)
				w2.Policy = toolrun.RequireApproval("writes need a person")
				var err error
				r, err = toolrun.Resume(client(s), st, []toolrun.Tool{w2}, &toolrun.Options{Logger: discard(), Policy: sandboxPolicy()})
				if err != nil {
					t.Fatal(err)
				}
			} else if err := r.Decide("w1", person); err != nil {
				t.Fatal(err)
			}
			res, err := r.Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
			}
			if diff := cmp.Diff(map[string]int{"/sandbox/passwd": 1}, writes.n); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}
