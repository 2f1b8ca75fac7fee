package transcript_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
	"github.com/toolrun/toolrun/transcript"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got); run go test -update if the change is intended:\n%s", path, diff)
	}
}

func client(s *toolruntest.Server) anthropic.Client { return s.Client(option.WithMaxRetries(0)) }

func userParams(text string) anthropic.BetaMessageNewParams {
	return anthropic.BetaMessageNewParams{
		Model:     "claude-test",
		MaxTokens: 1024,
		System:    []anthropic.BetaTextBlockParam{{Text: "You are a careful assistant."}},
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(text))},
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

type cityIn struct {
	City string `json:"city"`
}

// toolSet is the tools of the scripted run, whose behaviour a test can
// change for a replay.
type toolSet struct {
	weather func(city string) (string, error)
	fail    func() (string, error)
	boom    func() (string, error)
}

func recordedTools() toolSet {
	return toolSet{
		weather: func(city string) (string, error) { return "sunny in " + city, nil },
		fail:    func() (string, error) { return "", errors.New("database is down") },
		boom: func() (string, error) {
			var m map[string]int
			//lint:ignore SA5000 the tool panics on purpose
			m["x"] = 1 // panics: assignment to entry in nil map
			return "", nil
		},
	}
}

func (ts toolSet) list() []toolrun.Tool {
	return []toolrun.Tool{
		toolrun.NewTool("get_weather", "Current weather for a city", func(ctx context.Context, in cityIn) (string, error) {
			return ts.weather(in.City)
		}),
		toolrun.NewTool("query_db", "Runs a query", func(ctx context.Context, in struct{}) (string, error) { return ts.fail() }),
		toolrun.NewTool("parse", "Parses a thing", func(ctx context.Context, in struct{}) (string, error) { return ts.boom() }),
		toolrun.NewTool("delete_files", "Deletes files", func(ctx context.Context, in struct{}) (string, error) {
			return "deleted", nil
		}),
		toolrun.NewTool("lookup", "Looks something up", func(ctx context.Context, in struct{}) (string, error) {
			return "looked up", nil
		}),
	}
}

// script is the model's side of the scripted run: a turn with a call that
// succeeds, one that fails, one that panics, one denied and one skipped; a
// turn with one more call; and the answer.
func script() []toolruntest.Reply {
	return []toolruntest.Reply{
		toolruntest.Message(
			toolruntest.Text("Let me check a few things."),
			toolruntest.ToolUse("toolu_1", "get_weather", map[string]any{"city": "Paris"}),
			toolruntest.ToolUse("toolu_2", "query_db", nil),
			toolruntest.ToolUse("toolu_3", "parse", nil),
			toolruntest.ToolUse("toolu_4", "delete_files", nil),
			toolruntest.ToolUse("toolu_5", "lookup", nil),
		),
		toolruntest.Message(toolruntest.ToolUse("toolu_6", "get_weather", map[string]any{"city": "Oslo"})),
		toolruntest.Message(toolruntest.Text("Paris is sunny; the database is down.")),
	}
}

// runOptions are the recorded run's options: delete_files is denied, lookup
// is skipped with a cached answer, and calls run one at a time so the
// transcript's order is fixed.
func runOptions(onEvent func(context.Context, toolrun.Event)) *toolrun.Options {
	return &toolrun.Options{
		Logger:           discard(),
		MaxParallelTools: 1,
		Policy: policy.Chain(policy.DenyTools("delete_files"), func(ctx context.Context, call toolrun.PolicyCall) toolrun.Decision {
			if call.Name == "lookup" {
				d := policy.Skip(toolrun.Text("cached answer"))
				d.Reason = "answered from the cache"
				return d
			}
			return toolrun.Decision{}
		}),
		OnEvent: onEvent,
	}
}

// record runs the scripted run with tools and returns its transcript.
func record(t *testing.T, tools []toolrun.Tool, opts *transcript.RecorderOptions) []byte {
	t.Helper()
	var buf syncBuffer
	rec := transcript.NewRecorder(&buf, opts)
	s := toolruntest.New(t, toolruntest.Script(script()...))
	res, err := toolrun.New(client(s), userParams("What's the weather, and is the database up?"), tools, runOptions(rec.Observe)).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("StopReason = %q, want %q", res.StopReason, toolrun.StopEndTurn)
	}
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readBytes(t *testing.T, b []byte) *transcript.Transcript {
	t.Helper()
	tr, err := transcript.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

var (
	timeRE     = regexp.MustCompile(`"time":"[^"]*"`)
	durationRE = regexp.MustCompile(`"duration_ms":[0-9.e+-]+`)
	stackRE    = regexp.MustCompile(`"stack":"(?:[^"\\]|\\.)*"`)
)

// normalize makes a transcript deterministic: line n gets the time
// 2025-06-01T12:00:00Z plus n×10ms, every duration is 4ms and every stack
// the same, so that it stays a valid transcript.
func normalize(b []byte) []byte {
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	for i, line := range bytes.SplitAfter(b, []byte("\n")) {
		ts := base.Add(time.Duration(i) * 10 * time.Millisecond).Format(time.RFC3339Nano)
		line = timeRE.ReplaceAll(line, []byte(`"time":"`+ts+`"`))
		line = durationRE.ReplaceAll(line, []byte(`"duration_ms":4`))
		line = stackRE.ReplaceAll(line, []byte(`"stack":"goroutine 7 [running]:\nmain.parse()\n\t/src/parse.go:12 +0x1d\n"`))
		out.Write(line)
	}
	return out.Bytes()
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

func (b *syncBuffer) String() string { return string(b.Bytes()) }

// types returns the type of each entry, with its turn.
func types(tr *transcript.Transcript) []string {
	var out []string
	for _, e := range tr.Entries {
		out = append(out, fmt.Sprintf("%d:%s", e.Turn, e.Type))
	}
	return out
}
