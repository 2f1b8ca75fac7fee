package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun/internal/bridge"
)

// This file hands package driver (github.com/toolrun/toolrun/driver) the
// functions a driver needs to step a run held as data: one that keeps a
// [State] in a durable workflow, schedules the calls of a turn elsewhere
// and decides them from messages, as the temporal module does. They stay
// unexported here, so this package's API is the one a program running
// tools reads; internal/bridge carries them across.

// The bounds a run takes when its [Options] leave them at zero. A program
// that shows or applies a bound itself (the toolrun command's --max-turns,
// a driver that schedules calls) uses them to agree with the runner.
const (
	// DefaultMaxTurns is the turn limit of a run whose [Options.MaxTurns]
	// is zero.
	DefaultMaxTurns = 25
	// DefaultMaxParallelTools is how many calls of one turn run at once
	// when [Options.MaxParallelTools] is zero.
	DefaultMaxParallelTools = 128
)

func init() {
	bridge.Advance = func(ctx context.Context, r *Runner) ([]plannedCall, error) { return r.advance(ctx) }
	bridge.ExecuteCall = func(ctx context.Context, r *Runner, toolUseID string) (*ToolResult, error) {
		return r.executeCall(ctx, toolUseID)
	}
	bridge.CutResult = (*Runner).cutResult
	bridge.Batches = batches
	bridge.NewCallQueue = func(calls []plannedCall, maxParallel int) any { return newCallQueue(calls, maxParallel) }
	bridge.Skeleton = func(s *State) *State { return ownCalls(skeleton(s)) }
	bridge.Merge = func(s, whole *State) *State { return ownCalls(merge(s, whole)) }
	bridge.ForCall = func(s *State, toolUseID string) *State { return ownCalls(forCall(s, toolUseID)) }
	bridge.HasCall = func(s *State, toolUseID string) bool { return s != nil && s.call(toolUseID) != nil }
	bridge.CanDecide = func(s *State, toolUseID string, d Decision) error {
		_, err := s.decidable(toolUseID, d)
		return err
	}
	bridge.StopAfterCall = (*State).stopAfterCall
	bridge.SetResult = (*State).setResult
	bridge.ResponseText = (*State).responseText
	bridge.Snapshot = func(r *Runner) *State { return ownCalls(r.sharedState()) }
	bridge.Committed = (*Runner).committedTurn
	bridge.ResumeOwned = func(client anthropic.Client, s *State, tools []Tool, opts *Options) (*Runner, error) {
		if s == nil {
			return nil, errors.New("toolrun: resume: nil state")
		}
		if s.Format != stateFormat {
			return nil, fmt.Errorf("toolrun: resume: state format %d, want %d", s.Format, stateFormat)
		}
		return newTemplate(client, tools, opts).resume(s, true)
	}
	bridge.ShareEvents = func(o *Options) { o.sharedEvents = true }
	bridge.NewTemplate = func(client anthropic.Client, tools []Tool, opts *Options) (func(anthropic.BetaMessageNewParams) *Runner, func(*State) (*Runner, error)) {
		t := newTemplate(client, tools, opts)
		return t.New, t.Resume
	}
	bridge.Chain = func(ctx context.Context, call PolicyCall, policies []Policy) Decision {
		v, _ := askChain(call, policies, func(_ int, p Policy, call PolicyCall) (Decision, error) {
			return p(ctx, call), nil
		})
		return v.decision()
	}
	bridge.ChangeTools = (*State).changeTools
	bridge.ValidateInput = func(ctx context.Context, tool string, schema, input json.RawMessage) error {
		s, err := compileSchema(schema)
		if err != nil {
			return fmt.Errorf("toolrun: tool %q: %w", tool, err)
		}
		return (&toolSchema{tool: tool, schema: s}).validate(ctx, input)
	}
}

// ownCalls gives t's turn in progress, a copy already, a slice of calls
// of its own, so that a decision or result recorded in t is not recorded
// in the State it was cut from.
func ownCalls(t *State) *State {
	if t.pending != nil {
		t.pending.Calls = slices.Clone(t.pending.Calls)
	}
	return t
}

// Stop records in s a stop that a driver made without a Runner: only
// [StopPayloadTooLarge] and [StopError], the stops a driver finds on its
// own. A runner resumed from s stops as a Runner's own stop would: a
// StopPayloadTooLarge holds, a StopError is tried again. Any other reason
// is refused with an error, and s is left as it was.
func (s *State) Stop(reason StopReason, detail string) error {
	switch reason {
	case StopPayloadTooLarge, StopError:
	default:
		return fmt.Errorf("toolrun: stop: a driver cannot make a %q stop; only %q and %q", reason, StopPayloadTooLarge, StopError)
	}
	s.StopReason, s.Detail, s.Budget = reason, detail, ""
	return nil
}

// committedTurn returns the number of the turn r committed last, if it has
// received no response since, and the results of that turn's calls in the
// response's order, as [State.CallResult] gave them while it was in
// progress; 0 and nil otherwise.
func (r *Runner) committedTurn() (int, []*ToolResult) {
	p := r.committed
	if p == nil {
		return 0, nil
	}
	out := make([]*ToolResult, 0, len(p.Calls))
	for i := range p.Calls {
		c := p.Calls[i].detached()
		if c.Result == nil {
			continue // not reached: a turn is committed once every call is answered
		}
		out = append(out, c.toolResult())
	}
	return p.Turn, out
}
