package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolrun/toolrun/mcptool"
)

// TestMCPEnv runs "toolrun run" with an MCP server whose shell writes its
// environment to a file before it becomes the server: it has the
// library's allow-list (mcptool.DefaultEnv, LC_*, XDG_*) and the
// variables --mcp-env names or sets, and nothing else of toolrun's
// environment.
func TestMCPEnv(t *testing.T) {
	_, crash := binaries(t)
	dir := t.TempDir()
	envFile := filepath.Join(dir, "env.txt")
	script := writeScript(t, dir, textReply("Done."))
	got, _ := bin{
		dir: dir,
		env: []string{
			"OLDPWD=/somewhere", "PIP_INDEX_URL=https://pypi.example/simple", "CONTAINER_NAME=box", "SERVICE_TOKEN=svc",
			"GITHUB_PERSONAL_ACCESS_TOKEN=gh-value", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "HOME=" + dir, "ANTHROPIC_API_KEY=sk-not-for-the-server",
		},
		args: []string{"run", "--script", script, "--approve", "auto",
			"--mcp", "crash=sh -c 'env > " + envFile + "; exec " + crash + "'",
			"--mcp-env", "GITHUB_PERSONAL_ACCESS_TOKEN", "--mcp-env", "EXTRA=set here", "hi"},
	}.run(t)
	if got.code != exitOK {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", got.code, got.stderr)
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, value, _ := strings.Cut(line, "=")
		env[name] = value
	}
	for name, value := range map[string]string{
		"GITHUB_PERSONAL_ACCESS_TOKEN": "gh-value",
		"EXTRA":                        "set here",
		"LANG":                         "C.UTF-8",
		"LC_ALL":                       "C.UTF-8",
		"HOME":                         dir,
		"PATH":                         os.Getenv("PATH"),
	} {
		if env[name] != value {
			t.Errorf("the server's %s: got %q, want %q", name, env[name], value)
		}
	}
	for name := range env {
		switch {
		case slices.Contains(mcptool.DefaultEnv, name), strings.HasPrefix(name, "LC_"), strings.HasPrefix(name, "XDG_"):
		case name == "GITHUB_PERSONAL_ACCESS_TOKEN", name == "EXTRA":
		case name == "PWD", name == "SHLVL", name == "_": // the shell's own
		default:
			t.Errorf("the server has %s=%s, which is neither allowed by default nor named by --mcp-env", name, env[name])
		}
	}
}

// TestMCPEnvFlag checks the values --mcp-env takes, and that a saved run
// keeps their names and never a value.
func TestMCPEnvFlag(t *testing.T) {
	var e mcpEnv
	for _, v := range []string{"TOKEN", "A_B=c=d", "X="} {
		if err := e.Set(v); err != nil {
			t.Errorf("Set(%q) = %v, want nil", v, err)
		}
	}
	for _, v := range []string{"", "=v", "1A", "A-B=c", "A B"} {
		if err := e.Set(v); err == nil {
			t.Errorf("Set(%q) = nil, want an error", v)
		}
	}
	pass, set := e.options()
	if !slices.Equal(pass, []string{"TOKEN"}) || !slices.Equal(set, []string{"A_B=c=d", "X="}) {
		t.Errorf("options() = %q, %q; want [TOKEN], [A_B=c=d X=]", pass, set)
	}
	b, err := e.MarshalJSON()
	if err != nil || string(b) != `["TOKEN","A_B","X"]` {
		t.Errorf("MarshalJSON() = %s, %v; want the names only", b, err)
	}
}

// TestRunHelpNamesEnv checks that "toolrun run --help" names every
// variable an MCP server gets by default, as the library lists them.
func TestRunHelpNamesEnv(t *testing.T) {
	got := runCLI(t, func(string) string { return "" }, "", "run", "--help")
	for _, name := range mcptool.DefaultEnv {
		if !strings.Contains(got.stdout+got.stderr, name) {
			t.Errorf("the help of run does not name %s", name)
		}
	}
}

// TestMCPCollision runs "toolrun run" with two servers whose tools would
// have one name once prefixed, "a" + "b__echo" and "a__b" + "echo": the
// run is refused with an error naming both, and nothing panics.
func TestMCPCollision(t *testing.T) {
	_, crash := binaries(t)
	dir := t.TempDir()
	script := writeScript(t, dir, textReply("never sent"))
	got, _ := bin{dir: dir, args: []string{"run", "--script", script, "--approve", "auto",
		"--mcp", "a=" + crash + " -alias b__echo", "--mcp", "a__b=" + crash, "hi"}}.run(t)
	if got.code != exitError {
		t.Errorf("exit status %d, want %d; stderr:\n%s", got.code, exitError, got.stderr)
	}
	want := `tool "b__echo" of MCP server "a" and tool "echo" of MCP server "a__b" would both be named "a__b__echo"`
	if !strings.Contains(got.stderr, want) || strings.Contains(got.stderr, "panic") || got.stdout != "" {
		t.Errorf("stderr does not say %q, or the run started; stderr:\n%s\nstdout:\n%s", want, got.stderr, got.stdout)
	}
}
