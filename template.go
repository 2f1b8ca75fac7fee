package toolrun

import (
	"slices"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun/internal/deepcopy"
)

// template is what many runs share: a client, tools and [Options], copied
// once, with the tools' definitions and schemas built once. [New] and
// [Resume] build one for each runner; package driver's Template holds one
// for many, whose runners share that copy. It is never changed once built,
// and is safe for concurrent use.
type template struct {
	cfg *runConfig
	set *toolSet
}

// newTemplate returns a template of client, tools and opts (nil for none).
// It panics as [New] does: if two tools share a name, a tool's schema
// cannot be used, or Options.Store is set without Options.RunID.
func newTemplate(client anthropic.Client, tools []Tool, opts *Options) *template {
	cfg := newConfig(client.Beta.Messages, opts)
	if cfg.opts.Store != nil && cfg.opts.RunID == "" {
		panic("toolrun: Options.Store needs Options.RunID")
	}
	set, err := toolSetOf(tools)
	if err != nil {
		panic(err.Error())
	}
	return &template{cfg: cfg, set: set}
}

// New returns a runner for the conversation in params, as the function
// [New] does, with the template's client, tools and options.
func (t *template) New(params anthropic.BetaMessageNewParams) *Runner {
	r := t.newRunner()
	// The run's params share nothing with the caller's, who may go on
	// writing into theirs: the wire cache knows a message by its pointer
	// (encode.go).
	*r.st = State{Format: stateFormat, Params: deepcopy.Copy(params)}
	r.st.Betas = slices.Clone(params.Betas)
	r.syncTools()
	return r
}
