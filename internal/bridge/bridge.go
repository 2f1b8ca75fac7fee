// Package bridge carries the root package's driver functions to package
// driver, as net/http's internal hooks do: the root package keeps them
// unexported, so that its API is the one a program running tools reads,
// and sets each variable here in its init; package driver asserts each to
// the function it is, once, when it is initialised. A variable is typed any
// because its function's type names the root's types, which this package
// cannot import.
package bridge

// The root package's functions, set by its init (see its bridge.go).
var (
	Advance       any // func(context.Context, *toolrun.Runner) ([]plannedCall, error)
	ExecuteCall   any // func(context.Context, *toolrun.Runner, string) (*toolrun.ToolResult, error)
	CutResult     any // func(*toolrun.Runner, *toolrun.ToolResult) *toolrun.ToolResult
	Batches       any // func([]plannedCall) [][]plannedCall
	NewCallQueue  any // func([]plannedCall, int) any, a *callQueue
	Skeleton      any // func(*toolrun.State) *toolrun.State
	Merge         any // func(skeleton, whole *toolrun.State) *toolrun.State
	ForCall       any // func(*toolrun.State, string) *toolrun.State
	HasCall       any // func(*toolrun.State, string) bool
	CanDecide     any // func(*toolrun.State, string, toolrun.Decision) error
	StopAfterCall any // func(*toolrun.State, toolrun.StopReason, string) error
	SetResult     any // func(*toolrun.State, string, *toolrun.ToolResult) error
	ResponseText  any // func(*toolrun.State) (string, bool)
	Snapshot      any // func(*toolrun.Runner) *toolrun.State
	Committed     any // func(*toolrun.Runner) (int, []*toolrun.ToolResult)
	ResumeOwned   any // func(anthropic.Client, *toolrun.State, []toolrun.Tool, *toolrun.Options) (*toolrun.Runner, error)
	ValidateInput any // func(ctx, tool string, schema, input json.RawMessage) error
	ShareEvents   any // func(*toolrun.Options)
	NewTemplate   any // func(anthropic.Client, []toolrun.Tool, *toolrun.Options) (newRun func(anthropic.BetaMessageNewParams) *toolrun.Runner, resume func(*toolrun.State) (*toolrun.Runner, error))
	Chain         any // func(context.Context, toolrun.PolicyCall, []toolrun.Policy) toolrun.Decision, the runner's chain rule for package policy
	ChangeTools   any // func(*toolrun.State, remove []string, add []anthropic.BetaToolUnionParam, apply bool) error
)
