package toolrun

import (
	"encoding/json"
	"fmt"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/google/go-cmp/cmp"
)

// checkWireBody fails t unless the cache's body for p equals, as JSON,
// what marshalling p gives.
func checkWireBody(t *testing.T, c *wireCache, p *anthropic.BetaMessageNewParams, stream bool) {
	t.Helper()
	want, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("marshalling the params: %v", err)
	}
	size, sized := c.bodySize(p, stream)
	body, ok := c.body(p, stream)
	if sized != ok {
		t.Fatalf("bodySize says %v, body says %v", sized, ok)
	}
	if !ok {
		return // the client marshals p itself
	}
	if size != len(body) {
		t.Fatalf("bodySize = %d, the body is %d bytes:\n%s", size, len(body), body)
	}
	var got, wantV map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	if err := json.Unmarshal(want, &wantV); err != nil {
		t.Fatal(err)
	}
	if stream {
		wantV["stream"] = true
	}
	if diff := cmp.Diff(wantV, got); diff != "" {
		t.Fatalf("body differs from the marshalled params (-want +got):\n%s", diff)
	}
}

func wireUser(text string) anthropic.BetaMessageParam {
	return anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(text))
}

func wireAssistant(id string) anthropic.BetaMessageParam {
	return anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{
		anthropic.NewBetaTextBlock("calling <tool> & co"),
		{OfToolUse: &anthropic.BetaToolUseBlockParam{ID: id, Name: "get_weather", Input: json.RawMessage(`{"city": "Oslo"}`)}},
	}}}
}

func wireResult(id string) anthropic.BetaMessageParam {
	return anthropic.NewBetaUserMessage(anthropic.NewBetaToolResultBlock(id, "12 °C", false))
}

func wireParams(msgs ...anthropic.BetaMessageParam) anthropic.BetaMessageNewParams {
	return anthropic.BetaMessageNewParams{
		Model: anthropic.Model("claude-sonnet-4-5"), MaxTokens: 1024, Messages: msgs,
		System:       []anthropic.BetaTextBlockParam{{Text: "be brief"}},
		CacheControl: anthropic.NewBetaCacheControlEphemeralParam(),
		Betas:        []anthropic.AnthropicBeta{anthropic.AnthropicBetaCompact2026_09_04},
		Tools:        wireTools,
	}
}

// wireTools is one tool list shared by every wireParams, as a toolSet's is
// by runners: its encoding is cached by identity.
var wireTools = []anthropic.BetaToolUnionParam{
	{OfTool: &anthropic.BetaToolParam{Name: "get_weather", Description: anthropic.String("the <weather> & more"),
		InputSchema: anthropic.BetaToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}},
	{OfTool: &anthropic.BetaToolParam{Name: "deploy", InputSchema: anthropic.BetaToolInputSchemaParam{}}},
}

// TestWireBody: the incremental body equals the full params' JSON after
// every kind of history edit, each sent after a warm cache.
func TestWireBody(t *testing.T) {
	base := []anthropic.BetaMessageParam{wireUser("weather?"), wireAssistant("t1"), wireResult("t1"), wireAssistant("t2"), wireResult("t2")}
	override := param.Override[anthropic.BetaMessageParam](json.RawMessage(`{"role":"user","content":"raw"}`))
	extra := wireUser("extra")
	extra.SetExtraFields(map[string]any{"x": 1})
	tests := []struct {
		name   string
		edit   func([]anthropic.BetaMessageParam) []anthropic.BetaMessageParam
		params func(*anthropic.BetaMessageNewParams)
		stream bool
	}{
		{name: "a turn appended", edit: func(m []anthropic.BetaMessageParam) []anthropic.BetaMessageParam {
			return append(m, wireAssistant("t3"), wireResult("t3"))
		}},
		{name: "streamed", stream: true},
		{name: "a message replaced", edit: func(m []anthropic.BetaMessageParam) []anthropic.BetaMessageParam {
			m[2] = wireResult("t1-new")
			return m
		}},
		{name: "a message inserted", edit: func(m []anthropic.BetaMessageParam) []anthropic.BetaMessageParam {
			return append(m[:1:1], append([]anthropic.BetaMessageParam{wireUser("note")}, m[1:]...)...)
		}},
		{name: "compacted: prefix dropped, summary first", edit: func(m []anthropic.BetaMessageParam) []anthropic.BetaMessageParam {
			return append([]anthropic.BetaMessageParam{wireUser("summary")}, m[3:]...)
		}},
		{name: "truncated", edit: func(m []anthropic.BetaMessageParam) []anthropic.BetaMessageParam { return m[:2] }},
		{name: "emptied", edit: func(m []anthropic.BetaMessageParam) []anthropic.BetaMessageParam { return nil }},
		{name: "a message twice", edit: func(m []anthropic.BetaMessageParam) []anthropic.BetaMessageParam { return append(m, m[0]) }},
		{name: "an overridden message", edit: func(m []anthropic.BetaMessageParam) []anthropic.BetaMessageParam {
			return append(m, override, override)
		}},
		{name: "a message with extra fields", edit: func(m []anthropic.BetaMessageParam) []anthropic.BetaMessageParam { return append(m, extra) }},
		{name: "system and tools changed", params: func(p *anthropic.BetaMessageNewParams) {
			p.System = []anthropic.BetaTextBlockParam{{Text: "be verbose"}}
			p.Tools = []anthropic.BetaToolUnionParam{{OfTool: &anthropic.BetaToolParam{Name: "t", InputSchema: anthropic.BetaToolInputSchemaParam{Properties: map[string]any{"a": map[string]any{"type": "string"}}}}}}
		}},
		{name: "tools emptied", params: func(p *anthropic.BetaMessageNewParams) { p.Tools = []anthropic.BetaToolUnionParam{} }},
		{name: "tools dropped", params: func(p *anthropic.BetaMessageNewParams) { p.Tools = nil }},
		{name: "tools cut to the first", params: func(p *anthropic.BetaMessageNewParams) { p.Tools = p.Tools[:1] }},
		{name: "no tools, no messages", edit: func(m []anthropic.BetaMessageParam) []anthropic.BetaMessageParam { return nil },
			params: func(p *anthropic.BetaMessageNewParams) { p.Tools = nil }},
		{name: "params with extra fields", params: func(p *anthropic.BetaMessageNewParams) { p.SetExtraFields(map[string]any{"messages": []any{}}) }},
		// The head (the params less messages and tools) is kept while the
		// params are plain and their memory the same (headJSON).
		{name: "max_tokens changed", params: func(p *anthropic.BetaMessageNewParams) { p.MaxTokens = 7 }},
		// (A system prompt is known by its array, which the runner owns and
		// never writes: a new prompt comes in a new array.)
		{name: "system replaced", params: func(p *anthropic.BetaMessageNewParams) {
			p.System = []anthropic.BetaTextBlockParam{{Text: "replaced"}}
		}},
		{name: "cache_control dropped", params: func(p *anthropic.BetaMessageNewParams) { p.CacheControl = anthropic.BetaCacheControlEphemeralParam{} }},
		{name: "a thread created", params: func(p *anthropic.BetaMessageNewParams) {
			p.Thread = anthropic.BetaMessageThreadParamUnion{OfCreate: &anthropic.BetaThreadCreateParams{}}
		}},
		{name: "a thread continued", params: func(p *anthropic.BetaMessageNewParams) {
			p.Thread = anthropic.BetaMessageThreadParamOfContinue("msg_1")
		}},
		{name: "a field not plain", params: func(p *anthropic.BetaMessageNewParams) {
			p.Thinking = anthropic.BetaThinkingConfigParamOfEnabled(2048)
			p.StopSequences = []string{"END"}
		}},
		{name: "no system, a thread", params: func(p *anthropic.BetaMessageNewParams) {
			p.System = nil
			p.Thread = anthropic.BetaMessageThreadParamOfContinue("msg_2")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c wireCache
			p := wireParams(append([]anthropic.BetaMessageParam(nil), base...)...)
			checkWireBody(t, &c, &p, false)
			if tt.edit != nil {
				p.Messages = tt.edit(append([]anthropic.BetaMessageParam(nil), p.Messages...))
			}
			if tt.params != nil {
				tt.params(&p)
			}
			checkWireBody(t, &c, &p, tt.stream)
			checkWireBody(t, &c, &p, tt.stream) // and again, all cached
		})
	}
}

// TestWireHeadWrittenThrough: params that hold what the caller may write
// through (a thinking config's pointer here) are encoded anew every time,
// so that a write shows in the next body.
func TestWireHeadWrittenThrough(t *testing.T) {
	var c wireCache
	p := wireParams(wireUser("weather?"))
	p.Thinking = anthropic.BetaThinkingConfigParamOfEnabled(2048)
	checkWireBody(t, &c, &p, false)
	p.Thinking.OfEnabled.BudgetTokens = 4096
	checkWireBody(t, &c, &p, false)

}

// TestWireBodyEncodesOnlyWhatIsNew: with the cache warm, a request of 500
// messages allocates no more than one of 10 (a turn adds two messages in
// both); without the cache, the allocations grow with the history.
func TestWireBodyEncodesOnlyWhatIsNew(t *testing.T) {
	allocs := func(n int) float64 {
		var msgs []anthropic.BetaMessageParam
		msgs = append(msgs, wireUser("go"))
		for i := range n / 2 {
			id := fmt.Sprintf("t%d", i)
			msgs = append(msgs, wireAssistant(id), wireResult(id))
		}
		var c wireCache
		p := wireParams(msgs...)
		c.body(&p, false)
		turn := 0
		return testing.AllocsPerRun(20, func() {
			turn++
			id := fmt.Sprintf("new%d", turn)
			p.Messages = append(msgs[:len(msgs):len(msgs)], wireAssistant(id), wireResult(id))
			c.body(&p, false)
		})
	}
	small, large := allocs(10), allocs(500)
	if large > small+10 {
		t.Errorf("got %.0f allocations per request at 500 messages, want at most %.0f (10 messages: %.0f)", large, small+10, small)
	}
}

// FuzzWireBody edits a history at random between requests and checks each
// body against the full params' JSON.
func FuzzWireBody(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 1, 3, 4, 5, 6, 7})
	f.Add([]byte{1, 1, 1, 5, 5, 2, 2, 9, 8, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var c wireCache
		p := wireParams(wireUser("start"))
		for i, op := range ops {
			if i > 64 {
				break
			}
			msgs := p.Messages
			n := len(msgs)
			at := 0
			if n > 0 {
				at = int(op>>4) % n
			}
			switch op % 10 {
			case 0: // a turn
				id := fmt.Sprintf("t%d", i)
				p.Messages = append(msgs, wireAssistant(id), wireResult(id))
			case 1: // a caller's message
				p.Messages = append(msgs, wireUser(fmt.Sprintf("u%d <&>", i)))
			case 2: // replaced
				if n > 0 {
					msgs[at] = wireUser(fmt.Sprintf("r%d", i))
				}
			case 3: // removed
				if n > 0 {
					p.Messages = append(msgs[:at:at], msgs[at+1:]...)
				}
			case 4: // moved to the end
				if n > 0 {
					m := msgs[at]
					p.Messages = append(append(msgs[:at:at], msgs[at+1:]...), m)
				}
			case 5: // compacted
				if n > 0 {
					p.Messages = append([]anthropic.BetaMessageParam{wireUser("summary")}, msgs[at:]...)
				}
			case 6: // resumed: a cold cache
				c = wireCache{}
			case 7: // a hook's change of this request
				q := p
				q.Messages = append(append([]anthropic.BetaMessageParam(nil), msgs...), wireUser("hook"))
				q.System = nil
				checkWireBody(t, &c, &q, op&1 == 1)
			case 8: // an override
				p.Messages = append(msgs, param.Override[anthropic.BetaMessageParam](json.RawMessage(`{"role":"user","content":"o"}`)))
			case 9: // duplicated
				if n > 0 {
					p.Messages = append(msgs, msgs[at])
				}
			}
			checkWireBody(t, &c, &p, op&16 != 0)
		}
	})
}
