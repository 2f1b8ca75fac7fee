package toolrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/deepcopy"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestSentIsState is a differential test of the rule that what a turn sends
// is what the run's State holds: random, seeded sequences of edits through
// every public way to change a run (writes into what Messages returns,
// SetMessages and AppendMessages and writes into the slices given to them,
// BeforeRequest edits of messages, system prompt, tools and model made in a
// slice the hook keeps, RetryTurn, CompactBeforeNextTurn, State and Resume),
// with threads on and off, streamed and not. At every request the fake
// server rebuilds the conversation it would answer (a thread's history
// included), and the test compares it, with the system prompt, the tools and
// the model, with what the run held when the request was made, as the hook
// left it.
func TestSentIsState(t *testing.T) {
	seeds := 48
	if testing.Short() {
		seeds = 12
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { t.Parallel(); sentIsState(t, seed) })
	}
}

// snapshot is what a request should carry, taken in BeforeRequest after the
// hook's edits, and the number of requests the server had seen before it.
type snapshot struct {
	before                 int
	model                  string
	system, tools, history string
	compaction             bool
}

func sentIsState(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 0x5eed))
	var ids atomic.Int64
	srv := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		n := ids.Add(1)
		if req.Params.Raw["tool_choice"] != nil && strings.Contains(string(req.Params.Raw["tool_choice"]), "none") {
			return toolruntest.Message(toolruntest.Text(fmt.Sprintf("summary %d", n)))
		}
		return toolruntest.Message(toolruntest.Text(fmt.Sprintf("step %d", n)),
			toolruntest.ToolUse(fmt.Sprintf("toolu_%d", n), "echo", map[string]string{"s": fmt.Sprint(n)}))
	}})
	c := client(srv)

	stream := rnd.IntN(2) == 0
	noThread := rnd.IntN(2) == 0
	clientSide := rnd.IntN(2) == 0
	// A quiet run edits seldom, so that its thread has turns to continue.
	quiet := rnd.IntN(2) == 0
	edits := func(r *rand.Rand) bool { return !quiet || r.IntN(4) == 0 }
	echo := toolrun.NewTool("echo", "Echo", func(ctx context.Context, in echoIn) (string, error) { return "echoed " + in.S, nil })
	tools := []toolrun.Tool{echo}

	var (
		mu    sync.Mutex // guards snaps
		snaps []snapshot
		cur   *toolrun.Runner
		// The hook's own slices, kept across turns and written in place.
		ownSystem []anthropic.BetaTextBlockParam
		ownTools  []anthropic.BetaToolUnionParam
		model     = "claude-test"
		hookRnd   = rand.New(rand.NewPCG(seed, 0x400c))
		problems  []string
	)
	// A run without a BeforeRequest hook hands its observers the request
	// it sends; it is snapshot there. Either way, observers write through
	// every event they get, and the State must not change.
	obsRnd := rand.New(rand.NewPCG(seed, 0x0b5e))
	hooked := obsRnd.IntN(3) != 0
	unchanged := func(what string, write func()) {
		before := jsonOf(t, cur.State())
		write()
		if after := jsonOf(t, cur.State()); after != before {
			problems = append(problems, fmt.Sprintf("a write through %s changed the State:\n%s", what, cmp.Diff(before, after)))
		}
	}
	opts := &toolrun.Options{
		Logger:     discard(),
		Stream:     stream,
		NoThread:   noThread,
		Compaction: toolrun.Compaction{ClientSide: clientSide},
		MaxTurns:   1000,
		BeforeRequest: func(ctx context.Context, turn int, p *anthropic.BetaMessageNewParams) error {
			compaction := p.Compaction.OfSummarize != nil || p.ToolChoice.OfNone != nil
			// The params come from the State: its history, as the runner
			// holds it now.
			if !compaction {
				if got, want := jsonOf(t, p.Messages), jsonOf(t, cur.Messages()); got != want {
					problems = append(problems, fmt.Sprintf("turn %d: BeforeRequest's messages are not the State's:\n%s", turn, cmp.Diff(want, got)))
				}
			}
			if !edits(hookRnd) {
				mu.Lock()
				snaps = append(snaps, snapshot{before: len(srv.Requests()), model: string(p.Model), system: normalized(t, jsonOf(t, p.System)),
					tools: normalized(t, jsonOf(t, p.Tools)), history: normalized(t, jsonOf(t, p.Messages)), compaction: compaction})
				mu.Unlock()
				return nil
			}
			switch hookRnd.IntN(6) {
			case 0: // a system prompt in the hook's own slice, replaced in place
				if ownSystem == nil {
					ownSystem = make([]anthropic.BetaTextBlockParam, 1)
				}
				ownSystem[0] = anthropic.BetaTextBlockParam{Text: fmt.Sprintf("system %d", hookRnd.IntN(1000))}
				p.System = ownSystem
			case 1: // a tool's description, in the hook's own slice
				if ownTools == nil {
					ownTools = slices.Clone(p.Tools)
				}
				if len(ownTools) > 0 && ownTools[0].OfTool != nil {
					tool := *ownTools[0].OfTool
					tool.Description = anthropic.String(fmt.Sprintf("Echo %d", hookRnd.IntN(1000)))
					ownTools[0] = anthropic.BetaToolUnionParam{OfTool: &tool}
					p.Tools = ownTools
				}
			case 2: // another model from now on
				model = fmt.Sprintf("claude-test-%d", hookRnd.IntN(3))
			case 3: // a message of this request only, replaced
				if len(p.Messages) > 0 {
					p.Messages[0] = anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(fmt.Sprintf("hook edit %d", hookRnd.IntN(1000))))
				}
			}
			if ownSystem != nil && hookRnd.IntN(2) == 0 {
				p.System = ownSystem
			}
			p.Model = anthropic.Model(model)
			mu.Lock()
			snaps = append(snaps, snapshot{before: len(srv.Requests()), model: model, system: normalized(t, jsonOf(t, p.System)),
				tools: normalized(t, jsonOf(t, p.Tools)), history: normalized(t, jsonOf(t, p.Messages)), compaction: compaction})
			mu.Unlock()
			return nil
		},
	}
	opts.OnEvent = func(ctx context.Context, e toolrun.Event) {
		switch e := e.(type) {
		case toolrun.RequestSent:
			if !hooked {
				p := e.Params
				if !e.Compaction {
					if got, want := jsonOf(t, p.Messages), jsonOf(t, cur.Messages()); got != want {
						problems = append(problems, fmt.Sprintf("turn %d: RequestSent's messages are not the State's:\n%s", e.Turn, cmp.Diff(want, got)))
					}
				}
				mu.Lock()
				snaps = append(snaps, snapshot{before: len(srv.Requests()), model: string(p.Model), system: normalized(t, jsonOf(t, p.System)),
					tools: normalized(t, jsonOf(t, p.Tools)), history: normalized(t, jsonOf(t, p.Messages)), compaction: e.Compaction})
				mu.Unlock()
			}
			unchanged("RequestSent.Params", func() {
				editText(e.Params.Messages, obsRnd, "observed")
				if len(e.Params.System) > 0 {
					e.Params.System[0].Text = "observed system"
				}
				if len(e.Params.Tools) > 0 && e.Params.Tools[0].OfTool != nil {
					e.Params.Tools[0].OfTool.Description = anthropic.String("observed tool")
				}
			})
		case toolrun.ResponseReceived:
			// Written before the run builds the turn from the response:
			// the calls checked after Next must still be the model's.
			unchanged("ResponseReceived", func() { scribbleInputs(e.Message) })
		case toolrun.TurnFinished:
			unchanged("TurnFinished", func() {
				scribbleInputs(e.Message)
				for _, res := range e.Results {
					scribble(res.Call.Input)
				}
			})
		}
	}
	if !hooked {
		opts.BeforeRequest = nil
	}
	params := userParams("start")
	params.System = []anthropic.BetaTextBlockParam{{Text: "be brief"}}
	cur = toolrun.New(c, params, tools, opts)
	ctx := context.Background()

	var kept []anthropic.BetaMessageParam // a slice given to SetMessages, written later
	var log []string
	for step := 0; step < 10; step++ {
		turn, err := cur.Next(ctx)
		if err != nil {
			t.Fatalf("seed %d (stream %v, no thread %v, client-side %v), step %d after %v: Next: %v", seed, stream, noThread, clientSide, step, log, err)
		}
		if turn == nil {
			break
		}
		// The calls are the model's, whatever was written through the
		// previous turns' events.
		for _, c := range turn.ToolCalls {
			if want := fmt.Sprintf(`{"s":"%s"}`, strings.TrimPrefix(c.ID, "toolu_")); string(c.Input) != want {
				problems = append(problems, fmt.Sprintf("call %s: got input %s, want the model's %s", c.ID, c.Input, want))
			}
		}
		unchanged("the Turn", func() {
			scribbleInputs(turn.Message)
			for _, c := range turn.ToolCalls {
				scribble(c.Input)
			}
		})
		for range 1 + rnd.IntN(2) {
			if !edits(rnd) {
				continue
			}
			op := rnd.IntN(9)
			log = append(log, fmt.Sprint(op))
			switch op {
			case 0: // write into what Messages returned
				msgs := cur.Messages()
				editText(msgs, rnd, "edited")
			case 1: // SetMessages with an edited copy, then write into it
				msgs := cur.Messages()
				editText(msgs, rnd, "set")
				cur.SetMessages(msgs)
				kept = msgs
			case 2: // write into a slice given to SetMessages before
				editText(kept, rnd, "late")
			case 3:
				if last := cur.Messages(); len(last) > 0 && last[len(last)-1].OfUser != nil {
					cur.AppendMessages(anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{anthropic.NewBetaTextBlock("noted")}}},
						anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(fmt.Sprintf("appended %d", step))))
				}
			case 4:
				cur.RetryTurn()
			case 5:
				cur.CompactBeforeNextTurn()
			case 6: // State and Resume, with the turn pending
				r, err := toolrun.Resume(c, cur.State(), tools, opts)
				if err != nil {
					t.Fatalf("seed %d: Resume: %v", seed, err)
				}
				cur = r
			case 7: // write into the Params' messages
				p := cur.Params()
				editText(p.Messages, rnd, "params")
			}
		}
	}
	for _, p := range problems {
		t.Errorf("seed %d: %s", seed, p)
	}
	reqs := srv.Requests()
	if len(reqs) == 0 {
		t.Fatalf("seed %d: no request", seed)
	}
	continued := 0
	for _, req := range reqs {
		if req.Params.Thread != nil && req.Params.Thread.Type == "continue" && req.Status == 200 {
			continued++
		}
	}
	t.Logf("seed %d: %d requests, %d continued a thread (no thread %v, quiet %v, hooked %v)", seed, len(reqs), continued, noThread, quiet, hooked)
	for i, req := range reqs {
		var s *snapshot
		for j := range snaps {
			if snaps[j].before <= i {
				s = &snaps[j]
			}
		}
		if s == nil {
			t.Fatalf("seed %d: request %d came before any BeforeRequest", seed, i+1)
		}
		if req.Status != 200 {
			continue // refused (a thread the server no longer holds, say) and sent again
		}
		got := snapshot{before: s.before, compaction: s.compaction, model: req.Params.Model,
			system: normalized(t, string(orNull(req.System))), tools: normalized(t, string(orNull(req.Tools))),
			history: normalized(t, jsonOf(t, conversationJSON(req)))}
		if diff := cmp.Diff(*s, got, cmp.AllowUnexported(snapshot{})); diff != "" {
			t.Errorf("seed %d (stream %v, no thread %v, client-side %v, ops %v): request %d (thread %v) is not what the run held (-held +sent):\n%s",
				seed, stream, noThread, clientSide, log, i+1, req.Params.Thread, diff)
		}
	}
}

// scribble writes into b in place: every digit becomes a 7.
func scribble(b []byte) {
	for i, c := range b {
		if c >= '0' && c <= '9' {
			b[i] = '7'
		}
	}
}

// scribbleInputs writes into the input bytes of m's tool_use blocks.
func scribbleInputs(m *anthropic.BetaMessage) {
	if m == nil {
		return
	}
	for _, b := range m.Content {
		scribble(b.Input)
	}
}

// editText writes into the first text block of a random message of msgs, in
// place.
func editText(msgs []anthropic.BetaMessageParam, rnd *rand.Rand, word string) {
	if len(msgs) == 0 {
		return
	}
	m := msgs[rnd.IntN(len(msgs))]
	var content []anthropic.BetaContentBlockParamUnion
	switch {
	case m.OfUser != nil:
		content = m.OfUser.Content
	case m.OfAssistant != nil:
		content = m.OfAssistant.Content
	}
	for _, b := range content {
		if b.OfText != nil {
			b.OfText.Text += " " + word
			return
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// conversationJSON returns the conversation the server rebuilt for req as
// JSON messages, from the blocks as they were sent.
func conversationJSON(req *toolruntest.Request) []map[string]any {
	var out []map[string]any
	for _, m := range req.Conversation {
		var blocks []json.RawMessage
		for _, b := range m.Content {
			raw := b.Raw
			if raw == nil {
				raw, _ = json.Marshal(map[string]string{"type": "text", "text": b.Text})
			}
			blocks = append(blocks, raw)
		}
		out = append(out, map[string]any{"role": m.Role, "content": blocks})
	}
	return out
}

// normalized returns the JSON s with every cache_control member taken out,
// a string content as one text block, empty arrays as null, and keys sorted,
// so that what the runner adds on the way (cache breakpoints) and the
// encoding's choices do not count.
func normalized(t *testing.T, s string) string {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "cache_control")
			if c, ok := x["content"].(string); ok {
				x["content"] = []any{map[string]any{"type": "text", "text": c}}
			}
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			if len(x) == 0 {
				return nil
			}
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetIndent("", " ")
	if err := e.Encode(walk(v)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// scriptedToolTurns returns a server whose every reply calls echo, until
// the n-th, which ends the turn.
func scriptedToolTurns(t *testing.T, n int) *toolruntest.Server {
	var replies []toolruntest.Reply
	for i := 1; i < n; i++ {
		replies = append(replies, toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("toolu_%d", i), "echo", map[string]string{"s": fmt.Sprint(i)})))
	}
	replies = append(replies, toolruntest.Message(toolruntest.Text("done")))
	return toolruntest.New(t, toolruntest.Script(replies...))
}

// TestHookEditsSent: a BeforeRequest hook that keeps its own slices and
// replaces an element of the system prompt and of the tools each turn has
// each edit sent, with threads on and off, and one that switches the model
// on a thread starts a new one with the whole history instead of ending the
// run with the API's refusal.
func TestHookEditsSent(t *testing.T) {
	echo := toolrun.NewTool("echo", "Echo", func(ctx context.Context, in echoIn) (string, error) { return in.S, nil })
	for _, noThread := range []bool{false, true} {
		t.Run(fmt.Sprintf("noThread=%v", noThread), func(t *testing.T) {
			srv := scriptedToolTurns(t, 3)
			var system []anthropic.BetaTextBlockParam
			var tools []anthropic.BetaToolUnionParam
			opts := &toolrun.Options{NoThread: noThread, Logger: discard(),
				BeforeRequest: func(ctx context.Context, turn int, p *anthropic.BetaMessageNewParams) error {
					if system == nil {
						system, tools = make([]anthropic.BetaTextBlockParam, 1), slices.Clone(p.Tools)
					}
					system[0] = anthropic.BetaTextBlockParam{Text: fmt.Sprintf("system %d", turn)}
					def := *tools[0].OfTool
					def.Description = anthropic.String(fmt.Sprintf("Echo %d", turn))
					tools[0] = anthropic.BetaToolUnionParam{OfTool: &def}
					p.System, p.Tools = system, tools
					if turn > 1 {
						p.Model = "claude-test-other"
					}
					return nil
				}}
			res, err := toolrun.New(client(srv), userParams("go"), []toolrun.Tool{echo}, opts).Run(context.Background())
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Turns != 3 {
				t.Errorf("got %d turns, want 3", res.Turns)
			}
			for i, req := range srv.Requests() {
				var sys []struct{ Text string }
				json.Unmarshal(req.System, &sys)
				var defs []struct{ Description string }
				json.Unmarshal(req.Tools, &defs)
				want := fmt.Sprint(i + 1)
				if len(sys) != 1 || sys[0].Text != "system "+want {
					t.Errorf("request %d: got system %s, want system %s", i+1, req.System, want)
				}
				if len(defs) != 1 || defs[0].Description != "Echo "+want {
					t.Errorf("request %d: got tools %s, want Echo %s", i+1, req.Tools, want)
				}
			}
		})
	}
}

// TestModelChangeStartsThread: a model changed from one turn to the next
// creates a new thread with the whole history, and the turns after it
// continue that thread.
func TestModelChangeStartsThread(t *testing.T) {
	echo := toolrun.NewTool("echo", "Echo", func(ctx context.Context, in echoIn) (string, error) { return in.S, nil })
	srv := scriptedToolTurns(t, 4)
	opts := &toolrun.Options{Logger: discard(), BeforeRequest: func(ctx context.Context, turn int, p *anthropic.BetaMessageNewParams) error {
		if turn > 1 {
			p.Model = "claude-test-other"
		}
		return nil
	}}
	if _, err := toolrun.New(client(srv), userParams("go"), []toolrun.Tool{echo}, opts).Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var got []string
	for _, req := range srv.Requests() {
		got = append(got, fmt.Sprintf("%s %s %d/%d", req.Params.Model, req.Params.Thread.Type, len(req.Params.Messages), len(req.Conversation)))
	}
	want := []string{"claude-test create 1/1", "claude-test-other create 3/3", "claude-test-other continue 1/5", "claude-test-other continue 1/7"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (model, thread, messages sent/held) (-want +got):\n%s", diff)
	}
}

// TestMessagesShareNothing: writing into what Messages returned changes
// neither the run's history nor what it sends, on a thread or not; the edit
// given to SetMessages is sent.
func TestMessagesShareNothing(t *testing.T) {
	echo := toolrun.NewTool("echo", "Echo", func(ctx context.Context, in echoIn) (string, error) { return in.S, nil })
	for _, noThread := range []bool{false, true} {
		t.Run(fmt.Sprintf("noThread=%v", noThread), func(t *testing.T) {
			srv := scriptedToolTurns(t, 3)
			r := toolrun.New(client(srv), userParams("original"), []toolrun.Tool{echo}, &toolrun.Options{NoThread: noThread, Logger: discard()})
			ctx := context.Background()
			if _, err := r.Next(ctx); err != nil {
				t.Fatal(err)
			}
			r.Messages()[0].OfUser.Content[0].OfText.Text = "EDITED"
			if got := r.Messages()[0].OfUser.Content[0].OfText.Text; got != "original" {
				t.Errorf("after a write into Messages: got history %q, want %q", got, "original")
			}
			if _, err := r.Next(ctx); err != nil {
				t.Fatal(err)
			}
			msgs := r.Messages()
			msgs[0].OfUser.Content[0].OfText.Text = "SET"
			r.SetMessages(msgs)
			msgs[0].OfUser.Content[0].OfText.Text = "LATE" // after SetMessages: not the run's
			if _, err := r.Run(ctx); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, req := range srv.Requests() {
				got = append(got, req.Conversation[0].Content[0].Text)
			}
			if diff := cmp.Diff([]string{"original", "original", "SET"}, got); diff != "" {
				t.Errorf("the first message as the server saw it (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkHistoryShareNothing weighs the two ways of keeping what is sent
// what State holds, on histories of 10 and 100 turns: copying the history
// whole where it is handed out or taken in (copy: what Messages and
// SetMessages cost, once per call), against noticing an edit by content
// (encode: what every request would cost, as the official runner pays).
func BenchmarkHistoryShareNothing(b *testing.B) {
	for _, turns := range []int{10, 100} {
		msgs := []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))}
		for i := range turns {
			id := fmt.Sprintf("toolu_%d", i)
			msgs = append(msgs,
				anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{
					anthropic.NewBetaTextBlock("calling echo"), anthropic.NewBetaToolUseBlock(id, json.RawMessage(`{"s":"hello"}`), "echo")}}},
				anthropic.NewBetaUserMessage(anthropic.NewBetaToolResultBlock(id, "hello", false)))
		}
		b.Run(fmt.Sprintf("turns=%d/copy", turns), func(b *testing.B) {
			for b.Loop() {
				deepcopy.Copy(msgs)
			}
		})
		b.Run(fmt.Sprintf("turns=%d/encode", turns), func(b *testing.B) {
			for b.Loop() {
				if _, err := json.Marshal(msgs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
