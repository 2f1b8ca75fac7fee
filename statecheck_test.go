package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
)

// suspendedState is a State as a run writes it: one call awaiting
// approval, tools added and queued under the inline-tools beta.
const suspendedState = `{"format": 2, "version": 3,
	"params": {"model": "claude-test", "max_tokens": 1024,
		"messages": [{"role": "user", "content": [{"type": "text", "text": "file it"}]}]},
	"pending": {"turn": 1, "stop_reason": "tool_use",
		"message": {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "echo", "input": {"text": "hi"}}]},
		"calls": [{"call": {"id": "toolu_01", "name": "echo", "input": {"text": "hi"}}, "phase": "decided",
			"decision": {"kind": "defer", "reason": "needs approval"}, "decided_by": "policy"}]},
	"tools": {"added": [{"name": "echo", "input_schema": {"type": "object"}}],
		"queued": [{"type": "tool_addition", "tool": {"type": "tool_definition", "definition": {"name": "echo", "input_schema": {"type": "object"}}}}]},
	"max_turns": 10, "turns": 1, "tool_calls": 0, "tool_failures": 0, "usage": {"input_tokens": 10, "output_tokens": 5}}`

// editStateJSON returns suspendedState with edit applied to its JSON.
func editStateJSON(t testing.TB, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(suspendedState), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeState(t testing.TB, b []byte) *toolrun.State {
	t.Helper()
	var s toolrun.State
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// TestStateCheck edits a State as a forger would: each counter, the limit
// and the turn in progress. Check refuses each with ErrInvalidState, and
// Resume with it, before any runner exists.
func TestStateCheck(t *testing.T) {
	tests := []struct {
		name string
		edit func(m map[string]any)
		want string // in the error; "" for a state Check takes
	}{
		{"as written", func(m map[string]any) {}, ""},
		{"no turn limit", func(m map[string]any) { m["max_turns"] = -1 }, ""},
		{"turns below 0", func(m map[string]any) { m["turns"] = -1000000 }, "turns is -1000000"},
		{"tool_calls below 0", func(m map[string]any) { m["tool_calls"] = -1 }, "tool_calls is -1"},
		{"tool_failures below 0", func(m map[string]any) { m["tool_failures"] = -2 }, "tool_failures is -2"},
		{"tool_denials below 0", func(m map[string]any) { m["tool_denials"] = -3 }, "tool_denials is -3"},
		{"usage below 0", func(m map[string]any) { m["usage"] = map[string]any{"output_tokens": -9} }, "usage.output_tokens is -9"},
		{"cost below 0", func(m map[string]any) { m["cost_usd"] = -0.5 }, "cost_usd is -0.5"},
		{"max_turns below -1", func(m map[string]any) { m["max_turns"] = -2 }, "max_turns is -2"},
		{"pending turn below 0", func(m map[string]any) { m["pending"].(map[string]any)["turn"] = -1 }, "numbered -1"},
		{"unknown phase", func(m map[string]any) {
			m["pending"].(map[string]any)["calls"].([]any)[0].(map[string]any)["phase"] = "done"
		}, `unknown phase "done"`},
		{"calls not the response's", func(m map[string]any) {
			m["pending"].(map[string]any)["calls"].([]any)[0].(map[string]any)["call"].(map[string]any)["id"] = "toolu_99"
		}, "not the tool_use blocks"},
		{"another format", func(m map[string]any) { m["format"] = 1 }, "state format 1"},
	}
	echo := toolrun.NewTool("echo", "Echoes.", func(ctx context.Context, in struct{ Text string }) (string, error) { return in.Text, nil })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := decodeState(t, editStateJSON(t, tt.edit))
			err := s.Check()
			_, rerr := toolrun.Resume(anthropic.NewClient(), s, []toolrun.Tool{echo}, &toolrun.Options{Logger: discard()})
			if tt.want == "" {
				if err != nil || rerr != nil {
					t.Errorf("Check() = %v, Resume: %v; want both nil", err, rerr)
				}
				return
			}
			if !errors.Is(err, toolrun.ErrInvalidState) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check() = %v, want ErrInvalidState saying %q", err, tt.want)
			}
			if tt.name != "another format" && !errors.Is(rerr, toolrun.ErrInvalidState) {
				t.Errorf("Resume: %v, want ErrInvalidState", rerr)
			}
		})
	}
}

// TestStateReaches puts a server tool, an MCP server or a container with
// skills in each place a State keeps what it sends: Reaches names it
// wherever it is, and nothing for a State of client tools alone or a
// container named by its id (as a run keeps the one a response gave).
func TestStateReaches(t *testing.T) {
	webFetch := map[string]any{"type": "web_fetch_20250910", "name": "web_fetch"}
	addition := map[string]any{"type": "tool_addition", "tool": map[string]any{"type": "tool_definition", "definition": webFetch}}
	system := map[string]any{"role": "system", "content": []any{addition}}
	params := func(m map[string]any) map[string]any { return m["params"].(map[string]any) }
	tests := []struct {
		name string
		edit func(m map[string]any)
		want []string
	}{
		{"client tools alone", func(m map[string]any) {}, []string{}},
		{"container id", func(m map[string]any) { params(m)["container"] = "container_01" }, []string{}},
		{"container with skills", func(m map[string]any) {
			params(m)["container"] = map[string]any{"id": "c", "skills": []any{map[string]any{"type": "anthropic", "skill_id": "pdf"}}}
		}, []string{"container"}},
		{"mcp_servers", func(m map[string]any) {
			params(m)["mcp_servers"] = []any{map[string]any{"type": "url", "name": "x", "url": "https://mcp.invalid"}}
		}, []string{"mcp_servers"}},
		{"params tools", func(m map[string]any) { params(m)["tools"] = []any{webFetch} }, []string{"tools: web_fetch_20250910 web_fetch"}},
		{"added", func(m map[string]any) {
			m["tools"].(map[string]any)["added"] = []any{webFetch}
		}, []string{"tools: web_fetch_20250910 web_fetch"}},
		{"queued", func(m map[string]any) {
			m["tools"].(map[string]any)["queued"] = []any{addition}
		}, []string{"tools: web_fetch_20250910 web_fetch"}},
		{"history", func(m map[string]any) {
			params(m)["messages"] = append(params(m)["messages"].([]any), system)
		}, []string{"tools: web_fetch_20250910 web_fetch"}},
		{"appended after the turn", func(m map[string]any) {
			m["pending"].(map[string]any)["after"] = []any{system}
		}, []string{"tools: web_fetch_20250910 web_fetch"}},
		{"mcp toolset reference", func(m map[string]any) {
			ref := map[string]any{"type": "tool_addition", "tool": map[string]any{"type": "mcp_toolset_reference", "server_name": "x"}}
			m["tools"].(map[string]any)["queued"] = []any{ref}
		}, []string{"tools: mcp_toolset_reference x/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decodeState(t, editStateJSON(t, tt.edit)).Reaches()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Reaches() (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzStateFile decodes a State from any bytes, as a store or a file
// gives one, and resumes it: Check and Reaches never panic, Resume never
// panics, and Resume takes a State only if Check does.
func FuzzStateFile(f *testing.F) {
	f.Add([]byte(suspendedState))
	f.Add(editStateJSON(f, func(m map[string]any) { m["turns"] = -1 }))
	f.Add(editStateJSON(f, func(m map[string]any) { m["pending"] = nil }))
	f.Add(editStateJSON(f, func(m map[string]any) {
		m["tools"].(map[string]any)["added"] = []any{map[string]any{"type": "web_fetch_20250910", "name": "web_fetch"}}
	}))
	echo := toolrun.NewTool("echo", "Echoes.", func(ctx context.Context, in struct{ Text string }) (string, error) { return in.Text, nil })
	f.Fuzz(func(t *testing.T, b []byte) {
		var s toolrun.State
		if json.Unmarshal(b, &s) != nil {
			return
		}
		checkErr := s.Check()
		s.Reaches()
		r, err := toolrun.Resume(anthropic.NewClient(), &s, []toolrun.Tool{echo}, &toolrun.Options{Logger: discard()})
		if checkErr != nil && err == nil {
			t.Errorf("Resume took a State Check refused: %v", checkErr)
		}
		if r != nil {
			st := r.State()
			if err := st.Check(); err != nil {
				t.Errorf("the State of a resumed runner fails Check: %v", err)
			}
		}
	})
}
