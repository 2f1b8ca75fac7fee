package temporal_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
)

// clientTool returns a client tool's function and its definition, as
// serve declares one: the workers stand in for it (DeferClientTools).
func clientTool(t *testing.T, name string) (toolrun.Tool, anthropic.BetaToolParam) {
	t.Helper()
	tool, err := toolrun.NewRawTool(name, "the client's "+name, []byte(`{"type":"object","properties":{"precise":{"type":"boolean"}}}`),
		func(context.Context, json.RawMessage) (string, error) { return "", errors.New("run by the client") })
	if err != nil {
		t.Fatal(err)
	}
	r := toolrun.New(anthropic.Client{}, anthropic.BetaMessageNewParams{}, nil, &toolrun.Options{Logger: discard()})
	if err := r.AddTools(tool); err != nil {
		t.Fatal(err)
	}
	return tool, *r.State().AddedTools()[0].OfTool
}

// TestAppendClientTools: an AppendUpdate's ClientTools replace the client
// tools the run was given before, from the request after the decisions
// on: none of them for an empty set, exactly the set given otherwise
// (with or without the inline-tools beta), and a call of a tool taken out
// that awaited its client's answer gets that answer, not an unknown
// tool's error. An update without them leaves the tools as they were. The
// history of the client call's case is the golden append-tools.json.
func TestAppendClientTools(t *testing.T) {
	c := dialTemporal(t)
	location, locationDef := clientTool(t, "get_location")
	_, weatherDef := clientTool(t, "get_weather")
	for _, tt := range []struct {
		name   string
		inline bool
		first  toolruntest.Reply // the response that awaits a decision
		tools  *temporal.ClientTools
		decide func(ctx context.Context, queue string) error
		want   []string // the tools of the request after the decision
		result string   // the result the model gets
		golden string
	}{{
		name:   "approval, tools: []",
		first:  toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		tools:  &temporal.ClientTools{},
		want:   []string{"write_file"},
		result: "t1 error=false wrote /a",
	}, {
		name:   "approval, another tool",
		first:  toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		tools:  &temporal.ClientTools{Tools: []anthropic.BetaToolParam{weatherDef}},
		want:   []string{"write_file", "get_weather"},
		result: "t1 error=false wrote /a",
	}, {
		name:   "approval, the same tools",
		first:  toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		tools:  &temporal.ClientTools{Tools: []anthropic.BetaToolParam{locationDef}},
		want:   []string{"write_file", "get_location"},
		result: "t1 error=false wrote /a",
	}, {
		name:   "approval, no tools sent",
		first:  toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		want:   []string{"write_file", "get_location"},
		result: "t1 error=false wrote /a",
	}, {
		name:   "approval, tools: [] under the inline-tools beta",
		inline: true,
		first:  toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		tools:  &temporal.ClientTools{},
		want:   []string{"write_file"},
		result: "t1 error=false wrote /a",
	}, {
		name:   "approval, another tool under the inline-tools beta",
		inline: true,
		first:  toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		tools:  &temporal.ClientTools{Tools: []anthropic.BetaToolParam{weatherDef}},
		want:   []string{"write_file", "get_weather"},
		result: "t1 error=false wrote /a",
	}, {
		name:  "client call answered, tools: []",
		first: toolruntest.Message(toolruntest.ToolUse("t1", "get_location", map[string]any{})),
		tools: &temporal.ClientTools{},
		decide: func(ctx context.Context, queue string) error {
			return temporal.DecideBySignal(ctx, c, queue, "t1", policy.Skip(toolrun.Text("Paris")), nil)
		},
		want:   []string{"write_file"},
		result: "t1 error=false Paris",
		golden: "append-tools",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			queue := newQueue("toolrun-append-tools")
			model := toolruntest.New(t, toolruntest.Script(tt.first, toolruntest.Message(toolruntest.Text("Done."))))
			calls := &counter{}
			acts := temporal.NewActivities(model.Client(), []toolrun.Tool{writeTool(calls, policy.RequireApproval("writes change files"))}, &toolrun.Options{
				Logger: discard(),
				Store:  &filestore.Store{Dir: t.TempDir()},
			}).DeferClientTools()
			inProcessWorker(t, c, queue, acts)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			params := userParams("go")
			if tt.inline {
				params.Betas = []anthropic.AnthropicBeta{anthropic.AnthropicBetaInlineTools2026_09_15}
			}
			// The run as serve starts one: the client's tool added.
			r := toolrun.New(anthropic.Client{}, params, nil, &toolrun.Options{Logger: discard()})
			if err := r.AddTools(location); err != nil {
				t.Fatal(err)
			}
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, temporal.WorkflowName, temporal.Input{State: r.State()})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "the call awaiting a decision", func() bool {
				p, err := temporal.Pending(ctx, c, queue, nil)
				return err == nil && len(p) == 1
			})
			if tt.tools != nil {
				err = temporal.AppendMessagesWithTools(ctx, c, queue, *tt.tools, userText("and then?"))
			} else {
				err = temporal.AppendMessages(ctx, c, queue, userText("and then?"))
			}
			if err != nil {
				t.Fatalf("append: %v", err)
			}
			decide := tt.decide
			if decide == nil {
				decide = func(ctx context.Context, queue string) error {
					return temporal.Decide(ctx, c, queue, "t1", toolrun.Decision{}, nil)
				}
			}
			if err := decide(ctx, queue); err != nil {
				t.Fatal(err)
			}
			var out temporal.Outcome
			if err := run.Get(ctx, &out); err != nil {
				t.Fatal(err)
			}
			if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
				t.Fatalf("outcome %q %q, want end_turn Done.", out.StopReason, out.Text)
			}
			reqs := model.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			if diff := cmp.Diff([]string{"write_file", "get_location"}, reqs[0].ToolNames()); diff != "" {
				t.Errorf("the first request's tools (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, reqs[1].ToolNames()); diff != "" {
				t.Errorf("the tools of the request after the append (-want +got):\n%s", diff)
			}
			var results []string
			for _, m := range reqs[1].Conversation {
				for _, b := range m.Content {
					if b.Type == "tool_result" {
						results = append(results, b.ToolUseID+" error="+map[bool]string{false: "false", true: "true"}[b.IsError]+" "+b.ResultText())
					}
				}
			}
			if diff := cmp.Diff([]string{tt.result}, results); diff != "" {
				t.Errorf("the results the model got (-want +got):\n%s", diff)
			}
			// The appended message last, but for the role "system"
			// message of the tool changes under the inline-tools beta,
			// which a runner appends before its next request.
			var lastUser string
			for _, m := range reqs[1].Conversation {
				if m.Role == "user" {
					lastUser = m.Content[len(m.Content)-1].Text
				}
			}
			if lastUser != "and then?" {
				t.Errorf("the request after the append: its last user message says %q, want the appended message", lastUser)
			}
			if tt.golden != "" {
				recordHistory(t, c, queue, tt.golden)
			}
		})
	}
}

// TestAppendClientToolsRefused: client tools the workflow cannot take (a
// name that is no tool name, a schema that cannot be used, a name twice,
// a name of the run's params' tools, or over MaxAppendBytes with the
// messages) are refused, by the client and by the workflow alike, and
// nothing of the update is applied: the run goes on with its tools and
// without the message.
func TestAppendClientToolsRefused(t *testing.T) {
	c := dialTemporal(t)
	queue := newQueue("toolrun-append-tools-refused")
	ctx, run, _, model := startApprovalRun(t, c, queue,
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
		toolruntest.Message(toolruntest.Text("Done.")))
	waitFor(t, 30*time.Second, "the call awaiting approval", func() bool {
		p, err := temporal.Pending(ctx, c, queue, nil)
		return err == nil && len(p) == 1
	})
	_, good := clientTool(t, "get_location")
	badName := good
	badName.Name = "no spaces allowed"
	badSchema := good
	badSchema.InputSchema = anthropic.BetaToolInputSchemaParam{Properties: map[string]any{"x": map[string]any{"type": 5}}}
	big := good
	big.Description = anthropic.String(strings.Repeat("x", temporal.MaxAppendBytes))
	// send bypasses the client's checks, as another client might.
	send := func(tools temporal.ClientTools) error {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: queue, UpdateName: temporal.AppendUpdate, Args: []any{[]anthropic.BetaMessageParam{userText("refused")}, tools}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		return temporal.FromFailure(err)
	}
	for _, tt := range []struct {
		name  string
		tools []anthropic.BetaToolParam
		want  error  // the sentinel, or nil
		msg   string // what the error says, if no sentinel
	}{
		{"a bad name", []anthropic.BetaToolParam{badName}, nil, "must match"},
		{"a bad schema", []anthropic.BetaToolParam{badSchema}, toolrun.ErrInvalidSchema, ""},
		{"a name twice", []anthropic.BetaToolParam{good, good}, toolrun.ErrToolExists, ""},
		{"too large", []anthropic.BetaToolParam{big}, temporal.ErrMessagesTooLarge, ""},
	} {
		for _, by := range []struct {
			name string
			err  error
		}{
			{"client", temporal.AppendMessagesWithTools(ctx, c, queue, temporal.ClientTools{Tools: tt.tools}, userText("refused"))},
			{"workflow", send(temporal.ClientTools{Tools: tt.tools})},
		} {
			switch err := by.err; {
			case err == nil:
				t.Errorf("%s, by the %s: got no error, want a refusal", tt.name, by.name)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Errorf("%s, by the %s: got %v, want an error wrapping %v", tt.name, by.name, err, tt.want)
			case tt.want == nil && !strings.Contains(err.Error(), tt.msg):
				t.Errorf("%s, by the %s: got %v, want an error saying %q", tt.name, by.name, err, tt.msg)
			}
		}
	}
	if err := temporal.Decide(ctx, c, queue, "t1", toolrun.Decision{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	reqs := model.Requests()
	if diff := cmp.Diff([]string{"write_file"}, reqs[len(reqs)-1].ToolNames()); diff != "" {
		t.Errorf("the tools after the refusals (-want +got):\n%s", diff)
	}
	for _, m := range reqs[len(reqs)-1].Conversation {
		for _, b := range m.Content {
			if b.Text == "refused" {
				t.Fatal("a refused update's message reached the model")
			}
		}
	}
}
