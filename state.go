package toolrun

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// StateFormat is the version of the [State] format this package writes. A
// State of another format is refused by [Resume].
const StateFormat = 2

// State is a run's data: the runner holds one and works on it, and
// everything needed to continue the run is in it, as plain data that
// round-trips through JSON. It holds the request params with the history,
// the turn handed out and not yet committed with each of its calls' phase,
// decision and result, the tools allowed for the rest of the run, the
// counters and the usage so far.
//
// Take a copy with [Runner.State], store it anywhere, and continue with
// [Resume], in this process or another one. What cannot be serialised is
// not in it and is given to Resume again: the client, the tools and the
// [Options]. With Options.StateKey, a State is signed and a changed one is
// refused.
type State struct {
	// Format is [StateFormat] for a state this package wrote.
	Format int `json:"format"`
	// Version counts the saves of the run to Options.Store; see [Store].
	Version uint64 `json:"version,omitempty"`
	// Params are the request params with the history as Messages, without
	// the runner's own tools (those come from the tools given to Resume).
	Params anthropic.BetaMessageNewParams `json:"params"`
	// Betas are Params.Betas, which travel as a header and are not in
	// Params' JSON.
	Betas []anthropic.AnthropicBeta `json:"betas,omitempty"`
	// Pending is the turn handed out and not yet committed, if any.
	Pending *TurnState `json:"pending,omitempty"`
	// Edited reports that the caller changed the history after Pending was
	// handed out, so Pending will be left out.
	Edited bool `json:"edited,omitempty"`
	// AlwaysAllow lists the tools a person allowed for the rest of the run:
	// their calls that would be deferred to a person are allowed.
	AlwaysAllow []string `json:"always_allow,omitempty"`
	// Removed lists the tools taken out of the run with
	// [Runner.RemoveTools]; Resume leaves them out even if it is given them.
	Removed []string `json:"removed,omitempty"`
	// MaxTurns is the turn limit, as [Runner.SetMaxTurns] last set it.
	MaxTurns int `json:"max_turns"`
	// Turns counts the responses received.
	Turns int `json:"turns"`
	// ToolCalls counts the calls answered.
	ToolCalls int `json:"tool_calls"`
	// ToolFailures counts the calls answered with is_error.
	ToolFailures int   `json:"tool_failures"`
	Usage        Usage `json:"usage"`
	// CostUSD is what the run's responses cost so far; CostIncomplete
	// reports that a response's model had no price.
	CostUSD        float64 `json:"cost_usd,omitempty"`
	CostIncomplete bool    `json:"cost_incomplete,omitempty"`
	// StopReason and Detail are how the run stopped, if it had.
	StopReason StopReason `json:"stop_reason,omitempty"`
	Detail     string     `json:"detail,omitempty"`
	// Signature is the HMAC-SHA256 of the rest of the state, in hex, when
	// Options.StateKey is set.
	Signature string `json:"signature,omitempty"`
}

// TurnState is a response not yet committed to the history, and its calls.
type TurnState struct {
	Turn int `json:"turn"`
	// Message is the response as an assistant message.
	Message    anthropic.BetaMessageParam `json:"message"`
	StopReason anthropic.BetaStopReason   `json:"stop_reason"`
	Calls      []CallState                `json:"calls"`
}

// CallPhase is where a call is in its life. A call only moves forward:
// new → decided → started → answered, except that a decided call may be
// answered without starting (denied, skipped, invalid input).
type CallPhase string

// The phases of a call.
const (
	// PhaseNew: the call has arrived and has no decision yet.
	PhaseNew CallPhase = "new"
	// PhaseDecided: the call has a decision (CallState.Decision): allowed
	// and about to run, or deferred to a person ([Defer]).
	PhaseDecided CallPhase = "decided"
	// PhaseStarted: the tool was called (journaled before it was). A call
	// found started when a run continues did not finish: it is run again
	// only if its tool is idempotent, and otherwise answered with
	// [ErrInterrupted].
	PhaseStarted CallPhase = "started"
	// PhaseAnswered: the call has its result and never runs again.
	PhaseAnswered CallPhase = "answered"
)

// DecidedBy says who decided a call.
type DecidedBy string

// Who decides a call; see [Policy] for the order.
const (
	ByDefault  DecidedBy = "default"  // no rule had anything to say: allowed
	ByOptions  DecidedBy = "options"  // Options.Allow, Options.Deny or Options.Decide
	ByPolicy   DecidedBy = "policy"   // the tool's ToolConfig.Policy
	ByApproval DecidedBy = "approval" // a person, with Runner.Decide or State.Decide
	ByAlways   DecidedBy = "always"   // an earlier Always approval of the tool
)

// CallState is one tool call of a [TurnState].
type CallState struct {
	Call  ToolCall  `json:"call"`
	Phase CallPhase `json:"phase"`
	// Decision and DecidedBy are the call's decision once it has one.
	Decision  *Decision `json:"decision,omitempty"`
	DecidedBy DecidedBy `json:"decided_by,omitempty"`
	// Result is the call's answer, in PhaseAnswered.
	Result *ResultState `json:"result,omitempty"`
}

// awaiting reports whether the call awaits a person's decision.
func (c *CallState) awaiting() bool {
	return c.Phase == PhaseDecided && c.Decision != nil && c.Decision.Kind == Defer
}

// ResultState is an answered call's result.
type ResultState struct {
	Content      []Content                                `json:"content,omitempty"`
	IsError      bool                                     `json:"is_error,omitempty"`
	CacheControl anthropic.BetaCacheControlEphemeralParam `json:"cache_control,omitzero"`
	Error        *ErrorState                              `json:"error,omitempty"`
	Duration     time.Duration                            `json:"duration,omitempty"`
	Ran          bool                                     `json:"ran,omitempty"`
	Truncated    bool                                     `json:"truncated,omitempty"`
}

// ErrorState is a result's error as plain data, so that errors.Is and
// errors.As answer the same for it after a round trip through JSON as in
// the process that ran the call: [ErrDenied], [ErrNotRun],
// [ErrInterrupted], [ErrUnknownTool], *[ValidationError], *[PanicError] and
// *[TimeoutError] are kept; any other error keeps its text.
type ErrorState struct {
	// Kind is "denied", "not_run", "interrupted", "unknown_tool",
	// "validation", "panic", "timeout" or "tool" (any other error).
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Tool, Panic, Stack and After are the fields of a *PanicError or a
	// *TimeoutError; Validation is the *ValidationError.
	Tool       string           `json:"tool,omitempty"`
	Panic      string           `json:"panic,omitempty"`
	Stack      string           `json:"stack,omitempty"`
	After      time.Duration    `json:"after,omitempty"`
	Validation *ValidationError `json:"validation,omitempty"`
}

// sentinelKinds are the sentinels an ErrorState keeps, by kind.
var sentinelKinds = []struct {
	kind string
	err  error
}{
	{"interrupted", ErrInterrupted},
	{"not_run", ErrNotRun},
	{"denied", ErrDenied},
	{"unknown_tool", ErrUnknownTool},
}

func errorState(err error) *ErrorState {
	if err == nil {
		return nil
	}
	es := &ErrorState{Kind: "tool", Message: err.Error()}
	var (
		ve *ValidationError
		pe *PanicError
		te *TimeoutError
	)
	switch {
	case errors.As(err, &ve):
		es.Kind, es.Validation = "validation", ve
	case errors.As(err, &pe):
		es.Kind, es.Tool, es.Panic, es.Stack = "panic", pe.Tool, fmt.Sprint(pe.Value), string(pe.Stack)
	case errors.As(err, &te):
		es.Kind, es.Tool, es.After = "timeout", te.Tool, te.After
	default:
		for _, s := range sentinelKinds {
			if errors.Is(err, s.err) {
				es.Kind = s.kind
				break
			}
		}
	}
	return es
}

// err rebuilds the error es was made from.
func (es *ErrorState) err() error {
	switch es.Kind {
	case "validation":
		if es.Validation != nil {
			v := *es.Validation
			return &v
		}
	case "panic":
		return &PanicError{Tool: es.Tool, Value: es.Panic, Stack: []byte(es.Stack)}
	case "timeout":
		return &TimeoutError{Tool: es.Tool, After: es.After}
	}
	for _, s := range sentinelKinds {
		if s.kind == es.Kind {
			return &kindError{msg: es.Message, kind: s.err}
		}
	}
	return errors.New(es.Message)
}

// kindError is a sentinel-wrapping error rebuilt from its text.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

func resultState(res *ToolResult) *ResultState {
	return &ResultState{Content: slices.Clone(res.Content), IsError: res.IsError, CacheControl: res.CacheControl,
		Error: errorState(res.Err), Duration: res.Duration, Ran: res.Ran, Truncated: res.Truncated}
}

// toolResult rebuilds the result of c from its state.
func (c *CallState) toolResult() *ToolResult {
	rs := c.Result
	res := &ToolResult{Call: c.Call, Content: rs.Content, IsError: rs.IsError, CacheControl: rs.CacheControl,
		Duration: rs.Duration, Ran: rs.Ran, Truncated: rs.Truncated}
	if rs.Error != nil {
		res.Err = rs.Error.err()
	}
	if c.Decision != nil {
		res.Decision = *c.Decision
	}
	return res
}

// clone returns a copy of s that shares no slice the runner changes.
func (s *State) clone() *State {
	c := *s
	c.Params.Messages = slices.Clone(s.Params.Messages)
	c.Params.Tools = slices.Clone(s.Params.Tools)
	c.Betas = slices.Clone(s.Betas)
	c.AlwaysAllow = slices.Clone(s.AlwaysAllow)
	c.Removed = slices.Clone(s.Removed)
	if s.Pending != nil {
		p := *s.Pending
		p.Calls = slices.Clone(s.Pending.Calls)
		c.Pending = &p
	}
	return &c
}

// canonicalJSON is the JSON that a State's signature covers: its encoding
// with the signature left out, decoded and encoded again so that object keys
// are sorted and numbers kept as written.
func (s *State) canonicalJSON() ([]byte, error) {
	c := *s
	c.Signature = ""
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func (s *State) mac(key []byte) (string, error) {
	b, err := s.canonicalJSON()
	if err != nil {
		return "", fmt.Errorf("toolrun: signing the state: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil)), nil
}

// sign sets s.Signature with key, if key is set.
func (s *State) sign(key []byte) error {
	if len(key) == 0 {
		return nil
	}
	sig, err := s.mac(key)
	s.Signature = sig
	return err
}

// verify checks s.Signature against key, if key is set.
func (s *State) verify(key []byte) error {
	if len(key) == 0 {
		return nil
	}
	if s.Signature == "" {
		return fmt.Errorf("%w: the state is not signed", ErrStateSignature)
	}
	want, err := s.mac(key)
	if err != nil {
		return err
	}
	got, err := hex.DecodeString(s.Signature)
	wantb, _ := hex.DecodeString(want)
	if err != nil || !hmac.Equal(got, wantb) {
		return fmt.Errorf("%w: it was changed since it was signed, or signed with another key", ErrStateSignature)
	}
	return nil
}

// callState returns the pending call with id, or nil.
func (s *State) callState(id string) *CallState {
	if s.Pending == nil {
		return nil
	}
	for i := range s.Pending.Calls {
		if s.Pending.Calls[i].Call.ID == id {
			return &s.Pending.Calls[i]
		}
	}
	return nil
}

// Decide records a person's decision for a call awaiting approval: Allow
// (with Input to run it with other input; with Always, for every later call
// of the tool that would be deferred too), Deny or Skip. It is the one rule
// for a person's decision, which [Runner.Decide] and the Temporal module
// apply too: a call that does not await a decision — decided by a person
// already, answered, or not deferred — is refused with an error wrapping
// [ErrAlreadyDecided], so a decision, once given, stands. A decision may
// arrive while the other calls of the turn run; the run goes on once every
// deferred call has one.
//
// A person's Allow answers the deferral only: a deny rule (the Deny list,
// Options.Decide, a policy) still wins when the run goes on, in this
// process or after Resume with other Options.
//
// SetResult, Decide and [State.AwaitingApproval] change and read s as plain
// data, with no runner, no client and no I/O, so a deterministic workflow
// may call them.
func (s *State) Decide(toolUseID string, d Decision) error {
	if d.Kind == Defer {
		return errors.New("toolrun: decide: a person's decision cannot be Defer")
	}
	cs := s.callState(toolUseID)
	switch {
	case cs == nil:
		return fmt.Errorf("toolrun: decide: no call %q in the pending turn", toolUseID)
	case cs.DecidedBy == ByApproval || cs.Phase == PhaseAnswered || cs.Phase == PhaseStarted:
		return fmt.Errorf("%w: call %q (%s)", ErrAlreadyDecided, toolUseID, cs.Call.Name)
	case !cs.awaiting():
		return fmt.Errorf("%w: call %q (%s) does not await approval", ErrAlreadyDecided, toolUseID, cs.Call.Name)
	}
	d.Input = slices.Clone(d.Input)
	cs.Decision, cs.DecidedBy = &d, ByApproval
	if d.Kind == Allow && d.Always && !slices.Contains(s.AlwaysAllow, cs.Call.Name) {
		s.AlwaysAllow = append(s.AlwaysAllow, cs.Call.Name)
		slices.Sort(s.AlwaysAllow)
	}
	return nil
}

// SetResult records res as the result of the pending call toolUseID, as
// [Runner.ExecuteCall] would have on a runner holding s: for a call run
// elsewhere, or answered by the caller (a call interrupted by a crash, say).
// The call is then never run again. It is an error if the pending turn has
// no such call or the call has a result already.
func (s *State) SetResult(toolUseID string, res ResultState) error {
	cs := s.callState(toolUseID)
	if cs == nil {
		return fmt.Errorf("toolrun: set result: no call %q in the pending turn", toolUseID)
	}
	if cs.Phase == PhaseAnswered {
		return fmt.Errorf("toolrun: set result: call %q already has a result", toolUseID)
	}
	res.Content = slices.Clone(res.Content)
	cs.Result, cs.Phase = &res, PhaseAnswered
	return nil
}

// AwaitingApproval lists the calls of s deferred to a person and not
// decided yet, in order.
func (s *State) AwaitingApproval() []PendingCall {
	if s.Pending == nil {
		return nil
	}
	var out []PendingCall
	for i := range s.Pending.Calls {
		if cs := &s.Pending.Calls[i]; cs.awaiting() {
			out = append(out, PendingCall{Call: cs.Call, Reason: cs.Decision.Reason})
		}
	}
	return out
}

// Resume returns a runner that continues the run saved in s, with the same
// client, tools and options as the run that saved it, or others: a tool
// missing now makes its pending calls fail as unknown, and this runner's
// deny rules apply to every call not answered yet (see [Policy]). Calls
// that were answered are not run again, and a call that started and never
// finished runs again only if its tool is idempotent. A run that was
// awaiting approval still is: give the decisions with [Runner.Decide],
// then Run.
//
// With Options.StateKey, s must carry a matching signature, or Resume
// returns an error wrapping [ErrStateSignature].
func Resume(client anthropic.Client, s *State, tools []Tool, opts *Options) (*Runner, error) {
	if s == nil {
		return nil, errors.New("toolrun: resume: nil state")
	}
	if s.Format != StateFormat {
		return nil, fmt.Errorf("toolrun: resume: state format %d, want %d", s.Format, StateFormat)
	}
	r := newRunner(client, tools, opts)
	if err := s.verify(r.opts.StateKey); err != nil {
		return nil, fmt.Errorf("toolrun: resume: %w", err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("toolrun: resume: %w", err)
	}
	if err := json.Unmarshal(b, r.st); err != nil {
		return nil, fmt.Errorf("toolrun: resume: %w", err)
	}
	r.st.Signature = ""
	r.st.Betas = slices.Clone(s.Betas)
	r.st.Params.Betas = nil
	r.version = s.Version
	if p := r.st.Pending; p != nil {
		for i := range p.Calls {
			if err := p.Calls[i].check(); err != nil {
				return nil, fmt.Errorf("toolrun: resume: %w", err)
			}
		}
	}
	r.syncTools()
	if reason := r.st.StopReason; reason != "" && reason != StopError && reason != StopCanceled && reason != StopMalformedResponse {
		res := &Result{StopReason: reason, Detail: r.st.Detail, Messages: r.Messages(), Usage: r.st.Usage,
			CostUSD: r.st.CostUSD, CostComplete: !r.st.CostIncomplete,
			Turns: r.st.Turns, ToolCalls: r.st.ToolCalls, ToolFailures: r.st.ToolFailures}
		if reason == StopAwaitingApproval {
			res.Pending = r.st.AwaitingApproval()
		}
		r.setStopped(res)
	}
	return r, nil
}

// check reports a call whose phase and data disagree.
func (c *CallState) check() error {
	switch c.Phase {
	case PhaseNew:
	case PhaseDecided, PhaseStarted:
		if c.Decision == nil {
			return fmt.Errorf("call %q is %s without a decision", c.Call.ID, c.Phase)
		}
	case PhaseAnswered:
		if c.Result == nil {
			return fmt.Errorf("call %q is answered without a result", c.Call.ID)
		}
	default:
		return fmt.Errorf("call %q has an unknown phase %q", c.Call.ID, c.Phase)
	}
	return nil
}
