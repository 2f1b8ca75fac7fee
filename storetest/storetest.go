// Package storetest checks that a [toolrun.Store] behaves as toolrun needs,
// in the manner of testing/slogtest: run [Run] against your implementation
// in a test, and fail on the error it returns.
//
//	func TestMyStore(t *testing.T) {
//		if err := storetest.Run(t.Context(), newMyStore(t)); err != nil {
//			t.Error(err)
//		}
//	}
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
)

// Run checks s and returns every violation found, joined with errors.Join,
// or nil. It saves, loads and deletes runs whose ids start with
// "storetest-", so s may be shared with other data.
func Run(ctx context.Context, s toolrun.Store) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if _, err := s.Load(ctx, "storetest-missing"); !errors.Is(err, toolrun.ErrNoState) {
		fail("Load of a run never saved: got %v, want an error wrapping toolrun.ErrNoState", err)
	}
	if err := s.Delete(ctx, "storetest-missing"); err != nil {
		fail("Delete of a run never saved: got %v, want nil", err)
	}

	// Ids that a careless implementation would mix up or refuse.
	ids := []string{"storetest-a", "storetest-a/b", "storetest-a%2Fb", "storetest-../escape", "storetest-ä ö", "storetest-A", "storetest-a.b"}
	for i, id := range ids {
		if err := s.Save(ctx, id, sample(i)); err != nil {
			fail("Save(%q): %v", id, err)
		}
	}
	for i, id := range ids {
		got, err := s.Load(ctx, id)
		if err != nil {
			fail("Load(%q): %v", id, err)
			continue
		}
		if !same(got, sample(i)) {
			fail("Load(%q) gave another run's state or lost data: got turns %d, want %d", id, got.Turns, sample(i).Turns)
		}
	}

	// A second Save replaces the first.
	if err := s.Save(ctx, "storetest-a", sample(42)); err != nil {
		fail("second Save: %v", err)
	} else if got, err := s.Load(ctx, "storetest-a"); err != nil || !same(got, sample(42)) {
		fail("Load after a second Save: got %+v, %v; want the second state", got, err)
	}

	// Saves of different runs may happen at once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range 8 {
		wg.Go(func() {
			id := fmt.Sprintf("storetest-concurrent-%d", i)
			if err := s.Save(ctx, id, sample(100+i)); err != nil {
				mu.Lock()
				fail("concurrent Save(%q): %v", id, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := range 8 {
		id := fmt.Sprintf("storetest-concurrent-%d", i)
		if got, err := s.Load(ctx, id); err != nil || !same(got, sample(100+i)) {
			fail("Load(%q) after concurrent saves: %v", id, err)
		}
		_ = s.Delete(ctx, id)
	}

	for _, id := range ids {
		if err := s.Delete(ctx, id); err != nil {
			fail("Delete(%q): %v", id, err)
		}
		if _, err := s.Load(ctx, id); !errors.Is(err, toolrun.ErrNoState) {
			fail("Load(%q) after Delete: got %v, want ErrNoState", id, err)
		}
	}
	return errors.Join(errs...)
}

// sample returns a distinct state for n, with a pending turn so that every
// part of the format is exercised.
func sample(n int) *toolrun.State {
	d := toolrun.DeferCall("needs approval")
	return &toolrun.State{
		Format: toolrun.StateFormat,
		Params: anthropic.BetaMessageNewParams{
			Model:     "claude-test",
			MaxTokens: 1024,
			Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(fmt.Sprintf("run %d", n)))},
		},
		Pending: &toolrun.TurnState{
			Turn: n + 1,
			Message: anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{
				Content: []anthropic.BetaContentBlockParamUnion{
					anthropic.NewBetaToolUseBlock(fmt.Sprintf("toolu_%d", n), map[string]any{"n": 1}, "write"),
				},
			}},
			StopReason: anthropic.BetaStopReasonToolUse,
			Calls: []toolrun.CallState{{
				Call:  toolrun.ToolCall{ID: fmt.Sprintf("toolu_%d", n), Name: "write", Input: json.RawMessage(`{"n":1}`)},
				Phase: toolrun.PhaseDecided, Decision: &d, DecidedBy: toolrun.ByPolicy,
			}},
		},
		Turns: n,
		Usage: toolrun.Usage{InputTokens: int64(n) * 10},
	}
}

func same(a, b *toolrun.State) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
