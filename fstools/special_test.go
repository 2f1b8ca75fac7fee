//go:build unix

package fstools_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun/fstools"
)

// callBefore runs call under a context, from ctx, with a deadline far
// ahead, and fails the test if the call returns only once its context is
// done, or not at all: a call that blocks (opening a named pipe, reading a
// huge file) would.
func callBefore(t *testing.T, ctx context.Context, name string, call func(context.Context) (string, error)) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := call(ctx)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		if ctx.Err() != nil && !errors.Is(r.err, context.Canceled) {
			t.Errorf("%s returned only when its context was done: %v", name, r.err)
		}
		return r.out, r.err
	case <-time.After(25 * time.Second):
		t.Fatalf("%s still blocked 5s past its deadline", name)
		return "", nil
	}
}

// TestSpecialFiles: named pipes, sockets and links to them are refused,
// promptly, without being opened; a search of their directory skips them.
func TestSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	pipe := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	// Should a call open the pipe anyway, a writer lets it go at the end.
	t.Cleanup(func() {
		if f, err := os.OpenFile(pipe, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	if err := os.Symlink("pipe", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("needle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := tools(t, dir, nil)
	run := func(tool string, input any) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) { return callCtx(t, ctx, ts[tool], input) }
	}
	tests := []struct {
		name    string
		call    func(context.Context) (string, error)
		want    string
		wantErr string
	}{
		{"read a pipe", run("read_file", map[string]any{"path": "pipe"}), "",
			`"pipe" is a named pipe (FIFO), not a regular file; only regular files are read or searched: not a regular file`},
		{"grep a pipe", run("grep", map[string]any{"pattern": "x", "path": "pipe"}), "",
			`"pipe" is a named pipe (FIFO), not a regular file; only regular files are read or searched: not a regular file`},
		{"grep a link to a pipe", run("grep", map[string]any{"pattern": "x", "path": "link"}), "",
			`"link" is a named pipe (FIFO), not a regular file; only regular files are read or searched: not a regular file`},
		{"read a socket", run("read_file", map[string]any{"path": "sock"}), "",
			`"sock" is a socket, not a regular file; only regular files are read or searched: not a regular file`},
		{"grep the directory", run("grep", map[string]any{"pattern": "needle"}), "a.txt:1: needle", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := callBefore(t, t.Context(), tt.name, tt.call)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, fstools.ErrNotRegular) || err.Error() != tt.wantErr {
					t.Errorf("got error %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHugeLine reads and searches a sparse file of 64 GiB that is one
// line: the calls stop at the line-length bound, with a note, long before
// their deadline. Calls whose context is done read nothing.
func TestHugeLine(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "huge.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Repeat("a", 16<<10)); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 30); err != nil {
		t.Skipf("this file system cannot hold a sparse file of 64 GiB: %v", err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(dir, "small.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := tools(t, dir, &fstools.Options{MaxLineLen: 10})
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		tool    string
		input   any
		want    string
		wantErr string
	}{
		{"read", t.Context(), "read_file", map[string]any{"path": "huge.txt"},
			"     1\taaaaaaaaaa …[line cut]\n[read_file: stopped in line 1, which is longer than 1048576 bytes, the most read_file reads of a line; the rest of the file cannot be read with read_file]", ""},
		{"read past it", t.Context(), "read_file", map[string]any{"path": "huge.txt", "offset": 2}, "",
			`"huge.txt": line 1 is longer than 1048576 bytes, the most read_file reads of a line; it cannot read past it`},
		{"grep", t.Context(), "grep", map[string]any{"pattern": "b", "path": "huge.txt"},
			"no line matches \"b\" in huge.txt\n[grep: stopped searching huge.txt (line 1): the line is longer than 1048576 bytes, the most grep reads of a line]", ""},
		{"grep the directory", t.Context(), "grep", map[string]any{"pattern": "two"},
			"small.txt:2: two\n[grep: stopped searching huge.txt (line 1): the line is longer than 1048576 bytes, the most grep reads of a line]", ""},
		{"read, canceled", canceled, "read_file", map[string]any{"path": "small.txt"}, "", `"small.txt": context canceled`},
		{"grep, canceled", canceled, "grep", map[string]any{"pattern": "two", "path": "small.txt"}, "", "context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := callBefore(t, tt.ctx, tt.name, func(ctx context.Context) (string, error) {
				return callCtx(t, ctx, ts[tt.tool], tt.input)
			})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("got error %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}
