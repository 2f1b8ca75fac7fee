package transcript_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"strconv"
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

// teeHandler hands each record to every one of its handlers.
type teeHandler []slog.Handler

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool { return true }

func (t teeHandler) Handle(ctx context.Context, r slog.Record) error {
	var errs []error
	for _, h := range t {
		errs = append(errs, h.Handle(ctx, r.Clone()))
	}
	return errors.Join(errs...)
}

func (t teeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make(teeHandler, len(t))
	for i, h := range t {
		out[i] = h.WithAttrs(attrs)
	}
	return out
}

func (t teeHandler) WithGroup(name string) slog.Handler {
	out := make(teeHandler, len(t))
	for i, h := range t {
		out[i] = h.WithGroup(name)
	}
	return out
}

// TestRedactionEverySink is the table of the shapes of credential the
// README's "What redaction removes" lists, and of text that looks like one
// and is not: each is put in the model's text, a tool's input, a tool's
// output and a tool's error of a run logged at debug (so every request and
// response body is logged, JSON-encoded, with '&' and '<' escaped), through
// a JSON and a text handler, and recorded. No secret is in the JSON log,
// the text log, the transcript or the HTML report; every benign text is in
// each of them.
func TestRedactionEverySink(t *testing.T) {
	tests := []struct {
		name   string
		text   string
		secret string // "" for benign text, which must survive whole
	}{
		{"authorization bearer", "Authorization: Bearer tkBearer1a2b3c", "tkBearer1a2b3c"},
		{"authorization token scheme", "Authorization: Token tkToken9x8y7z", "tkToken9x8y7z"},
		{"authorization digest", `Authorization: Digest username="u", response="dgResp6629fae4"`, "dgResp6629fae4"},
		{"proxy authorization", "Proxy-Authorization: Basic cHJveHk6cGFzc3dk", "cHJveHk6cGFzc3dk"},
		{"cookie", "Cookie: sid=ckSession77aa; theme=dark", "ckSession77aa"},
		{"set-cookie", "Set-Cookie: sid=ckSet88bb; Path=/", "ckSet88bb"},
		{"x-api-key header", "X-Api-Key: xakHeader12ab", "xakHeader12ab"},
		{"client_secret in JSON", `{"client_id":"app","client_secret":"csJson34cd"}`, "csJson34cd"},
		{"security token header", "X-Amz-Security-Token: FwoGsec56ef", "FwoGsec56ef"},
		{"go header map", "map[X-Api-Key:[xakMap78gh]]", "xakMap78gh"},
		{"sigv4", "Credential=AKIDcred90ij/20240101/us-east-1/s3/aws4_request, Signature=5d67sigv4kl", "5d67sigv4kl"},
		{"x-amz-signature", "https://b.s3/k?X-Amz-Expires=60&X-Amz-Signature=amzSig12mn&x=1", "amzSig12mn"},
		{"query key first", "https://maps/api?key=qkFirst34op&q=paris", "qkFirst34op"},
		{"query sig not first", "https://blob/c?sv=2020&sig=sigLater56qr&se=1", "sigLater56qr"},
		{"query key not first", "https://maps/api?q=paris&key=keyLater78st", "keyLater78st"},
		{"query api_key", "GET /v1?api_key=apiKey90uv HTTP/1.1", "apiKey90uv"},
		{"query access_token", "/cb?state=s&access_token=ya29atok12wx&x=1", "ya29atok12wx"},
		{"query token", "wss://h/ws?token=wsTok34yz", "wsTok34yz"},
		{"url-encoded query", "/login?next=%2Fb%3Fx%3D1%26sig%3DencSig56ab%26y%3D2", "encSig56ab"},
		{"anthropic key", "sk-ant-api03-antKey78cdEF", "antKey78cdEF"},
		{"openai key", "sk-proj-openaiKey90efGH12ijKL34", "openaiKey90efGH12ijKL34"},
		{"aws access key id", "AKIAAWSKEY0123456789", "AKIAAWSKEY0123456789"},
		{"github token", "ghp_ghTok56mnOP78qrST90uvWX12yzAB", "ghTok56mnOP78qrST90uvWX12yzAB"},
		{"github pat", "github_pat_11patTok34cdEF56ghIJ78kl", "patTok34cdEF56ghIJ78kl"},
		{"gitlab token", "glpat-glTok90mnOP12qrST34uv", "glTok90mnOP12qrST34uv"},
		{"slack token", "xoxb-1234-slackTok56wx", "slackTok56wx"},
		{"google api key", "AIzaSyGoogleKey78yzAB90cdEF12ghIJ34kl", "GoogleKey78yzAB90cdEF12ghIJ34kl"},
		{"stripe key", "sk_live_stripeKey56mnOP78qr", "stripeKey56mnOP78qr"},
		{"npm token", "npm_npmTok90stUV12wxYZ34abCD56efGH78ijKL", "npmTok90stUV12wxYZ34abCD56efGH78ijKL"},
		{"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.jwtSig90mnOP", "jwtSig90mnOP"},
		{"bearer in prose", "use Bearer prose12qrST here", "prose12qrST"},
		{"url password", "postgres://app:urlPw34uv@db:5432/x", "urlPw34uv"},
		{"private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpemBody56wx\n-----END RSA PRIVATE KEY-----", "MIIEpemBody56wx"},
		{"secret env var", "the deploy secret is envSecret78yzAB", "envSecret78yzAB"},
		{"xml element", "<user>bob</user><password>xmlPw90cdEF</password>", "xmlPw90cdEF"},
		{"toml", "[db]\npassword = \"tomlPw12ghIJ\"\nport = 5432", "tomlPw12ghIJ"},
		{"ini", "[db]\npassword=iniPw34klMN\nuser=bob", "iniPw34klMN"},
		{"yaml", "db:\n  user: bob\n  password: yamlPw56opQR\n", "yamlPw56opQR"},
		{"yaml on the next line", "db:\n  password:\n    nextPw78stUV\n  user: bob", "nextPw78stUV"},
		{"on the line after its key", "Your API token:\nlineTok90wxYZ\nKeep it safe.", "lineTok90wxYZ"},
		{"xml attribute", `<db host="h" password="xmlAttr12abCD" port="5432"/>`, "xmlAttr12abCD"},
		{"xml attribute in single quotes", `<db password='xmlAttr34efGH'>`, "xmlAttr34efGH"},
		{"xml attribute html-escaped", `&lt;db password=&quot;xmlEsc56ijKL&quot;/&gt;`, "xmlEsc56ijKL"},
		{"xml key and value pair", `<add key="DbPassword" value="xmlPair78mnOP"/>`, "xmlPair78mnOP"},
		{"zero-width space in a key", "api\u200b_key=zwKey56ijKL", "zwKey56ijKL"},
		{"zero-width joiner in a key", "pass\u200dword: zwPass78mnOP", "zwPass78mnOP"},
		{"zero-width in a JSON key", "{\"pass\u200bword\":\"zwJson90qrST\"}", "zwJson90qrST"},
		// Not secrets.
		{"oauth provider", "oauth: google", ""},
		{"auth mechanism", "auth: none", ""},
		{"token counts", "max_tokens: 1024, input_tokens=5", ""},
		{"prose bearer", "the bearer of bad news", ""},
		{"key in prose", "the key=value pair", ""},
		{"xml pair not secret", `<add key="Timeout" value="30"/>`, ""},
		{"zero-width in a benign key", "max\u200b_tokens=5", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DEPLOY_SECRET", "envSecret78yzAB")
			t.Setenv("ANTHROPIC_LOG", "debug")
			marker := fmt.Sprintf("shape-%02d", i) // shows the text reached the sink
			text := marker + "\n" + tt.text
			var jsonLog, textLog syncBuffer
			logger := slog.New(teeHandler{
				slog.NewJSONHandler(&jsonLog, &slog.HandlerOptions{Level: slog.LevelDebug}),
				slog.NewTextHandler(&textLog, &slog.HandlerOptions{Level: slog.LevelDebug}),
			})
			var out syncBuffer
			rec := transcript.NewRecorder(&out, nil)
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.Text(text),
					toolruntest.ToolUse("toolu_1", "show", map[string]string{"note": text}),
					toolruntest.ToolUse("toolu_2", "fail", nil)),
				toolruntest.Message(toolruntest.Text("done")),
			))
			tools := []toolrun.Tool{
				toolrun.NewTool("show", "", func(ctx context.Context, in struct {
					Note string `json:"note"`
				}) (string, error) {
					return in.Note, nil
				}),
				toolrun.NewTool("fail", "", func(ctx context.Context, in struct{}) (string, error) { return "", errors.New(text) }),
			}
			res, err := toolrun.New(client(s), userParams("go"), tools, &toolrun.Options{Logger: logger, OnEvent: rec.Observe}).Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run = %v, %v; want end_turn", res.StopReason, err)
			}
			var page bytes.Buffer
			if err := transcript.WriteHTML(&page, readBytes(t, out.Bytes())); err != nil {
				t.Fatal(err)
			}
			sinks := []struct{ name, text string }{
				{"JSON log", jsonLog.String()},
				{"text log", textLog.String()},
				{"transcript", out.String()},
				{"HTML report", page.String()},
			}
			for _, sink := range sinks {
				if !strings.Contains(sink.text, marker) {
					t.Errorf("the %s has no %q: the text did not reach it", sink.name, marker)
				}
				if tt.secret == "" {
					// Benign text survives, as each sink writes it.
					var want []string
					switch sink.name {
					case "HTML report":
						want = []string{template.HTMLEscapeString(tt.text)}
					case "text log":
						want = []string{strings.Trim(strconv.Quote(tt.text), `"`)}
					case "JSON log":
						// slog's JSON handler leaves '<', '>' and '&' as they are.
						var b strings.Builder
						enc := json.NewEncoder(&b)
						enc.SetEscapeHTML(false)
						enc.Encode(tt.text)
						want = []string{strings.Trim(strings.TrimSpace(b.String()), `"`)}
					default:
						b, _ := json.Marshal(tt.text)
						want = []string{strings.Trim(string(b), `"`)}
					}
					for _, w := range want {
						if !strings.Contains(sink.text, w) {
							t.Errorf("the %s has no %q: benign text was redacted\n%s", sink.name, w, sink.text)
						}
					}
					continue
				}
				if strings.Contains(sink.text, tt.secret) {
					t.Errorf("the %s has the secret %q of %q:\n%s", sink.name, tt.secret, tt.text, sink.text)
				}
				if !strings.Contains(sink.text, redact.Mark) {
					t.Errorf("the %s has no %s", sink.name, redact.Mark)
				}
			}
		})
	}
}
