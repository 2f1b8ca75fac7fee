package mcptool_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolrun/toolrun/internal/redact"
	"github.com/toolrun/toolrun/mcptool"
)

// TestStderrRedacted runs a server that writes credentials to its standard
// error and crashes: the log record of its exit has the end of its
// standard error, with the credentials redacted.
func TestStderrRedacted(t *testing.T) {
	bin := buildCrashServer(t)
	const key = "sk-ant-api03-LeakedKey_0123456789abcdef"
	const token = "tok.en-LEAK~99+/="
	log, logs := newLogger()
	s := connect(t, "srv", mcptool.Command(bin, "-stderr", "using "+key+"\nAuthorization: Token "+token), &mcptool.Options{Logger: log})
	exited := logs.await("mcptool: MCP server exited")
	if _, err := find(t, tools(t, s), "srv__crash").Run(t.Context(), nil); err == nil {
		t.Fatal("crash: got no error, want one")
	}
	<-exited
	exits := logs.records(t, "mcptool: MCP server exited")
	if len(exits) != 1 {
		t.Fatalf("got %d exit records, want 1", len(exits))
	}
	check(t, "stderr", exits[0]["stderr"], any("crashserver started\nusing sk-ant-[REDACTED]\nAuthorization: Token [REDACTED]\ncrashserver: fatal: crash requested"))
	for _, secret := range []string{key, token, "LeakedKey"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log has %q:\n%s", secret, logs.String())
		}
	}
}

// TestChildEnv checks what a command's child finds in its environment.
func TestChildEnv(t *testing.T) {
	bin := buildCrashServer(t)
	tests := []struct {
		name string
		env  []string // this process's whole environment
		dial mcptool.Dial
		opts mcptool.Options
		want []string
	}{
		{
			name: "only secrets",
			env:  []string{"ANTHROPIC_API_KEY=sk-ant-api03-k", "ANTHROPIC_AUTH_TOKEN=t0k3n", "ANTHROPIC_BASE_URL=http://x", "GITHUB_TOKEN=ghp_x", "DB_PASSWORD=pw"},
			dial: mcptool.Command(bin, "-env-tool"),
			want: nil,
		},
		{
			name: "defaults, allow-list and Env",
			env: []string{"PATH=/bin:/usr/bin", "HOME=/h", "LANG=C", "LC_ALL=C", "FOO=bar", "GITHUB_TOKEN=ghp_x",
				"ANTHROPIC_API_KEY=sk-ant-api03-k", "HTTPS_PROXY=http://u:p@proxy:1", "HTTP_PROXY=http://proxy:2", "AWS_SECRET_ACCESS_KEY=aws"},
			dial: mcptool.Command(bin, "-env-tool"),
			opts: mcptool.Options{PassEnv: []string{"github_token"}, Env: []string{"EXTRA=1", "PATH=/override"}},
			want: []string{"EXTRA=1", "GITHUB_TOKEN=ghp_x", "HOME=/h", "HTTP_PROXY=http://proxy:2", "LANG=C", "LC_ALL=C", "PATH=/override"},
		},
		{
			name: "a Dial's own Env",
			env:  []string{"PATH=/bin", "SLACK_TOKEN=xoxb-1", "OTHER=o"},
			dial: func(context.Context) (mcp.Transport, error) {
				cmd := exec.Command(bin, "-env-tool")
				cmd.Env = []string{"FOO=bar", "ANTHROPIC_API_KEY=sk-ant-api03-k", "MY_SECRET=s", "DEBUG=1"}
				return &mcp.CommandTransport{Command: cmd}, nil
			},
			opts: mcptool.Options{PassEnv: []string{"SLACK_TOKEN"}},
			want: []string{"DEBUG=1", "FOO=bar", "SLACK_TOKEN=xoxb-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnviron(t, tt.env)
			opts := tt.opts
			s := connect(t, "srv", tt.dial, &opts)
			content, err := find(t, tools(t, s), "srv__env").Run(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range content {
				got = append(got, strings.Split(c.OfText.Text, "\n")...)
			}
			check(t, "child's environment", got, tt.want)
		})
	}
}

// setEnviron makes env the whole environment of this process until the
// end of the test.
func setEnviron(t *testing.T, env []string) {
	t.Helper()
	t.Setenv("TOOLRUN_TEST_ENVIRON", "") // this test cannot run in parallel
	saved := os.Environ()
	os.Clearenv()
	t.Cleanup(func() {
		os.Clearenv()
		for _, kv := range saved {
			name, value, _ := strings.Cut(kv, "=")
			os.Setenv(name, value)
		}
	})
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		os.Setenv(name, value)
	}
}

// TestCloseStopsPromptly closes servers that exit on their standard
// input's end, that linger after it, and that ignore SIGTERM too: Close
// returns nil for each, soon.
func TestCloseStopsPromptly(t *testing.T) {
	bin := buildCrashServer(t)
	tests := []struct {
		name   string
		args   []string
		within time.Duration
	}{
		{"exits on stdin EOF", nil, time.Second},
		{"lingers after stdin EOF", []string{"-linger"}, time.Second},
		{"ignores SIGTERM", []string{"-linger", "-ignore-term"}, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := connect(t, "srv", mcptool.Command(bin, tt.args...), nil)
			tools(t, s)
			start := time.Now()
			err := s.Close()
			elapsed := time.Since(start)
			if err != nil {
				t.Errorf("Close() = %v, want nil", err)
			}
			if elapsed > tt.within {
				t.Errorf("Close took %s, want under %s", elapsed, tt.within)
			}
		})
	}
}

// TestCloseReportsFailure: a server that exits with a failure when its
// standard input closes is no normal shutdown.
func TestCloseReportsFailure(t *testing.T) {
	bin := buildCrashServer(t)
	s := connect(t, "srv", mcptool.Command("/bin/sh", "-c", `"$0" ; exit 7`, bin), nil)
	tools(t, s)
	err := s.Close()
	var exit *exec.ExitError
	if err == nil || !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Errorf("Close() = %v, want exit status 7", err)
	}
}

// FuzzStderrRedacted plants a secret, in each shape of redact.Plant, in
// the standard error of a server that then crashes: the secret is in none
// of the package's log records.
func FuzzStderrRedacted(f *testing.F) {
	bin := buildCrashServer(f)
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
		text = strings.ToValidUTF8(strings.ReplaceAll(text, "\x00", ""), "")
		planted, secret := redact.Plant(text, secret, shape)
		control, _ := redact.Plant(text, "", shape)
		if len(secret) < 6 || strings.Contains(control, secret) || strings.Contains("[REDACTED]", secret) || len(planted) > 2<<10 {
			return
		}
		log, logs := newLogger()
		s := connect(t, "srv", mcptool.Command(bin, "-stderr", planted), &mcptool.Options{Logger: log})
		exited := logs.await("mcptool: MCP server exited")
		if _, err := find(t, tools(t, s), "srv__crash").Run(t.Context(), nil); err == nil {
			t.Fatal("crash: got no error, want one")
		}
		<-exited
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log has the secret %q planted as %q:\n%s", secret, planted, logs.String())
		}
	})
}
