package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A hostile or mistaken config file is refused with a usage error that
// names the file and what is wrong, before the server starts.
func TestServeConfigRefused(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, body, want string
	}{
		{"not JSON", `addr = "x"`, "not JSON"},
		{"not an object", `["addr"]`, "want one JSON object"},
		{"unknown key", `{"adress": "127.0.0.1:1"}`, `unknown setting "adress"`},
		{"config in config", `{"config": "other.json"}`, `unknown setting "config"`},
		{"key twice", `{"addr": "127.0.0.1:1", "addr": "0.0.0.0:80"}`, `"addr" is given twice`},
		{"object value", `{"addr": {"host": "x"}}`, "an object"},
		{"null", `{"db": null}`, "null is not a value"},
		{"array for one value", `{"addr": ["a", "b"]}`, "takes one value"},
		{"array of numbers", `{"require-approval": [1, 2]}`, "array of strings"},
		{"bad duration", `{"tool-timeout": "soon"}`, `"tool-timeout"`},
		{"bad number", `{"max-turns": "many"}`, `"max-turns"`},
		{"bad approve mode", `{"approve": "sometimes"}`, `"approve"`},
		{"bad temporal-worker", `{"temporal": "127.0.0.1:1", "temporal-worker": "maybe"}`, `"temporal-worker"`},
		{"text after", `{"addr": "127.0.0.1:1"} {}`, "text after"},
		{"cut short", `{"addr": "127.0.0.1:1"`, "not JSON"},
		{"too large", `{"system": "` + strings.Repeat("x", maxConfigBytes) + `"}`, "larger than"},
		{"non-loopback without tokens", `{"addr": "0.0.0.0:8080"}`, "not a loopback address"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "c"+string(rune('a'+i))+".json")
			if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			// A --script that does not exist fails the start, should the
			// file be taken for good.
			got := runCLI(t, noEnv, "", "serve", "--config", path, "--script", filepath.Join(dir, "no-script.jsonl"))
			if got.code != exitUsage || !strings.Contains(got.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", got.code, got.stderr, exitUsage, tt.want)
			}
			if strings.Contains(got.stdout, "listening") {
				t.Errorf("the server started: %s", got.stdout)
			}
		})
	}
	got := runCLI(t, noEnv, "", "serve", "--config", filepath.Join(dir, "missing.json"), "--script", filepath.Join(dir, "no-script.jsonl"))
	if got.code != exitUsage || !strings.Contains(got.stderr, "missing.json") {
		t.Errorf("a missing file: exit %d, stderr %q", got.code, got.stderr)
	}
}

// The settings of a config file are those of the flags, and a flag given
// on the command line overrides the file: the file's address would not
// listen, its approval rule and script make the run an interrupt.
func TestServeConfigFile(t *testing.T) {
	dir := t.TempDir()
	files := filepath.Join(dir, "files")
	os.Mkdir(files, 0o755)
	os.WriteFile(filepath.Join(files, "a.txt"), []byte("hello\n"), 0o644)
	script := filepath.Join(dir, "s.jsonl")
	os.WriteFile(script, []byte(`{"scene":"read a","content":[{"type":"tool_use","id":"call_a","name":"read_file","input":{"path":"a.txt"}}]}
{"content":[{"type":"text","text":"done"}]}
`), 0o644)
	config := filepath.Join(dir, "serve.json")
	body := `{"addr": "127.0.0.1:1", "db": "` + filepath.Join(dir, "serve.db") + `", "script": "` + script + `",
		"workdir": "` + files + `", "require-approval": ["read_file"], "max-turns": 5, "approval-ttl": "1h"}`
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	// startServe passes --addr 127.0.0.1:0, which overrides the file's.
	p := startServe(t, "--config", config)
	evs := postRun(t, p.url, map[string]any{"threadId": "t", "runId": "r1", "messages": []any{map[string]any{"id": "u1", "role": "user", "content": "read a"}}})
	outcome, _ := evs[len(evs)-1]["outcome"].(map[string]any)
	if outcome["type"] != "interrupt" {
		t.Fatalf("outcome %v, want an interrupt for read_file (the file's require-approval)", evs[len(evs)-1])
	}
	if _, err := os.Stat(filepath.Join(dir, "serve.db")); err != nil {
		t.Errorf("the file's db: %v", err)
	}
}
