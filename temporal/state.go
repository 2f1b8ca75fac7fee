package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
)

// This file holds every use this package makes of the fields of
// [toolrun.State] and of rules that belong to the root package, so that a
// change there is adapted here and nowhere else. It goes through the root
// package's exported API only: the module is versioned apart from it, so
// the root's internal packages are no contract it may rely on.

// errUnknownCall is the rule's verdict on a call the state has not seen:
// a signal for it is kept until the call appears.
var errUnknownCall = errors.New("toolrun: no such call yet")

// decidable says whether decision d for call id may be recorded in s: nil
// if it may, an error wrapping [toolrun.ErrNotAwaitingApproval] if the call has a decision
// or cannot take one, errUnknownCall if s has no such call. The update's
// validator and the signal handler both go through it, and it asks the
// root package's one rule, [toolrun.State.Decide], without changing s.
func decidable(s *toolrun.State, id string, d toolrun.Decision) error {
	if !hasCall(s, id) {
		return errUnknownCall
	}
	return driver.CanDecide(s, id, d)
}

// decide records decision d for call id in s if [decidable] allows it.
func decide(s *toolrun.State, id string, d toolrun.Decision) error {
	if err := decidable(s, id, d); err != nil {
		return err
	}
	return s.Decide(id, d)
}

// hasCall reports whether the pending turn of s has call id.
func hasCall(s *toolrun.State, id string) bool { return driver.HasCall(s, id) }

// skeleton returns s without what only a model request needs and what
// grows with the run: the history and the pending response as a message
// (its calls are kept, with their inputs, decisions and results). It is
// what the workflow holds; the whole state is in the Store, and [merge]
// puts the two together again.
func skeleton(s *toolrun.State) *toolrun.State { return driver.Skeleton(s) }

// merge returns the whole state from the skeleton the workflow holds and
// the whole state the Store holds for it: the skeleton's progress (the
// decisions and results recorded in the workflow since) with the stored
// history and pending response.
func merge(skel, stored *toolrun.State) *toolrun.State { return driver.Merge(skel, stored) }

// forCall returns the state the tool activity needs for call id: the
// skeleton with that call alone.
func forCall(s *toolrun.State, id string) *toolrun.State { return driver.ForCall(s, id) }

// summary is what the search attributes show of a run.
type summary struct {
	status   string
	awaiting bool
	model    string
	turns    int
	cost     float64
}

func summarize(s *toolrun.State) summary {
	status := "running"
	if s.StopReason != "" {
		status = string(s.StopReason)
	}
	awaiting := len(s.AwaitingApproval()) > 0
	if awaiting {
		status = string(toolrun.StopAwaitingApproval)
	}
	return summary{status: status, awaiting: awaiting, model: string(s.Params.Model), turns: s.Turns, cost: s.CostUSD}
}

// lastText returns the text of the last response of s: the turn in
// progress, whose response is not in the history until it is committed,
// or else the last assistant message of the history.
func lastText(s *toolrun.State) string {
	if text, ok := driver.ResponseText(s); ok {
		return text
	}
	msgs := s.Params.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i].OfAssistant
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, c := range m.Content {
			if c.OfText != nil {
				b.WriteString(c.OfText.Text)
			}
		}
		return b.String()
	}
	return ""
}

// saveState and loadState keep whole states in a [toolrun.Store] under
// keys written once each, so that the Store's compare-and-swap expects
// "nothing saved yet": a second save under one key is refused.
func saveState(ctx context.Context, st toolrun.Store, key string, s *toolrun.State) error {
	c := *s
	c.Version = 1
	return st.Save(ctx, key, &c, 0)
}

func loadState(ctx context.Context, st toolrun.Store, key string) (*toolrun.State, error) {
	return st.Load(ctx, key)
}

// retryable classifies a failed model request, after the runner's own
// stream retries, by the one rule the runner's stream retries use too
// ([driver.Retryable]).
func retryable(err error) (bool, time.Duration) { return driver.Retryable(err) }

// clientToolChange returns what makes the client tools added to s (the
// definitions with OfTool of its AddedTools; none for a nil s) the tools
// of defs, for [driver.ChangeTools]: the names to take out (a tool not in
// defs, or whose definition differs), and the definitions to add (a tool
// s has not, or whose definition differs), in defs' order. Two
// definitions are the same if their JSON is, keys in any order.
func clientToolChange(s *toolrun.State, defs []anthropic.BetaToolParam) (remove []string, add []anthropic.BetaToolUnionParam) {
	had := map[string]string{}
	var order []string
	if s != nil {
		for _, d := range s.AddedTools() {
			if d.OfTool != nil {
				had[d.OfTool.Name] = canonicalJSON(d)
				order = append(order, d.OfTool.Name)
			}
		}
	}
	want := map[string]bool{}
	for _, def := range defs {
		u := anthropic.BetaToolUnionParam{OfTool: &def}
		want[def.Name] = true
		if old, ok := had[def.Name]; ok {
			if old == canonicalJSON(u) {
				continue
			}
			remove = append(remove, def.Name)
		}
		add = append(add, u)
	}
	for _, name := range order {
		if !want[name] {
			remove = append(remove, name)
		}
	}
	return remove, add
}

// canonicalJSON returns v's JSON with the keys of its objects sorted, or
// "" if it does not encode.
func canonicalJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return ""
	}
	b, _ = json.Marshal(x)
	return string(b)
}

// removedClientTool reports whether the tool of call id of s is a tool
// taken out of the run ([toolrun.State].Removed) and not added again, as
// a [ClientTools] change leaves a client tool the run no longer offers.
func removedClientTool(s *toolrun.State, id string) bool {
	var name string
	for _, c := range s.Calls() {
		if c.ID == id {
			name = c.Name
		}
	}
	if name == "" || !slices.Contains(s.Removed, name) {
		return false
	}
	return !slices.ContainsFunc(s.AddedTools(), func(d anthropic.BetaToolUnionParam) bool {
		return d.OfTool != nil && d.OfTool.Name == name
	})
}
