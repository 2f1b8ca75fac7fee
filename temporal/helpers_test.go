package temporal_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/log"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

func userParams(text string) anthropic.BetaMessageNewParams {
	return anthropic.BetaMessageNewParams{
		Model:     "claude-test",
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(text))},
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// nopLogger keeps the test environment quiet.
var nopLogger = log.NewStructuredLogger(discard())

// fastRetries keeps the test environment's retries short.
var fastRetries = temporal.RunOptions{
	ModelRetry: &sdktemporal.RetryPolicy{InitialInterval: 10 * time.Millisecond, MaximumAttempts: 3},
	ToolRetry:  &sdktemporal.RetryPolicy{InitialInterval: 10 * time.Millisecond, MaximumAttempts: 3},
}

// newEnv returns a test environment with the workflow and the activities
// for s and tools registered.
func newEnv(t *testing.T, s *toolruntest.Server, tools []toolrun.Tool, opts *toolrun.Options) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(nopLogger)
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(10 * time.Minute) // minutes: a loaded machine is slow, and only a hang takes this long
	if opts == nil {
		opts = &toolrun.Options{}
	}
	if opts.Logger == nil {
		opts.Logger = discard()
	}
	temporal.Register(env, temporal.NewActivities(s.Client(), tools, opts))
	return env
}

// outcome returns the workflow's outcome, failing the test if it has none.
func outcome(t *testing.T, env *testsuite.TestWorkflowEnvironment) *temporal.Outcome {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	var out temporal.Outcome
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// seenResults lists the tool results of every request as "id error=bool text".
func seenResults(s *toolruntest.Server) []string {
	var out []string
	for _, req := range s.Requests() {
		msgs := req.Conversation
		if len(msgs) == 0 {
			continue
		}
		for _, b := range msgs[len(msgs)-1].Content {
			if b.Type == "tool_result" {
				out = append(out, fmt.Sprintf("%s error=%v %s", b.ToolUseID, b.IsError, b.ResultText()))
			}
		}
	}
	return out
}

// counter counts calls of tools.
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

func (c *counter) all() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

type cityIn struct {
	City string `json:"city"`
}

// weatherTool counts its calls by city.
func weatherTool(calls *counter) *toolrun.FuncTool {
	return toolrun.NewTool("get_weather", "Current weather for a city", func(ctx context.Context, in cityIn) (string, error) {
		calls.inc("weather " + in.City)
		return "sunny in " + in.City, nil
	})
}

type writeIn struct {
	Path string `json:"path"`
}

// writeTool counts its calls by path; it is not idempotent.
func writeTool(calls *counter, policy toolrun.Policy) *toolrun.FuncTool {
	t := toolrun.NewTool("write_file", "Write a file", func(ctx context.Context, in writeIn) (string, error) {
		calls.inc("write " + in.Path)
		return "wrote " + in.Path, nil
	})
	t.Policy = policy
	return t
}
