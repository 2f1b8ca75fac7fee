package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProgram builds the program the README shows first and runs it as a
// newcomer would, in a process of its own, with no key and no network.
func TestProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the program")
	}
	bin := filepath.Join(t.TempDir(), "quickstart")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{"PATH=/usr/bin:/bin"} // no ANTHROPIC_API_KEY, nothing else
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out)
	}
	want := "It is sunny in Paris, 21°C.\nstopped: end_turn after 2 turns; tool calls: 1, failed: 0\n"
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
