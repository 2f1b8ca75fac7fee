package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
)

// sandbox returns a directory the model may write in, inside a parent that
// the test also owns, so writes that escape land where the test can see.
func sandbox(t *testing.T) (dir, parent string) {
	t.Helper()
	parent = t.TempDir()
	dir = filepath.Join(parent, "sandbox")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, parent
}

func TestRun(t *testing.T) {
	dir, parent := sandbox(t)
	var out, errOut bytes.Buffer
	res, err := run(t.Context(), &out, &errOut, dir, false)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if got, want := res.StopReason, toolrun.StopEndTurn; got != want {
		t.Errorf("StopReason = %q, want %q", got, want)
	}

	got, err := os.ReadFile(filepath.Join(dir, "notes", "plan.txt"))
	if err != nil {
		t.Fatalf("the allowed write: %v", err)
	}
	if want := "1. tag v1.4.1\n2. publish\n"; string(got) != want {
		t.Errorf("notes/plan.txt = %q, want %q", got, want)
	}
	// Nothing was written outside: the parent holds the sandbox alone.
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"sandbox"}, names); diff != "" {
		t.Errorf("files beside the sandbox (-want +got):\n%s", diff)
	}

	// The model was told which writes were denied, and why.
	type outcome struct {
		ID      string
		IsError bool
		Denied  bool
	}
	var outcomes []outcome
	for _, m := range res.Messages {
		if m.OfUser == nil {
			continue
		}
		for _, b := range m.OfUser.Content {
			if tr := b.OfToolResult; tr != nil {
				var text strings.Builder
				for _, c := range tr.Content {
					if c.OfText != nil {
						text.WriteString(c.OfText.Text)
					}
				}
				outcomes = append(outcomes, outcome{tr.ToolUseID, tr.IsError.Value,
					strings.Contains(text.String(), "outside the directory the model may write in")})
			}
		}
	}
	want := []outcome{{"toolu_01", false, false}, {"toolu_02", true, true}, {"toolu_03", true, true}}
	if diff := cmp.Diff(want, outcomes); diff != "" {
		t.Errorf("tool results (-want +got):\n%s", diff)
	}
}

func TestInside(t *testing.T) {
	dir, parent := sandbox(t)
	mustMkdir(t, filepath.Join(dir, "sub"))
	// Links inside the sandbox: one that stays in, two that lead out.
	mustSymlink(t, filepath.Join(dir, "sub"), filepath.Join(dir, "in-link"))
	mustSymlink(t, parent, filepath.Join(dir, "out-link"))
	mustSymlink(t, filepath.Join(parent, "secret.txt"), filepath.Join(dir, "file-link"))
	mustSymlink(t, filepath.Join(parent, "nothing"), filepath.Join(dir, "dangling-dir-link"))
	mustSymlink(t, "loop-b", filepath.Join(dir, "loop-a"))
	mustSymlink(t, "loop-a", filepath.Join(dir, "loop-b"))

	tests := []struct {
		name    string
		path    string
		want    string // the path relative to dir, when allowed
		outside bool   // refused as outside dir
		refused bool   // refused for another reason
	}{
		{name: "file", path: "plan.txt", want: "plan.txt"},
		{name: "new directories", path: "a/b/c.txt", want: filepath.Join("a", "b", "c.txt")},
		{name: "dot dot that stays in", path: "sub/../plan.txt", want: "plan.txt"},
		{name: "absolute inside", path: filepath.Join(dir, "sub", "x.txt"), want: filepath.Join("sub", "x.txt")},
		{name: "link that stays in", path: "in-link/x.txt", want: filepath.Join("sub", "x.txt")},
		{name: "dot dot", path: "../plan.txt", outside: true},
		{name: "dot dot deep", path: "sub/../../plan.txt", outside: true},
		{name: "absolute elsewhere", path: filepath.Join(parent, "plan.txt"), outside: true},
		{name: "root", path: string(filepath.Separator), outside: true},
		{name: "link to a directory outside", path: "out-link/plan.txt", outside: true},
		{name: "link to a file outside", path: "file-link", outside: true},
		{name: "link to a directory outside that does not exist", path: "dangling-dir-link/x.txt", outside: true},
		{name: "link loop", path: "loop-a/x.txt", refused: true},
		{name: "empty", path: "", refused: true},
		{name: "the directory itself", path: ".", refused: true},
		{name: "prefix of another directory", path: filepath.Join(parent, "sandbox2", "x.txt"), outside: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := inside(dir, tt.path)
			if tt.outside {
				if !errors.Is(err, errOutside) {
					t.Errorf("inside(%q) = %q, %v; want an error wrapping errOutside", tt.path, got, err)
				}
				return
			}
			if tt.refused {
				if err == nil || errors.Is(err, errOutside) {
					t.Errorf("inside(%q) = %q, %v; want an error other than errOutside", tt.path, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("inside(%q) = %q, %v; want %q, nil", tt.path, got, err, tt.want)
			}
		})
	}
}

// TestToolRefusesOutside checks that the tool holds the line on its own,
// should a policy let a call through.
func TestToolRefusesOutside(t *testing.T) {
	dir, parent := sandbox(t)
	input, err := json.Marshal(writeIn{Path: "../escaped.txt", Content: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeFileTool(dir).Run(t.Context(), input); !errors.Is(err, errOutside) {
		t.Errorf("Run: got error %v, want one wrapping errOutside", err)
	}
	if _, err := os.Stat(filepath.Join(parent, "escaped.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of the file outside: got %v, want it not to exist", err)
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks not available: %v", err)
	}
}
