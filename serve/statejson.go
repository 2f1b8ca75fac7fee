package serve

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"unsafe"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun"
)

// historyEncoder encodes a run's States for its saves, encoding each
// message of the history once: a State's history only grows within a run
// (the runner appends to it, and replaces it whole when it compacts it or
// is given another), and every save encoded all of it again, the largest
// part of a busy server's encoding. A message is known by the pointer to
// its role's struct (OfUser, OfAssistant, OfSystem), which the runner's
// copies of its State share and never write into (a message it changes
// is a new one), and which the encoder holds, so it is never reused for
// another message. The State's JSON is the same, byte for byte, as
// json.Marshal of the State: it is encoded with a marker message for its
// history, which the messages' encodings then replace.
type historyEncoder struct {
	keys []unsafe.Pointer // the messages encoded, by their role's struct
	enc  [][]byte         // their encodings
}

// historyMarker is the history a State is encoded with, and markerJSON
// its encoding: a text no conversation has, being random and never
// shown.
var historyMarker, markerJSON = func() ([]anthropic.BetaMessageParam, []byte) {
	b := make([]byte, 16)
	rand.Read(b)
	m := []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("toolrun-serve-history-" + hex.EncodeToString(b)))}
	enc, err := json.Marshal(m)
	if err != nil {
		panic("serve: encoding the history marker: " + err.Error())
	}
	return m, enc
}()

// messageKey returns what a message is known by, or nil if it has no
// role's struct.
func messageKey(m *anthropic.BetaMessageParam) unsafe.Pointer {
	switch {
	case m.OfUser != nil:
		return unsafe.Pointer(m.OfUser)
	case m.OfAssistant != nil:
		return unsafe.Pointer(m.OfAssistant)
	case m.OfSystem != nil:
		return unsafe.Pointer(m.OfSystem)
	}
	return nil
}

// marshalState returns json.Marshal(st), without json.Marshal's pass
// that checks and compacts what st.MarshalJSON returns: that is
// json.Marshal's own output already (compact, its HTML escaped), so the
// pass, a scan of the whole State at every save, changes nothing.
func marshalState(st *toolrun.State) ([]byte, error) { return st.MarshalJSON() }

// marshal returns json.Marshal(st).
func (e *historyEncoder) marshal(st *toolrun.State) ([]byte, error) {
	msgs := st.Params.Messages
	if len(msgs) == 0 {
		return marshalState(st)
	}
	size := 2
	for i := range msgs {
		k := messageKey(&msgs[i])
		if i < len(e.keys) && k != nil && e.keys[i] == k {
			size += len(e.enc[i]) + 1
			continue
		}
		b, err := json.Marshal(&msgs[i])
		if err != nil {
			return nil, err
		}
		e.keys, e.enc = append(e.keys[:i], k), append(e.enc[:i], b)
		size += len(b) + 1
	}
	e.keys, e.enc = e.keys[:len(msgs)], e.enc[:len(msgs)]
	t := *st
	t.Params.Messages = historyMarker
	b, err := marshalState(&t)
	if err != nil {
		return nil, err
	}
	at := bytes.Index(b, markerJSON)
	if at < 0 {
		return marshalState(st) // not where it was put: encoded whole
	}
	out := make([]byte, 0, len(b)-len(markerJSON)+size)
	out = append(out, b[:at]...)
	out = append(out, '[')
	for i, m := range e.enc {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	out = append(out, ']')
	return append(out, b[at+len(markerJSON):]...), nil
}
