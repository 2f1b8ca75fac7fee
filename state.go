package toolrun

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun/internal/deepcopy"
)

// stateFormat is the version of the [State] format this package writes. A
// State of another format is refused by [Resume].
const stateFormat = 2

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
//
// The turn in progress — its response and, for each call, where it is in
// its life (new, decided, started, answered), its decision and its result —
// is in the JSON but not in exported fields: it changes only through
// [State.Decide] and driver.SetResult, which move a call forward and never
// back, and is read through [State.Calls], [State.CallResult] and
// [State.AwaitingApproval], which return copies. A call cannot be marked
// unanswered by hand and so run twice.
type State struct {
	// Format is the version of the format: 2 for a state this package
	// writes. Resume refuses another.
	Format int `json:"format"`
	// Version counts the saves of the run to Options.Store; see [Store].
	Version uint64 `json:"version,omitempty"`
	// Params are the request params with the history as Messages, without
	// the runner's own tools (those come from the tools given to Resume).
	// The tools added during the run are read with [State.AddedTools].
	Params anthropic.BetaMessageNewParams `json:"params"`
	// Betas are Params.Betas, which travel as a header and are not in
	// Params' JSON.
	Betas []anthropic.AnthropicBeta `json:"betas,omitempty"`
	// pending is the turn handed out and not yet committed, if any.
	pending *turnState
	// tools are the tools added during the run and the changes not sent
	// yet (addtools.go); read through [State.AddedTools].
	tools *toolChanges
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
	// ToolFailures counts the calls answered with is_error that were not
	// denied or skipped: a decision is not a failure.
	ToolFailures int `json:"tool_failures"`
	// ToolDenials counts the calls answered as denied.
	ToolDenials int   `json:"tool_denials,omitempty"`
	Usage       Usage `json:"usage"`
	// CostUSD is what the run's responses cost so far; CostIncomplete
	// reports that a response's model had no price.
	CostUSD        float64 `json:"cost_usd,omitempty"`
	CostIncomplete bool    `json:"cost_incomplete,omitempty"`
	// edited reports that the caller changed the history after pending was
	// handed out, so pending will be left out. It and compactNext sit
	// beside CostIncomplete, in the padding after it: a State held by the
	// thousand stays in its size class (the bench's held-run row measures it).
	edited bool
	// compactNext is set by [Runner.CompactBeforeNextTurn] until the
	// compaction it asks for is made.
	compactNext bool
	// held are messages appended (AppendMessages) to a turn whose results
	// answer calls made from code (ToolCall.Caller): the API takes
	// nothing but tool_result blocks in the user turn that answers them,
	// so the messages wait, and go after the next turn that is not one of
	// those (a turn's After), in the order they were appended.
	held []anthropic.BetaMessageParam
	// StopReason and Detail are how the run stopped, if it had; Budget
	// names the bound of a [StopBudget] stop, as [Result.Budget] does, so
	// that a resumed run stops as the run that saved it did: with the same
	// error, and going on from a wall-time stop (see [Budget]). A State
	// written before Budget was kept has none, and its StopBudget stop is
	// taken for final.
	StopReason StopReason `json:"stop_reason,omitempty"`
	Detail     string     `json:"detail,omitempty"`
	Budget     BudgetKind `json:"budget,omitempty"`
	// RunID is the Options.RunID of the runner that exported or saved the
	// state, if it had one. [Open] refuses a state its store holds under
	// another id (moved there from another run); with Options.StateKey
	// the id is signed with the rest, so it cannot be changed to match.
	// [Resume] takes a state of any run: resuming one under a new RunID
	// starts a copy of it.
	RunID string `json:"run_id,omitempty"`
	// Signature is the HMAC-SHA256 of the rest of the state, in hex, when
	// Options.StateKey is set.
	Signature string `json:"signature,omitempty"`
}

// plainState is State without its methods, so that its exported fields
// encode as they are.
type plainState State

// stateJSON is the JSON form of a State: its exported fields and the turn
// in progress.
type stateJSON struct {
	*plainState
	Pending     *turnState                   `json:"pending,omitempty"`
	Edited      bool                         `json:"edited,omitempty"`
	CompactNext bool                         `json:"compact_next,omitempty"`
	Tools       *toolChanges                 `json:"tools,omitempty"`
	Held        []anthropic.BetaMessageParam `json:"held,omitempty"`
}

// MarshalJSON encodes s whole, with the turn in progress.
func (s State) MarshalJSON() ([]byte, error) {
	p := plainState(s)
	return json.Marshal(stateJSON{plainState: &p, Pending: s.pending, Edited: s.edited, CompactNext: s.compactNext, Tools: s.tools, Held: s.held})
}

// UnmarshalJSON decodes a State that MarshalJSON encoded.
func (s *State) UnmarshalJSON(b []byte) error {
	j := stateJSON{plainState: (*plainState)(s)}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	s.pending, s.edited, s.compactNext, s.tools, s.held = j.Pending, j.Edited, j.CompactNext, j.Tools, j.Held
	return nil
}

// turnState is a response not yet committed to the history, and its calls.
type turnState struct {
	Turn int `json:"turn"`
	// Message is the response as an assistant message.
	Message    anthropic.BetaMessageParam `json:"message"`
	StopReason anthropic.BetaStopReason   `json:"stop_reason"`
	Calls      []callState                `json:"calls"`
	// After are messages to append to the history after the turn's tool
	// results, when it is committed (see State.AppendMessages).
	After []anthropic.BetaMessageParam `json:"after,omitempty"`
}

// callPhase is where a call is in its life: new → decided → started →
// answered. A decided call may be answered without starting (denied,
// skipped, invalid input), and a call deferred to a person goes back to
// new when the person decides, for the rules to take that decision once.
// The phase is the one record of whether a call is decided: a decision
// recorded (phase decided or later) stands, in this runner and in every
// runner resumed from the State.
type callPhase string

// The phases of a call.
const (
	// phaseNew: the call awaits the rules' decision: it has none, or it
	// has a person's answer to its deferral (DecidedBy is ByApproval),
	// which the rules take or overrule (see [Policy]).
	phaseNew callPhase = "new"
	// phaseDecided: the call has a decision (callState.Decision): allowed
	// and about to run, or deferred to a person ([Defer]).
	phaseDecided callPhase = "decided"
	// phaseStarted: the tool was called (journaled before it was). A call
	// found started when a run continues did not finish: it is run again
	// only if its tool is idempotent, and otherwise answered with
	// [ErrInterrupted].
	phaseStarted callPhase = "started"
	// phaseAnswered: the call has its result and never runs again.
	phaseAnswered callPhase = "answered"
)

// DecidedBy says who decided a call.
type DecidedBy string

// Who decides a call; see [Policy] for the order.
const (
	ByDefault  DecidedBy = "default"  // no rule had anything to say: allowed
	ByPolicy   DecidedBy = "policy"   // Options.Policy or the tool's ToolConfig.Policy, chained
	ByApproval DecidedBy = "approval" // a person, with Runner.Decide or State.Decide
	ByAlways   DecidedBy = "always"   // an earlier Always approval of the tool
)

// callState is one tool call of a [turnState].
type callState struct {
	Call  ToolCall  `json:"call"`
	Phase callPhase `json:"phase"`
	// Decision and DecidedBy are the call's decision once it has one.
	Decision  *Decision `json:"decision,omitempty"`
	DecidedBy DecidedBy `json:"decided_by,omitempty"`
	// Result is the call's answer, in phaseAnswered.
	Result *resultState `json:"result,omitempty"`
}

// awaiting reports whether the call awaits a person's decision.
func (c *callState) awaiting() bool {
	return c.Phase == phaseDecided && c.Decision != nil && c.Decision.Kind == Defer
}

// resultState is an answered call's result.
type resultState struct {
	Content      []Content                                `json:"content,omitempty"`
	IsError      bool                                     `json:"is_error,omitempty"`
	CacheControl anthropic.BetaCacheControlEphemeralParam `json:"cache_control,omitzero"`
	Error        *errorState                              `json:"error,omitempty"`
	Duration     time.Duration                            `json:"duration,omitempty"`
	Ran          bool                                     `json:"ran,omitempty"`
	Truncated    bool                                     `json:"truncated,omitempty"`
}

// errorState is a result's error as plain data, so that errors.Is and
// errors.As answer the same for it after a round trip through JSON as in
// the process that ran the call: [ErrDenied], [ErrNotRun],
// [ErrInterrupted], [ErrUnknownTool], *[ValidationError], *[PanicError] and
// *[TimeoutError] are kept; any other error keeps its text.
type errorState struct {
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

// sentinelKinds are the sentinels an errorState keeps, by kind.
var sentinelKinds = []struct {
	kind string
	err  error
}{
	{"interrupted", ErrInterrupted},
	{"not_run", ErrNotRun},
	{"denied", ErrDenied},
	{"unknown_tool", ErrUnknownTool},
}

func errorOf(err error) *errorState {
	if err == nil {
		return nil
	}
	es := &errorState{Kind: "tool", Message: err.Error()}
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
func (es *errorState) err() error {
	switch es.Kind {
	case "validation":
		if es.Validation != nil {
			v := *es.Validation
			v.Violations = slices.Clone(v.Violations)
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

func resultOf(res *ToolResult) *resultState {
	return &resultState{Content: slices.Clone(res.Content), IsError: res.IsError, CacheControl: res.CacheControl,
		Error: errorOf(res.Err), Duration: res.Duration, Ran: res.Ran, Truncated: res.Truncated}
}

// toolResult rebuilds the result of c from its state.
func (c *callState) toolResult() *ToolResult { return c.Result.toolResult(c.Call, c.Decision) }

// cloneContent returns a copy of content that shares nothing with it: a
// block is a union of pointers, so the blocks are copied through their
// JSON, which is how a State keeps them anyway. Content that does not
// encode is copied one level deep.
func cloneContent(content []Content) []Content {
	if content == nil {
		return nil
	}
	var out []Content
	if b, err := json.Marshal(content); err == nil && json.Unmarshal(b, &out) == nil && len(out) == len(content) {
		return out
	}
	return slices.Clone(content)
}

// cloneDecision returns a copy of d that shares no slice with it.
func cloneDecision(d Decision) Decision {
	d.Input = slices.Clone(d.Input)
	d.Result = cloneContent(d.Result)
	return d
}

// detached returns a copy of c that shares nothing with it, for a reader
// of the State whose writes must not reach it.
func (c *callState) detached() callState {
	out := *c
	out.Call.Input = slices.Clone(c.Call.Input)
	if c.Decision != nil {
		d := cloneDecision(*c.Decision)
		out.Decision = &d
	}
	if c.Result != nil {
		rs := *c.Result
		rs.Content = cloneContent(rs.Content)
		if rs.Error != nil {
			es := *rs.Error
			rs.Error = &es
		}
		out.Result = &rs
	}
	return out
}

// toolResult rebuilds the result rs was made from, of call decided by d.
func (rs *resultState) toolResult(call ToolCall, d *Decision) *ToolResult {
	res := &ToolResult{Call: call, Content: rs.Content, IsError: rs.IsError, CacheControl: rs.CacheControl,
		Duration: rs.Duration, Ran: rs.Ran, Truncated: rs.Truncated}
	if rs.Error != nil {
		res.Err = rs.Error.err()
	}
	if d != nil {
		res.Decision = *d
	}
	return res
}

// MarshalJSON encodes the result as a [State] keeps it: content,
// is_error, cache_control, duration, ran, truncated, and the error as plain
// data (see Err), so that errors.Is and errors.As answer the same for it
// after a round trip as in the process that ran the call: [ErrDenied],
// [ErrNotRun], [ErrInterrupted], [ErrUnknownTool], *[ValidationError],
// *[PanicError] and *[TimeoutError] are kept; any other error keeps its
// text. Call and Decision are not in it: the State keeps them beside the
// result.
func (res ToolResult) MarshalJSON() ([]byte, error) { return json.Marshal(resultOf(&res)) }

// UnmarshalJSON decodes what MarshalJSON encoded.
func (res *ToolResult) UnmarshalJSON(b []byte) error {
	var rs resultState
	if err := json.Unmarshal(b, &rs); err != nil {
		return err
	}
	d := res.Decision
	*res = *rs.toolResult(res.Call, &d)
	return nil
}

// Calls returns the calls of the turn in progress, in the order of the
// response, answered or not; nil if no turn is in progress. They are
// copies: changing them does not change s.
func (s *State) Calls() []ToolCall {
	if s.pending == nil {
		return nil
	}
	out := make([]ToolCall, len(s.pending.Calls))
	for i, c := range s.pending.Calls {
		out[i] = c.Call
		out[i].Input = slices.Clone(c.Call.Input)
	}
	return out
}

// ResponseText returns the text of the response of the turn in progress
// (its text blocks, in order), and whether a turn is in progress: the
// response whose calls [State.Calls] lists, which is in Params.Messages
// only once the turn is committed. A driver that reports each response as
// it arrives reads it here. A state without its history
// (driver.Skeleton) has no response text.
func (s *State) responseText() (string, bool) {
	if s.pending == nil || s.pending.Message.OfAssistant == nil {
		return "", s.pending != nil
	}
	var text string
	for _, c := range s.pending.Message.OfAssistant.Content {
		if c.OfText != nil {
			text += c.OfText.Text
		}
	}
	return text, true
}

// CallResult returns the result of the pending call toolUseID, with its
// call and decision, if it has one. The result is a copy: changing it
// does not change s.
func (s *State) CallResult(toolUseID string) (*ToolResult, bool) {
	cs := s.call(toolUseID)
	if cs == nil || cs.Result == nil {
		return nil, false
	}
	c := cs.detached()
	return c.toolResult(), true
}

// clone returns a copy of s that shares no slice the runner changes.
func (s *State) clone() *State {
	c := *s
	c.Params.Messages = slices.Clone(s.Params.Messages)
	c.Params.Tools = slices.Clone(s.Params.Tools)
	c.Betas = slices.Clone(s.Betas)
	c.AlwaysAllow = slices.Clone(s.AlwaysAllow)
	c.Removed = slices.Clone(s.Removed)
	c.held = slices.Clone(s.held)
	if s.pending != nil {
		p := *s.pending
		p.Calls = slices.Clone(s.pending.Calls)
		p.After = slices.Clone(s.pending.After)
		c.pending = &p
	}
	return &c
}

// A State's signature is an HMAC-SHA256, with Options.StateKey, of its
// Version and of the SHA-256 of each of its parts' canonical JSON: the
// rest of the state (restJSON), its Params with the history and its
// Betas, and, for a turn in progress, the response and each call. A part
// is canonical once decoded and encoded again, so that object keys are
// sorted and numbers kept as written. Signing part by part lets a runner
// that saves a turn call by call (an appending Store) sign only what each
// save changed, reusing the digests of the parts it did not: the cost of
// a signed save is what the step added, as an unsigned one's is, not the
// whole state again.
type stateDigests struct {
	rest, params, message [sha256.Size]byte
	pending               bool
	calls                 [][sha256.Size]byte
}

// canonicalBytes counts the bytes canonicalized for signatures, for the
// tests that check a signed save costs what it changed.
var canonicalBytes atomic.Int64

// partDigest returns the SHA-256 of the canonical form of the JSON b.
func partDigest(b []byte) ([sha256.Size]byte, error) {
	canonicalBytes.Add(int64(len(b)))
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return [sha256.Size]byte{}, err
	}
	c, err := json.Marshal(v)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(c), nil
}

// digests returns the digests of every part of s.
func (s *State) digests() (*stateDigests, error) {
	d := &stateDigests{}
	var err error
	part := func(b []byte, encErr error, into *[sha256.Size]byte) {
		if err != nil {
			return
		}
		if encErr != nil {
			err = encErr
			return
		}
		*into, err = partDigest(b)
	}
	b, e := restJSON(s)
	part(b, e, &d.rest)
	b, e = paramsPart(s)
	part(b, e, &d.params)
	if s.pending != nil {
		d.pending = true
		b, e = messagePart(s)
		part(b, e, &d.message)
		d.calls = make([][sha256.Size]byte, len(s.pending.Calls))
		for i := range s.pending.Calls {
			b, e = callPart(s, i)
			part(b, e, &d.calls[i])
		}
	}
	if err != nil {
		return nil, fmt.Errorf("toolrun: signing the state: %w", err)
	}
	return d, nil
}

// mac returns the signature of a state of version whose parts have the
// digests d.
func (d *stateDigests) mac(key []byte, version uint64) string {
	m := hmac.New(sha256.New, key)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], version)
	m.Write([]byte("toolrun state\x00"))
	m.Write(n[:])
	m.Write(d.rest[:])
	m.Write(d.params[:])
	if d.pending {
		binary.BigEndian.PutUint64(n[:], uint64(len(d.calls)))
		m.Write([]byte{1})
		m.Write(d.message[:])
		m.Write(n[:])
		for _, c := range d.calls {
			m.Write(c[:])
		}
	}
	return hex.EncodeToString(m.Sum(nil))
}

func (s *State) mac(key []byte) (string, error) {
	d, err := s.digests()
	if err != nil {
		return "", err
	}
	return d.mac(key, s.Version), nil
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

// call returns the pending call with id, or nil.
func (s *State) call(id string) *callState {
	if s.pending == nil {
		return nil
	}
	for i := range s.pending.Calls {
		if s.pending.Calls[i].Call.ID == id {
			return &s.pending.Calls[i]
		}
	}
	return nil
}

// Decide records a person's decision for a call awaiting approval: Allow
// (with Input, which must be JSON, to run it with other input; with Always,
// for every later call of the tool that would be deferred too), Deny or
// Skip. It is the one rule
// for a person's decision, which [Runner.Decide] and the Temporal module
// apply too: a call that does not await a decision — decided by a person
// already, answered, or not deferred — is refused with an error wrapping
// [ErrNotAwaitingApproval], so a decision, once given, stands. A decision may
// arrive while the other calls of the turn run; the run goes on once every
// deferred call has one.
//
// A person's Allow answers the deferral only: a deny rule (Options.Policy,
// a tool's policy) still wins when the run goes on, in this
// process or after Resume with other Options.
//
// SetResult, Decide and [State.AwaitingApproval] change and read s as plain
// data, with no runner, no client and no I/O, so a deterministic workflow
// may call them.
func (s *State) Decide(toolUseID string, d Decision) error {
	cs, err := s.decidable(toolUseID, d)
	if err != nil {
		return err
	}
	d = cloneDecision(d)
	// Back to new: the rules decide the call once more, with the person's
	// decision (see [Policy]), when the run goes on.
	cs.Decision, cs.DecidedBy, cs.Phase = &d, ByApproval, phaseNew
	if d.Kind == Allow && d.Always && !slices.Contains(s.AlwaysAllow, cs.Call.Name) {
		s.AlwaysAllow = append(s.AlwaysAllow, cs.Call.Name)
		slices.Sort(s.AlwaysAllow)
	}
	return nil
}

// decidable returns the call that decision d of a person for toolUseID
// would answer, or why [State.Decide] refuses it; it changes nothing.
func (s *State) decidable(toolUseID string, d Decision) (*callState, error) {
	if d.Kind == Defer {
		return nil, errors.New("toolrun: decide: a person's decision cannot be Defer")
	}
	if !d.Kind.valid() {
		return nil, fmt.Errorf("toolrun: decide: unknown decision kind %d; want Allow, Deny or Skip", int(d.Kind))
	}
	if len(d.Input) > 0 && !json.Valid(d.Input) {
		// Kept, it would leave a State that does not encode, and a run
		// whose journal cannot be saved.
		return nil, errors.New("toolrun: decide: the decision's Input is not JSON")
	}
	cs := s.call(toolUseID)
	switch {
	case cs == nil:
		return nil, fmt.Errorf("%w: no call %q in the pending turn", ErrNotAwaitingApproval, toolUseID)
	case cs.DecidedBy == ByApproval || cs.Phase == phaseAnswered || cs.Phase == phaseStarted:
		return nil, fmt.Errorf("%w: call %q (%s) was decided, or has run, already", ErrNotAwaitingApproval, toolUseID, cs.Call.Name)
	case !cs.awaiting():
		return nil, fmt.Errorf("%w: call %q (%s) was never deferred to a person", ErrNotAwaitingApproval, toolUseID, cs.Call.Name)
	}
	return cs, nil
}

// SetResult records res as the result of the pending call toolUseID, as
// driver.ExecuteCall would have on a runner holding s: for a call run
// elsewhere, or answered by the caller (a call interrupted by a crash, say).
// What is recorded is what the result's JSON form keeps (see
// [ToolResult.MarshalJSON]), and, as by ExecuteCall, a result with Err and
// no Content, or with a zero content block, is an is_error result that
// says why; res.Call and
// res.Decision are ignored. The
// call is then never run again. It is an error if the pending turn has no
// such call or the call has a result already.
func (s *State) setResult(toolUseID string, res *ToolResult) error {
	cs := s.call(toolUseID)
	switch {
	case res == nil:
		return fmt.Errorf("toolrun: set result: nil result for call %q", toolUseID)
	case cs == nil:
		return fmt.Errorf("toolrun: set result: no call %q in the pending turn", toolUseID)
	case cs.Phase == phaseAnswered:
		return fmt.Errorf("toolrun: set result: call %q already has a result", toolUseID)
	}
	failed := *res
	failed.Call = cs.Call
	asFailure(&failed)
	emptyBlock(&failed)
	rs := resultOf(&failed)
	rs.Content = cloneContent(rs.Content) // the caller keeps res
	cs.Result, cs.Phase = rs, phaseAnswered
	return nil
}

// AwaitingApproval lists the calls of s deferred to a person and not
// decided yet, in order.
func (s *State) AwaitingApproval() []PendingCall {
	if s.pending == nil {
		return nil
	}
	var out []PendingCall
	for i := range s.pending.Calls {
		if cs := &s.pending.Calls[i]; cs.awaiting() {
			out = append(out, PendingCall{Call: cs.Call, Reason: cs.Decision.Reason})
		}
	}
	return out
}

// Resume returns a runner that continues the run saved in s, with the same
// client, tools and options as the run that saved it, or others: a tool
// missing now makes its pending calls fail as unknown, and this runner's
// rules decide every call the State records no decision for, a person's
// answer to a deferral included (see [Policy]); a decision recorded stands. Calls
// that were answered are not run again, and a call that started and never
// finished runs again only if its tool is idempotent. A run that was
// awaiting approval still is: give the decisions with [Runner.Decide],
// then Run.
//
// A tool the run was given with [Runner.AddTools] must be among tools, as
// the State keeps its definition and not its function: Resume returns an
// error wrapping [ErrAddedToolMissing] that names it otherwise.
//
// With Options.StateKey, s must carry a matching signature, or Resume
// returns an error wrapping [ErrStateSignature]. A State that
// [State.Check] refuses (edited or forged: a negative counter, calls that
// are not its response's) is refused with an error wrapping
// [ErrInvalidState].
func Resume(client anthropic.Client, s *State, tools []Tool, opts *Options) (*Runner, error) {
	if s == nil {
		return nil, errors.New("toolrun: resume: nil state")
	}
	if s.Format != stateFormat {
		return nil, fmt.Errorf("toolrun: resume: state format %d, want %d", s.Format, stateFormat)
	}
	return newTemplate(client, tools, opts).Resume(s)
}

// Resume returns a runner that continues the run s, as the function
// [Resume] does, with the template's client, tools and options.
func (t *template) Resume(s *State) (*Runner, error) {
	if s == nil {
		return nil, errors.New("toolrun: resume: nil state")
	}
	if s.Format != stateFormat {
		return nil, fmt.Errorf("toolrun: resume: state format %d, want %d", s.Format, stateFormat)
	}
	return t.resume(s, false)
}

// resume is Template.Resume; with owned, the runner takes s over, as
// package driver's ResumeOwned does, rather than copying it through JSON.
func (t *template) resume(s *State, owned bool) (*Runner, error) {
	r := t.newRunner()
	if err := s.verify(r.opts.StateKey); err != nil {
		return nil, fmt.Errorf("toolrun: resume: %w", err)
	}
	if owned {
		r.st = s.clone()
	} else {
		b, err := json.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("toolrun: resume: %w", err)
		}
		if err := json.Unmarshal(b, r.st); err != nil {
			return nil, fmt.Errorf("toolrun: resume: %w", err)
		}
	}
	r.st.Signature = ""
	r.st.Betas = slices.Clone(s.Betas)
	r.st.Params.Betas = nil
	r.version = s.Version
	if err := r.st.Check(); err != nil {
		return nil, fmt.Errorf("toolrun: resume: %w", err)
	}
	if err := r.checkAddedTools(); err != nil {
		return nil, fmt.Errorf("toolrun: resume: %w", err)
	}
	r.syncTools()
	if reason := r.st.StopReason; reason != "" && !reason.failed() {
		// The stop is made again as stop made it (setStop): a limit
		// stop resumed is still an error, and Budget still names the
		// bound, which halted reads.
		r.setStop(reason, r.st.Detail, r.st.Budget, nil)
	}
	return r, nil
}

// check reports a turn in progress whose calls could not each get the one
// tool_result the API wants: a call without an id, two calls of one id,
// or calls that are not the tool_use blocks of the turn's response, in
// their order, by id and name. Such a State (edited by hand, or forged)
// would make every later request fail, or leave a call that can never be
// decided. A skeleton's response has no content (driver.Skeleton): its
// calls are checked for their ids alone.
func (p *turnState) check() error {
	ids := make(map[string]bool, len(p.Calls))
	for _, c := range p.Calls {
		switch {
		case c.Call.ID == "":
			return fmt.Errorf("a call of tool %q of turn %d has no id", c.Call.Name, p.Turn)
		case ids[c.Call.ID]:
			return fmt.Errorf("two calls of turn %d share the id %q", p.Turn, c.Call.ID)
		}
		ids[c.Call.ID] = true
	}
	a := p.Message.OfAssistant
	if a == nil {
		return fmt.Errorf("the response of turn %d is not an assistant message", p.Turn)
	}
	if len(a.Content) == 0 {
		return nil
	}
	i := 0
	seam := paramFallbackSeam(a.Content) // a declined attempt's tool_use blocks are no calls
	for j, b := range a.Content {
		tu := b.OfToolUse
		if tu == nil || j < seam {
			continue
		}
		if i >= len(p.Calls) || p.Calls[i].Call.ID != tu.ID || p.Calls[i].Call.Name != tu.Name {
			return fmt.Errorf("the calls of turn %d are not the tool_use blocks of its response (tool_use %q of %q)", p.Turn, tu.ID, tu.Name)
		}
		i++
	}
	if i != len(p.Calls) {
		return fmt.Errorf("turn %d has %d calls for %d tool_use blocks of its response", p.Turn, len(p.Calls), i)
	}
	return nil
}

// check reports a call whose phase and data disagree.
func (c *callState) check() error {
	switch c.Phase {
	case phaseNew:
	case phaseDecided, phaseStarted:
		if c.Decision == nil {
			return fmt.Errorf("call %q is %s without a decision", c.Call.ID, c.Phase)
		}
	case phaseAnswered:
		if c.Result == nil {
			return fmt.Errorf("call %q is answered without a result", c.Call.ID)
		}
	default:
		return fmt.Errorf("call %q has an unknown phase %q", c.Call.ID, c.Phase)
	}
	return nil
}

// skeleton returns s without what only a model request needs and what
// grows with the run: the history (Params.Messages) and the pending
// response as a message (its calls are kept, with their inputs, decisions
// and results).
func skeleton(s *State) *State {
	t := *s
	t.Params.Messages = nil
	if s.pending != nil {
		p := *s.pending
		// An empty assistant message: a zero BetaMessageParam does not
		// round-trip through JSON.
		p.Message = anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{}}
		t.pending = &p
	}
	return &t
}

// merge returns the whole state from skel and whole: skel's progress (the
// decisions and results recorded since) with whole's history and, if it
// is of the same turn, its pending response.
func merge(skel, whole *State) *State {
	s := *skel
	s.Params.Messages = whole.Params.Messages
	if s.pending != nil && whole.pending != nil && whole.pending.Turn == s.pending.Turn {
		p := *s.pending
		p.Message = whole.pending.Message
		s.pending = &p
	}
	return &s
}

// forCall returns the skeleton of s with call id alone.
func forCall(s *State, id string) *State {
	t := skeleton(s)
	if t.pending != nil {
		p := *t.pending
		p.Calls, p.After = nil, nil
		for _, c := range s.pending.Calls {
			if c.Call.ID == id {
				p.Calls = append(p.Calls, c)
			}
		}
		t.pending = &p
	}
	return t
}

// AppendMessages appends a copy of messages to the history after the
// turn in progress: once each of its calls is answered, after their tool
// results, so that the next request gives the model the results and then
// the messages, as a client that answers the last pending calls and says
// something more at once means. It never leaves the turn out: its calls
// still await their decisions, and those decided still run. With no turn
// in progress, or one the caller took over ([Runner.SetMessages],
// [Runner.RetryTurn]), they are appended to the history at once.
//
// A tool_result block among messages for a call of the turn in progress
// is taken out of them, since the turn sends that call's one result: for
// a call not allowed to run (awaiting the rules or a person, or denied by
// a person and not yet answered) it becomes the call's result, as [State.SetResult] records one,
// so the call never runs and a later decision of it is refused; for a
// call allowed, started or answered it is dropped, and the call's own
// result is sent. A message left with no content is dropped.
func (s *State) AppendMessages(messages ...anthropic.BetaMessageParam) {
	if s.pending == nil && len(s.held) > 0 {
		// Behind the messages that wait for a turn that answers no call
		// made from code.
		s.held = append(slices.Clip(s.held), deepcopy.Copy(messages)...)
		return
	}
	if s.pending == nil || s.edited {
		s.Params.Messages = append(slices.Clip(s.Params.Messages), deepcopy.Copy(messages)...)
		return
	}
	s.pending.After = append(slices.Clip(s.pending.After), s.takeResults(deepcopy.Copy(messages))...)
}

// takeResults takes out of messages, which are s's own copy, the
// tool_result blocks for calls of the pending turn, as AppendMessages
// says, and returns what is left.
func (s *State) takeResults(messages []anthropic.BetaMessageParam) []anthropic.BetaMessageParam {
	out := messages[:0]
	for _, m := range messages {
		u := m.OfUser
		if u == nil {
			out = append(out, m)
			continue
		}
		kept := u.Content[:0]
		for _, b := range u.Content {
			tr := b.OfToolResult
			cs := (*callState)(nil)
			if tr != nil {
				cs = s.call(tr.ToolUseID)
			}
			if cs == nil {
				kept = append(kept, b)
				continue
			}
			allowed := cs.Decision != nil && cs.Decision.Kind == Allow
			if cs.awaiting() || (cs.Phase == phaseNew && !allowed) {
				s.setResult(tr.ToolUseID, &ToolResult{Content: tr.Content, IsError: tr.IsError.Value})
			}
		}
		if len(kept) == 0 && len(u.Content) > 0 {
			continue
		}
		u.Content = kept
		out = append(out, m)
	}
	return out
}
