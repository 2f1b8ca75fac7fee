package toolruntest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolrun/toolrun/toolruntest"
)

// ExampleNew scripts a tool call and an answer. With a nil TB, as outside a
// test, the example closes the server itself; in a test, New(t, ...) would.
func ExampleNew() {
	s := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_01", "get_weather", map[string]string{"city": "Paris"})),
		toolruntest.Message(toolruntest.Text("It is sunny in Paris.")),
	))
	defer s.Close()
	client := s.Client()
	ctx := context.Background()

	params := anthropic.MessageNewParams{
		Model:     anthropic.Model("claude-sonnet-4-5"),
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:        "get_weather",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}},
		}}},
	}
	msg, err := client.Messages.New(ctx, params)
	if err != nil {
		fmt.Println(err)
		return
	}
	call := msg.Content[0]
	fmt.Println(msg.StopReason, call.Name, string(call.Input))

	params.Messages = append(params.Messages,
		msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(call.ID, "sunny", false)),
	)
	msg, err = client.Messages.New(ctx, params)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(msg.StopReason, msg.Content[0].Text)

	last := s.Requests()[1].Params.Messages[2].Content[0]
	fmt.Println(last.Type, last.ToolUseID, last.ResultText())
	// Output:
	// tool_use get_weather {"city":"Paris"}
	// end_turn It is sunny in Paris.
	// tool_result toolu_01 sunny
}

// ExampleNew_func computes each reply from its request.
func ExampleNew_func() {
	s := toolruntest.New(nil, toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
		last := r.Params.Messages[len(r.Params.Messages)-1]
		return toolruntest.Message(toolruntest.Text(strings.ToUpper(last.Content[0].Text)))
	}})
	defer s.Close()
	client := s.Client()

	for _, q := range []string{"hello", "shout"} {
		msg, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
			Model:     anthropic.Model("claude-sonnet-4-5"),
			MaxTokens: 1024,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(msg.ID, msg.Content[0].Text)
	}
	// Output:
	// msg_toolruntest_1 HELLO
	// msg_toolruntest_2 SHOUT
}

func ExampleRateLimited() {
	s := toolruntest.New(nil, toolruntest.Script(
		toolruntest.RateLimited(10*time.Millisecond),
		toolruntest.Message(toolruntest.Text("Worth the wait.")),
	))
	defer s.Close()
	client := s.Client()

	msg, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model:     anthropic.Model("claude-sonnet-4-5"),
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(msg.Content[0].Text)
	for _, r := range s.Requests() {
		fmt.Println("attempt", r.Attempt, "status", r.Status)
	}
	// Output:
	// Worth the wait.
	// attempt 1 status 429
	// attempt 2 status 200
}

func ExampleFault() {
	s := toolruntest.New(nil, toolruntest.Script(toolruntest.Reply{
		Content: []toolruntest.Block{toolruntest.Text("Half a sentence and then")},
		Fault:   toolruntest.Fault{StreamErrorAfter: 4},
	}))
	defer s.Close()
	client := s.Client()

	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model:     anthropic.Model("claude-sonnet-4-5"),
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))},
	})
	defer stream.Close()
	var msg anthropic.Message
	for stream.Next() {
		msg.Accumulate(stream.Current())
	}
	var apiErr *anthropic.Error
	if errors.As(stream.Err(), &apiErr) {
		fmt.Println(apiErr.Type(), apiErr.Message)
	}
	fmt.Printf("%q\n", msg.Content[0].Text)
	// Output:
	// overloaded_error Overloaded
	// "Half a s"
}

func ExampleValidate() {
	body := `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[
		{"role":"user","content":"Weather?"},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}]},
		{"role":"user","content":"Well?"}]}`
	fmt.Println(toolruntest.Validate([]byte(body)))
	// Output:
	// messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01. Each `tool_use` block must have a corresponding `tool_result` block in the next message.
}

// ExampleClock caches a long system prompt, and lets the cached prefix
// expire by moving the server's clock on.
func ExampleClock() {
	clock := new(toolruntest.Clock)
	ok := toolruntest.Message(toolruntest.Text("Ok"))
	s := toolruntest.New(nil, toolruntest.Options{Now: clock.Now, Replies: []toolruntest.Reply{ok, ok, ok}})
	defer s.Close()
	client := s.Client()

	params := anthropic.BetaMessageNewParams{
		Model:     anthropic.Model("claude-sonnet-4-5"),
		MaxTokens: 1024,
		// 4100 bytes up to the end of the block: 1025 tokens, over the
		// minimum of 1024 that this model can cache.
		System: []anthropic.BetaTextBlockParam{{
			Text:         strings.Repeat("a", 4074),
			CacheControl: anthropic.NewBetaCacheControlEphemeralParam(),
		}},
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Hi"))},
	}
	for _, wait := range []time.Duration{0, time.Minute, 10 * time.Minute} {
		clock.Advance(wait)
		msg, err := client.Beta.Messages.New(context.Background(), params)
		if err != nil {
			fmt.Println(err)
			return
		}
		u := msg.Usage
		fmt.Printf("written %d, read %d, uncached %d\n", u.CacheCreationInputTokens, u.CacheReadInputTokens, u.InputTokens)
	}
	fmt.Println("billed as", toolruntest.BilledInputTokens(s.Usage()), "uncached input tokens")
	// Output:
	// written 1025, read 0, uncached 15
	// written 0, read 1025, uncached 15
	// written 1025, read 0, uncached 15
	// billed as 2710 uncached input tokens
}
