package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clientsDir holds the Python, TypeScript and curl clients of the docs.
const clientsDir = "../../docs/clients"

// TestDocsClients runs each client of docs/clients twice in a row against
// toolrun serve, as a reader who copies it would: each asks, gets an
// interrupt, approves it and prints the answer, then shows the error body
// of a request that is not JSON. A client whose interpreter is missing is
// skipped, unless CI is set.
func TestDocsClients(t *testing.T) {
	p := startServe(t, "--db", filepath.Join(t.TempDir(), "serve.db"), "--script", filepath.Join(aguiDir, "scenes.jsonl"),
		"--workdir", filepath.Join(aguiDir, "files"), "--require-approval", "read_file")
	esbuild, _ := filepath.Abs(filepath.Join(copilotkitDir, "node_modules", ".bin", "esbuild"))
	tsOut := filepath.Join(t.TempDir(), "client.mjs")
	tests := []struct {
		name  string
		tools []string // what must be installed
		prep  []string // run once before
		cmd   []string
	}{
		{"python", []string{"python3"}, nil, []string{"python3", "client.py", p.url + "/"}},
		{"typescript", []string{"node", esbuild}, []string{esbuild, "client.ts", "--format=esm", "--outfile=" + tsOut, "--log-level=warning"}, []string{"node", tsOut, p.url + "/"}},
		{"curl", []string{"bash", "curl"}, nil, []string{"bash", "client.sh", p.url + "/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, tool := range tt.tools {
				if _, err := exec.LookPath(tool); err != nil {
					msg := "missing component: " + tool + " (" + err.Error() + "); the TypeScript client needs bash .ci/copilotkit.sh"
					if os.Getenv("CI") != "" {
						t.Fatal(msg + "; CI is set")
					}
					t.Skip(msg)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if tt.prep != nil {
				prep := exec.CommandContext(ctx, tt.prep[0], tt.prep[1:]...)
				prep.Dir = clientsDir
				if out, err := prep.CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", strings.Join(tt.prep, " "), err, out)
				}
			}
			for i := 1; i <= 2; i++ {
				cmd := exec.CommandContext(ctx, tt.cmd[0], tt.cmd[1:]...)
				cmd.Dir = clientsDir
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("run %d: %v\n%s", i, err, out)
				}
				for _, want := range []string{"it says hello", `"error"`} {
					if !strings.Contains(string(out), want) {
						t.Errorf("run %d: the output has no %q:\n%s", i, want, out)
					}
				}
			}
		})
	}
}
