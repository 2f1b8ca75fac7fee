package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestDemoNextCommandWorks runs the demo's binary as a newcomer may have
// it: on the PATH, off it, and built by "go run" in the clone. The command
// the demo prints to see its transcript names the program as it can be
// run, and, run as printed, writes the report.
func TestDemoNextCommandWorks(t *testing.T) {
	toolrunBin, _ := binaries(t)
	goBuild := filepath.Join(t.TempDir(), "go-build1234", "b001", "exe")
	if err := os.MkdirAll(goBuild, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(toolrunBin)
	if err != nil {
		t.Fatal(err)
	}
	goRunBin := filepath.Join(goBuild, "toolrun")
	if err := os.WriteFile(goRunBin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	offPath := "PATH=" + filepath.Dir(mustLookPath(t, "go")) + string(os.PathListSeparator) + "/usr/bin:/bin"
	tests := []struct {
		name string
		bin  string
		dir  string
		env  []string
		want string // how the printed command names toolrun
		run  bool   // run the printed command
	}{
		{"on the PATH", toolrunBin, "", nil, "toolrun", true},
		{"off the PATH", toolrunBin, "", []string{offPath}, shellQuote(toolrunBin), true},
		{"go run in the clone", goRunBin, root, []string{offPath}, "go run ./cmd/toolrun", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir
			if dir == "" {
				dir = t.TempDir()
			}
			tmp := t.TempDir()
			cmd := exec.CommandContext(t.Context(), tt.bin, "demo", "--yes")
			cmd.Dir = dir
			cmd.Env = append(append(os.Environ(), "TMPDIR="+tmp), tt.env...)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("demo: %v; stdout:\n%s", err, out)
			}
			m := regexp.MustCompile(`(?m)^see it with: (.+) view (\S+) -o report\.html \(or replay it: (.+) replay \S+\)$`).FindStringSubmatch(string(out))
			if m == nil {
				t.Fatalf("demo printed no command to see the run; stdout:\n%s", out)
			}
			if m[1] != tt.want || m[3] != tt.want {
				t.Errorf("demo names toolrun %q and %q, want %q", m[1], m[3], tt.want)
			}
			if !tt.run {
				return
			}
			report := filepath.Join(tmp, "report.html")
			view := exec.CommandContext(t.Context(), "sh", "-c", m[1]+" view "+m[2]+" -o "+shellQuote(report))
			view.Dir = dir
			view.Env = cmd.Env
			if b, err := view.CombinedOutput(); err != nil {
				t.Fatalf("the printed command failed: %v\n%s", err, b)
			}
			if _, err := os.Stat(report); err != nil {
				t.Errorf("the printed command wrote no report: %v", err)
			}
		})
	}
}

func mustLookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSelfCommandTestBinary: a program not named toolrun (this test
// binary) is called toolrun.
func TestSelfCommandTestBinary(t *testing.T) {
	if got := selfCommand(); got != "toolrun" {
		t.Errorf("selfCommand() = %q in a test binary, want toolrun", got)
	}
}
