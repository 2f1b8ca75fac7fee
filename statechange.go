package toolrun

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// appender is a [Store] that can also save a version of a run as what
// changed since the version it holds: package driver's StateAppender,
// whose documentation is its contract. The runner saves with Append
// whenever a step changed only what a [StateChange] can carry.
type appender interface {
	Store
	Append(ctx context.Context, id string, c *StateChange, prev uint64) error
}

// StateChange is what changed in a run's [State] from one saved version to
// the next, as a runner hands it to a store's Append ([github.com/toolrun/toolrun/driver.StateAppender]): the calls of the
// turn in progress that changed, and the parts of the rest of the state
// that changed. It is opaque data: a store keeps its JSON (MarshalJSON)
// and, to load the run, decodes it (UnmarshalJSON) and applies it to the
// state it changes with [State.Apply]. Its size is that of what changed,
// not of the state.
type StateChange struct {
	// Version is the version of the state the change makes.
	Version uint64
	// rest is the state without its params, version and signature, and
	// with its turn in progress stripped of its response and calls, if
	// that changed.
	rest json.RawMessage
	// params is Params and Betas, if they changed.
	params json.RawMessage
	// message is the response of the turn in progress, if it changed.
	message json.RawMessage
	// calls are the calls of the turn in progress that changed.
	calls []changedCall
	// signature is the signature of the state the change makes, if the
	// run is signed (Options.StateKey).
	signature string
}

// changedCall is one call of the turn in progress, at its index in it.
type changedCall struct {
	Index int             `json:"i"`
	ID    string          `json:"id"`
	Call  json.RawMessage `json:"call"`
}

// stateChangeJSON is the JSON form of a StateChange.
type stateChangeJSON struct {
	Version uint64          `json:"version"`
	Rest    json.RawMessage `json:"rest,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Message json.RawMessage `json:"message,omitempty"`
	Calls   []changedCall   `json:"calls,omitempty"`
	Sig     string          `json:"signature,omitempty"`
}

// MarshalJSON encodes c, for a store to keep.
func (c StateChange) MarshalJSON() ([]byte, error) {
	return json.Marshal(stateChangeJSON{Version: c.Version, Rest: c.rest, Params: c.params, Message: c.message, Calls: c.calls, Sig: c.signature})
}

// UnmarshalJSON decodes a StateChange that MarshalJSON encoded.
func (c *StateChange) UnmarshalJSON(b []byte) error {
	var j stateChangeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = StateChange{Version: j.Version, rest: j.Rest, params: j.Params, message: j.Message, calls: j.Calls, signature: j.Sig}
	return nil
}

// errChange is wrapped by the error of [State.Apply] for a change that
// does not apply to the state.
var errChange = errors.New("toolrun: the change does not apply to this state")

// Apply changes s by c, making it the state of version c.Version, in
// place. A store calls it in Load, on the state it saved, for each change
// appended since, in order. A change applies only to the state of the
// version it was made after, which has a turn in progress with the same
// calls; one that does not fit (another turn, a call that is not there)
// is refused with an error and s is left as it was. Apply sets s's
// signature to the change's: that of the whole state it makes, for a
// signed run (Options.StateKey), and none for an unsigned one. Apply
// checks no signature; the runner that loads the state does.
func (s *State) Apply(c *StateChange) error {
	if c == nil {
		return fmt.Errorf("%w: no change", errChange)
	}
	if s.pending == nil {
		return fmt.Errorf("%w: it changes a turn in progress and the state has none", errChange)
	}
	t := *s
	p := *s.pending
	if c.rest != nil {
		var r State
		if err := json.Unmarshal(c.rest, &r); err != nil {
			return fmt.Errorf("%w: decoding it: %w", errChange, err)
		}
		if r.pending == nil || r.pending.Turn != p.Turn {
			return fmt.Errorf("%w: it is of another turn", errChange)
		}
		r.Params, r.Betas = t.Params, t.Betas
		rp := *r.pending
		rp.Message, rp.Calls = p.Message, p.Calls
		t, p = r, rp
	}
	if c.params != nil {
		var pj paramsJSON
		if err := json.Unmarshal(c.params, &pj); err != nil {
			return fmt.Errorf("%w: decoding its params: %w", errChange, err)
		}
		t.Params, t.Betas = pj.Params, pj.Betas
	}
	if c.message != nil {
		var m anthropic.BetaMessageParam
		if err := json.Unmarshal(c.message, &m); err != nil {
			return fmt.Errorf("%w: decoding its response: %w", errChange, err)
		}
		p.Message = m
	}
	if len(c.calls) > 0 {
		calls := make([]callState, len(c.calls))
		for i, cc := range c.calls {
			if cc.Index < 0 || cc.Index >= len(p.Calls) || p.Calls[cc.Index].Call.ID != cc.ID {
				return fmt.Errorf("%w: it changes call %q, which is not call %d of the turn", errChange, cc.ID, cc.Index)
			}
			if err := json.Unmarshal(cc.Call, &calls[i]); err != nil {
				return fmt.Errorf("%w: decoding call %q: %w", errChange, cc.ID, err)
			}
			if calls[i].Call.ID != cc.ID {
				return fmt.Errorf("%w: call %d is %q, not %q", errChange, cc.Index, calls[i].Call.ID, cc.ID)
			}
		}
		// Written in place: the state is the store's own, decoded for this
		// Load, and a copy per change would make a Load of n changes cost n².
		for i, cc := range c.calls {
			p.Calls[cc.Index] = calls[i]
		}
	}
	t.pending = &p
	t.Version, t.Signature = c.Version, c.signature
	*s = t
	return nil
}

// paramsJSON is the params part of a StateChange.
type paramsJSON struct {
	Params anthropic.BetaMessageNewParams `json:"params"`
	Betas  []anthropic.AnthropicBeta      `json:"betas,omitempty"`
}

// savedShape is what a runner remembers of the state it last saved, to
// tell what the next save changes without encoding what did not: the
// encoded small parts, and the identity of the large ones (the history,
// the response of the turn in progress) and of each call's record. The
// runner never changes a message of the history or the response in place
// (it appends to the history or replaces it, and a turn's response is set
// once), and records a call's progress by a new phase and new Decision and
// Result values, never by writing into the old ones: so the same slice, of
// the same length, holding the same pointers, is the same data.
type savedShape struct {
	digests   *stateDigests // of a signed run's state, for the next signature
	rest      []byte
	params    []byte // Params and Betas, without the history
	history   historyID
	turn      int
	messageID messageID
	calls     []callID
}

// sliceID is the identity of a slice: where its elements are and how many.
type sliceID struct {
	data any // a pointer to the first element of the backing array, or nil
	n    int
}

func sliceIDOf[T any](s []T) sliceID {
	id := sliceID{n: len(s)}
	if cap(s) > 0 {
		id.data = &s[:1][0]
	}
	return id
}

// historyID is the identity of a history: its length and its first and
// last messages. Not the slice's: a snapshot's history is a copy of the
// runner's (a new slice of the same messages, each holding the same
// pointers), so the slice differs at every save and the whole history
// would be saved again with each call. The runner appends to its history
// or replaces it, replacing every message: either changes the length or
// the last message.
type historyID struct {
	n           int
	first, last messageID
}

func historyIDOf(m []anthropic.BetaMessageParam) historyID {
	if len(m) == 0 {
		return historyID{}
	}
	return historyID{n: len(m), first: messageIDOf(&m[0]), last: messageIDOf(&m[len(m)-1])}
}

// messageID is the identity of a message: its parts and their content.
type messageID struct {
	assistant *anthropic.BetaAssistantMessageParam
	user      *anthropic.BetaUserMessageParam
	system    *anthropic.BetaSystemMessageParam
	content   sliceID
}

func messageIDOf(m *anthropic.BetaMessageParam) messageID {
	id := messageID{assistant: m.OfAssistant, user: m.OfUser, system: m.OfSystem}
	switch {
	case m.OfAssistant != nil:
		id.content = sliceIDOf(m.OfAssistant.Content)
	case m.OfUser != nil:
		id.content = sliceIDOf(m.OfUser.Content)
	case m.OfSystem != nil:
		id.content = sliceIDOf(m.OfSystem.Content)
	}
	return id
}

// callID is the identity of a call's record.
type callID struct {
	id        string
	phase     callPhase
	decidedBy DecidedBy
	decision  *Decision
	result    *resultState
}

func callIDOf(c *callState) callID {
	return callID{id: c.Call.ID, phase: c.Phase, decidedBy: c.DecidedBy, decision: c.Decision, result: c.Result}
}

// shapeOf returns the shape of s, which is a snapshot the runner saves.
func shapeOf(s *State) (*savedShape, error) {
	sh := &savedShape{history: historyIDOf(s.Params.Messages)}
	var err error
	if sh.rest, err = restJSON(s); err != nil {
		return nil, err
	}
	if sh.params, err = paramsWithoutHistory(s); err != nil {
		return nil, err
	}
	if s.pending != nil {
		sh.turn = s.pending.Turn
		sh.messageID = messageIDOf(&s.pending.Message)
		sh.calls = make([]callID, len(s.pending.Calls))
		for i := range s.pending.Calls {
			sh.calls[i] = callIDOf(&s.pending.Calls[i])
		}
	}
	return sh, nil
}

// restJSON encodes s without what a StateChange carries apart: params,
// version, signature, and the response and calls of the turn in progress.
func restJSON(s *State) ([]byte, error) {
	c := *s
	c.Params, c.Betas = anthropic.BetaMessageNewParams{}, nil
	c.Version, c.Signature = 0, ""
	if s.pending != nil {
		p := *s.pending
		// An empty assistant message: a zero BetaMessageParam does not
		// round-trip through JSON.
		p.Message = anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{}}
		p.Calls = nil
		c.pending = &p
	}
	return json.Marshal(&c)
}

// The parts of a State a change carries and a signature digests, each
// encoded in one place so that the bytes a change carries are the bytes
// its signature digested (see stateDigests): restJSON, and these.

// paramsPart encodes s's Params, with the history, and its Betas.
func paramsPart(s *State) ([]byte, error) {
	return json.Marshal(paramsJSON{Params: s.Params, Betas: s.Betas})
}

// messagePart encodes the response of s's turn in progress.
func messagePart(s *State) ([]byte, error) { return json.Marshal(&s.pending.Message) }

// callPart encodes call i of s's turn in progress.
func callPart(s *State, i int) ([]byte, error) { return json.Marshal(&s.pending.Calls[i]) }

// paramsWithoutHistory encodes s's Params without their messages, and its
// Betas.
func paramsWithoutHistory(s *State) ([]byte, error) {
	p := s.Params
	p.Messages = nil
	return json.Marshal(paramsJSON{Params: p, Betas: s.Betas})
}

// nextDigests returns the digests of s, the state next is the shape of
// and c the change to, from sh's: those of the parts c carries computed
// again from the bytes it carries (each encoded as digests encodes it),
// the others as they were. Without sh's digests, it computes them all.
func (sh *savedShape) nextDigests(next *savedShape, s *State, c *StateChange) (*stateDigests, error) {
	if sh.digests == nil || !sh.digests.pending || len(sh.digests.calls) != len(next.calls) {
		return s.digests()
	}
	d := *sh.digests
	d.calls = slices.Clone(sh.digests.calls)
	var err error
	part := func(b []byte, into *[sha256.Size]byte) {
		if err == nil && b != nil {
			*into, err = partDigest(b)
		}
	}
	part(c.rest, &d.rest)
	part(c.params, &d.params)
	part(c.message, &d.message)
	for _, cc := range c.calls {
		part(cc.Call, &d.calls[cc.Index])
	}
	if err != nil {
		return nil, fmt.Errorf("toolrun: signing the state: %w", err)
	}
	return &d, nil
}

// change returns the change from the state sh was taken of to s, and the
// shape of s; or a nil change if s differs in more than a change carries
// (no turn in progress, another turn, other calls), and is to be saved
// whole.
func (sh *savedShape) change(s *State) (*StateChange, *savedShape, error) {
	if sh == nil || s.pending == nil || s.pending.Turn != sh.turn || len(s.pending.Calls) != len(sh.calls) {
		return nil, nil, nil
	}
	next, err := shapeOf(s)
	if err != nil {
		return nil, nil, err
	}
	c := &StateChange{Version: s.Version}
	for i, id := range next.calls {
		if id.id != sh.calls[i].id {
			return nil, nil, nil
		}
		if id == sh.calls[i] {
			continue
		}
		b, err := callPart(s, i)
		if err != nil {
			return nil, nil, err
		}
		c.calls = append(c.calls, changedCall{Index: i, ID: id.id, Call: b})
	}
	if !bytes.Equal(next.rest, sh.rest) {
		c.rest = next.rest
	}
	if next.history != sh.history || !bytes.Equal(next.params, sh.params) {
		if c.params, err = paramsPart(s); err != nil {
			return nil, nil, err
		}
	}
	if next.messageID != sh.messageID {
		if c.message, err = messagePart(s); err != nil {
			return nil, nil, err
		}
	}
	return c, next, nil
}
