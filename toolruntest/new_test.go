package toolruntest_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/toolruntest"
)

// recordingTB is a toolruntest.TB that keeps its cleanups and errors, so a
// test can run the cleanups when it chooses and see what they reported.
type recordingTB struct {
	mu       sync.Mutex // guards cleanups, errors
	cleanups []func()
	errors   []string
}

func (tb *recordingTB) Helper() {}

func (tb *recordingTB) Cleanup(f func()) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.cleanups = append(tb.cleanups, f)
}

func (tb *recordingTB) Errorf(format string, args ...any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.errors = append(tb.errors, fmt.Sprintf(format, args...))
}

// end runs the cleanups, last first, as package testing does.
func (tb *recordingTB) end() {
	tb.mu.Lock()
	fs := tb.cleanups
	tb.cleanups = nil
	tb.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// closed reports whether err is what a client gets from a closed server: a
// failure to connect, not an answer from the API.
func closed(err error) bool {
	var apiErr *anthropic.Error
	return err != nil && !errors.As(err, &apiErr)
}

// ask sends one question and returns the text of the answer.
func ask(t *testing.T, c anthropic.Client, q string) (string, error) {
	t.Helper()
	msg, err := c.Beta.Messages.New(t.Context(), question(q))
	if err != nil {
		return "", err
	}
	return msg.Content[0].Text, nil
}

func TestNew(t *testing.T) {
	text := func(s string) toolruntest.Reply { return toolruntest.Message(toolruntest.Text(s)) }
	tests := []struct {
		name  string
		opts  toolruntest.Options
		asks  []string
		want  []string // the answers; "error" where the request fails
		ended int      // how many requests ran past the end of the script
	}{
		{
			name: "script in order",
			opts: toolruntest.Script(text("one"), text("two"), text("three")),
			asks: []string{"a", "b", "c"},
			want: []string{"one", "two", "three"},
		},
		{
			name:  "script runs out",
			opts:  toolruntest.Script(text("one")),
			asks:  []string{"a", "b"},
			want:  []string{"one", "error"},
			ended: 1,
		},
		{
			name:  "neither script nor func",
			opts:  toolruntest.Options{},
			asks:  []string{"a"},
			want:  []string{"error"},
			ended: 1,
		},
		{
			name: "func",
			opts: toolruntest.Options{Func: func(r *toolruntest.Request) toolruntest.Reply {
				last := r.Params.Messages[len(r.Params.Messages)-1]
				return text(strings.ToUpper(last.Content[0].Text))
			}},
			asks: []string{"a", "b", "c"},
			want: []string{"A", "B", "C"},
		},
		{
			name: "func with an empty script",
			opts: toolruntest.Options{Replies: []toolruntest.Reply{}, Func: func(*toolruntest.Request) toolruntest.Reply {
				return text("from func")
			}},
			asks: []string{"a"},
			want: []string{"from func"},
		},
		{
			name: "script with other options",
			opts: toolruntest.Options{MinCacheableTokens: 1, Replies: []toolruntest.Reply{text("one"), text("two")}},
			asks: []string{"a", "b"},
			want: []string{"one", "two"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := toolruntest.New(nil, tt.opts)
			defer s.Close()
			c := s.Client(option.WithMaxRetries(0))
			var got []string
			for _, q := range tt.asks {
				a, err := ask(t, c, q)
				if err != nil {
					a = "error"
				}
				got = append(got, a)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
			ended := 0
			for _, err := range s.Errors() {
				if !errors.Is(err, toolruntest.ErrScriptEnded) {
					t.Errorf("got server error %v, want only ErrScriptEnded", err)
				}
				ended++
			}
			if ended != tt.ended {
				t.Errorf("got %d ErrScriptEnded, want %d", ended, tt.ended)
			}
		})
	}
}

// TestNewCopiesReplies checks that changing the script after New does not
// change what the server answers.
func TestNewCopiesReplies(t *testing.T) {
	t.Parallel()
	replies := []toolruntest.Reply{toolruntest.Message(toolruntest.Text("before"))}
	s := toolruntest.New(t, toolruntest.Script(replies...))
	replies[0] = toolruntest.Message(toolruntest.Text("after"))
	got, err := ask(t, s.Client(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if got != "before" {
		t.Errorf("got %q, want %q", got, "before")
	}
}

func TestNewPanicsWithRepliesAndFunc(t *testing.T) {
	t.Parallel()
	defer func() {
		r := recover()
		msg, _ := r.(string)
		if !strings.HasPrefix(msg, "toolruntest: ") || !strings.Contains(msg, "both Options.Replies and Options.Func") {
			t.Errorf("got panic %#v, want a toolruntest panic about setting both Replies and Func", r)
		}
	}()
	tb := new(recordingTB)
	defer tb.end()
	toolruntest.New(tb, toolruntest.Options{
		Replies: []toolruntest.Reply{toolruntest.Message(toolruntest.Text("one"))},
		Func:    func(*toolruntest.Request) toolruntest.Reply { return toolruntest.Reply{} },
	})
	t.Error("New returned, want a panic")
}

// TestNewWithTB checks that a server given a TB is closed by the TB's
// cleanup, which reports each of the server's errors.
func TestNewWithTB(t *testing.T) {
	t.Parallel()
	tb := new(recordingTB)
	s := toolruntest.New(tb, toolruntest.Script(toolruntest.Message(toolruntest.Text("one"))))
	c := s.Client(option.WithMaxRetries(0))
	if _, err := ask(t, c, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := ask(t, c, "b"); err == nil {
		t.Fatal("got no error past the end of the script, want one")
	}
	if len(tb.errors) != 0 {
		t.Fatalf("got errors %q before the test ended, want none", tb.errors)
	}

	tb.end()
	if len(tb.errors) != 1 || !strings.Contains(tb.errors[0], toolruntest.ErrScriptEnded.Error()) {
		t.Errorf("got errors %q, want one that the script ran out", tb.errors)
	}
	if _, err := ask(t, c, "c"); !closed(err) {
		t.Errorf("got %v after the cleanup, want an error from a closed server", err)
	}
}

// TestNewWithTestingT checks that a *testing.T fits TB, and that a subtest's
// server closes when the subtest ends.
func TestNewWithTestingT(t *testing.T) {
	t.Parallel()
	var s *toolruntest.Server
	t.Run("sub", func(t *testing.T) {
		s = toolruntest.New(t, toolruntest.Options{Func: func(*toolruntest.Request) toolruntest.Reply {
			return toolruntest.Message(toolruntest.Text("one"))
		}})
		if _, err := ask(t, s.Client(), "a"); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := ask(t, s.Client(option.WithMaxRetries(0)), "b"); !closed(err) {
		t.Errorf("got %v after the subtest ended, want an error from a closed server", err)
	}
}

// TestNewNilTBNeedsClose checks that a server made without a TB outlives
// the test that made it until the caller closes it.
func TestNewNilTBNeedsClose(t *testing.T) {
	t.Parallel()
	var s *toolruntest.Server
	t.Run("sub", func(t *testing.T) {
		s = toolruntest.New(nil, toolruntest.Options{Func: func(*toolruntest.Request) toolruntest.Reply {
			return toolruntest.Message(toolruntest.Text("still here"))
		}})
	})
	c := s.Client(option.WithMaxRetries(0))
	got, err := ask(t, c, "a")
	if err != nil || got != "still here" {
		s.Close()
		t.Fatalf("got %q, %v after the subtest ended, want the server still serving", got, err)
	}
	s.Close()
	if _, err := ask(t, c, "b"); !closed(err) {
		t.Errorf("got %v after Close, want an error from a closed server", err)
	}
}
