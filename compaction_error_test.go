package toolrun_test

import (
	"context"
	"errors"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestFailedCompactionTurnError: the *TurnError of a compaction's request
// that fails names the turn its RequestSent announced (the turn it comes
// before, as BeforeRequest is given) and attempt 1, so an observer can
// match the failure to the request. It named the turn before (0 before
// the first turn) and attempt 0.
func TestFailedCompactionTurnError(t *testing.T) {
	failing := toolruntest.Reply{Fault: toolruntest.Fault{Status: 400}}
	s := toolruntest.New(t, toolruntest.Script(failing))
	var sent []int
	r := toolrun.New(client(s), userParams("Hello"), nil, &toolrun.Options{
		Logger:     discard(),
		Compaction: toolrun.Compaction{ClientSide: true}, // its request is a scripted one, which fails
		OnEvent: func(_ context.Context, e toolrun.Event) {
			if rs, ok := e.(toolrun.RequestSent); ok && rs.Compaction {
				sent = append(sent, rs.Turn)
			}
		},
	})
	r.CompactBeforeNextTurn()
	_, err := r.Run(t.Context())
	var te *toolrun.TurnError
	if !errors.As(err, &te) {
		t.Fatalf("Run: %v; want a *TurnError", err)
	}
	if len(sent) != 1 {
		t.Fatalf("compaction requests announced for turns %v; want one (the test's premise)", sent)
	}
	if te.Turn != sent[0] || te.Attempt != 1 {
		t.Errorf("TurnError{Turn: %d, Attempt: %d} for the compaction request announced as turn %d; want Turn %d, Attempt 1", te.Turn, te.Attempt, sent[0], sent[0])
	}
}
