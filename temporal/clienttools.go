package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
)

// ClientToolReason is the reason with which activities that
// [Activities.DeferClientTools] defer each call of a client tool: a tool
// the run was given with [toolrun.Runner.AddTools] (its definition in
// [toolrun.State.AddedTools]) whose function the workers do not have,
// because the run's client runs it. It is the reason of "toolrun serve"'s
// client tools, which its Temporal executor relies on.
const ClientToolReason = "a client tool: the client runs it"

// DeferClientTools makes a's steps stand in for every client tool added to
// a run that a's tools lack, rather than refuse the run's State with
// [toolrun.ErrAddedToolMissing]: a call of one is deferred with
// [ClientToolReason], waits as a call awaiting approval does (listed by
// [Pending], no worker needed), and is answered by a decision that carries
// the client's result (a Skip decision, sent with [DecideBySignal]);
// the stand-in itself never runs. This is how "toolrun serve --temporal"
// runs the tools its clients declare. Call it before the worker starts;
// it returns a.
func (a *Activities) DeferClientTools() *Activities {
	a.deferClient = true
	return a
}

// errClientTool is the error of a stand-in asked to run: a client tool's
// call is answered by its client, never run by a worker.
var errClientTool = errors.New("toolrun: a client tool runs in its client, not on a worker")

// toolsFor returns a's tools for a run of s: with [Activities.DeferClientTools],
// a stand-in too for each client tool added to s that a's tools lack.
func (a *Activities) toolsFor(s *toolrun.State) []toolrun.Tool {
	if !a.deferClient || s == nil {
		return a.tools
	}
	tools := a.tools
	for _, d := range s.AddedTools() {
		def := d.OfTool
		if def == nil || slices.ContainsFunc(a.tools, func(t toolrun.Tool) bool { return t.Name() == def.Name }) {
			continue
		}
		schema, err := json.Marshal(def.InputSchema)
		if err != nil {
			continue // Resume names the tool missing
		}
		t, err := toolrun.NewRawTool(def.Name, def.Description.Value, schema, func(context.Context, json.RawMessage) (string, error) {
			return "", errClientTool
		})
		if err != nil {
			continue
		}
		t.Policy = func(context.Context, toolrun.PolicyCall) toolrun.Decision { return policy.Defer(ClientToolReason) }
		if len(tools) == len(a.tools) {
			tools = slices.Clone(a.tools)
		}
		tools = append(tools, t)
	}
	return tools
}
