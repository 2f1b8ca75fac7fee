package main

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/toolrun/toolrun/toolruntest"
)

// TestPromptFromStdinIsNotCutSilently: a prompt on standard input
// longer than maxPrompt (16 MiB) is a usage error (exit status 2) that
// says so, and nothing is sent. It was cut at the limit, possibly inside
// a UTF-8 character, and sent as if whole, with exit status 0 and no word
// on stderr.
func TestPromptFromStdinIsNotCutSilently(t *testing.T) {
	var (
		mu   sync.Mutex
		sent []string
	)
	s := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		mu.Lock()
		defer mu.Unlock()
		if len(req.Conversation) > 0 && len(req.Conversation[0].Content) > 0 {
			sent = append(sent, req.Conversation[0].Content[0].Text)
		}
		return toolruntest.Message(toolruntest.Text("read it"))
	}})
	const marker = "…and this last line is the question."
	prompt := strings.Repeat("a line of a long log file\n", (16<<20)/26+1) + marker
	got := runCLI(t, env(map[string]string{"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": s.URL}), prompt,
		"run", "--max-turns", "1", "-")
	mu.Lock()
	defer mu.Unlock()
	cut := len(sent) > 0 && !strings.HasSuffix(sent[0], marker)
	if got.code != 2 || cut || len(sent) > 0 || !strings.Contains(got.stderr, "longer than the limit") {
		t.Errorf("a %d-byte prompt on stdin: exit %d, the model was sent %d bytes of it (cut: %v), stderr %q; want exit 2 and a usage error, the prompt not cut",
			len(prompt), got.code, lenOf(sent), cut, tail(got.stderr, 300))
	}
}

func lenOf(sent []string) int {
	if len(sent) == 0 {
		return 0
	}
	return len(sent[0])
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestReadAtMost: input of the limit's length is read whole; one byte more
// is an error wrapping errTooLong, never a cut input.
func TestReadAtMost(t *testing.T) {
	for _, tt := range []struct {
		in      string
		wantErr bool
	}{{"", false}, {"1234", false}, {"12345", true}} {
		b, err := readAtMost(strings.NewReader(tt.in), 4)
		if gotErr := errors.Is(err, errTooLong); gotErr != tt.wantErr || (!tt.wantErr && string(b) != tt.in) {
			t.Errorf("readAtMost(%q, 4) = %q, %v; want an error wrapping errTooLong: %v", tt.in, b, err, tt.wantErr)
		}
	}
}
