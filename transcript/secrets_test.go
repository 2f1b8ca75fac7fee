package transcript_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/redact"
	"github.com/toolrun/toolrun/toolruntest"
	"github.com/toolrun/toolrun/transcript"
)

// TestNoSecretsAnywhere runs with the API key in the environment, in the
// prompt, in the model's text, in a tool's output (with an Authorization
// header) and in a tool's error, with every body logged, and checks that the
// key is in no log line, no transcript line and nowhere in the report.
func TestNoSecretsAnywhere(t *testing.T) {
	const token = "tok-env-secret-123456" // not an sk-ant key: found by its env var alone
	t.Setenv("ANTHROPIC_API_KEY", toolruntest.TestAPIKey)
	t.Setenv("ANTHROPIC_AUTH_TOKEN", token)
	t.Setenv("ANTHROPIC_LOG", "debug")
	secrets := []string{toolruntest.TestAPIKey, token, "toolruntest-0000"}

	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var out syncBuffer
	rec := transcript.NewRecorder(&out, &transcript.RecorderOptions{Meta: map[string]string{"key": toolruntest.TestAPIKey}})

	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(
			toolruntest.Text("I will use the key "+toolruntest.TestAPIKey+"."),
			toolruntest.ToolUse("toolu_1", "show_env", map[string]string{"key": toolruntest.TestAPIKey}),
			toolruntest.ToolUse("toolu_2", "call_api", nil),
		),
		toolruntest.Message(toolruntest.Text("Done; the token was "+token+".")),
	))
	tools := []toolrun.Tool{
		toolrun.NewTool("show_env", "", func(ctx context.Context, in struct {
			Key string `json:"key"`
		}) (string, error) {
			return "ANTHROPIC_API_KEY=" + toolruntest.TestAPIKey + "\nAuthorization: Bearer " + token + "\nx-api-key: " + toolruntest.TestAPIKey, nil
		}),
		toolrun.NewTool("call_api", "", func(ctx context.Context, in struct{}) (string, error) {
			return "", errors.New(`401 from the API with {"x-api-key":"` + toolruntest.TestAPIKey + `","authorization":"Bearer ` + token + `"}`)
		}),
	}
	params := userParams("My key is " + toolruntest.TestAPIKey + " and my token " + token)
	params.Betas = []anthropic.AnthropicBeta{"beta-" + token}
	res, err := toolrun.New(client(s), params, tools, &toolrun.Options{Logger: logger, OnEvent: rec.Observe}).Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %v, %v; want end_turn", res.StopReason, err)
	}
	// The client did send the key: the secret was there to leak.
	if h := s.Requests()[0].Header; h.Get("X-Api-Key") != toolruntest.TestAPIKey && h.Get("Authorization") != "Bearer "+toolruntest.TestAPIKey {
		t.Fatalf("the client sent no key; headers %v", h)
	}

	tr := readBytes(t, out.Bytes())
	var page bytes.Buffer
	if err := transcript.WriteHTML(&page, tr); err != nil {
		t.Fatal(err)
	}
	outputs := []struct {
		name  string
		text  string
		wants []string // what shows that the redacted text was written
	}{
		{"log", logs.String(), []string{`"msg":"toolrun: request body"`, `"msg":"toolrun: response body"`, `"msg":"toolrun: tool call failed"`}},
		{"transcript", out.String(), []string{`"type":"tool_finished"`, `"type":"response"`}},
		{"report", page.String(), []string{`class="tool-bar`}},
	}
	for _, o := range outputs {
		t.Run(o.name, func(t *testing.T) {
			for i, line := range strings.Split(o.text, "\n") {
				for _, secret := range secrets {
					if strings.Contains(line, secret) {
						t.Errorf("line %d has the secret %q: %s", i+1, secret, line)
					}
				}
			}
			for _, want := range append(o.wants, "[REDACTED]") {
				if !strings.Contains(o.text, want) {
					t.Errorf("no %q in:\n%s", want, o.text)
				}
			}
		})
	}
}

// FuzzNoSecretsAnywhere plants a secret, in each shape of redact.Plant,
// in a tool's output, a tool's error and the model's text of a run logged
// with every body, and checks that it is in no log line, no transcript line
// and nowhere in the report.
func FuzzNoSecretsAnywhere(f *testing.F) {
	for shape := range redact.Shapes {
		f.Add("status \"ok\" \\ line\nnext", "tok.en-Sec~ret+/9", shape)
	}
	f.Fuzz(func(t *testing.T, text, secret string, shape int) {
		secret = strings.Map(func(r rune) rune {
			if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._~+/-", r)) {
				return r
			}
			return -1
		}, secret)
		text = strings.ToValidUTF8(text, "")
		planted, secret := redact.Plant(text, secret, shape)
		control, _ := redact.Plant(text, "", shape)
		if len(secret) < 6 || strings.Contains(control, secret) || strings.Contains("[REDACTED]", secret) {
			return
		}
		t.Setenv("ANTHROPIC_LOG", "debug")
		var logs syncBuffer
		logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		var out syncBuffer
		rec := transcript.NewRecorder(&out, nil)
		s := toolruntest.New(t, toolruntest.Script(
			toolruntest.Message(toolruntest.Text(planted), toolruntest.ToolUse("toolu_1", "show", nil), toolruntest.ToolUse("toolu_2", "fail", nil)),
			toolruntest.Message(toolruntest.Text("done")),
		))
		tools := []toolrun.Tool{
			toolrun.NewTool("show", "", func(ctx context.Context, in struct{}) (string, error) { return planted, nil }),
			toolrun.NewTool("fail", "", func(ctx context.Context, in struct{}) (string, error) { return "", errors.New(planted) }),
		}
		res, err := toolrun.New(client(s), userParams("go"), tools, &toolrun.Options{Logger: logger, OnEvent: rec.Observe}).Run(t.Context())
		if err != nil || res.StopReason != toolrun.StopEndTurn {
			t.Fatalf("Run = %v, %v; want end_turn", res.StopReason, err)
		}
		var page bytes.Buffer
		if err := transcript.WriteHTML(&page, readBytes(t, out.Bytes())); err != nil {
			t.Fatal(err)
		}
		for name, text := range map[string]string{"log": logs.String(), "transcript": out.String(), "report": page.String()} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s has the secret %q planted as %q:\n%s", name, secret, planted, text)
			}
		}
	})
}
