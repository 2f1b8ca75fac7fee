package toolruntest_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/toolruntest"
)

// The expected numbers of these tests are worked out by hand from the bytes
// the SDK sends, at four bytes a token, rounded up. The pieces:
//
//	a text block         {"text":"<t>","type":"text"}                    25 + len(t)
//	the same, cached     {"text":"<t>","cache_control":{...},"type":"text"} counts as above
//	a user message       {"content":[<blocks>],"role":"user"}           12 + blocks + 16
//	an assistant message {"content":[<blocks>],"role":"assistant"}      12 + blocks + 21
//	a field              [<elements, comma-separated>]                  2 + elements + commas
//
// A prefix that ends with a block counts from the first byte of the tools
// field (then system, then messages) to the last byte of the block.

// text returns n bytes of text.
func text(n int) string { return strings.Repeat("a", n) }

// cached returns a text block with a cache breakpoint of ttl ("" for the
// default).
func cached(t string, ttl anthropic.BetaCacheControlEphemeralTTL) anthropic.BetaContentBlockParamUnion {
	cc := anthropic.NewBetaCacheControlEphemeralParam()
	cc.TTL = ttl
	return anthropic.BetaContentBlockParamUnion{OfText: &anthropic.BetaTextBlockParam{Text: t, CacheControl: cc}}
}

// cachedSystem returns a system prompt of one text block with a breakpoint.
func cachedSystem(t string, ttl anthropic.BetaCacheControlEphemeralTTL) []anthropic.BetaTextBlockParam {
	cc := anthropic.NewBetaCacheControlEphemeralParam()
	cc.TTL = ttl
	return []anthropic.BetaTextBlockParam{{Text: t, CacheControl: cc}}
}

// user returns a user message of text blocks.
func user(blocks ...anthropic.BetaContentBlockParamUnion) anthropic.BetaMessageParam {
	return anthropic.NewBetaUserMessage(blocks...)
}

func plain(t string) anthropic.BetaContentBlockParamUnion { return anthropic.NewBetaTextBlock(t) }

// usageOf returns the usage of msg as the package's Usage.
func usageOf(msg *anthropic.BetaMessage) toolruntest.Usage {
	return toolruntest.Usage{
		InputTokens:                msg.Usage.InputTokens,
		OutputTokens:               msg.Usage.OutputTokens,
		CacheCreationInputTokens:   msg.Usage.CacheCreationInputTokens,
		CacheReadInputTokens:       msg.Usage.CacheReadInputTokens,
		CacheCreation1hInputTokens: msg.Usage.CacheCreation.Ephemeral1hInputTokens,
	}
}

// inputOnly returns u without its output tokens, which these tests do not
// work out.
func inputOnly(u toolruntest.Usage) toolruntest.Usage {
	u.OutputTokens = 0
	return u
}

func TestPromptCaching(t *testing.T) {
	t.Parallel()
	// A system block of 4074 bytes of text ends at byte 1+25+4074 = 4100 of
	// the prompt: 1025 tokens, just over the 1024 of claude-sonnet-4-5. The
	// system field is 4101 bytes, and [{"content":[{"text":"Hi","type":"text"}],"role":"user"}]
	// 1+12+27+16+1 = 57 more: 4158 bytes, 1040 tokens in all.
	big := cachedSystem(text(4074), "")
	// One of 1000 bytes ends at byte 1026: 257 tokens, too few to cache. The
	// request is 1027+57 = 1084 bytes, 271 tokens.
	small := cachedSystem(text(1000), "")
	changed := cachedSystem(text(4073)+"b", "")
	hi := []anthropic.BetaMessageParam{user(plain("Hi"))}
	// req is a request with a system prompt and messages.
	type req struct {
		system   []anthropic.BetaTextBlockParam
		messages []anthropic.BetaMessageParam
	}
	tests := []struct {
		name string
		reqs []req
		want []toolruntest.Usage
	}{
		{
			name: "below the minimum nothing is cached",
			reqs: []req{{small, hi}, {small, hi}},
			want: []toolruntest.Usage{{InputTokens: 271}, {InputTokens: 271}},
		},
		{
			name: "the first request writes, the next ones read the same prefix",
			reqs: []req{{big, hi}, {big, hi}, {big, []anthropic.BetaMessageParam{user(plain("Ho"))}}},
			want: []toolruntest.Usage{
				{InputTokens: 15, CacheCreationInputTokens: 1025},
				{InputTokens: 15, CacheReadInputTokens: 1025},
				{InputTokens: 15, CacheReadInputTokens: 1025},
			},
		},
		{
			name: "a changed prefix misses",
			reqs: []req{{big, hi}, {changed, hi}, {big, hi}},
			want: []toolruntest.Usage{
				{InputTokens: 15, CacheCreationInputTokens: 1025},
				{InputTokens: 15, CacheCreationInputTokens: 1025},
				{InputTokens: 15, CacheReadInputTokens: 1025},
			},
		},
		{
			// A second breakpoint on the user block: [{"content":[{"text":<4062>,...}],...}]
			// ends that block at 4101+1+12+25+4062 = 8201 bytes, 2051 tokens.
			// The request is 8201+16+1 = 8218 bytes, 2055 tokens. The second
			// request reads up to the user block, the third asks something
			// else and reads only the system prompt.
			name: "two breakpoints write two prefixes",
			reqs: []req{
				{big, []anthropic.BetaMessageParam{user(cached(text(4062), ""))}},
				{big, []anthropic.BetaMessageParam{user(cached(text(4062), ""))}},
				{big, []anthropic.BetaMessageParam{user(cached(text(4061)+"b", ""))}},
			},
			want: []toolruntest.Usage{
				{InputTokens: 4, CacheCreationInputTokens: 2051},
				{InputTokens: 4, CacheReadInputTokens: 2051},
				{InputTokens: 4, CacheReadInputTokens: 1025, CacheCreationInputTokens: 1026},
			},
		},
		{
			// Without a breakpoint the request counts as its bytes, as it
			// always has: 1+55+1 = 57 bytes of messages, 15 tokens.
			name: "no breakpoint",
			reqs: []req{{nil, hi}, {nil, hi}},
			want: []toolruntest.Usage{{InputTokens: 15}, {InputTokens: 15}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := toolruntest.New(nil, toolruntest.Options{Func: func(*toolruntest.Request) toolruntest.Reply {
				return toolruntest.Message(toolruntest.Text("Ok"))
			}})
			defer s.Close()
			client := s.Client()
			var got []toolruntest.Usage
			for _, r := range tc.reqs {
				msg, err := client.Beta.Messages.New(t.Context(), anthropic.BetaMessageNewParams{
					Model: model, MaxTokens: 1024, System: r.system, Messages: r.messages,
				})
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, inputOnly(usageOf(msg)))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			// The server's record and totals agree with what it sent.
			var total toolruntest.Usage
			for i, r := range s.Requests() {
				if r.Usage == nil {
					t.Fatalf("request %d has no Usage", i+1)
				}
				if diff := cmp.Diff(got[i], inputOnly(*r.Usage)); diff != "" {
					t.Errorf("request %d: Usage differs from the message (-message +record):\n%s", i+1, diff)
				}
				total.InputTokens += r.Usage.InputTokens
				total.OutputTokens += r.Usage.OutputTokens
				total.CacheCreationInputTokens += r.Usage.CacheCreationInputTokens
				total.CacheReadInputTokens += r.Usage.CacheReadInputTokens
			}
			if diff := cmp.Diff(total, s.Usage()); diff != "" {
				t.Errorf("Server.Usage (-sum of requests +got):\n%s", diff)
			}
			if errs := s.Errors(); len(errs) > 0 {
				t.Errorf("server errors: %v", errs)
			}
		})
	}
}

// TestAutomaticCaching follows a conversation with a top-level
// cache_control: each turn reads what the turn before wrote and writes the
// new part.
func TestAutomaticCaching(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.Text("Ok")),
		toolruntest.Message(toolruntest.Text("Ok")),
		toolruntest.Message(toolruntest.Text("Ok")),
	))
	defer s.Close()
	client := s.Client()
	params := anthropic.BetaMessageNewParams{
		Model:        model,
		MaxTokens:    1024,
		CacheControl: anthropic.NewBetaCacheControlEphemeralParam(),
		Messages:     []anthropic.BetaMessageParam{user(plain(text(4062)))},
	}
	// Turn 1: the breakpoint goes on the only block, which ends at
	// 1+12+25+4062 = 4100 bytes (1025 tokens); the request is 4117 bytes
	// (1030 tokens).
	// Turn 2 adds ,{"content":[{"text":"Ok","type":"text"}],"role":"assistant"}
	// (61 bytes) and ,{"content":[{"text":"Go on","type":"text"}],"role":"user"}:
	// its last block ends at 4100+16+61+1+12+30 = 4220 bytes (1055 tokens),
	// and the request is 4237 bytes (1060 tokens).
	// Turn 3 adds the same again: 4340 bytes (1085 tokens), 4357 in all
	// (1090 tokens).
	want := []toolruntest.Usage{
		{InputTokens: 5, CacheCreationInputTokens: 1025},
		{InputTokens: 5, CacheReadInputTokens: 1025, CacheCreationInputTokens: 30},
		{InputTokens: 5, CacheReadInputTokens: 1055, CacheCreationInputTokens: 30},
	}
	var got []toolruntest.Usage
	for range want {
		msg, err := client.Beta.Messages.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, inputOnly(usageOf(msg)))
		params.Messages = append(params.Messages, msg.ToParam(), user(plain("Go on")))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usage by turn (-want +got):\n%s", diff)
	}
}

// TestCacheTTL moves the server's clock on between two requests with the
// same cached prefix.
func TestCacheTTL(t *testing.T) {
	t.Parallel()
	// The prefix of TestPromptCaching: 1025 tokens of a 1040-token request.
	write5m := toolruntest.Usage{InputTokens: 15, CacheCreationInputTokens: 1025}
	write1h := toolruntest.Usage{InputTokens: 15, CacheCreationInputTokens: 1025, CacheCreation1hInputTokens: 1025}
	read := toolruntest.Usage{InputTokens: 15, CacheReadInputTokens: 1025}
	tests := []struct {
		name  string
		ttl   anthropic.BetaCacheControlEphemeralTTL
		after []time.Duration // the time before each request after the first
		want  []toolruntest.Usage
	}{
		{"5m: read within 5 minutes", "", []time.Duration{4 * time.Minute}, []toolruntest.Usage{write5m, read}},
		{"5m: written again after 6 minutes", "5m", []time.Duration{6 * time.Minute}, []toolruntest.Usage{write5m, write5m}},
		{"5m: written again at exactly 5 minutes", "", []time.Duration{5 * time.Minute}, []toolruntest.Usage{write5m, write5m}},
		{"5m: each read refreshes the TTL", "", []time.Duration{4 * time.Minute, 4 * time.Minute, 4 * time.Minute}, []toolruntest.Usage{write5m, read, read, read}},
		{"1h: read after 6 minutes", "1h", []time.Duration{6 * time.Minute}, []toolruntest.Usage{write1h, read}},
		{"1h: written again after 61 minutes", "1h", []time.Duration{61 * time.Minute}, []toolruntest.Usage{write1h, write1h}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := new(toolruntest.Clock)
			s := toolruntest.New(nil, toolruntest.Options{
				Now: clock.Now,
				Func: func(*toolruntest.Request) toolruntest.Reply {
					return toolruntest.Message(toolruntest.Text("Ok"))
				},
			})
			defer s.Close()
			client := s.Client()
			var got []toolruntest.Usage
			for i := range tc.want {
				if i > 0 {
					clock.Advance(tc.after[i-1])
				}
				msg, err := client.Beta.Messages.New(t.Context(), anthropic.BetaMessageNewParams{
					Model: model, MaxTokens: 1024, System: cachedSystem(text(4074), tc.ttl),
					Messages: []anthropic.BetaMessageParam{user(plain("Hi"))},
				})
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, inputOnly(usageOf(msg)))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCacheLookback checks the 20 block boundaries that a breakpoint looks
// back over for a cached prefix, its own included.
func TestCacheLookback(t *testing.T) {
	t.Parallel()
	// The first request caches a user block that ends at 1+12+25+4062 =
	// 4100 bytes (1025 tokens). The second sends it again, uncached, then n
	// blocks ,{"text":"bb","type":"text"} of 28 bytes, the last with the
	// breakpoint: it ends at 4100+28n bytes, and the request has 17 more.
	tests := []struct {
		name string
		n    int
		want toolruntest.Usage
	}{
		// 4100+28*19 = 4632 bytes, 1158 tokens; 4649 in all, 1163 tokens.
		{"19 blocks on, the cached prefix is the 20th boundary back", 19,
			toolruntest.Usage{InputTokens: 5, CacheReadInputTokens: 1025, CacheCreationInputTokens: 133}},
		// 4660 bytes, 1165 tokens; 4677 in all, 1170 tokens.
		{"20 blocks on, it is out of reach", 20,
			toolruntest.Usage{InputTokens: 5, CacheCreationInputTokens: 1165}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := toolruntest.New(nil, toolruntest.Options{Func: func(*toolruntest.Request) toolruntest.Reply {
				return toolruntest.Message(toolruntest.Text("Ok"))
			}})
			defer s.Close()
			client := s.Client()
			first, err := client.Beta.Messages.New(t.Context(), anthropic.BetaMessageNewParams{
				Model: model, MaxTokens: 1024, Messages: []anthropic.BetaMessageParam{user(cached(text(4062), ""))},
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(toolruntest.Usage{InputTokens: 5, CacheCreationInputTokens: 1025}, inputOnly(usageOf(first))); diff != "" {
				t.Errorf("first request (-want +got):\n%s", diff)
			}
			blocks := []anthropic.BetaContentBlockParamUnion{plain(text(4062))}
			for range tc.n - 1 {
				blocks = append(blocks, plain("bb"))
			}
			blocks = append(blocks, cached("bb", ""))
			second, err := client.Beta.Messages.New(t.Context(), anthropic.BetaMessageNewParams{
				Model: model, MaxTokens: 1024, Messages: []anthropic.BetaMessageParam{user(blocks...)},
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, inputOnly(usageOf(second))); diff != "" {
				t.Errorf("second request (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMixedTTLs writes a 1-hour prefix and a 5-minute one in one request,
// and weighs the usage as billed.
func TestMixedTTLs(t *testing.T) {
	t.Parallel()
	s := toolruntest.New(nil, toolruntest.Script(toolruntest.Message(toolruntest.Text("Ok"))))
	defer s.Close()
	// The system block (1h) ends at 4100 bytes, 1025 tokens; the user block
	// (5m) at 8201, 2051 tokens; the request is 8218 bytes, 2055 tokens.
	client := s.Client()
	msg, err := client.Beta.Messages.New(t.Context(), anthropic.BetaMessageNewParams{
		Model: model, MaxTokens: 1024, System: cachedSystem(text(4074), "1h"),
		Messages: []anthropic.BetaMessageParam{user(cached(text(4062), "5m"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := toolruntest.Usage{InputTokens: 4, CacheCreationInputTokens: 2051, CacheCreation1hInputTokens: 1025}
	got := inputOnly(usageOf(msg))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if got, want := msg.Usage.CacheCreation.Ephemeral5mInputTokens, int64(1026); got != want {
		t.Errorf("got cache_creation.ephemeral_5m_input_tokens %d, want %d", got, want)
	}
	// 4 + 1.25×1026 + 2×1025 = 3336.5
	if got, want := toolruntest.BilledInputTokens(got), 3336.5; got != want {
		t.Errorf("got BilledInputTokens %v, want %v", got, want)
	}
}

func TestBilledInputTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		u    toolruntest.Usage
		want float64
	}{
		{"uncached", toolruntest.Usage{InputTokens: 1000, OutputTokens: 50}, 1000},
		{"5-minute writes", toolruntest.Usage{InputTokens: 10, CacheCreationInputTokens: 1000}, 1260},
		{"1-hour writes", toolruntest.Usage{InputTokens: 10, CacheCreationInputTokens: 1000, CacheCreation1hInputTokens: 1000}, 2010},
		{"reads", toolruntest.Usage{InputTokens: 10, CacheReadInputTokens: 1000}, 110},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := toolruntest.BilledInputTokens(tc.u); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMinCacheableTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		model string
		want  int64
	}{
		{"claude-sonnet-4-5", 1024},
		{"claude-sonnet-4-5-20250929", 1024},
		{"claude-sonnet-4-6", 1024},
		{"claude-opus-4-1", 1024},
		{"claude-opus-4-5-20251101", 4096},
		{"claude-opus-4-6", 4096},
		{"claude-opus-4-7", 2048},
		{"claude-opus-4-8", 1024},
		{"claude-haiku-4-5", 4096},
		{"claude-3-5-haiku-20241022", 2048},
		{"claude-opus-5", 512},
		{"claude-opus-5-5", 512},
		{"claude-sonnet-5-5", 1024},
		{"some-other-model", toolruntest.DefaultMinCacheableTokens},
	}
	for _, tc := range tests {
		if got := toolruntest.MinCacheableTokens(tc.model); got != tc.want {
			t.Errorf("MinCacheableTokens(%q) = %d, want %d", tc.model, got, tc.want)
		}
	}

	// Options.MinCacheableTokens lowers the bar for every model: the small
	// system prompt of TestPromptCaching (257 tokens) is cached.
	s := toolruntest.New(nil, toolruntest.Options{MinCacheableTokens: 100, Replies: []toolruntest.Reply{toolruntest.Message(toolruntest.Text("Ok"))}})
	defer s.Close()
	client := s.Client()
	msg, err := client.Beta.Messages.New(t.Context(), anthropic.BetaMessageNewParams{
		Model: model, MaxTokens: 1024, System: cachedSystem(text(1000), ""),
		Messages: []anthropic.BetaMessageParam{user(plain("Hi"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(toolruntest.Usage{InputTokens: 14, CacheCreationInputTokens: 257}, inputOnly(usageOf(msg))); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

// TestCacheControlRejected checks the breakpoints the API refuses.
func TestCacheControlRejected(t *testing.T) {
	t.Parallel()
	five := make([]anthropic.BetaTextBlockParam, 5)
	four := make([]anthropic.BetaTextBlockParam, 4)
	for i := range five {
		five[i] = cachedSystem("block", "")[0]
	}
	copy(four, five)
	tests := []struct {
		name   string
		params anthropic.BetaMessageNewParams
		want   string // in the error message; "" for none
	}{
		{
			name:   "five breakpoints",
			params: anthropic.BetaMessageNewParams{System: five, Messages: []anthropic.BetaMessageParam{user(plain("Hi"))}},
			want:   "A maximum of 4 blocks with cache_control may be provided. Found 5.",
		},
		{
			name: "four and the automatic one",
			params: anthropic.BetaMessageNewParams{System: four, CacheControl: anthropic.NewBetaCacheControlEphemeralParam(),
				Messages: []anthropic.BetaMessageParam{user(plain("Hi"))}},
			want: "A maximum of 4 blocks with cache_control may be provided. Found 5.",
		},
		{
			name: "the automatic one on an explicit one",
			params: anthropic.BetaMessageNewParams{System: four[:3], CacheControl: anthropic.NewBetaCacheControlEphemeralParam(),
				Messages: []anthropic.BetaMessageParam{user(cached("Hi", ""))}},
		},
		{
			name: "1h after 5m",
			params: anthropic.BetaMessageNewParams{System: cachedSystem("sys", "5m"),
				Messages: []anthropic.BetaMessageParam{user(cached("Hi", "1h"))}},
			want: "messages.0.content.0.cache_control.ttl: a cache_control with a ttl of 1h cannot come after one with a ttl of 5m",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := toolruntest.New(nil, toolruntest.Script(toolruntest.Message(toolruntest.Text("Ok"))))
			defer s.Close()
			tc.params.Model, tc.params.MaxTokens = model, 1024
			client := s.Client()
			_, err := client.Beta.Messages.New(t.Context(), tc.params)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				return
			}
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.RawJSON(), tc.want) {
				t.Fatalf("got error %v, want a 400 saying %q", err, tc.want)
			}
			if errs := s.Errors(); len(errs) != 1 {
				t.Errorf("got server errors %v, want the one rejection", errs)
			}
		})
	}
}
