package fstools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/fstools"
)

// tree makes a working directory "work" inside a parent that holds what
// must stay out of reach, and returns both.
//
//	parent/secret.txt
//	parent/outside/x.txt
//	parent/work/a.txt, sub/b.go, bin.dat, and symbolic links
func tree(t *testing.T) (work, parent string) {
	t.Helper()
	parent = t.TempDir()
	work = filepath.Join(parent, "work")
	files := map[string]string{
		"secret.txt":         "top secret\n",
		"outside/x.txt":      "outside\n",
		"work/a.txt":         "alpha\nbeta\ngamma\n",
		"work/sub/b.go":      "package sub\n\nfunc Beta() {}\n",
		"work/sub/deep/c.md": "# Beta\r\nwindows line\r\n",
		"work/bin.dat":       "\x00\x01\x02beta\x00",
		"work/empty.txt":     "",
	}
	for name, data := range files {
		p := filepath.Join(parent, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"work/link_out_file": "../secret.txt",
		"work/link_out_dir":  "../outside",
		"work/sub/link_up":   "../../secret.txt",
		"work/link_in_file":  "a.txt",
		"work/link_in_dir":   "sub",
		"work/link_abs_out":  filepath.Join(parent, "secret.txt"),
		"work/link_abs_in":   filepath.Join(work, "a.txt"),
		"work/link_dangling": "../nowhere.txt",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(parent, filepath.FromSlash(name))); err != nil {
			t.Skipf("symbolic links: %v", err)
		}
	}
	return work, parent
}

// tools opens dir and returns its tools by name.
func tools(t *testing.T, dir string, opts *fstools.Options) map[string]toolrun.Tool {
	t.Helper()
	root, err := fstools.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	m := map[string]toolrun.Tool{}
	for _, tl := range root.Tools() {
		m[tl.Name()] = tl
	}
	return m
}

// call runs the tool with input and returns its text or its error.
func call(t *testing.T, tool toolrun.Tool, input any) (string, error) {
	t.Helper()
	return callCtx(t, t.Context(), tool, input)
}

// callCtx is call with ctx.
func callCtx(t *testing.T, ctx context.Context, tool toolrun.Tool, input any) (string, error) {
	t.Helper()
	raw, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	content, err := tool.Run(ctx, raw)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, c := range content {
		parts = append(parts, c.OfText.Text)
	}
	return strings.Join(parts, ""), nil
}

func TestOutside(t *testing.T) {
	work, parent := tree(t)
	ts := tools(t, work, nil)
	paths := []struct {
		name    string
		path    string
		symlink bool
	}{
		{name: "dot dot", path: ".."},
		{name: "dot dot file", path: "../secret.txt"},
		{name: "into and out", path: "sub/../../secret.txt"},
		{name: "absolute outside", path: filepath.Join(parent, "secret.txt")},
		{name: "absolute parent", path: parent},
		{name: "absolute root", path: "/"},
		{name: "absolute with dot dot", path: filepath.Join(work, "..", "secret.txt")},
		{name: "symlink to a file outside", path: "link_out_file", symlink: true},
		{name: "symlink to a directory outside", path: "link_out_dir", symlink: true},
		{name: "through a symlink to a directory outside", path: "link_out_dir/x.txt", symlink: true},
		{name: "nested symlink up", path: "sub/link_up", symlink: true},
		{name: "absolute symlink outside", path: "link_abs_out", symlink: true},
		{name: "absolute symlink inside", path: "link_abs_in", symlink: true},
		{name: "dangling symlink outside", path: "link_dangling", symlink: true},
	}
	inputs := map[string]func(p string) any{
		"read_file":  func(p string) any { return map[string]any{"path": p} },
		"list_files": func(p string) any { return map[string]any{"path": p} },
		"grep":       func(p string) any { return map[string]any{"pattern": "secret|outside", "path": p} },
	}
	for _, tt := range paths {
		for tool, input := range inputs {
			t.Run(tt.name+"/"+tool, func(t *testing.T) {
				got, err := call(t, ts[tool], input(tt.path))
				if !errors.Is(err, fstools.ErrOutside) {
					t.Fatalf("got result %q, error %v; want an error wrapping ErrOutside", got, err)
				}
				var oe *fstools.OutsideError
				if !errors.As(err, &oe) || oe.Path != tt.path || oe.Symlink != tt.symlink {
					t.Errorf("got %#v, want an *OutsideError with Path %q and Symlink %v", err, tt.path, tt.symlink)
				}
				want := fmt.Sprintf("path %q is outside the working directory", tt.path)
				if !strings.HasPrefix(err.Error(), want) {
					t.Errorf("got error %q, want it to start with %q", err, want)
				}
				if strings.Contains(err.Error(), "top secret") {
					t.Errorf("the error shows the file outside: %q", err)
				}
			})
		}
	}
}

func TestInside(t *testing.T) {
	work, _ := tree(t)
	ts := tools(t, work, nil)
	tests := []struct {
		name  string
		tool  string
		input any
		want  string
	}{
		{
			name:  "read a file",
			tool:  "read_file",
			input: map[string]any{"path": "a.txt"},
			want:  "     1\talpha\n     2\tbeta\n     3\tgamma",
		},
		{
			name:  "read an absolute path inside",
			tool:  "read_file",
			input: map[string]any{"path": filepath.Join(work, "sub", "b.go")},
			want:  "     1\tpackage sub\n     2\t\n     3\tfunc Beta() {}",
		},
		{
			name:  "read through a symlink inside",
			tool:  "read_file",
			input: map[string]any{"path": "link_in_file"},
			want:  "     1\talpha\n     2\tbeta\n     3\tgamma",
		},
		{
			name:  "read through a symlinked directory inside",
			tool:  "read_file",
			input: map[string]any{"path": "link_in_dir/b.go", "offset": 3},
			want:  "     3\tfunc Beta() {}",
		},
		{
			name:  "dot dot that stays inside",
			tool:  "read_file",
			input: map[string]any{"path": "sub/../a.txt", "offset": 2, "limit": 1},
			want:  "     2\tbeta\n[read_file: stopped after line 2, at the limit of 1 line; the file goes on: read it with offset 3]",
		},
		{
			name:  "windows line endings",
			tool:  "read_file",
			input: map[string]any{"path": "sub/deep/c.md"},
			want:  "     1\t# Beta\n     2\twindows line",
		},
		{
			name:  "empty file",
			tool:  "read_file",
			input: map[string]any{"path": "empty.txt"},
			want:  "(empty file)",
		},
		{
			name:  "list the working directory",
			tool:  "list_files",
			input: map[string]any{},
			want: strings.Join([]string{
				"a.txt (17 bytes)",
				"bin.dat (8 bytes)",
				"empty.txt (0 bytes)",
				"link_abs_in -> " + filepath.Join(work, "a.txt") + " (symbolic link)",
				"link_abs_out -> " + filepath.Join(filepath.Dir(work), "secret.txt") + " (symbolic link)",
				"link_dangling -> ../nowhere.txt (symbolic link)",
				"link_in_dir -> sub (symbolic link)",
				"link_in_file -> a.txt (symbolic link)",
				"link_out_dir -> ../outside (symbolic link)",
				"link_out_file -> ../secret.txt (symbolic link)",
				"sub/",
			}, "\n"),
		},
		{
			name:  "list a tree",
			tool:  "list_files",
			input: map[string]any{"path": "sub", "recursive": true},
			want: strings.Join([]string{
				"sub/b.go (28 bytes)",
				"sub/deep/",
				"sub/deep/c.md (22 bytes)",
				"sub/link_up -> ../../secret.txt (symbolic link)",
			}, "\n"),
		},
		{
			name:  "list through a symlinked directory inside",
			tool:  "list_files",
			input: map[string]any{"path": "link_in_dir/deep"},
			want:  "link_in_dir/deep/c.md (22 bytes)",
		},
		{
			name:  "grep the tree, not following links, skipping binary files",
			tool:  "grep",
			input: map[string]any{"pattern": "beta", "ignore_case": true},
			want: strings.Join([]string{
				"a.txt:2: beta",
				"sub/b.go:3: func Beta() {}",
				"sub/deep/c.md:1: # Beta",
				"[grep: skipped 1 binary file]",
			}, "\n"),
		},
		{
			name:  "grep with a glob",
			tool:  "grep",
			input: map[string]any{"pattern": "Beta", "glob": "*.go"},
			want:  "sub/b.go:3: func Beta() {}",
		},
		{
			name:  "grep a file through a symlink inside",
			tool:  "grep",
			input: map[string]any{"pattern": "^g", "path": "link_in_file"},
			want:  "link_in_file:3: gamma",
		},
		{
			name:  "grep without a match",
			tool:  "grep",
			input: map[string]any{"pattern": "delta", "path": "sub"},
			want:  `no line matches "delta" in sub`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(t, ts[tt.tool], tt.input)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result differs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFailures(t *testing.T) {
	work, _ := tree(t)
	ts := tools(t, work, nil)
	tests := []struct {
		name    string
		tool    string
		input   any
		wantErr string
	}{
		{"binary file", "read_file", map[string]any{"path": "bin.dat"}, `"bin.dat" is a binary file (8 bytes); read_file reads text files only`},
		{"missing file", "read_file", map[string]any{"path": "nope.txt"}, `"nope.txt" does not exist in the working directory`},
		{"directory", "read_file", map[string]any{"path": "sub"}, `"sub" is a directory; list it with list_files`},
		{"offset past the end", "read_file", map[string]any{"path": "a.txt", "offset": 5}, `"a.txt" has 3 lines; offset 5 is past its end`},
		{"offset just past the end", "read_file", map[string]any{"path": "a.txt", "offset": 4}, `"a.txt" has 3 lines; offset 4 is past its end`},
		{"negative limit", "read_file", map[string]any{"path": "a.txt", "limit": -1}, "offset and limit must not be negative"},
		{"list a file", "list_files", map[string]any{"path": "a.txt"}, `"a.txt" is a file, not a directory; read it with read_file`},
		{"bad pattern", "grep", map[string]any{"pattern": "("}, "invalid pattern: error parsing regexp: missing closing ): `(`"},
		{"bad glob", "grep", map[string]any{"pattern": "a", "glob": "["}, `invalid glob "[": syntax error in pattern`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(t, ts[tt.tool], tt.input)
			if err == nil {
				t.Fatalf("got result %q, want error %q", got, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantErr, err.Error()); diff != "" {
				t.Errorf("error differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBounds checks that no call returns more than its bounds, however large
// the file or the tree.
func TestBounds(t *testing.T) {
	dir := t.TempDir()
	var big strings.Builder
	for i := 1; i <= 200_000; i++ {
		fmt.Fprintf(&big, "line %d of a large file\n", i)
	}
	files := map[string]string{
		"big.txt":      big.String(),                      // about 5 MB
		"oneline.txt":  strings.Repeat("x", 3<<20) + "\n", // one 3 MB line
		"late.bin":     strings.Repeat("text\n", 2000) + "\x00",
		"many/0.txt":   "",
		"nul_late.txt": strings.Repeat("a", 9000) + "\x00",
	}
	for i := range 30 {
		files[fmt.Sprintf("many/%02d.txt", i)] = "match\n"
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := &fstools.Options{MaxEntries: 10, MaxLines: 100, MaxBytes: 4096, MaxMatches: 20, MaxLineLen: 80}
	ts := tools(t, dir, opts)
	tests := []struct {
		name     string
		tool     string
		input    any
		maxBytes int
		wantEnd  string // the last line
		wantHas  string
	}{
		{
			name:     "lines",
			tool:     "read_file",
			input:    map[string]any{"path": "big.txt"},
			maxBytes: 4096 + 200,
			wantEnd:  "[read_file: stopped after line 100, at the limit of 100 lines; the file goes on: read it with offset 101]",
		},
		{
			name:     "limit above the bound",
			tool:     "read_file",
			input:    map[string]any{"path": "big.txt", "offset": 150_000, "limit": 5000},
			maxBytes: 4096 + 200,
			wantHas:  "150000\tline 150000 of a large file\n",
			wantEnd:  "[read_file: stopped after line 150099, at the limit of 100 lines; the file goes on: read it with offset 150100]",
		},
		{
			name:     "one long line",
			tool:     "read_file",
			input:    map[string]any{"path": "oneline.txt"},
			maxBytes: 400,
			wantHas:  "     1\t" + strings.Repeat("x", 80) + " …[line cut]\n",
			wantEnd:  "[read_file: stopped in line 1, which is longer than 1048576 bytes, the most read_file reads of a line; the rest of the file cannot be read with read_file]",
		},
		{
			name:     "a NUL past the sniffed start is text",
			tool:     "read_file",
			input:    map[string]any{"path": "late.bin", "offset": 2000, "limit": 1},
			maxBytes: 200,
			wantHas:  "  2000\ttext\n",
			wantEnd:  "[read_file: stopped after line 2000, at the limit of 1 line; the file goes on: read it with offset 2001]",
		},
		{
			name:     "matches",
			tool:     "grep",
			input:    map[string]any{"pattern": "match", "path": "many"},
			maxBytes: 4096 + 200,
			wantEnd:  "[grep: stopped at the limit of 20 matches; narrow the pattern, the path or the glob to see the rest]",
		},
		{
			name:     "grep bytes",
			tool:     "grep",
			input:    map[string]any{"pattern": "large", "path": "big.txt"},
			maxBytes: 4096 + 200,
			wantEnd:  "[grep: stopped at the limit of 20 matches; narrow the pattern, the path or the glob to see the rest]",
		},
		{
			name:     "grep a long line",
			tool:     "grep",
			input:    map[string]any{"pattern": "x", "path": "oneline.txt"},
			maxBytes: 400,
			wantHas:  "oneline.txt:1: " + strings.Repeat("x", 80) + " …[line cut]\n",
			wantEnd:  "[grep: stopped searching oneline.txt (line 1): the line is longer than 1048576 bytes, the most grep reads of a line]",
		},
		{
			name:     "entries",
			tool:     "list_files",
			input:    map[string]any{"recursive": true},
			maxBytes: 4096,
			wantEnd:  "[list_files: stopped at the limit of 10 entries; list a subdirectory to see the rest]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(t, ts[tt.tool], tt.input)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if len(got) > tt.maxBytes {
				t.Errorf("got %d bytes, want at most %d", len(got), tt.maxBytes)
			}
			lines := strings.Split(got, "\n")
			if end := lines[len(lines)-1]; end != tt.wantEnd {
				t.Errorf("last line %q, want %q", end, tt.wantEnd)
			}
			if !strings.Contains(got, tt.wantHas) {
				t.Errorf("result does not contain %q:\n%s", tt.wantHas, got)
			}
		})
	}
}

func TestGrepByteBound(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte(strings.Repeat("a match on a line\n", 500)), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := tools(t, dir, &fstools.Options{MaxMatches: 1000, MaxBytes: 1024})
	got, err := call(t, ts["grep"], map[string]any{"pattern": "match"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > 1024+200 {
		t.Errorf("got %d bytes, want about 1024", len(got))
	}
	lines := strings.Split(got, "\n")
	if got, want := lines[len(lines)-1], "[grep: stopped at the limit of 1024 bytes; narrow the pattern, the path or the glob to see the rest]"; got != want {
		t.Errorf("last line %q, want %q", got, want)
	}
}

// TestOutsideExample checks the path that the error of a path outside
// suggests: the given path without its way out where that exists inside,
// else an entry of the directory; never a path that is not there.
func TestOutsideExample(t *testing.T) {
	work, parent := tree(t)
	ts := tools(t, work, nil)
	tests := []struct {
		name, path, want string
	}{
		{"dot dot to a name inside", "../a.txt", "a.txt"},
		{"absolute, as if rooted at the directory", "/sub/b.go", "sub/b.go"},
		{"its last element", "../elsewhere/empty.txt", "empty.txt"},
		{"nothing like it inside", "../secret.txt", "a.txt"},
		{"absolute elsewhere", filepath.Join(parent, "outside", "x.txt"), "a.txt"},
		{"a symlink out, never itself", "link_out_file", "a.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, ts["read_file"], map[string]any{"path": tt.path})
			var oe *fstools.OutsideError
			if !errors.As(err, &oe) {
				t.Fatalf("got %v, want an *OutsideError", err)
			}
			if oe.Example != tt.want {
				t.Errorf("Example: got %q, want %q", oe.Example, tt.want)
			}
			if want := fmt.Sprintf(`such as "." or %q`, tt.want); !strings.HasSuffix(err.Error(), want) {
				t.Errorf("got error %q, want it to end with %q", err, want)
			}
		})
	}
	empty := t.TempDir()
	_, err := call(t, tools(t, empty, nil)["read_file"], map[string]any{"path": "../x"})
	if want := `such as "."`; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("in an empty directory: got %v, want it to end with %q", err, want)
	}
}
