package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/toolrunner"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/policy"
)

// toolInput is the input of every tool of the workloads.
type toolInput struct {
	S string `json:"s"`
}

// toolSpec is a tool of a workload, from which each runner builds its own
// kind of tool around the same function.
type toolSpec struct {
	name, description string
	fn                func(ctx context.Context, in toolInput) (string, error)
	// approval marks a tool whose calls wait for a person: toolrun defers
	// them; the hand loop stops before it runs one.
	approval bool
}

func echoTool() toolSpec {
	return toolSpec{name: "echo", description: "Echoes s back.", fn: func(_ context.Context, in toolInput) (string, error) {
		return in.S, nil
	}}
}

func sleepTool(d time.Duration) toolSpec {
	return toolSpec{name: "sleep", description: "Waits, then says so.", fn: func(ctx context.Context, in toolInput) (string, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return "slept: " + in.S, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}}
}

func deployTool() toolSpec {
	return toolSpec{name: "deploy", description: "Deploys s.", approval: true, fn: func(_ context.Context, in toolInput) (string, error) {
		return "deployed " + in.S, nil
	}}
}

// inputSchema is the schema toolrun infers for toolInput, spelled out for the
// official runner and the hand loop so that all three send the same tools.
var inputSchema = anthropic.BetaToolInputSchemaParam{
	Properties:  map[string]any{"s": map[string]any{"type": "string"}},
	Required:    []string{"s"},
	ExtraFields: map[string]any{"additionalProperties": false},
}

func newParams(prompt string) anthropic.BetaMessageNewParams {
	return anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(prompt))},
	}
}

// runFunc runs one conversation from prompt to the model's answer and
// returns how many requests it took.
type runFunc func(ctx context.Context, prompt string) (turns int, err error)

// contender is one of the three ways to run the loop. setup does what a
// program does once (build the tools); the runFunc it returns does what it
// does per conversation, and is what is measured.
type contender struct {
	name  string
	setup func(c anthropic.Client, tools []toolSpec) runFunc
}

// contenders lists the runners in the order of the table's columns.
var contenders = []contender{
	{"official", officialSetup},
	{"hand", handSetup},
	{"toolrun", toolrunSetup},
}

// plainContender is toolrun with the requests the hand loop sends: no
// thread and no cache_control (Options.NoThread, Options.NoCache). The
// concurrent workload runs it beside the others, so that its throughput
// can be read like for like: the fake server answers a default toolrun
// request (cached, on a thread) with more work than a plain one, and on
// this machine that work takes the same two CPUs as the clients.
var plainContender = contender{"toolrun-plain", toolrunPlainSetup}

func contenderNamed(name string) (contender, error) {
	for _, c := range append(contenders, plainContender, officialThreadContender) {
		if c.name == name {
			return c, nil
		}
	}
	return contender{}, fmt.Errorf("no runner %q", name)
}

// officialThreadContender is the official runner on its message thread
// (DisableThread false, its default). The pause workload runs it beside the
// others, so that its rows compare two runners that both continue a
// thread at each pause_turn.
var officialThreadContender = contender{"official-thread", officialThreadSetup}

// officialSetup runs the loop with the official client's BetaToolRunner,
// without message threads, with no iteration limit: the loop every row
// but the pause workload's compares with.
func officialSetup(c anthropic.Client, specs []toolSpec) runFunc {
	return officialSetupWith(c, specs, true)
}

// officialThreadSetup is officialSetup on the runner's message thread.
func officialThreadSetup(c anthropic.Client, specs []toolSpec) runFunc {
	return officialSetupWith(c, specs, false)
}

// officialSetupWith runs the loop with the official client's
// BetaToolRunner, with its DisableThread set to disableThread.
func officialSetupWith(c anthropic.Client, specs []toolSpec, disableThread bool) runFunc {
	tools := make([]anthropic.BetaTool, len(specs))
	for i, s := range specs {
		tools[i] = toolrunner.NewBetaTool(s.name, s.description, inputSchema,
			func(ctx context.Context, in toolInput) (anthropic.BetaToolResultBlockParamContentUnion, error) {
				out, err := s.fn(ctx, in)
				return anthropic.BetaToolResultBlockParamContentUnion{OfText: &anthropic.BetaTextBlockParam{Text: out}}, err
			})
	}
	return func(ctx context.Context, prompt string) (int, error) {
		r := c.Beta.Messages.NewToolRunner(tools, anthropic.BetaToolRunnerParams{
			BetaMessageNewParams: newParams(prompt),
			DisableThread:        disableThread,
		})
		if _, err := r.RunToCompletion(ctx); err != nil {
			return r.IterationCount(), err
		}
		return r.IterationCount(), nil
	}
}

// toolrunSetup runs the loop with toolrun's Runner, with default options but
// no turn limit and a logger that discards.
func toolrunSetup(c anthropic.Client, specs []toolSpec) runFunc {
	return toolrunSetupWith(c, specs, toolrunOptions())
}

// toolrunPlainSetup is toolrunSetup with Options.NoThread and NoCache.
func toolrunPlainSetup(c anthropic.Client, specs []toolSpec) runFunc {
	opts := toolrunOptions()
	opts.NoThread, opts.NoCache = true, true
	return toolrunSetupWith(c, specs, opts)
}

// toolrunSetupWith runs the loop with toolrun's Runner and opts, each run
// made by one Template, as a program running many does.
func toolrunSetupWith(c anthropic.Client, specs []toolSpec, opts *toolrun.Options) runFunc {
	tpl := driver.NewTemplate(c, toolrunTools(specs), opts)
	return func(ctx context.Context, prompt string) (int, error) {
		res, err := tpl.New(newParams(prompt)).Run(ctx)
		if err == nil && res.StopReason != toolrun.StopEndTurn {
			err = fmt.Errorf("toolrun stopped with %s: %s", res.StopReason, res.Detail)
		}
		return res.Turns, err
	}
}

func toolrunTools(specs []toolSpec) []toolrun.Tool {
	tools := make([]toolrun.Tool, len(specs))
	for i, s := range specs {
		t := toolrun.NewTool(s.name, s.description, s.fn)
		if s.approval {
			t.Policy = policy.RequireApproval("a person approves each deploy")
		}
		tools[i] = t
	}
	return tools
}

func toolrunOptions() *toolrun.Options {
	return &toolrun.Options{MaxTurns: -1, Logger: slog.New(slog.DiscardHandler)}
}

// handTool is a tool of the hand loop: its definition and its function.
type handTool struct {
	param anthropic.BetaToolUnionParam
	spec  toolSpec
}

func handTools(specs []toolSpec) (map[string]handTool, []anthropic.BetaToolUnionParam) {
	tools := map[string]handTool{}
	var params []anthropic.BetaToolUnionParam
	for _, s := range specs {
		p := anthropic.BetaToolUnionParam{OfTool: &anthropic.BetaToolParam{
			Name: s.name, Description: anthropic.String(s.description), InputSchema: inputSchema,
		}}
		tools[s.name] = handTool{p, s}
		params = append(params, p)
	}
	return tools, params
}

// handSetup is the floor: a loop on the same client that sends, appends the
// response, runs the calls (in parallel when there are several) and appends
// their results. It checks nothing and logs nothing.
func handSetup(c anthropic.Client, specs []toolSpec) runFunc {
	tools, toolParams := handTools(specs)
	return func(ctx context.Context, prompt string) (int, error) {
		params := newParams(prompt)
		params.Tools = toolParams
		turns, _, err := handLoop(ctx, c, &params, tools)
		return turns, err
	}
}

// handLoop runs the hand loop on params until the model answers, or, for a
// tool that needs approval, until it is called: then it returns that call
// with the history as it stands, the call's turn appended.
func handLoop(ctx context.Context, c anthropic.Client, params *anthropic.BetaMessageNewParams, tools map[string]handTool) (int, *anthropic.BetaContentBlockUnion, error) {
	for turns := 1; ; turns++ {
		msg, err := c.Beta.Messages.New(ctx, *params)
		if err != nil {
			return turns, nil, err
		}
		params.Messages = append(params.Messages, msg.ToParam())
		if msg.StopReason != anthropic.BetaStopReasonToolUse {
			return turns, nil, nil
		}
		var calls []*anthropic.BetaContentBlockUnion
		for i := range msg.Content {
			if msg.Content[i].Type == "tool_use" {
				calls = append(calls, &msg.Content[i])
			}
		}
		for _, call := range calls {
			if tools[call.Name].spec.approval {
				return turns, call, nil
			}
		}
		results := make([]anthropic.BetaContentBlockParamUnion, len(calls))
		if len(calls) == 1 {
			results[0] = handCall(ctx, tools, calls[0])
		} else {
			var wg sync.WaitGroup
			for i, call := range calls {
				wg.Go(func() { results[i] = handCall(ctx, tools, call) })
			}
			wg.Wait()
		}
		params.Messages = append(params.Messages, anthropic.NewBetaUserMessage(results...))
	}
}

func handCall(ctx context.Context, tools map[string]handTool, call *anthropic.BetaContentBlockUnion) anthropic.BetaContentBlockParamUnion {
	var in toolInput
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return anthropic.NewBetaToolResultBlock(call.ID, err.Error(), true)
	}
	out, err := tools[call.Name].spec.fn(ctx, in)
	if err != nil {
		return anthropic.NewBetaToolResultBlock(call.ID, err.Error(), true)
	}
	return anthropic.NewBetaToolResultBlock(call.ID, out, false)
}
