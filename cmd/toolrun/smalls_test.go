package main

import (
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"
)

// TestScriptErrors parses script lines of the wrong shape: each error says
// what the script format wants, and none names a Go type.
func TestScriptErrors(t *testing.T) {
	tests := []struct {
		name string
		line string
		want string
	}{
		{"array", `[{"type":"text","text":"hi"}]`, `line 1: want a reply, a JSON object such as {"content": [{"type": "text", "text": "Hi."}]}, got a JSON array`},
		{"string", `"hi"`, `line 1: want a reply, a JSON object such as {"content": [{"type": "text", "text": "Hi."}]}, got a JSON string`},
		{"content a string", `{"content":"hi"}`, `line 1: "content": want an array of content blocks, got a JSON string`},
		{"usage a number", `{"content":[{"type":"text","text":"hi"}],"usage":3}`, `line 1: "usage": want an object such as {"input_tokens": 10, "output_tokens": 5}, got a JSON number`},
		{"tokens a string", `{"content":[{"type":"text","text":"hi"}],"usage":{"output_tokens":"5"}}`, `line 1: "usage.output_tokens": want a whole number, got a JSON string`},
		{"no content", `{}`, `line 1: want a reply with "content", an array of content blocks`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseScript(strings.NewReader(tt.line + "\n"))
			if err == nil {
				t.Fatalf("parseScript(%s): no error, want %q", tt.line, tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("parseScript(%s): got %q, want %q", tt.line, got, tt.want)
			}
			if strings.Contains(err.Error(), "main.") || strings.Contains(err.Error(), "Go ") {
				t.Errorf("the error names a Go type: %v", err)
			}
		})
	}
}

// TestPackageDocListsCommands checks that the package doc of cmd/toolrun
// lists every command, help included, each with its summary.
func TestPackageDocListsCommands(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	for _, cmd := range append(commands, &command{name: "help", summary: "show help for toolrun or one of its commands"}) {
		if !regexp.MustCompile(`(?m)^\s+` + cmd.name + `\s+` + regexp.QuoteMeta(cmd.summary) + `$`).MatchString(doc) {
			t.Errorf("the package doc does not list %q with its summary %q; doc:\n%s", cmd.name, cmd.summary, doc)
		}
	}
}

// TestHelpFlagsTwoDashes checks that each command's help writes its flags
// with two dashes, as the docs do.
func TestHelpFlagsTwoDashes(t *testing.T) {
	for _, cmd := range commands {
		got := runCLI(t, noEnv, "", cmd.name, "--help")
		_, flags, ok := strings.Cut(got.stdout, "\nflags:\n")
		if !ok {
			continue
		}
		flags, _, _ = strings.Cut(flags, "\nexit status:")
		for _, line := range strings.Split(flags, "\n") {
			if strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "  --") {
				t.Errorf("toolrun %s --help: flag line %q has one dash, want two", cmd.name, line)
			}
		}
	}
}
