package toolruntest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/toolruntest"
)

// summarize is the compaction config of a compaction request.
var summarize = anthropic.BetaCompactionConfigUnionParam{OfSummarize: &anthropic.BetaSummarizeCompactionParam{}}

// TestCompaction compacts a conversation through the SDK and goes on from
// the compaction block.
func TestCompaction(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			t.Parallel()
			s := toolruntest.New(nil, toolruntest.Script(toolruntest.Message(toolruntest.Text("Ok"))))
			defer s.Close()
			client := s.Client()
			params := anthropic.BetaMessageNewParams{
				Model:      model,
				MaxTokens:  1024,
				Betas:      []anthropic.AnthropicBeta{anthropic.AnthropicBetaCompact2026_09_04},
				Compaction: summarize,
				Messages:   []anthropic.BetaMessageParam{user(plain("Hello there"))},
			}
			var msg *anthropic.BetaMessage
			if stream {
				st := client.Beta.Messages.NewStreaming(t.Context(), params)
				msg = new(anthropic.BetaMessage)
				for st.Next() {
					if err := msg.Accumulate(st.Current()); err != nil {
						t.Fatal(err)
					}
				}
				if err := st.Err(); err != nil {
					t.Fatal(err)
				}
			} else {
				var err error
				if msg, err = client.Beta.Messages.New(t.Context(), params); err != nil {
					t.Fatal(err)
				}
			}

			const summary = `Summary of 1 message. Last user text: "Hello there".`
			if msg.StopReason != anthropic.BetaStopReasonCompaction || len(msg.Content) != 1 || msg.Content[0].Type != "compaction" || msg.Content[0].Content.OfString != summary {
				t.Fatalf("got %s, want one compaction block saying %q and stop reason compaction", msg.RawJSON(), summary)
			}
			if msg.Content[0].Signature == "" {
				t.Errorf("got no signature on the compaction block")
			}
			// The top-level usage is 0; the iteration has the cost:
			// [{"content":[{"text":"Hello there","type":"text"}],"role":"user"}]
			// is 1+53+11+1 = 66 bytes, 17 tokens, and the summary 52 bytes,
			// 13 tokens.
			if msg.Usage.InputTokens != 0 || msg.Usage.OutputTokens != 0 || len(msg.Usage.Iterations) != 1 {
				t.Fatalf("got usage %s, want 0 tokens and one iteration", msg.Usage.RawJSON())
			}
			it := msg.Usage.Iterations[0]
			if it.Type != "compaction" || it.InputTokens != 17 || it.OutputTokens != 13 {
				t.Errorf("got iteration %s, want a compaction of 17 input and 13 output tokens", it.RawJSON())
			}
			if diff := cmp.Diff(toolruntest.Usage{InputTokens: 17, OutputTokens: 13}, s.Usage()); diff != "" {
				t.Errorf("Server.Usage (-want +got):\n%s", diff)
			}

			// The next request counts from the compaction block on, whether
			// or not it still sends what the block replaces. The block is
			// {"content":<summary>,"signature":<34 bytes>,"type":"compaction"}:
			// 11+56+13+34+21 = 135 bytes, for the summary is 56 bytes in
			// JSON. The messages are then 1+(12+135+21)+1+(53+4)+1 = 228
			// bytes, 57 tokens.
			block, _ := json.Marshal(msg.Content[0].Content.OfString)
			if len(block) != 56 {
				t.Fatalf("got a summary of %d bytes of JSON, want 56", len(block))
			}
			for _, history := range [][]anthropic.BetaMessageParam{
				{msg.ToParam(), user(plain("Next"))},
				{user(plain("Hello there")), msg.ToParam(), user(plain("Next"))},
			} {
				s := toolruntest.New(nil, toolruntest.Script(toolruntest.Message(toolruntest.Text("Ok"))))
				defer s.Close()
				client := s.Client()
				next, err := client.Beta.Messages.New(t.Context(), anthropic.BetaMessageNewParams{
					Model: model, MaxTokens: 1024, Messages: history,
					Betas: []anthropic.AnthropicBeta{anthropic.AnthropicBetaCompact2026_09_04},
				})
				if err != nil {
					t.Fatal(err)
				}
				if next.Usage.InputTokens != 57 {
					t.Errorf("with %d messages: got %d input tokens, want 57", len(history), next.Usage.InputTokens)
				}
			}
			if errs := s.Errors(); len(errs) > 0 {
				t.Errorf("server errors: %v", errs)
			}
		})
	}
}

// TestCompactionRejected checks what the API does not take with compaction.
func TestCompactionRejected(t *testing.T) {
	t.Parallel()
	compact := []anthropic.AnthropicBeta{anthropic.AnthropicBetaCompact2026_09_04}
	tests := []struct {
		name string
		edit func(*anthropic.BetaMessageNewParams)
		want string
	}{
		{"without the beta", func(p *anthropic.BetaMessageNewParams) { p.Betas = nil }, "compaction: this feature requires the anthropic-beta header compact-2026-09-04"},
		{"with context_management", func(p *anthropic.BetaMessageNewParams) {
			p.Betas = append(p.Betas, anthropic.AnthropicBetaContextManagement2025_06_27)
			p.ContextManagement.Edits = []anthropic.BetaContextManagementConfigEditUnionParam{{OfClearToolUses20250919: &anthropic.BetaClearToolUses20250919EditParam{}}}
		}, "compaction: cannot be combined with context_management"},
		{"with stop_sequences", func(p *anthropic.BetaMessageNewParams) { p.StopSequences = []string{"END"} }, "compaction: cannot be combined with stop_sequences"},
		{"with a forced tool_choice", func(p *anthropic.BetaMessageNewParams) {
			p.ToolChoice = anthropic.BetaToolChoiceUnionParam{OfAny: &anthropic.BetaToolChoiceAnyParam{}}
		}, "compaction: cannot be combined with a tool_choice of type any"},
		{"with an output format", func(p *anthropic.BetaMessageNewParams) {
			p.OutputConfig.Format = anthropic.BetaJSONOutputFormatParam{Schema: map[string]any{"type": "object"}}
		}, "compaction: cannot be combined with output_config.format"},
		{"an empty compaction block", func(p *anthropic.BetaMessageNewParams) {
			p.Compaction = anthropic.BetaCompactionConfigUnionParam{}
			p.Messages = append(p.Messages, anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{
				Content: []anthropic.BetaContentBlockParamUnion{{OfCompaction: &anthropic.BetaCompactionBlockParam{Content: anthropic.String("")}}},
			}})
		}, "messages.1.content.0.content: compaction content must be non-empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := toolruntest.New(nil, toolruntest.Script())
			defer s.Close()
			params := anthropic.BetaMessageNewParams{
				Model: model, MaxTokens: 1024, Betas: compact, Compaction: summarize,
				Messages: []anthropic.BetaMessageParam{user(plain("Hello"))},
			}
			tc.edit(&params)
			client := s.Client()
			_, err := client.Beta.Messages.New(t.Context(), params)
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.RawJSON(), tc.want) {
				t.Fatalf("got error %v, want a 400 saying %q", err, tc.want)
			}
		})
	}
}

// toolConversation returns a conversation of four tool calls, each with a
// result of 400 bytes of text, and the assistant messages that make it.
//
// The messages field is 2545 bytes, 637 tokens:
//
//	[                                                             1
//	{"content":[{"text":"Go","type":"text"}],"role":"user"}      55
//	4 × ,{"content":[{"id":"toolu_N","input":{},"name":"get","type":"tool_use"}],"role":"assistant"}
//	    ,{"content":[{"tool_use_id":"toolu_N","is_error":false,"content":[{"text":<400>,"type":"text"}],"type":"tool_result"}],"role":"user"}
//	                                                    4 × (1+91+1+529)
//	]                                                             1
//
// Clearing a result puts "[tool result cleared by context management]" (45
// bytes of JSON) in place of its 427 bytes of content.
func toolConversation() []anthropic.BetaMessageParam {
	msgs := []anthropic.BetaMessageParam{user(plain("Go"))}
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("toolu_%d", i)
		msgs = append(msgs,
			anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{
				{OfToolUse: &anthropic.BetaToolUseBlockParam{ID: id, Name: "get", Input: map[string]any{}}},
			}}},
			user(anthropic.NewBetaToolResultBlock(id, text(400), false)),
		)
	}
	return msgs
}

func TestClearToolUses(t *testing.T) {
	t.Parallel()
	toolUses := func(n int64) anthropic.BetaClearToolUses20250919EditTriggerUnionParam {
		return anthropic.BetaClearToolUses20250919EditTriggerUnionParam{OfToolUses: &anthropic.BetaToolUsesTriggerParam{Value: n}}
	}
	keep1 := anthropic.BetaToolUsesKeepParam{Value: 1}
	// Clearing three results takes 3×(427-45) = 1146 bytes off 2545: 1399
	// bytes, 350 tokens, 287 fewer than 637.
	cleared := `{"applied_edits":[{"type":"clear_tool_uses_20250919","cleared_input_tokens":287,"cleared_tool_uses":3}]}`
	none := `{"applied_edits":[]}`
	tests := []struct {
		name      string
		edit      anthropic.BetaClearToolUses20250919EditParam
		wantInput int64
		wantCM    string
	}{
		{"the defaults: 637 tokens are under the trigger of 100000", anthropic.BetaClearToolUses20250919EditParam{}, 637, none},
		{"triggered by tool uses, keeping one", anthropic.BetaClearToolUses20250919EditParam{Trigger: toolUses(2), Keep: keep1}, 350, cleared},
		{"triggered by input tokens", anthropic.BetaClearToolUses20250919EditParam{
			Trigger: anthropic.BetaClearToolUses20250919EditTriggerUnionParam{OfInputTokens: &anthropic.BetaInputTokensTriggerParam{Value: 600}},
			Keep:    keep1,
		}, 350, cleared},
		{"below the input token trigger", anthropic.BetaClearToolUses20250919EditParam{
			Trigger: anthropic.BetaClearToolUses20250919EditTriggerUnionParam{OfInputTokens: &anthropic.BetaInputTokensTriggerParam{Value: 638}},
			Keep:    keep1,
		}, 637, none},
		{"below the tool use trigger", anthropic.BetaClearToolUses20250919EditParam{Trigger: toolUses(5), Keep: keep1}, 637, none},
		{"clearing just enough", anthropic.BetaClearToolUses20250919EditParam{Trigger: toolUses(2), Keep: keep1,
			ClearAtLeast: anthropic.BetaInputTokensClearAtLeastParam{Value: 287}}, 350, cleared},
		{"clearing too little", anthropic.BetaClearToolUses20250919EditParam{Trigger: toolUses(2), Keep: keep1,
			ClearAtLeast: anthropic.BetaInputTokensClearAtLeastParam{Value: 288}}, 637, none},
		{"excluding the tool", anthropic.BetaClearToolUses20250919EditParam{Trigger: toolUses(2), Keep: keep1, ExcludeTools: []string{"get"}}, 637, none},
		// The default keep of 3 leaves one to clear: 427-45 = 382 bytes
		// off, 2163 bytes, 541 tokens.
		{"keeping the default 3", anthropic.BetaClearToolUses20250919EditParam{Trigger: toolUses(2)}, 541,
			`{"applied_edits":[{"type":"clear_tool_uses_20250919","cleared_input_tokens":96,"cleared_tool_uses":1}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := toolruntest.New(nil, toolruntest.Script(toolruntest.Message(toolruntest.Text("Done"))))
			defer s.Close()
			client := s.Client()
			msg, err := client.Beta.Messages.New(t.Context(), anthropic.BetaMessageNewParams{
				Model: model, MaxTokens: 1024, Messages: toolConversation(),
				Betas:             []anthropic.AnthropicBeta{anthropic.AnthropicBetaContextManagement2025_06_27},
				ContextManagement: anthropic.BetaContextManagementConfigParam{Edits: []anthropic.BetaContextManagementConfigEditUnionParam{{OfClearToolUses20250919: &tc.edit}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if msg.Usage.InputTokens != tc.wantInput {
				t.Errorf("got %d input tokens, want %d", msg.Usage.InputTokens, tc.wantInput)
			}
			if diff := cmp.Diff(decode(t, tc.wantCM), decode(t, msg.ContextManagement.RawJSON())); diff != "" {
				t.Errorf("context_management (-want +got):\n%s", diff)
			}
		})
	}

	// Without the beta, the API refuses context_management.
	s := toolruntest.New(nil, toolruntest.Script())
	defer s.Close()
	client := s.Client()
	_, err := client.Beta.Messages.New(t.Context(), anthropic.BetaMessageNewParams{
		Model: model, MaxTokens: 1024, Messages: toolConversation(),
		ContextManagement: anthropic.BetaContextManagementConfigParam{Edits: []anthropic.BetaContextManagementConfigEditUnionParam{{OfClearToolUses20250919: &anthropic.BetaClearToolUses20250919EditParam{}}}},
	})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.RawJSON(), "context-management-2025-06-27") {
		t.Errorf("got error %v, want a 400 naming the beta", err)
	}
}

// TestThreads runs a conversation on a message thread through the SDK's
// thread helper.
func TestThreads(t *testing.T) {
	t.Parallel()
	tool := anthropic.BetaToolUnionParam{OfTool: &anthropic.BetaToolParam{
		Name:        "get",
		InputSchema: anthropic.BetaToolInputSchemaParam{Properties: map[string]any{}},
	}}
	replies := []toolruntest.Reply{
		toolruntest.Message(toolruntest.ToolUse("toolu_01", "get", nil)),
		toolruntest.Message(toolruntest.Text("Done")),
	}
	s := toolruntest.New(nil, toolruntest.Script(append(replies, replies[1])...))
	defer s.Close()
	client := s.Client()
	thread := client.Beta.Messages.NewThread(anthropic.BetaMessageThreadCreateParams{
		Model: model, MaxTokens: 1024,
		System: []anthropic.BetaTextBlockParam{{Text: "Be brief."}},
		Tools:  []anthropic.BetaToolUnionParam{tool},
	})
	first, err := thread.Send(t.Context(), anthropic.BetaMessageThreadSendParams{
		Messages: []anthropic.BetaMessageParam{user(plain("Get it"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	second, err := thread.Send(t.Context(), anthropic.BetaMessageThreadSendParams{
		Messages: []anthropic.BetaMessageParam{user(anthropic.NewBetaToolResultBlock(first.Content[0].ID, "it", false))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if second.Content[0].Text != "Done" {
		t.Fatalf("got %s, want Done", second.RawJSON())
	}

	// The same conversation without a thread, to compare.
	client2 := s.Client()
	whole, err := client2.Beta.Messages.New(t.Context(), anthropic.BetaMessageNewParams{
		Model: model, MaxTokens: 1024, System: []anthropic.BetaTextBlockParam{{Text: "Be brief."}},
		Tools: []anthropic.BetaToolUnionParam{tool}, Messages: thread.Messages()[:3],
	})
	if err != nil {
		t.Fatal(err)
	}

	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("got %d requests, want 3", len(reqs))
	}
	create, cont := reqs[0].Params, reqs[1].Params
	if create.Thread == nil || create.Thread.Type != "create" || cont.Thread == nil || cont.Thread.Type != "continue" || cont.Thread.PreviousMessageID != first.ID {
		t.Fatalf("got thread fields %+v and %+v, want a create and a continue from %s", create.Thread, cont.Thread, first.ID)
	}
	if len(cont.Messages) != 1 || cont.System != nil || cont.Tools != nil {
		t.Errorf("the continue sent %d messages, system %s and tools %v; want only the new message", len(cont.Messages), cont.System, cont.Tools)
	}
	if got := len(reqs[1].Conversation); got != 3 {
		t.Errorf("got a conversation of %d messages for the continue, want 3", got)
	}
	// The continue is counted over the whole conversation, as the request
	// without a thread is.
	if got, want := second.Usage.InputTokens, whole.Usage.InputTokens; got != want {
		t.Errorf("the continue counted %d input tokens, the whole conversation %d", got, want)
	}
	if errs := s.Errors(); len(errs) > 0 {
		t.Errorf("server errors: %v", errs)
	}
}

// TestThreadErrors checks the rejections of thread requests, with the
// error codes the SDK's thread helper acts on.
func TestThreadErrors(t *testing.T) {
	t.Parallel()
	betas := []anthropic.AnthropicBeta{anthropic.AnthropicBetaMessageThreads2026_08_12}
	create := func(c anthropic.Client, ctx *testing.T) *anthropic.BetaMessage {
		msg, err := c.Beta.Messages.New(ctx.Context(), anthropic.BetaMessageNewParams{
			Model: model, MaxTokens: 1024, Betas: betas,
			Thread:   anthropic.BetaMessageThreadParamUnion{OfCreate: &anthropic.BetaThreadCreateParams{}},
			Messages: []anthropic.BetaMessageParam{user(plain("Hi"))},
		})
		if err != nil {
			ctx.Fatal(err)
		}
		return msg
	}
	continueFrom := func(id string) anthropic.BetaMessageNewParams {
		return anthropic.BetaMessageNewParams{
			Model: model, MaxTokens: 1024, Betas: betas,
			Thread:   anthropic.BetaMessageThreadParamOfContinue(id),
			Messages: []anthropic.BetaMessageParam{user(plain("Again"))},
		}
	}
	tests := []struct {
		name       string
		opts       toolruntest.Options
		do         func(c anthropic.Client, clock *toolruntest.Clock, t *testing.T) error
		wantStatus int
		wantCode   string
		wantErrors int // in Server.Errors
	}{
		{
			name: "an unknown message", wantStatus: http.StatusNotFound, wantCode: "thread_not_found",
			do: func(c anthropic.Client, _ *toolruntest.Clock, t *testing.T) error {
				_, err := c.Beta.Messages.New(t.Context(), continueFrom("msg_nope"))
				return err
			},
		},
		{
			name: "an expired thread", wantStatus: http.StatusNotFound, wantCode: "thread_not_found",
			do: func(c anthropic.Client, clock *toolruntest.Clock, t *testing.T) error {
				first := create(c, t)
				clock.Advance(5*time.Minute + time.Second)
				_, err := c.Beta.Messages.New(t.Context(), continueFrom(first.ID))
				return err
			},
		},
		{
			name: "a thread continued twice", wantStatus: http.StatusBadRequest, wantCode: "thread_already_continued", wantErrors: 1,
			do: func(c anthropic.Client, clock *toolruntest.Clock, t *testing.T) error {
				first := create(c, t)
				clock.Advance(4 * time.Minute)
				if _, err := c.Beta.Messages.New(t.Context(), continueFrom(first.ID)); err != nil {
					t.Fatal(err)
				}
				_, err := c.Beta.Messages.New(t.Context(), continueFrom(first.ID))
				return err
			},
		},
		{
			name: "another system prompt", wantStatus: http.StatusBadRequest, wantCode: "thread_fingerprint_mismatch", wantErrors: 1,
			do: func(c anthropic.Client, _ *toolruntest.Clock, t *testing.T) error {
				first := create(c, t)
				params := continueFrom(first.ID)
				params.System = []anthropic.BetaTextBlockParam{{Text: "Be brief."}}
				_, err := c.Beta.Messages.New(t.Context(), params)
				return err
			},
		},
		{
			name: "a continue that breaks the conversation", wantStatus: http.StatusBadRequest, wantErrors: 1,
			do: func(c anthropic.Client, _ *toolruntest.Clock, t *testing.T) error {
				first := create(c, t)
				params := continueFrom(first.ID)
				params.Messages = []anthropic.BetaMessageParam{user(anthropic.NewBetaToolResultBlock("toolu_99", "x", false))}
				_, err := c.Beta.Messages.New(t.Context(), params)
				return err
			},
		},
		{
			name: "without the beta", wantStatus: http.StatusBadRequest, wantErrors: 1,
			do: func(c anthropic.Client, _ *toolruntest.Clock, t *testing.T) error {
				params := continueFrom("msg_1")
				params.Betas = nil
				_, err := c.Beta.Messages.New(t.Context(), params)
				return err
			},
		},
		{
			name: "a server whose threads are unsupported", wantStatus: http.StatusBadRequest, wantCode: "thread_unsupported_request",
			opts: toolruntest.Options{ThreadUnsupported: []string{"inference_hooks"}},
			do: func(c anthropic.Client, _ *toolruntest.Clock, t *testing.T) error {
				_, err := c.Beta.Messages.New(t.Context(), anthropic.BetaMessageNewParams{
					Model: model, MaxTokens: 1024, Betas: betas,
					Thread:   anthropic.BetaMessageThreadParamUnion{OfCreate: &anthropic.BetaThreadCreateParams{}},
					Messages: []anthropic.BetaMessageParam{user(plain("Hi"))},
				})
				return err
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := new(toolruntest.Clock)
			opts := tc.opts
			opts.Now = clock.Now
			opts.Func = func(*toolruntest.Request) toolruntest.Reply {
				return toolruntest.Message(toolruntest.Text("Ok"))
			}
			s := toolruntest.New(nil, opts)
			defer s.Close()
			err := tc.do(s.Client(option.WithMaxRetries(0)), clock, t)
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.wantStatus {
				t.Fatalf("got error %v, want HTTP %d", err, tc.wantStatus)
			}
			var body struct {
				Error struct {
					Details struct {
						ErrorCode string `json:"error_code"`
					} `json:"details"`
				} `json:"error"`
			}
			json.Unmarshal([]byte(apiErr.RawJSON()), &body)
			if got := body.Error.Details.ErrorCode; got != tc.wantCode {
				t.Errorf("got error code %q, want %q: %s", got, tc.wantCode, apiErr.RawJSON())
			}
			if errs := s.Errors(); len(errs) != tc.wantErrors {
				t.Errorf("got server errors %v, want %d", errs, tc.wantErrors)
			}
		})
	}
}

// TestThreadUnsupportedFallback checks that the SDK's thread helper, told to
// go on without a thread, sends the whole history when the server refuses
// threads.
func TestThreadUnsupportedFallback(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(nil, toolruntest.Options{
		ThreadUnsupported: []string{"inference_hooks"},
		Replies: []toolruntest.Reply{
			toolruntest.Message(toolruntest.Text("One")),
			toolruntest.Message(toolruntest.Text("Two")),
		},
	})
	defer s.Close()
	client := s.Client()
	thread := client.Beta.Messages.NewThread(anthropic.BetaMessageThreadCreateParams{
		Model: model, MaxTokens: 1024,
		UnsupportedRequestBehavior: anthropic.BetaMessageThreadUnsupportedRequestBehaviorContinueUnthreaded,
	})
	for _, q := range []string{"First", "Second"} {
		if _, err := thread.Send(t.Context(), anthropic.BetaMessageThreadSendParams{Messages: []anthropic.BetaMessageParam{user(plain(q))}}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, r := range s.Requests() {
		got = append(got, fmt.Sprintf("%d %t %d", r.Status, r.Params.Thread != nil, len(r.Params.Messages)))
	}
	// The create is refused; the turn goes again without a thread, and so
	// does the next, with the whole history.
	want := []string{"400 true 1", "200 false 1", "200 false 3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests as status, threaded, messages (-want +got):\n%s", diff)
	}
	if errs := s.Errors(); len(errs) > 0 {
		t.Errorf("server errors: %v", errs)
	}
}

// TestCompactEdit triggers the compact_20260112 edit of context_management.
func TestCompactEdit(t *testing.T) {
	t.Parallel()
	// [{"content":[{"text":<200000>,"type":"text"}],"role":"user"}] is
	// 1+53+200000+1 = 200055 bytes, 50014 tokens: over the trigger of 50000.
	long := []anthropic.BetaMessageParam{user(plain(text(200_000)))}
	for _, pause := range []bool{false, true} {
		t.Run(fmt.Sprintf("pause=%t", pause), func(t *testing.T) {
			t.Parallel()
			var replies []toolruntest.Reply
			if !pause {
				replies = append(replies, toolruntest.Message(toolruntest.Text("Ok")))
			}
			s := toolruntest.New(nil, toolruntest.Script(replies...))
			defer s.Close()
			client := s.Client()
			msg, err := client.Beta.Messages.New(t.Context(), anthropic.BetaMessageNewParams{
				Model: model, MaxTokens: 1024, Messages: long,
				Betas: []anthropic.AnthropicBeta{anthropic.AnthropicBetaCompact2026_01_12},
				ContextManagement: anthropic.BetaContextManagementConfigParam{Edits: []anthropic.BetaContextManagementConfigEditUnionParam{
					{OfCompact20260112: &anthropic.BetaCompact20260112EditParam{
						Trigger:              anthropic.BetaInputTokensTriggerParam{Value: 50_000},
						PauseAfterCompaction: anthropic.Bool(pause),
					}},
				}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(msg.Content) == 0 || msg.Content[0].Type != "compaction" {
				t.Fatalf("got %.300s, want a compaction block first", msg.RawJSON())
			}
			summary := msg.Content[0].Content.OfString
			its := msg.Usage.Iterations
			if len(its) == 0 || its[0].Type != "compaction" || its[0].InputTokens != 50014 || its[0].OutputTokens != int64(len(summary)+3)/4 {
				t.Fatalf("got iterations %s, want a compaction of 50014 input tokens first", msg.Usage.RawJSON())
			}
			if pause {
				if msg.StopReason != "compaction" || len(msg.Content) != 1 || len(its) != 1 || msg.Usage.InputTokens != 0 {
					t.Errorf("got %s, want the compaction block alone, stop reason compaction, usage 0", msg.RawJSON())
				}
				return
			}
			// The model's turn reads the compaction block alone:
			// [{"content":[{"type":"compaction","content":<summary>,"signature":<34>}],"role":"assistant"}]
			// is 1+12+(79+len(summary as JSON))+21+1 bytes.
			js, _ := json.Marshal(summary)
			after := int64(114+len(js)+3) / 4
			if msg.StopReason != "end_turn" || len(msg.Content) != 2 || msg.Content[1].Text != "Ok" {
				t.Errorf("got %.300s, want the compaction block and the reply", msg.RawJSON())
			}
			if len(its) != 2 || its[1].Type != "message" || its[1].InputTokens != after || msg.Usage.InputTokens != after {
				t.Errorf("got usage %s, want the model's turn to read %d tokens", msg.Usage.RawJSON(), after)
			}
		})
	}
}

func TestClearThinking(t *testing.T) {
	t.Parallel()
	thinking := func(text string) anthropic.BetaMessageParam {
		return anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{
			{OfThinking: &anthropic.BetaThinkingBlockParam{Thinking: text, Signature: "sig"}},
			plain("Answer"),
		}}}
	}
	// Each thinking block {"signature":"sig","thinking":<395>,"type":"thinking"}
	// is 18+(14+395)+19 = 446 bytes, and 447 with its comma: keeping the
	// last thinking turn drops the first one's.
	msgs := []anthropic.BetaMessageParam{
		user(plain("One")), thinking(text(395)), user(plain("Two")), thinking(text(395)), user(plain("Three")),
	}
	s := toolruntest.New(nil, toolruntest.Script(toolruntest.Message(toolruntest.Text("Ok")), toolruntest.Message(toolruntest.Text("Ok"))))
	defer s.Close()
	client := s.Client()
	params := anthropic.BetaMessageNewParams{Model: model, MaxTokens: 1024, Messages: msgs}
	plainMsg, err := client.Beta.Messages.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	params.Betas = []anthropic.AnthropicBeta{anthropic.AnthropicBetaContextManagement2025_06_27}
	params.ContextManagement.Edits = []anthropic.BetaContextManagementConfigEditUnionParam{{OfClearThinking20251015: &anthropic.BetaClearThinking20251015EditParam{}}}
	edited, err := client.Beta.Messages.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	// The messages are [ One , (12+446+1+31+21) , Two , 511 , Three ]:
	// 1+56+1+511+1+56+1+511+1+58+1 = 1198 bytes (300 tokens) as sent, 751
	// (188 tokens) without the first thinking block.
	if plainMsg.Usage.InputTokens != 300 || edited.Usage.InputTokens != 188 {
		t.Errorf("got %d and %d input tokens, want 300 and 188", plainMsg.Usage.InputTokens, edited.Usage.InputTokens)
	}
	want := `{"applied_edits":[{"type":"clear_thinking_20251015","cleared_input_tokens":112,"cleared_thinking_turns":1}]}`
	if diff := cmp.Diff(decode(t, want), decode(t, edited.ContextManagement.RawJSON())); diff != "" {
		t.Errorf("context_management (-want +got):\n%s", diff)
	}
}
