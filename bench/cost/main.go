// Command cost compares what the same 40-turn task costs in input tokens
// through the official tool runner and through toolrun, each with its
// default settings, against one fake server that accounts tokens and prompt
// caching by the API's rules (toolruntest):
//
//	go run ./bench/cost -o BENCHMARKS.md
//
// The task: the model calls a tool 39 times, each result longer than the
// last (200 more bytes each turn), then answers. Both runners run with
// their defaults (message threads on in each) and with one option changed
// at a time; a thread changes the bytes sent, not the tokens billed, since
// the API bills a thread's held history as input. Billed input-token equivalents are
// uncached + 1.25 × cache writes + 0.1 × cache reads (the API's prices
// relative to uncached input). A third run, toolrun with compaction at a
// threshold, shows the context size at the end.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/toolrunner"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

const (
	turns  = 40
	model  = anthropic.ModelClaudeSonnet5_5
	prompt = "Read the 39 pages of the log, one after another, then say what went wrong."
	answer = "The disk filled up on page 23."
	begin  = "<!-- cost:begin -->"
	end    = "<!-- cost:end -->"
)

// script returns the model: a call per turn until turn 40, then the
// answer. It counts the requests it answers (the fake server answers
// compaction requests itself), so a compacted history does not confuse it.
func script() func(*toolruntest.Request) toolruntest.Reply {
	var mu sync.Mutex
	calls := 0
	return func(req *toolruntest.Request) toolruntest.Reply {
		mu.Lock()
		defer mu.Unlock()
		if calls >= turns-1 {
			return toolruntest.Message(toolruntest.Text(answer))
		}
		calls++
		return toolruntest.Message(toolruntest.Text(fmt.Sprintf("Reading page %d.", calls)),
			toolruntest.ToolUse(fmt.Sprintf("toolu_%02d", calls), "read_page", map[string]int{"page": calls}))
	}
}

type pageIn struct {
	Page int `json:"page" jsonschema:"the page to read, from 1"`
}

// page is the tool: page n is n × 200 bytes of log lines.
func page(in pageIn) string {
	var b strings.Builder
	for i := 0; b.Len() < in.Page*200; i++ {
		fmt.Fprintf(&b, "page %d line %d: ok\n", in.Page, i)
	}
	return b.String()
}

type outcome struct {
	name     string
	usage    toolruntest.Usage
	requests int
	text     string
	context  int64 // input tokens of the last request, all kinds
}

func (o outcome) billed() float64 { return toolruntest.BilledInputTokens(o.usage) }

func lastContext(s *toolruntest.Server) int64 {
	reqs := s.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if u := reqs[i].Usage; u != nil {
			return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
		}
	}
	return 0
}

func newParams() anthropic.BetaMessageNewParams {
	return anthropic.BetaMessageNewParams{
		Model:     model,
		MaxTokens: 1024,
		System:    []anthropic.BetaTextBlockParam{{Text: "You are a careful log reader. Read every page you are asked to before you answer."}},
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(prompt))},
	}
}

// official runs the task with the official runner: with its defaults
// (message threads on, no cache breakpoint), or with caching, a top-level
// cache_control as toolrun sends by default.
func official(ctx context.Context, name string, caching bool) (outcome, error) {
	s := toolruntest.New(nil, toolruntest.Options{Func: script()})
	defer s.Close()
	tool, err := toolrunner.NewBetaToolFromJSONSchema("read_page", "Read one page of the log",
		func(ctx context.Context, in pageIn) (anthropic.BetaToolResultBlockParamContentUnion, error) {
			return anthropic.BetaToolResultBlockParamContentUnion{OfText: &anthropic.BetaTextBlockParam{Text: page(in)}}, nil
		})
	if err != nil {
		return outcome{}, err
	}
	client := s.Client()
	params := newParams()
	if caching {
		params.CacheControl = anthropic.NewBetaCacheControlEphemeralParam()
	}
	r := client.Beta.Messages.NewToolRunner([]anthropic.BetaTool{tool}, anthropic.BetaToolRunnerParams{BetaMessageNewParams: params})
	msg, err := r.RunToCompletion(ctx)
	if err != nil {
		return outcome{}, err
	}
	text := ""
	for _, c := range msg.Content {
		text += c.Text
	}
	return outcome{name: name, usage: s.Usage(), requests: len(s.Requests()), text: text, context: lastContext(s)}, nil
}

func withToolrun(ctx context.Context, name string, opts toolrun.Options) (outcome, error) {
	s := toolruntest.New(nil, toolruntest.Options{Func: script()})
	defer s.Close()
	tool := toolrun.NewTool("read_page", "Read one page of the log", func(ctx context.Context, in pageIn) (string, error) {
		return page(in), nil
	})
	opts.Logger = slog.New(slog.DiscardHandler)
	opts.MaxTurns = turns + 5
	res, err := toolrun.New(s.Client(), newParams(), []toolrun.Tool{tool}, &opts).Run(ctx)
	if err != nil {
		return outcome{}, err
	}
	return outcome{name: name, usage: s.Usage(), requests: len(s.Requests()), text: res.Text(), context: lastContext(s)}, nil
}

func report(w io.Writer, off, offCached outcome, tr []outcome) {
	fmt.Fprintf(w, "Command: `go run ./bench/cost -o BENCHMARKS.md` — a %d-turn task, each tool result 200 bytes longer than the last, against `toolruntest`'s token and prompt-cache accounting.\n\n", turns)
	fmt.Fprintln(w, "| runner | requests | uncached input | cache writes | cache reads | output | billed input-token equivalents | ÷ official (defaults) | ÷ official (caching on) | context at the end | final answer |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, o := range append([]outcome{off, offCached}, tr...) {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %.0f | %.3f | %.3f | %d | %q |\n", o.name, o.requests, o.usage.InputTokens,
			o.usage.CacheCreationInputTokens, o.usage.CacheReadInputTokens, o.usage.OutputTokens, o.billed(),
			o.billed()/off.billed(), o.billed()/offCached.billed(), o.context, o.text)
	}
	fmt.Fprintf(w, "\nEach toolrun row names the option that earns its difference: the defaults differ from the official runner's defaults by prompt caching alone (toolrun sends `cache_control` unless `NoCache`), so against the official runner with caching on the ratio is %.3f; compaction (`Options.Compaction`) is what takes the billed input and the context below that; threads (on unless `NoThread`) change the bytes sent, not the tokens billed.\n",
		tr[0].billed()/offCached.billed())
}

func main() {
	out := flag.String("o", "", "also write the table into `file` (BENCHMARKS.md), between its cost markers")
	flag.Parse()
	ctx := context.Background()
	off, err := official(ctx, "official BetaToolRunner (defaults: threads, no caching)", false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cost: official runner:", err)
		os.Exit(1)
	}
	offCached, err := official(ctx, "official BetaToolRunner, caching on", true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cost: official runner with caching:", err)
		os.Exit(1)
	}
	var tr []outcome
	for _, v := range []struct {
		name string
		opts toolrun.Options
	}{
		{"toolrun (defaults: caching, threads)", toolrun.Options{}},
		{"toolrun, NoCache", toolrun.Options{NoCache: true}},
		{"toolrun, compaction at 20k tokens", toolrun.Options{Compaction: toolrun.Compaction{Threshold: 20_000}}},
		{"toolrun, NoThread", toolrun.Options{NoThread: true}},
	} {
		o, err := withToolrun(ctx, v.name, v.opts)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cost: %s: %v\n", v.name, err)
			os.Exit(1)
		}
		tr = append(tr, o)
	}
	var b bytes.Buffer
	report(&b, off, offCached, tr)
	os.Stdout.Write(b.Bytes())
	if *out != "" {
		if err := writeInto(*out, b.String()); err != nil {
			fmt.Fprintln(os.Stderr, "cost:", err)
			os.Exit(1)
		}
	}
}

// writeInto replaces what stands between the cost markers of path, or
// appends a section with them.
func writeInto(path, table string) error {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(data)
	section := begin + "\n" + table + end
	if i, j := strings.Index(s, begin), strings.Index(s, end); i >= 0 && j > i {
		s = s[:i] + section + s[j+len(end):]
	} else {
		s += "\n## Cost of a 40-turn task\n\n" + section + "\n"
	}
	return os.WriteFile(path, []byte(s), 0o644)
}
