package toolrun

import (
	"slices"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun/internal/deepcopy"
)

// Template is what many runs share: a client, tools and [Options], copied
// once, with the tools' definitions and schemas built once. The runners a
// Template makes share that copy, which keeps each of them small when runs
// are held by the thousand (awaiting approval, say); [New] and [Resume]
// build a Template of their own for each runner.
//
// A Template is never changed once built, and is safe for concurrent use.
// The tools' settings (a [FuncTool]'s Timeout, Policy and so on) are
// those they had when it was built.
type Template struct {
	cfg *runConfig
	set *toolSet
}

// NewTemplate returns a template of client, tools and opts (nil for none).
// It panics as [New] does: if two tools share a name, a tool's schema
// cannot be used, or Options.Store is set without Options.RunID.
func NewTemplate(client anthropic.Client, tools []Tool, opts *Options) *Template {
	cfg := newConfig(client.Beta.Messages, opts)
	if cfg.opts.Store != nil && cfg.opts.RunID == "" {
		panic("toolrun: Options.Store needs Options.RunID")
	}
	set, err := toolSetOf(tools)
	if err != nil {
		panic(err.Error())
	}
	return &Template{cfg: cfg, set: set}
}

// New returns a runner for the conversation in params, as the function
// [New] does, with the template's client, tools and options.
func (t *Template) New(params anthropic.BetaMessageNewParams) *Runner {
	r := t.newRunner()
	// The run's params share nothing with the caller's, who may go on
	// writing into theirs: the wire cache knows a message by its pointer
	// (encode.go).
	*r.st = State{Format: stateFormat, Params: deepcopy.Copy(params)}
	r.st.Betas = slices.Clone(params.Betas)
	r.syncTools()
	return r
}
