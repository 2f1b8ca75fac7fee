package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestRunTwice runs the program as the README tells a reader to, each time
// in a process of its own on one store: the first suspends, the second
// approves and refunds, and the third, run again as a person might, finds
// the run finished, prints the answer and refunds nothing.
func TestRunTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the program")
	}
	bin := build(t)
	tests := []struct {
		name        string
		runs        [][]string // the flags of each process, in order
		wantLast    string     // the last process's output
		wantRefunds string     // refunds.log at the end
	}{
		{"allow, then again", [][]string{nil, {"-decide", "allow"}, {"-decide", "allow"}},
			"claude: Refunded order 42.\n", "42\n"},
		{"allow, then again without a decision", [][]string{nil, {"-decide", "allow"}, nil},
			"claude: Refunded order 42.\n", "42\n"},
		{"deny", [][]string{nil, {"-decide", "deny"}, {"-decide", "allow"}},
			"claude: I did not refund order 42: tool call denied: the person said no\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var out string
			for i, flags := range tt.runs {
				cmd := exec.Command(bin, append([]string{"-dir", dir}, flags...)...)
				cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no ANTHROPIC_API_KEY: the scripted model
				b, err := cmd.Output()
				if err != nil {
					t.Fatalf("process %d (%q): %v\n%s", i+1, flags, err, b)
				}
				out = string(b)
				if i == 0 && !strings.Contains(out, "awaiting approval: refund_order") {
					t.Fatalf("first process: output %q does not say refund_order awaits approval", out)
				}
			}
			if out != tt.wantLast {
				t.Errorf("last process printed %q, want %q", out, tt.wantLast)
			}
			b, err := os.ReadFile(filepath.Join(dir, "refunds.log"))
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if got := string(b); got != tt.wantRefunds {
				t.Errorf("refunds.log = %q, want %q", got, tt.wantRefunds)
			}
		})
	}
}

// TestNoDecision checks that a process started while a call awaits
// approval, without a decision, says what to give and runs nothing.
func TestNoDecision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the program")
	}
	bin := build(t)
	dir := t.TempDir()
	for i := range 2 {
		cmd := exec.Command(bin, "-dir", dir)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		b, err := cmd.CombinedOutput()
		if i == 0 && err != nil {
			t.Fatalf("first process: %v\n%s", err, b)
		}
		if i == 1 && (err == nil || !strings.Contains(string(b), "refund_order awaits approval: give -decide allow or -decide deny")) {
			t.Errorf("second process without -decide: %v, %q; want exit status 1 naming -decide", err, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "refunds.log")); !os.IsNotExist(err) {
		t.Errorf("refunds.log: %v; want no refund", err)
	}
}

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "approval")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
