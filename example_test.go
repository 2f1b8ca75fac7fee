package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// The examples talk to a fake Messages API with a scripted model, so they run
// offline; with a real client, only the client changes.

func ExampleNewTool() {
	type addIn struct {
		A int `json:"a" jsonschema:"the first addend"`
		B int `json:"b" jsonschema:"the second addend"`
	}
	add := toolrun.NewTool("add", "Add two integers", func(ctx context.Context, in addIn) (int, error) {
		return in.A + in.B, nil
	})
	schema, _ := json.Marshal(add.InputSchema())
	fmt.Println(add.Name())
	fmt.Println(string(schema))

	out, err := add.Run(context.Background(), json.RawMessage(`{"a":2,"b":3}`))
	fmt.Println(out[0].OfText.Text, err)
	// Output:
	// add
	// {"type":"object","properties":{"a":{"type":"integer","description":"the first addend"},"b":{"type":"integer","description":"the second addend"}},"required":["a","b"],"additionalProperties":false}
	// 5 <nil>
}

func ExampleRunner_Run() {
	// The scripted model asks for the weather, then answers.
	server := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "get_weather", map[string]string{"city": "Paris"})),
		toolruntest.Message(toolruntest.Text("It is sunny in Paris.")),
	))
	defer server.Close()

	type weatherIn struct {
		City string `json:"city" jsonschema:"the city name"`
	}
	weather := toolrun.NewTool("get_weather", "Current weather for a city",
		func(ctx context.Context, in weatherIn) (string, error) {
			return "sunny, 21°C in " + in.City, nil
		})

	r := toolrun.New(server.Client(), anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages: []anthropic.BetaMessageParam{
			anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("What's the weather in Paris?")),
		},
	}, []toolrun.Tool{weather}, nil)

	res, err := r.Run(context.Background())
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(res.StopReason, res.Turns, res.ToolCalls)
	fmt.Println(res.Text())
	// Output:
	// end_turn 2 1
	// It is sunny in Paris.
}

func ExampleRunner_Turns() {
	server := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.Text("Let me look."), toolruntest.ToolUse("toolu_1", "lookup", map[string]string{"q": "go"})),
		toolruntest.Message(toolruntest.Text("Go is a programming language.")),
	))
	defer server.Close()

	lookup := toolrun.NewTool("lookup", "Look a term up", func(ctx context.Context, in struct {
		Q string `json:"q"`
	}) (string, error) {
		return in.Q + ": a programming language", nil
	})
	r := toolrun.New(server.Client(), anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("What is Go?"))},
	}, []toolrun.Tool{lookup}, nil)

	for turn, err := range r.Turns(context.Background()) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		for _, c := range turn.ToolCalls {
			fmt.Printf("turn %d calls %s %s\n", turn.Number, c.Name, c.Input)
		}
		if len(turn.ToolCalls) == 0 {
			fmt.Printf("turn %d says %q\n", turn.Number, turn.Message.Content[0].Text)
		}
	}
	fmt.Println(r.Result().StopReason)
	// Output:
	// turn 1 calls lookup {"q":"go"}
	// turn 2 says "Go is a programming language."
	// end_turn
}

func ExampleOptions_logging() {
	server := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "flaky", nil)),
		toolruntest.Message(toolruntest.Text("The tool failed; I'll stop here.")),
	))
	defer server.Close()

	flaky := toolrun.NewTool("flaky", "Fails", func(ctx context.Context, in struct{}) (string, error) {
		return "", fmt.Errorf("upstream timeout")
	})
	// Every tool failure is logged with its tool, id, turn and error.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "duration" {
				return slog.Attr{}
			}
			return a
		},
	}))
	r := toolrun.New(server.Client(), anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))},
	}, []toolrun.Tool{flaky}, &toolrun.Options{Logger: logger})
	res, _ := r.Run(context.Background())
	fmt.Println(res.StopReason, res.ToolFailures)
	// Output:
	// level=ERROR msg="toolrun: tool call failed" tool=flaky tool_use_id=toolu_1 turn=1 error="upstream timeout"
	// end_turn 1
}

func ExampleRunner_Decide() {
	server := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "send_mail", map[string]string{"to": "ceo@example.com"})),
		toolruntest.Message(toolruntest.Text("Mail sent.")),
	))
	defer server.Close()

	sendMail := toolrun.NewTool("send_mail", "Send an e-mail", func(ctx context.Context, in struct {
		To string `json:"to"`
	}) (string, error) {
		return "sent to " + in.To, nil
	})
	sendMail.Policy = policy.RequireApproval("sends e-mail")

	params := anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Mail the CEO"))},
	}
	r := toolrun.New(server.Client(), params, []toolrun.Tool{sendMail}, nil)
	res, _ := r.Run(context.Background())
	fmt.Println(res.StopReason)
	for _, p := range res.Pending {
		fmt.Printf("%s wants %s: %s\n", p.Call.Name, p.Call.Input, p.Reason)
	}

	// The state can be stored and the run resumed elsewhere.
	saved, _ := json.Marshal(r.State())
	var state toolrun.State
	_ = json.Unmarshal(saved, &state)
	r2, _ := toolrun.Resume(server.Client(), &state, []toolrun.Tool{sendMail}, nil)
	_ = r2.Decide(res.Pending[0].Call.ID, toolrun.Decision{})
	res, _ = r2.Run(context.Background())
	fmt.Println(res.StopReason, strings.TrimSpace(res.Text()))
	// Output:
	// awaiting_approval
	// send_mail wants {"to":"ceo@example.com"}: sends e-mail
	// end_turn Mail sent.
}

func ExampleOpen() {
	server := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "charge", map[string]int{"cents": 1200})),
		toolruntest.Message(toolruntest.Text("Charged $12.")),
	))
	defer server.Close()

	dir, _ := os.MkdirTemp("", "runs")
	defer os.RemoveAll(dir)
	charge := toolrun.NewTool("charge", "Charge the card", func(ctx context.Context, in struct {
		Cents int `json:"cents"`
	}) (string, error) {
		return fmt.Sprintf("charged %d cents", in.Cents), nil
	})
	charge.Policy = policy.RequireApproval("moves money")

	opts := &toolrun.Options{Store: &filestore.Store{Dir: dir}, RunID: "order-42", Logger: slog.New(slog.DiscardHandler)}
	params := anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Charge $12"))},
	}
	r, _ := toolrun.Open(context.Background(), server.Client(), params, []toolrun.Tool{charge}, opts)
	res, _ := r.Run(context.Background())
	fmt.Println(res.StopReason)

	// The process may exit here. Later, Open finds the saved run.
	r, _ = toolrun.Open(context.Background(), server.Client(), params, []toolrun.Tool{charge}, opts)
	_ = r.Decide("toolu_1", toolrun.Decision{})
	res, _ = r.Run(context.Background())
	fmt.Println(res.StopReason, res.Text())
	// Output:
	// awaiting_approval
	// end_turn Charged $12.
}

func ExampleBudget() {
	// The scripted model never stops calling its tool.
	server := toolruntest.New(nil, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		r := toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("toolu_%d", len(req.Conversation)), "poll", nil))
		r.Usage = &toolruntest.Usage{InputTokens: 2000, OutputTokens: 20}
		return r
	}})
	defer server.Close()

	poll := toolrun.NewTool("poll", "Poll the job", func(ctx context.Context, in struct{}) (string, error) {
		return "still running", nil
	})
	r := toolrun.New(server.Client(), anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 256,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Wait for the job"))},
	}, []toolrun.Tool{poll}, &toolrun.Options{
		Budget: toolrun.Budget{InputTokens: 7000},
		Logger: slog.New(slog.DiscardHandler),
	})
	res, err := r.Run(context.Background())
	fmt.Println(res.StopReason, res.Budget, res.Turns)
	fmt.Println(errors.Is(err, toolrun.ErrBudget))
	// Output:
	// budget input_tokens 3
	// true
}

// A large tool result gets a cache breakpoint of its own, as the API's
// docs suggest: the turns after it read it from the prompt cache.
func ExampleToolResult_cacheControl() {
	server := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "read_manual", map[string]string{})),
		toolruntest.Message(toolruntest.Text("The manual says to restart it.")),
	))
	defer server.Close()

	manual := toolrun.NewTool("read_manual", "Read the whole manual", func(ctx context.Context, in struct{}) (string, error) {
		return strings.Repeat("Chapter text. ", 5000), nil
	})
	r := toolrun.New(server.Client(), anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 256,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("How do I fix it?"))},
	}, []toolrun.Tool{manual}, &toolrun.Options{
		Logger: slog.New(slog.DiscardHandler),
		AfterTool: func(ctx context.Context, res *toolrun.ToolResult) error {
			size := 0
			for _, c := range res.Content {
				if c.OfText != nil {
					size += len(c.OfText.Text)
				}
			}
			if size > 10_000 {
				res.CacheControl = anthropic.NewBetaCacheControlEphemeralParam()
			}
			return nil
		},
	})
	if _, err := r.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	var sent struct {
		Messages []struct {
			Content []struct {
				Type         string          `json:"type"`
				CacheControl json.RawMessage `json:"cache_control"`
			} `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(server.Requests()[1].Body, &sent)
	// The last message sent is the tool results (on a message thread, the
	// only one: the API holds the rest).
	result := sent.Messages[len(sent.Messages)-1].Content[0]
	fmt.Println(result.Type, string(result.CacheControl))
	// Output:
	// tool_result {"type":"ephemeral"}
}

// A turn limit the caller set is an error alongside the Result, so code
// that checks only err cannot miss that the run did not finish.
func ExampleErrMaxTurns() {
	server := toolruntest.New(nil, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		return toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("toolu_%d", len(req.Conversation)), "poll", nil))
	}})
	defer server.Close()
	poll := toolrun.NewTool("poll", "Poll the job", func(ctx context.Context, in struct{}) (string, error) {
		return "still running", nil
	})
	r := toolrun.New(server.Client(), anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 256,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Wait for the job"))},
	}, []toolrun.Tool{poll}, &toolrun.Options{MaxTurns: 3, Logger: slog.New(slog.DiscardHandler)})
	res, err := r.Run(context.Background())
	fmt.Println(errors.Is(err, toolrun.ErrMaxTurns), res.StopReason, res.Turns)

	r.SetMaxTurns(4) // raise the limit and go on
	res, err = r.Run(context.Background())
	fmt.Println(errors.Is(err, toolrun.ErrMaxTurns), res.StopReason, res.Turns)
	// Output:
	// true max_turns 3
	// true max_turns 4
}

func ExampleChain() {
	// The scripted model asks to delete a branch and to write two files.
	server := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(
			toolruntest.ToolUse("toolu_1", "delete_branch", map[string]string{"name": "main"}),
			toolruntest.ToolUse("toolu_2", "write_file", map[string]string{"path": "/etc/hosts"}),
			toolruntest.ToolUse("toolu_3", "write_file", map[string]string{"path": "notes.txt"}),
		),
		toolruntest.Message(toolruntest.Text("Done what I could.")),
	))
	defer server.Close()

	type branchIn struct {
		Name string `json:"name"`
	}
	type writeIn struct {
		Path string `json:"path"`
	}
	deleteBranch := toolrun.NewTool("delete_branch", "Delete a branch", func(ctx context.Context, in branchIn) (string, error) {
		return "deleted " + in.Name, nil
	})
	write := toolrun.NewTool("write_file", "Write a file", func(ctx context.Context, in writeIn) (string, error) {
		return "wrote " + in.Path, nil
	})
	opts := &toolrun.Options{
		// Never delete a branch; no writes under /etc; the rest may run.
		Policy: policy.Chain(
			policy.DenyTools("delete_branch"),
			policy.Func(func(ctx context.Context, in writeIn) toolrun.Decision {
				if strings.HasPrefix(in.Path, "/etc/") {
					return policy.Deny("no writes under /etc")
				}
				return toolrun.Decision{} // nothing to say
			}),
		),
		OnEvent: func(ctx context.Context, e toolrun.Event) {
			if e, ok := e.(toolrun.ToolFinished); ok {
				fmt.Printf("%s: %s\n", e.Result.Call.ID, e.Result.Content[0].OfText.Text)
			}
		},
		MaxParallelTools: 1, // one at a time, so the output's order is fixed
		Logger:           slog.New(slog.DiscardHandler),
	}
	r := toolrun.New(server.Client(), anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Tidy up."))},
	}, []toolrun.Tool{deleteBranch, write}, opts)
	if _, err := r.Run(context.Background()); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// toolu_1: tool call denied: tool "delete_branch" is not allowed in this run
	// toolu_2: tool call denied: no writes under /etc
	// toolu_3: wrote notes.txt
}
