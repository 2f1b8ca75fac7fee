package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
)

// A run's policy: no deletes at all, writes only under /sandbox, and a
// person for every payment. Chain asks them in order, as the runner asks
// Options.Policy and then a tool's own.
func ExampleChain() {
	type writeIn struct {
		Path string `json:"path"`
	}
	p := policy.Chain(
		policy.DenyTools("delete_file"),
		func(ctx context.Context, call toolrun.PolicyCall) toolrun.Decision {
			if call.Name != "write_file" {
				return toolrun.Decision{}
			}
			return policy.Func(func(ctx context.Context, in writeIn) toolrun.Decision {
				if !strings.HasPrefix(in.Path, "/sandbox/") {
					return policy.Deny("writes go under /sandbox/")
				}
				return toolrun.Decision{}
			})(ctx, call)
		},
		func(ctx context.Context, call toolrun.PolicyCall) toolrun.Decision {
			if call.Name == "pay" {
				return policy.Defer("payments need a person")
			}
			return toolrun.Decision{}
		},
	)
	for _, c := range []toolrun.ToolCall{
		{ID: "1", Name: "delete_file", Input: json.RawMessage(`{"path":"/sandbox/a"}`)},
		{ID: "2", Name: "write_file", Input: json.RawMessage(`{"path":"/etc/passwd"}`)},
		{ID: "3", Name: "write_file", Input: json.RawMessage(`{"path":"/sandbox/notes.txt"}`)},
		{ID: "4", Name: "pay", Input: json.RawMessage(`{"amount":5}`)},
	} {
		d := p(context.Background(), toolrun.PolicyCall{ToolCall: c})
		fmt.Println(strings.TrimSpace(fmt.Sprintf("%s: %v %s", c.Name, d.Kind, d.Reason)))
	}
	// Output:
	// delete_file: deny tool "delete_file" is not allowed in this run
	// write_file: deny writes go under /sandbox/
	// write_file: allow
	// pay: defer payments need a person
}
