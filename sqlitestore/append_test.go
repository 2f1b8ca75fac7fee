package sqlitestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/sqlitestore"
	"github.com/toolrun/toolrun/toolruntest"
)

// countingAppends is a sqlitestore.Store that counts its Appends.
type countingAppends struct {
	*sqlitestore.Store
	appends atomic.Int32
}

func (s *countingAppends) Append(ctx context.Context, id string, c *toolrun.StateChange, prev uint64) error {
	s.appends.Add(1)
	return s.Store.Append(ctx, id, c, prev)
}

// TestATurnSavedByAppendsLoadsAsTheRunHeldIt: the saves of a turn of
// calls are appended, one row per step rather than the whole state again,
// and the run loads back as the runner held it.
func TestATurnSavedByAppendsLoadsAsTheRunHeldIt(t *testing.T) {
	const n = 20
	reply := func(req *toolruntest.Request) toolruntest.Reply {
		var blocks []toolruntest.Block
		for i := range n {
			name := "echo"
			if i == n-1 {
				name = "approve"
			}
			blocks = append(blocks, toolruntest.ToolUse(fmt.Sprintf("c%d", i), name, map[string]int{"i": i}))
		}
		return toolruntest.Message(blocks...)
	}
	type in struct {
		I int `json:"i"`
	}
	echo := toolrun.NewTool("echo", "Echo", func(ctx context.Context, in in) (string, error) {
		return fmt.Sprintf("%d %s", in.I, strings.Repeat("x", 200)), nil
	})
	approve := toolrun.NewTool("approve", "Needs a person", func(ctx context.Context, in in) (string, error) { return "ok", nil })
	approve.Policy = policy.RequireApproval("asks")
	db, err := sqlitestore.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := &countingAppends{Store: db}
	s := toolruntest.New(t, toolruntest.Options{Func: reply})
	c := anthropic.NewClient(option.WithBaseURL(s.URL), option.WithAPIKey(toolruntest.TestAPIKey), option.WithMaxRetries(0))
	params := anthropic.BetaMessageNewParams{Model: "claude-test", MaxTokens: 1024,
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))}}
	r, err := toolrun.Open(t.Context(), c, params, []toolrun.Tool{echo, approve}, &toolrun.Options{Store: store, RunID: "many"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("Run = %q, %v; want awaiting_approval", res.StopReason, err)
	}
	if got := store.appends.Load(); got < n {
		t.Errorf("got %d appends, want one for each call at least", got)
	}
	loaded, err := db.Load(t.Context(), "many")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(r.State())
	got, _ := json.Marshal(loaded)
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("the loaded state differs from the runner's (-runner +loaded):\n%s", diff)
	}
}
