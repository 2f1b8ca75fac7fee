package redact

import "testing"

// TestURLPasswordVariants: the password of a URL's userinfo is redacted
// in every way a URL writes one, not only "scheme://user:password@host".
func TestURLPasswordVariants(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty user", "redis://:pw-1@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"},
		{"empty user, https", "https://:tok@h/x", "https://:[REDACTED]@h/x"},
		{"uppercase scheme", "REDIS://:pw@cache", "REDIS://:[REDACTED]@cache"},
		{"mixed-case scheme, user", "Postgres://app:s3cr3t@db/x", "Postgres://app:[REDACTED]@db/x"},
		{"percent-encoded password", "postgres://app:p%40ss%2Fw@db/x", "postgres://app:[REDACTED]@db/x"},
		{"percent-encoded user", "amqp://us%40er:pw@mq", "amqp://us%40er:[REDACTED]@mq"},
		{"raw @ in password", "postgres://app:p@ss@db/x", "postgres://app:[REDACTED]@db/x"},
		{"colon in password", "mysql://root:a:b:c@db", "mysql://root:[REDACTED]@db"},
		{"scheme with plus", "mongodb+srv://u:pw@cluster0.example.net", "mongodb+srv://u:[REDACTED]@cluster0.example.net"},
		{"scheme-relative", "see //u:pw@host/p", "see //u:[REDACTED]@host/p"},
		{"JSON-escaped slashes", `{"url":"redis:\/\/:pw@cache"}`, `{"url":"redis:\/\/:[REDACTED]@cache"}`},
		{"in quotes", `url='redis://:pw@h'`, `url='redis://:[REDACTED]@h'`},
		{"two in a line", "a://:x@h b://u:y@k", "a://:[REDACTED]@h b://u:[REDACTED]@k"},
		{"mail address kept", "write to bob@example.com: ok", "write to bob@example.com: ok"},
		{"no password kept", "https://user@github.com/x", "https://user@github.com/x"},
		{"query @ kept", "https://h/p?a=b:c@d", "https://h/p?a=b:c@d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
