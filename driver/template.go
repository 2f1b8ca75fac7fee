package driver

import (
	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/bridge"
)

var newTemplate = bridge.NewTemplate.(func(anthropic.Client, []toolrun.Tool, *toolrun.Options) (func(anthropic.BetaMessageNewParams) *toolrun.Runner, func(*toolrun.State) (*toolrun.Runner, error)))

// Template is what many runs share: a client, tools and [toolrun.Options],
// copied once, with the tools' definitions and schemas built once. The
// runners a Template makes share that copy, which keeps each of them small
// when a program holds runs by the thousand (a server with runs awaiting
// approval, say); [toolrun.New] and [toolrun.Resume] build such a copy of
// their own for each runner, which is what a program with a few runs at a
// time wants.
//
// A Template is never changed once built, and is safe for concurrent use.
// The tools' settings (a [toolrun.FuncTool]'s Timeout, Policy and so on)
// are those they had when it was built.
type Template struct {
	newRun func(anthropic.BetaMessageNewParams) *toolrun.Runner
	resume func(*toolrun.State) (*toolrun.Runner, error)
}

// NewTemplate returns a template of client, tools and opts (nil for none).
// It panics as [toolrun.New] does: if two tools share a name, a tool's
// schema cannot be used, or Options.Store is set without Options.RunID.
func NewTemplate(client anthropic.Client, tools []toolrun.Tool, opts *toolrun.Options) *Template {
	newRun, resume := newTemplate(client, tools, opts)
	return &Template{newRun: newRun, resume: resume}
}

// New returns a runner for the conversation in params, as [toolrun.New]
// does, with the template's client, tools and options.
func (t *Template) New(params anthropic.BetaMessageNewParams) *toolrun.Runner {
	return t.newRun(params)
}

// Resume returns a runner that continues the run s, as [toolrun.Resume]
// does, with the template's client, tools and options.
func (t *Template) Resume(s *toolrun.State) (*toolrun.Runner, error) {
	return t.resume(s)
}
