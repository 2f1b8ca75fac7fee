package toolrun_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// emptyBlockTool is a Tool whose result has a zero Content block, which
// encodes as null: a bug in a hand-written tool.
type emptyBlockTool struct {
	toolrun.ToolConfig
	runs *counter
}

func (emptyBlockTool) Name() string                 { return "empty_block" }
func (emptyBlockTool) Description() string          { return "Returns a zero block" }
func (emptyBlockTool) InputSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (t emptyBlockTool) Run(ctx context.Context, in json.RawMessage) ([]toolrun.Content, error) {
	t.runs.inc("run")
	return []toolrun.Content{toolrun.Text("part"), {}}, nil
}

// TestEmptyResultBlockIsAFailure: a result with a zero content block (from
// a tool or an AfterTool hook) reaches the model as the tool's failure,
// saying why, instead of a request the API refuses at every retry
// ("Input should be a valid dictionary") and a State that cannot be
// decoded to resume; the tool ran once.
func TestEmptyResultBlockIsAFailure(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("e1", "empty_block", map[string]any{})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	var runs counter
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{emptyBlockTool{runs: &runs}}, &toolrun.Options{Logger: discard()})
	res, err := r.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %q, %v (%s); want end_turn", res.StopReason, err, res.Detail)
	}
	b := toolResults(s.Requests()[1])
	if len(b) != 1 || !b[0].IsError || !strings.Contains(b[0].ResultText(), "empty content block") {
		t.Errorf("the model got %+v, want an is_error result about the empty block", b)
	}
	if runs.get("run") != 1 || res.ToolFailures != 1 {
		t.Errorf("runs, ToolFailures = %d, %d; want 1, 1", runs.get("run"), res.ToolFailures)
	}
	var st toolrun.State
	if err := json.Unmarshal(mustJSON(t, r.State()), &st); err != nil {
		t.Errorf("the State does not decode: %v", err)
	}
}
