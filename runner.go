package toolrun

import (
	"slices"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// This file holds the Runner and how one is built (see also template.go):
// its fields, and the tool list it sends.

// Runner runs the tool loop of one conversation. Build it with [New],
// [Resume] or [Open], or with a [github.com/toolrun/toolrun/driver.Template] for many runs. A Runner is not
// safe for concurrent use: call its methods from one goroutine at a time
// (the loop body of [Runner.Turns] included).
//
// A Runner holds the run's [State], its tools, its client and its
// options; every other field is derived from those, a cache that cannot
// change what is sent or decided, or the bookkeeping of this process (its
// saves, its event sink).
type Runner struct {
	// messages is the client's Messages service: all the runner needs of
	// the client, a fraction of its size, which matters for runs held by
	// the thousand while they await approval.
	//
	// messages, opts and log point into the runConfig of the runner's
	// template, shared with its other runners and never written.
	messages *anthropic.BetaMessageService
	opts     *Options
	log      *runLogger  // Options.Logger as ANTHROPIC_LOG sets it, redacting
	set      *toolSet    // the template's, shared with its other runners
	tools    []toolEntry // this runner's view of set's tools, by position
	// toolDefs is the tool list sent with each request: set.defs itself
	// (shared, never written through) while the run has no tool params of
	// its own and removed none.
	toolDefs []anthropic.BetaToolUnionParam

	// mu guards st.Pending's calls while the executor's goroutines answer
	// them and a checkpoint reads them; everything else in st is changed
	// by the engine's goroutine alone.
	//
	// st is an object of its own rather than a field, which keeps each of
	// the two within a smaller allocation for runs held by the thousand
	// (the bench's held-run row measures it).
	mu sync.Mutex
	st *State // the run's data: the only copy

	// stopErr is the error of the run's stop (see setStop), which no
	// State can carry; the stop itself is the State's.
	stopErr error
	// last is the last response, decoded, for Turn.Message, Result.Message
	// and TurnFinished; lastRaw holds its JSON in its place once the run
	// stops awaiting approval (see stop). Neither is read to build a
	// request or to decide a call: the State holds the response as a
	// message of its history.
	last    *anthropic.BetaMessage
	lastRaw string

	// live holds the pending turn's results answered in this process,
	// with their errors as the tools returned them, for the events and
	// ExecuteCall to hand out. What the model is sent is the State's
	// result of each call, never these.
	live map[string]*ToolResult
	// committed is the turn this runner committed last, until its next
	// response: a driver whose step both received a response and answered
	// all its calls reads them here (driver.Committed), since the State no
	// longer shows them.
	committed *turnState

	started       time.Time // the first step in this process, for Budget.WallTime
	lastInput     int64     // the input tokens of the last request, all kinds
	lastInputMsgs int       // the messages the last request sent
	compactFloor  int64     // the input of the first response after the last compaction
	measureFloor  bool      // the next response's input is compactFloor
	inputStale    bool      // lastInput does not bound the history's first lastInputMsgs messages (budget.go)
	breakpoints   cacheTier // the dearest cache breakpoint seen in the history (budget.go)
	// threadOff says that this run's first thread request was refused with
	// a 400 and the same request without a thread was not (thread.go): the
	// rest of the run, in this process, goes without a thread, a stop and
	// a continue included, and the Warn record is written once.
	threadOff   bool
	warnedPrice map[string]bool
	// historyIDs is the set of the history's tool_use ids, for
	// checkResponse: built from the history when first needed, kept up to
	// date by appendTurn, and dropped by setHistory, the one other way the
	// history changes in place of it, and when the run stops (a held run
	// keeps no cache).
	historyIDs map[string]struct{}

	// wire holds the request JSON of the history's messages, so that a
	// request encodes only what is new (encode.go). It is a cache, not
	// state: a resumed runner encodes its first request in full.
	// It is nil until the first request, and again once the run stops.
	wire *wireCache

	saveMu  sync.Mutex  // serialises saves to Options.Store; guards saveErr, busy, version, claimed and shape
	saveErr error       // the first failed save, which stops the run
	version uint64      // the version of the state last loaded from or saved to the store
	busy    bool        // saveErr is a refusal (ErrRunBusy): the run is another runner's, for good
	claimed bool        // a save succeeded in this process
	shape   *savedShape // the state last saved, for a store's next Append (statechange.go)

	eventMu sync.Mutex // serialises OnEvent and logging; guards sink and observerErr
	sink    *eventSink // the consumer of Events, while it runs
	// observerErr is the panic of an OnEvent observer, which stops the run
	// at its next step.
	observerErr error
}

// New returns a runner for the conversation in params (model, max_tokens,
// system, messages and any other request fields) with tools. Tools already
// in params.Tools are sent as they are (server tools, say); tools given here
// are added to them and run by the runner. opts may be nil.
//
// New panics if two tools share a name, a tool's schema cannot be used, or
// Options.Store is set without Options.RunID: those are mistakes in the
// program. To build many runners of the same client, tools and options,
// build a [github.com/toolrun/toolrun/driver.Template] once.
func New(client anthropic.Client, params anthropic.BetaMessageNewParams, tools []Tool, opts *Options) *Runner {
	return newTemplate(client, tools, opts).New(params)
}

// newRunner returns a runner of t with an empty State.
func (t *template) newRunner() *Runner {
	return &Runner{messages: &t.cfg.messages, opts: &t.cfg.opts, log: &t.cfg.log, st: &State{},
		set: t.set, tools: t.set.entries}
}

// syncTools rebuilds the tools of the run and the tool list sent with
// each request from the run's State: the caller's own tool params, then
// the runner's tools in the order they were given, less those removed,
// then those added during the run (addtools.go). Under the inline-tools
// beta the list leaves out nothing removed and gains nothing added, since
// the history's system messages say what changed: it stays the list the
// run began with.
func (r *Runner) syncTools() {
	added, only := r.st.addedDefs(), r.st.addedOnly()
	if len(r.st.Removed) == 0 && len(added) == 0 && len(only) == 0 {
		r.tools = r.set.entries
		if len(r.st.Params.Tools) == 0 {
			r.toolDefs = r.set.defs
			return
		}
		// A list of the run's own, never the shared set's.
		r.toolDefs = append(slices.Clone(r.st.Params.Tools), r.set.defs...)
		return
	}
	n := len(r.set.entries)
	var mine []toolEntry // the entries AddTools built in this process
	if len(r.tools) > n {
		mine = r.tools[n:]
	}
	tools := make([]toolEntry, n, n+len(added))
	copy(tools, r.set.entries) // the set's, shared, are never written
	for _, name := range r.st.Removed {
		if i, ok := r.set.index[name]; ok {
			tools[i].removed = true
		}
	}
	for _, name := range only {
		// Given to Resume as an added tool's function, and no tool of
		// the run's otherwise.
		if i, ok := r.set.index[name]; ok {
			tools[i].removed = true
		}
	}
	names := make(map[string]bool, len(added))
	for _, d := range added {
		name := definitionName(d)
		names[name] = true
		if i, ok := r.set.index[name]; ok {
			tools[i].removed = true // the added tool stands in its place
		}
		if d.OfTool == nil {
			continue // the API runs it
		}
		var e *toolEntry
		for j := range mine {
			if mine[j].tool.Name() == name {
				e = &mine[j]
			}
		}
		if e == nil {
			i, ok := r.set.index[name]
			if !ok {
				continue // refused by Resume (checkAddedTools)
			}
			e = &r.set.entries[i] // the tool given to Resume
		}
		c := *e
		c.removed = false
		tools = append(tools, c)
	}
	r.tools = tools
	inline := r.inlineTools()
	r.toolDefs = slices.Clone(r.st.Params.Tools)
	for i := range n {
		name := r.set.entries[i].tool.Name()
		// Under the beta a removed tool stays, and so does one of New's
		// tools removed and added again; a tool given to Resume only as an
		// added tool's function was never in the list.
		keep := !tools[i].removed ||
			(inline && (!names[name] || slices.Contains(r.st.Removed, name)) && !slices.Contains(only, name))
		if keep {
			r.toolDefs = append(r.toolDefs, r.set.defs[i])
		}
	}
	if !inline {
		r.toolDefs = append(r.toolDefs, added...)
	}
}

// toolNames returns the sorted names of the tools in the run, for a message
// to the model.
func (r *Runner) toolNames() []string {
	var names []string
	for _, name := range r.set.names {
		if r.toolNamed(name) != nil {
			names = append(names, name)
		}
	}
	if extra := r.addedNames(); len(extra) > 0 {
		names = append(names, extra...)
		slices.Sort(names)
		names = slices.Compact(names)
	}
	return names
}

// RemoveTools takes tools out of the run: they are no longer sent to the
// model, and a later call of one of them is answered as an unknown tool, so
// a model cannot use a tool that was taken away. The removal is kept in the
// run's [State]. Names not in the run, and the tools of the params given
// to [New], are ignored. A tool added with [Runner.AddTools] or
// [Runner.AddToolParams] is forgotten, definition and all; one of New's
// tools may be given again with AddTools. Under the inline-tools beta (see
// AddTools) the tool list stays as it was, and the model is told in a
// tool_removal block ahead of the next request. With Options.Store the
// State is saved before RemoveTools returns; a failed save stops the run
// at its next step.
func (r *Runner) RemoveTools(names ...string) {
	r.removeAdded(names)
	for _, name := range names {
		// A tool added during the run is kept out of a resumed run too,
		// though the tools given to Resume have it.
		if !slices.Contains(r.st.Removed, name) {
			r.st.Removed = append(r.st.Removed, name)
		}
	}
	r.syncTools()
	r.saveToolChange()
}
