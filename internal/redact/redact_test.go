package redact_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun/internal/redact"
)

// TestString is the table of credential shapes String must remove, and of
// text it must leave alone.
func TestString(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "plain-secret-value")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "short") // under 8 bytes: left alone
	t.Setenv("MY_SERVICE_PASSWORD", `pa"ss\word-42`)
	t.Setenv("GITHUB_TOKEN", "gh-env-token-value")
	t.Setenv("APP_SECRET", "a&b-secret-value")
	tests := []struct {
		name string
		in   string
		want string
	}{
		// Headers, any scheme.
		{"bearer header", "Authorization: Bearer abcdefgh12345678", "Authorization: Bearer [REDACTED]"},
		{"basic header", "authorization: Basic dXNlcjpwYXNzd29yZA==", "authorization: Basic [REDACTED]"},
		{"token scheme", "Authorization: Token X", "Authorization: Token [REDACTED]"},
		{"bearer with punctuation", "Authorization: Bearer a.b-c~d+/=", "Authorization: Bearer [REDACTED]"},
		{"digest", `Authorization: Digest username="bob", realm="x", nonce="abc", response="6629fae49393a053"`, "Authorization: Digest [REDACTED]"},
		{"bare value", "Authorization: abcdef123456", "Authorization: [REDACTED]"},
		{"short bare value", "Authorization: x", "Authorization: [REDACTED]"},
		{"proxy authorization", "Proxy-Authorization: Basic dXNlcjpwYXNz", "Proxy-Authorization: Basic [REDACTED]"},
		{"header in a sentence", "request failed; Authorization: Token abc123 was refused", "request failed; Authorization: Token [REDACTED]"},
		{"lower-case header", "authorization:bearer abc.def", "authorization:bearer [REDACTED]"},
		{"x-api-key header", "X-Api-Key: abc123", "X-Api-Key: [REDACTED]"},
		{"x-goog-api-key", "x-goog-api-key: AIzaSyD-not-a-real-key", "x-goog-api-key: [REDACTED]"},
		{"cookie", "Cookie: session=abc123; theme=dark", "Cookie: [REDACTED]"},
		{"set-cookie", "Set-Cookie: sid=abc123; Path=/; HttpOnly", "Set-Cookie: [REDACTED]"},
		{"http dump", "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Token abc\r\nAccept: */*\r\n", "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Token [REDACTED]\r\nAccept: */*\r\n"},
		{"go header map", "map[Authorization:[Bearer abc.def] X-Api-Key:[k123]]", "map[Authorization:[Bearer [REDACTED]] X-Api-Key:[[REDACTED]]]"},
		// AWS SigV4.
		{"sigv4 header", "Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
			"Authorization: AWS4-HMAC-SHA256 [REDACTED]"},
		{"sigv4 fields", "Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, Signature=5d672d79c15b", "Credential=[REDACTED], Signature=[REDACTED]"},
		{"security token header", "X-Amz-Security-Token: FwoGZXIvYXdzEBYaDH", "X-Amz-Security-Token: [REDACTED]"},
		{"presigned url", "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F2015&X-Amz-Security-Token=FwoG&X-Amz-Signature=abcd1234&X-Amz-Expires=60",
			"https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[REDACTED]&X-Amz-Security-Token=[REDACTED]&X-Amz-Signature=[REDACTED]&X-Amz-Expires=60"},
		{"aws access key id", "id AKIAIOSFODNN7EXAMPLE here", "id [REDACTED] here"},
		{"aws secret env line", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY=[REDACTED]"},
		// Query strings.
		{"query key", "https://maps.example.com/api?key=abc123&q=paris", "https://maps.example.com/api?key=[REDACTED]&q=paris"},
		{"query api_key", "GET /v1?api_key=abc123 HTTP/1.1", "GET /v1?api_key=[REDACTED] HTTP/1.1"},
		{"query access_token", "/cb?state=s&access_token=ya29.a0Af&x=1", "/cb?state=s&access_token=[REDACTED]&x=1"},
		{"query token", "wss://h/ws?token=abc.def", "wss://h/ws?token=[REDACTED]"},
		{"query sig", "/blob?sv=2020&sig=abc%2Bdef", "/blob?sv=2020&sig=[REDACTED]"},
		{"key not in a query", "the key=value pair", "the key=value pair"},
		// JSON.
		{"header as JSON", `{"X-Api-Key":["abc123"],"Accept":["*/*"]}`, `{"X-Api-Key":["[REDACTED]"],"Accept":["*/*"]}`},
		{"field in JSON", `{"api_key":"abc123","n":1}`, `{"api_key":"[REDACTED]","n":1}`},
		{"authorization in JSON", `{"authorization":"Digest username=\"bob\", response=\"abc\"","n":1}`, `{"authorization":"Digest [REDACTED]","n":1}`},
		{"password in JSON", `{"user":"bob","password":"hunter2 \"quoted\""}`, `{"user":"bob","password":"[REDACTED]"}`},
		{"client secret in JSON", `{"client_id":"app","client_secret":"s3cr3t"}`, `{"client_id":"app","client_secret":"[REDACTED]"}`},
		{"refresh token in JSON", `{"refresh_token": "1//0abc"}`, `{"refresh_token": "[REDACTED]"}`},
		{"number in JSON", `{"token":12345,"max_tokens":10}`, `{"token":12345,"max_tokens":10}`},
		{"header inside a JSON string", `{"text":"send \"authorization\": \"tok123456\" now"}`, `{"text":"send \"authorization\": \"[REDACTED]\" now"}`},
		{"header line in an escaped body", `{"body":"POST / HTTP/1.1\r\nAuthorization: Token abc\r\nHost: x"}`, `{"body":"POST / HTTP/1.1\r\nAuthorization: Token [REDACTED]\r\nHost: x"}`},
		{"header line after \\n", `{"log":"line one\nAuthorization: Bearer a.b-c~d+/=\nline three"}`, `{"log":"line one\nAuthorization: Bearer [REDACTED]\nline three"}`},
		{"escaped header at end of string", `{"log":"Authorization: Digest username=\"bob\", response=\"abc\""}`, `{"log":"Authorization: Digest [REDACTED]"}`},
		{"doubly escaped", `{"a":"{\"b\":\"x\\nAuthorization: Token abc\\nY\"}"}`, `{"a":"{\"b\":\"x\\nAuthorization: Token [REDACTED]\\nY\"}"}`},
		{"thinking signature kept", `{"type":"thinking","signature":"EqQBCkgIAR"}`, `{"type":"thinking","signature":"EqQBCkgIAR"}`},
		// Shapes.
		{"anthropic key", "key=sk-ant-api03-AbC_d-9 ok", "key=sk-ant-[REDACTED] ok"},
		{"openai key", "sk-proj-abcdefghijklmnopqrstuvwx", "[REDACTED]"},
		{"github token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED]"},
		{"github pat", "github_pat_11ABCDEFG0123456789_abcdefghij", "[REDACTED]"},
		{"slack token", "xoxb-1234567890-abcdefghij", "[REDACTED]"},
		{"stripe key", "sk_live_abcdefghijklmnop1234", "[REDACTED]"},
		{"jwt", "id eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig-nature_x", "id [REDACTED]"},
		{"url password", "postgres://app:s3cr3t@db:5432/x", "postgres://app:[REDACTED]@db:5432/x"},
		{"private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "-----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY-----"},
		{"bearer in prose", "use Bearer abc.def-ghi here", "use Bearer [REDACTED] here"},
		{"prose bearer", "the bearer of bad news", "the bearer of bad news"},
		// Environment.
		{"env var value", "using plain-secret-value now", "using [REDACTED] now"},
		{"short env var value", "a short word", "a short word"},
		{"secret-named env var", "cloned with gh-env-token-value", "cloned with [REDACTED]"},
		{"env value escaped in JSON", `{"x":"pa\"ss\\word-42"}`, `{"x":"[REDACTED]"}`},
		{"env value url-encoded", "/login?pw=pa%22ss%5Cword-42&x=1", "/login?pw=[REDACTED]&x=1"},
		{"env value html-escaped in JSON", `{"x":"a\u0026b-secret-value"}`, `{"x":"[REDACTED]"}`},
		{"env assignment", "ANTHROPIC_AUTH_TOKEN=xyz987", "ANTHROPIC_AUTH_TOKEN=[REDACTED]"},
		{"slog text attr", `level=INFO msg=x password="a b c" n=1`, `level=INFO msg=x password="[REDACTED]" n=1`},
		// Query parameters after the first, as JSON and URL encoding write them.
		{"json-escaped &sig", `{"u":"https://h/b?sv=1\u0026sig=abc%2Bdef\u0026se=2"}`, `{"u":"https://h/b?sv=1\u0026sig=[REDACTED]\u0026se=2"}`},
		{"json-escaped &key", `{"u":"/maps?q=paris\u0026key=AbC123xyz"}`, `{"u":"/maps?q=paris\u0026key=[REDACTED]"}`},
		{"doubly escaped &sig", `{"a":"{\"u\":\"/b?x=1\\u0026sig=abc123\"}"}`, `{"a":"{\"u\":\"/b?x=1\\u0026sig=[REDACTED]\"}"}`},
		{"url-encoded query in a query", "/login?next=%2Fb%3Fx%3D1%26sig%3Dabc%252Bdef%26y%3D2", "/login?next=%2Fb%3Fx%3D1%26sig%3D[REDACTED]%26y%3D2"},
		{"url-encoded first key", "/r?u=https%3A%2F%2Fh%2Fapi%3Fkey%3DAbC123xyz", "/r?u=https%3A%2F%2Fh%2Fapi%3Fkey%3D[REDACTED]"},
		{"html-escaped &amp;sig", `<a href="/b?x=1&amp;sig=abc123">`, `<a href="/b?x=1&amp;sig=[REDACTED]">`},
		// XML.
		{"xml element", "<user>bob</user><password>hunter2</password>", "<user>bob</user><password>[REDACTED]</password>"},
		{"xml element with namespace and attributes", `<ns:ApiKey type="x">AbC123</ns:ApiKey>`, `<ns:ApiKey type="x">[REDACTED]</ns:ApiKey>`},
		{"xml element spaced", "<secret>\n  s3cr3t value\n</secret>", "<secret>\n  [REDACTED]\n</secret>"},
		{"xml in JSON", `{"body":"\u003cpassword\u003ehunter2\u003c/password\u003e"}`, `{"body":"\u003cpassword\u003e[REDACTED]\u003c/password\u003e"}`},
		{"xml html-escaped", "&lt;token&gt;abc123&lt;/token&gt;", "&lt;token&gt;[REDACTED]&lt;/token&gt;"},
		{"xml attribute", `<db host="h" password="hunter2" port="5432"/>`, `<db host="h" password="[REDACTED]" port="5432"/>`},
		{"xml attribute single-quoted", `<db password='hunter 2'>`, `<db password='[REDACTED]'>`},
		{"xml attribute in JSON", `{"b":"\u003cdb password=\"hunter2\"/\u003e"}`, `{"b":"\u003cdb password=\"[REDACTED]\"/\u003e"}`},
		{"xml attribute html-escaped", `&lt;db password=&quot;hunter2&quot;/&gt;`, `&lt;db password=&quot;[REDACTED]&quot;/&gt;`},
		{"xml attribute quote as &#34;", `<db password=&#34;hunter2&#34;>`, `<db password=&#34;[REDACTED]&#34;>`},
		{"xml attribute quote as \u0022", `{"b":"<db password=\u0022hunter2\u0022>"}`, `{"b":"<db password=\u0022[REDACTED]\u0022>"}`},
		{"xml key and value pair", `<add key="DbPassword" value="hunter2"/>`, `<add key="DbPassword" value="[REDACTED]"/>`},
		{"xml value before its name", `<property value="hunter2" name="api_key"/>`, `<property value="[REDACTED]" name="api_key"/>`},
		{"xml pair in JSON", `{"b":"<add key=\"client_secret\" value=\"hunter2\"/>"}`, `{"b":"<add key=\"client_secret\" value=\"[REDACTED]\"/>"}`},
		{"xml pair html-escaped", `&lt;add key=&quot;token&quot; value=&quot;hunter2&quot;/&gt;`, `&lt;add key=&quot;token&quot; value=&quot;[REDACTED]&quot;/&gt;`},
		{"xml element named by its key", `<entry key="password">hunter2</entry>`, `<entry key="password">[REDACTED]</entry>`},
		{"xml pair not secret kept", `<add key="Timeout" value="30"/><param name="max_tokens" value="5"/>`, `<add key="Timeout" value="30"/><param name="max_tokens" value="5"/>`},
		{"xml password input kept", `<input type="password" name="pw"><option value="token">Token</option>`, `<input type="password" name="pw"><option value="token">Token</option>`},
		{"xml parent element kept", "<credentials><username>bob</username></credentials>", "<credentials><username>bob</username></credentials>"},
		// Names split by characters that show as nothing.
		{"zero-width space in a key", "api\u200b_key=AbC123xyz", "api\u200b_key=[REDACTED]"},
		{"zero-width joiner in a key", "pass\u200dword: hunter22", "pass\u200dword: [REDACTED]"},
		{"word joiner, bom, soft hyphen", "pass\u2060word=a1 to\ufeffken=b2 se\u00adcret=c3", "pass\u2060word=[REDACTED] to\ufeffken=[REDACTED] se\u00adcret=[REDACTED]"},
		{"zero-width before the separator", "password\u200b=hunter22", "password\u200b=[REDACTED]"},
		{"zero-width in a JSON key", "{\"pass\u200bword\":\"hunter22\"}", "{\"pass\u200bword\":\"[REDACTED]\"}"},
		{"zero-width escaped in a JSON key", `{"pass\u200Bword":"hunter22"}`, `{"pass\u200Bword":"[REDACTED]"}`},
		{"zero-width escaped twice", `{"a":"{\"api\\u200b_key\":\"hunter22\"}"}`, `{"a":"{\"api\\u200b_key\":\"[REDACTED]\"}"}`},
		{"zero-width in a header name", "Author\u200bization: Token abc123", "Author\u200bization: Token [REDACTED]"},
		{"zero-width in an xml element", "<pass\u200bword>hunter2</pass\u200bword>", "<pass\u200bword>[REDACTED]</pass\u200bword>"},
		{"zero-width in a benign key kept", "max\u200b_tokens=5 hello\u200bworld=3", "max\u200b_tokens=5 hello\u200bworld=3"},
		// Configuration files.
		{"toml", "[db]\npassword = \"hunter2\"\nport = 5432", "[db]\npassword = \"[REDACTED]\"\nport = 5432"},
		{"toml single-quoted", "api_key = 'AbC123'", "api_key = '[REDACTED]'"},
		{"ini", "[auth]\npassword=hunter2\nuser=bob", "[auth]\npassword=[REDACTED]\nuser=bob"},
		{"yaml", "db:\n  user: bob\n  password: hunter2\n", "db:\n  user: bob\n  password: [REDACTED]\n"},
		{"yaml quoted", "client_secret: \"s3 cr3t\"", "client_secret: \"[REDACTED]\""},
		{"yaml value on the next line", "password:\n  hunter2\nuser: bob", "password:\n  [REDACTED]\nuser: bob"},
		{"yaml block scalar", "token: |\n  line1abc\n  line2def\nuser: bob", "token: |\n  [REDACTED]\nuser: bob"},
		{"value on the line after its key", "Your API token:\nAbC123dEf456\nKeep it safe.", "Your API token:\n[REDACTED]\nKeep it safe."},
		{"next line in JSON", `{"text":"password:\n  hunter2\nnext"}`, `{"text":"password:\n  [REDACTED]\nnext"}`},
		{"yaml mapping after a key kept", "auth:\n  type: oauth\n  provider: google", "auth:\n  type: oauth\n  provider: google"},
		{"prose after a key kept", "Password:\nThe next step is to log in.", "Password:\nThe next step is to log in."},
		{"code after a key kept", "if token:\n    refresh()\nif auth:\n    login", "if token:\n    refresh()\nif auth:\n    login"},
		{"known shape after an escaped newline", `{"t":"line\nghp_abcdefghijklmnopqrstuvwxyz0123456789"}`, `{"t":"line\n[REDACTED]"}`},
		{"bearer after an escaped newline", `{"t":"line\nBearer abc.def-ghi"}`, `{"t":"line\nBearer [REDACTED]"}`},
		// Benign values after key-like words.
		{"oauth provider kept", "oauth: google", "oauth: google"},
		{"auth mechanism kept", `{"auth":"none","x":1}`, `{"auth":"none","x":1}`},
		{"oauth token", "oauth: ya29.a0AfH6SMBx", "oauth: [REDACTED]"},
		{"auth with digits", "auth: s3cr3tT0ken", "auth: [REDACTED]"},
		// Left alone.
		{"no secret", "sunny in Paris", "sunny in Paris"},
		{"token counts", "max_tokens: 1024, input_tokens=5", "max_tokens: 1024, input_tokens=5"},
		{"already redacted", "Authorization: Bearer [REDACTED] x-api-key: [REDACTED] sk-ant-[REDACTED]", "Authorization: Bearer [REDACTED] x-api-key: [REDACTED] sk-ant-[REDACTED]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := redact.String(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("String(%q) (-want +got):\n%s", tt.in, diff)
			}
			if again := redact.String(got); again != got {
				t.Errorf("String is not idempotent: got %q, then %q", got, again)
			}
			if json.Valid([]byte(tt.in)) && !json.Valid([]byte(got)) {
				t.Errorf("String(%q) = %q: got invalid JSON, want valid", tt.in, got)
			}
		})
	}
}

func TestSecretName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"ANTHROPIC_API_KEY", true}, {"ANTHROPIC_AUTH_TOKEN", true}, {"GITHUB_TOKEN", true},
		{"AWS_SECRET_ACCESS_KEY", true}, {"AWS_SESSION_TOKEN", true}, {"DB_PASSWORD", true},
		{"npm_config__auth", true}, {"OPENAI_APIKEY", true}, {"SSH_AUTH_SOCK", true},
		{"PATH", false}, {"HOME", false}, {"KEYBOARD", false}, {"ANTHROPIC_BASE_URL", false},
		{"AWS_ACCESS_KEY_ID", false}, {"PWD", false}, {"TOKENIZERS_PARALLELISM", false},
	}
	for _, tt := range tests {
		if got := redact.SecretName(tt.name); got != tt.want {
			t.Errorf("SecretName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// FuzzString plants a secret in any text, in the shapes String knows, and
// checks that it never survives and that valid JSON stays valid.
func FuzzString(f *testing.F) {
	f.Add("hello", "abcDEF123456", uint8(0))
	f.Add(`{"a":"b"}`, "x.y-z~w+/=", uint8(3))
	for shape := range redact.Shapes {
		f.Add("line\r\nmore \"quoted\" \\ end", "tok.en-abc~d+/", uint8(shape))
	}
	f.Fuzz(func(t *testing.T, text, secret string, shape uint8) {
		secret = strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._~+/-", r) {
				return r
			}
			return -1
		}, secret)
		planted, secret := redact.Plant(text, secret, int(shape))
		control, _ := redact.Plant(text, "", int(shape))
		if len(secret) < 6 || strings.Contains(control, secret) || strings.Contains(redact.Mark, secret) {
			return
		}
		got := redact.String(planted)
		if strings.Contains(got, secret) {
			t.Fatalf("String(%q) = %q: got the secret %q, want it redacted", planted, got, secret)
		}
		if json.Valid([]byte(planted)) && !json.Valid([]byte(got)) {
			t.Fatalf("String(%q) = %q: got invalid JSON, want valid", planted, got)
		}
	})
}
