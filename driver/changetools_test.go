package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/toolruntest"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// rawTool returns a tool named name with a small schema.
func rawTool(t *testing.T, name string) toolrun.Tool {
	t.Helper()
	tool, err := toolrun.NewRawTool(name, "tool "+name, []byte(`{"type":"object","properties":{"q":{"type":"string"}}}`),
		func(context.Context, json.RawMessage) (string, error) { return name + " ran", nil })
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// TestChangeTools: ChangeTools leaves a State as a runner's RemoveTools and
// AddTools leave it, with the inline-tools beta and without (the same
// JSON: definitions, removals, queued blocks), and a run resumed from it
// offers the model the tools the change left.
func TestChangeTools(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "tool list", true: "inline-tools beta"}[inline], func(t *testing.T) {
			a, b, c := rawTool(t, "a"), rawTool(t, "b"), rawTool(t, "c")
			params := anthropic.BetaMessageNewParams{Model: "claude-test", MaxTokens: 64,
				Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))}}
			if inline {
				params.Betas = []anthropic.AnthropicBeta{anthropic.AnthropicBetaInlineTools2026_09_15}
			}
			quiet := &toolrun.Options{Logger: discard()}
			begun := func() *toolrun.Runner {
				r := toolrun.New(anthropic.Client{}, params, nil, quiet)
				if err := r.AddTools(a, b); err != nil {
					t.Fatal(err)
				}
				return r
			}
			byRunner := begun()
			byRunner.RemoveTools("a")
			if err := byRunner.AddTools(c); err != nil {
				t.Fatal(err)
			}
			want := byRunner.State()

			// c's definition as AddTools makes it.
			defs := toolrun.New(anthropic.Client{}, anthropic.BetaMessageNewParams{}, nil, quiet)
			if err := defs.AddTools(c); err != nil {
				t.Fatal(err)
			}
			got := begun().State()
			if err := driver.ChangeTools(got, []string{"a", "not_added"}, defs.State().AddedTools()...); err != nil {
				t.Fatal(err)
			}
			wantJSON, _ := json.Marshal(want)
			gotJSON, _ := json.Marshal(got)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("the State after ChangeTools:\n got %s\nwant %s (as by RemoveTools and AddTools)", gotJSON, wantJSON)
			}

			model := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
			r, err := toolrun.Resume(model.Client(), got, []toolrun.Tool{a, b, c}, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"b", "c"}, model.Requests()[0].ToolNames()); diff != "" {
				t.Errorf("the tools the model is offered (-want +got):\n%s", diff)
			}
		})
	}
}

// TestChangeToolsRefused: a change ChangeTools cannot make (a name taken,
// a schema that cannot be used, a bad name) is refused with the error
// AddTools gives, by CanChangeTools alike, and the State is unchanged.
func TestChangeToolsRefused(t *testing.T) {
	def := func(name string, schema map[string]any) anthropic.BetaToolUnionParam {
		return anthropic.BetaToolUnionParam{OfTool: &anthropic.BetaToolParam{Name: name, InputSchema: anthropic.BetaToolInputSchemaParam{Properties: schema}}}
	}
	ok := map[string]any{"q": map[string]any{"type": "string"}}
	for _, tt := range []struct {
		name   string
		remove []string
		add    []anthropic.BetaToolUnionParam
		want   error  // the sentinel, or nil
		msg    string // what the error says, if no sentinel
	}{
		{"a name the run has", nil, []anthropic.BetaToolUnionParam{def("a", ok)}, toolrun.ErrToolExists, ""},
		{"a name twice", []string{"a"}, []anthropic.BetaToolUnionParam{def("c", ok), def("c", ok)}, toolrun.ErrToolExists, ""},
		{"a bad schema", []string{"a"}, []anthropic.BetaToolUnionParam{def("c", map[string]any{"q": map[string]any{"type": 5}})}, toolrun.ErrInvalidSchema, ""},
		{"a bad name", []string{"a"}, []anthropic.BetaToolUnionParam{def("c d", ok)}, nil, "must match"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := toolrun.New(anthropic.Client{}, anthropic.BetaMessageNewParams{}, nil, &toolrun.Options{Logger: discard()})
			if err := r.AddTools(rawTool(t, "a")); err != nil {
				t.Fatal(err)
			}
			s := r.State()
			before, _ := json.Marshal(s)
			for name, err := range map[string]error{
				"CanChangeTools": driver.CanChangeTools(s, tt.remove, tt.add...),
				"ChangeTools":    driver.ChangeTools(s, tt.remove, tt.add...),
			} {
				switch {
				case err == nil:
					t.Errorf("%s: got no error, want a refusal", name)
				case tt.want != nil && !errors.Is(err, tt.want):
					t.Errorf("%s: got %v, want an error wrapping %v", name, err, tt.want)
				case tt.want == nil && !strings.Contains(err.Error(), tt.msg):
					t.Errorf("%s: got %v, want an error saying %q", name, err, tt.msg)
				}
			}
			if after, _ := json.Marshal(s); string(after) != string(before) {
				t.Errorf("the refused change changed the State:\n got %s\nwant %s", after, before)
			}
		})
	}
}
