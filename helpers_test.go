package toolrun_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// client returns the server's client with fast retries.
func client(s *toolruntest.Server) anthropic.Client {
	return s.Client(option.WithMaxRetries(2))
}

func userParams(text string) anthropic.BetaMessageNewParams {
	return anthropic.BetaMessageNewParams{
		Model:     "claude-test",
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(text))},
	}
}

// logBuffer is a concurrency-safe buffer of JSON log lines.
type logBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the log records decoded.
func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// find returns the first record with msg, or nil.
func (b *logBuffer) find(t *testing.T, msg string) map[string]any {
	t.Helper()
	for _, r := range b.records(t) {
		if r["msg"] == msg {
			return r
		}
	}
	return nil
}

func newLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// checkHistory fails the test if the fake server would reject msgs.
func checkHistory(t *testing.T, msgs []anthropic.BetaMessageParam) {
	t.Helper()
	body, err := json.Marshal(anthropic.BetaMessageNewParams{Model: "claude-test", MaxTokens: 1, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if err := toolruntest.Validate(body); err != nil {
		t.Errorf("history is not valid: %v\n%s", err, body)
	}
}

// toolResults returns the tool_result blocks of the last message of req.
func toolResults(req *toolruntest.Request) []toolruntest.Block {
	msgs := req.Conversation
	if len(msgs) == 0 {
		return nil
	}
	var out []toolruntest.Block
	for _, b := range msgs[len(msgs)-1].Content {
		if b.Type == "tool_result" {
			out = append(out, b)
		}
	}
	return out
}

// counter counts calls of a tool.
type counter struct {
	mu sync.Mutex // guards n
	n  map[string]int
}

func (c *counter) inc(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

var _ = toolrun.Text

// discard returns a logger that drops everything, for tests that check
// logging elsewhere.
func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
