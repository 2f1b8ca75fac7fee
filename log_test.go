package toolrun_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/redact"
	"github.com/toolrun/toolrun/toolruntest"
)

func TestRedact(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "plain-secret-value")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "short") // under 8 bytes: left alone
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"no secret", "sunny in Paris", "sunny in Paris"},
		{"anthropic key", "key=sk-ant-api03-AbC_d-9 ok", "key=sk-ant-[REDACTED] ok"},
		{"env var value", "using plain-secret-value now", "using [REDACTED] now"},
		{"short env var value", "a short word", "a short word"},
		{"bearer header", "Authorization: Bearer abcdefgh12345678", "Authorization: Bearer [REDACTED]"},
		{"basic header", "authorization: Basic dXNlcjpwYXNzd29yZA==", "authorization: Basic [REDACTED]"},
		{"x-api-key header", "X-Api-Key: abc123", "X-Api-Key: [REDACTED]"},
		{"header as JSON", `{"X-Api-Key":["abc123"],"Accept":["*/*"]}`, `{"X-Api-Key":["[REDACTED]"],"Accept":["*/*"]}`},
		{"field in JSON", `{"api_key":"abc123","n":1}`, `{"api_key":"[REDACTED]","n":1}`},
		{"header inside a JSON string", `{"text":"send \"authorization\": \"tok123456\" now"}`, `{"text":"send \"authorization\": \"[REDACTED]\" now"}`},
		{"env assignment", "ANTHROPIC_AUTH_TOKEN=xyz987", "ANTHROPIC_AUTH_TOKEN=[REDACTED]"},
		{"prose bearer", "the bearer of bad news", "the bearer of bad news"},
		{"already redacted", "Authorization: Bearer [REDACTED] x-api-key: [REDACTED] sk-ant-[REDACTED]", "Authorization: Bearer [REDACTED] x-api-key: [REDACTED] sk-ant-[REDACTED]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redact.String(tt.in); got != tt.want {
				t.Errorf("redact.String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// logRun runs two turns, with one call that succeeds and one that fails,
// logging to logger.
func logRun(t *testing.T, logger *slog.Logger, toolOutput string) {
	t.Helper()
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "ok", nil), toolruntest.ToolUse("t2", "fail", nil)),
		toolruntest.Message(toolruntest.Text("done")),
	))
	tools := []toolrun.Tool{
		toolrun.NewTool("ok", "", func(ctx context.Context, in struct{}) (string, error) { return toolOutput, nil }),
		toolrun.NewTool("fail", "", func(ctx context.Context, in struct{}) (string, error) {
			return "", errors.New("failed with " + toolOutput)
		}),
	}
	if _, err := toolrun.New(client(s), userParams("go"), tools, &toolrun.Options{Logger: logger}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// levels returns the level of each record by message, in order, the
// repeats of a message joined by commas.
func levels(t *testing.T, b *logBuffer) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range b.records(t) {
		msg, _ := r["msg"].(string)
		level, _ := r["level"].(string)
		if out[msg] != "" {
			level = out[msg] + "," + level
		}
		out[msg] = level
	}
	return out
}

// noPrice is the warning for a model with no price: the tests' model has
// none.
const noPrice = "toolrun: no price for the model; Result.CostUSD leaves its responses out (set Budget.Prices)"

func TestAnthropicLog(t *testing.T) {
	common := map[string]string{
		"toolrun: tool call failed": "ERROR",
	}
	tests := []struct {
		name string
		env  string
		want map[string]string // level by message
	}{
		{
			name: "unset",
			want: map[string]string{
				"toolrun: request sent":       "DEBUG,DEBUG",
				"toolrun: response received":  "DEBUG,DEBUG",
				"toolrun: tool call finished": "DEBUG",
				"toolrun: run stopped":        "DEBUG",
			},
		},
		{
			name: "info",
			env:  "info",
			want: map[string]string{
				"toolrun: request sent":       "INFO,INFO",
				"toolrun: response received":  "INFO,INFO",
				"toolrun: tool call finished": "INFO",
				"toolrun: run stopped":        "INFO",
			},
		},
		{
			name: "debug",
			env:  "DEBUG",
			want: map[string]string{
				"toolrun: request sent":       "INFO,INFO",
				"toolrun: request body":       "DEBUG,DEBUG",
				"toolrun: response received":  "INFO,INFO",
				"toolrun: response body":      "DEBUG,DEBUG",
				"toolrun: tool call finished": "INFO",
				"toolrun: run stopped":        "INFO",
			},
		},
		{
			name: "not understood",
			env:  "verbose",
			want: map[string]string{
				"toolrun: ANTHROPIC_LOG not understood; want info or debug": "WARN",
				"toolrun: request sent":       "DEBUG,DEBUG",
				"toolrun: response received":  "DEBUG,DEBUG",
				"toolrun: tool call finished": "DEBUG",
				"toolrun: run stopped":        "DEBUG",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("ANTHROPIC_LOG", tt.env)
			logger, logs := newLogger()
			logRun(t, logger, "fine")
			want := map[string]string{noPrice: "WARN"}
			for k, v := range common {
				want[k] = v
			}
			for k, v := range tt.want {
				want[k] = v
			}
			if diff := cmp.Diff(want, levels(t, logs)); diff != "" {
				t.Errorf("record levels (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnthropicLogKeepsLoggerLevel checks that a logger passed in is used
// with its own level: ANTHROPIC_LOG raises what the runner logs, not what
// the application's handler lets through.
func TestAnthropicLogKeepsLoggerLevel(t *testing.T) {
	t.Setenv("ANTHROPIC_LOG", "debug")
	logs := &logBuffer{}
	logRun(t, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})), "fine")
	want := map[string]string{"toolrun: tool call failed": "ERROR", noPrice: "WARN"}
	if diff := cmp.Diff(want, levels(t, logs)); diff != "" {
		t.Errorf("record levels (-want +got):\n%s", diff)
	}
}

// TestAnthropicLogStderr checks that without a logger, ANTHROPIC_LOG logs to
// stderr as text at its level. It replaces os.Stderr, so it does not run in
// parallel.
func TestAnthropicLogStderr(t *testing.T) {
	tests := []struct {
		name      string
		env       string
		wantLines []string // substrings of lines that must be there
		wantNone  []string // substrings no line may have
	}{
		{"info", "info", []string{`level=INFO msg="toolrun: request sent"`, `level=INFO msg="toolrun: run stopped"`, `level=ERROR msg="toolrun: tool call failed"`}, []string{"level=DEBUG"}},
		{"debug", "debug", []string{`level=INFO msg="toolrun: request sent"`, `level=DEBUG msg="toolrun: request body"`, `level=DEBUG msg="toolrun: response body"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("ANTHROPIC_LOG", tt.env)
			f, err := os.CreateTemp(t.TempDir(), "stderr")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			saved := os.Stderr
			os.Stderr = f
			logRun(t, nil, "fine")
			os.Stderr = saved
			b, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			got := string(b)
			for _, want := range tt.wantLines {
				if !strings.Contains(got, want) {
					t.Errorf("stderr has no %q; got:\n%s", want, got)
				}
			}
			for _, bad := range tt.wantNone {
				if strings.Contains(got, bad) {
					t.Errorf("stderr has %q; got:\n%s", bad, got)
				}
			}
		})
	}
}

// TestLogNeverHasSecrets runs with every body logged and secrets in the
// tool's output and error, and checks that no record has them.
func TestLogNeverHasSecrets(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", toolruntest.TestAPIKey)
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "auth-token-1234567890")
	t.Setenv("ANTHROPIC_LOG", "debug")
	logger, logs := newLogger()
	logRun(t, logger, "key "+toolruntest.TestAPIKey+", token auth-token-1234567890, Authorization: Bearer auth-token-1234567890")
	logs.mu.Lock()
	out := logs.buf.String()
	logs.mu.Unlock()
	for _, secret := range []string{toolruntest.TestAPIKey, "auth-token-1234567890"} {
		for line := range strings.SplitSeq(out, "\n") {
			if strings.Contains(line, secret) {
				t.Errorf("log line has the secret %q: %s", secret, line)
			}
		}
	}
	// The secrets were there to be removed: the bodies and the error were
	// logged, redacted.
	for _, want := range []string{`"msg":"toolrun: request body"`, `"msg":"toolrun: tool call failed"`, "[REDACTED]"} {
		if !strings.Contains(out, want) {
			t.Errorf("log has no %q; got:\n%s", want, out)
		}
	}
}
