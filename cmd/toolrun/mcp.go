package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/mcptool"
)

// mcpConnectTimeout bounds the start and handshake of each MCP server.
const mcpConnectTimeout = 30 * time.Second

// mcpSpec is one MCP server of the command line: a command (--mcp) or a URL
// (--mcp-url), with the name that prefixes its tools.
type mcpSpec struct {
	name string
	argv []string // for a command
	url  string   // for a URL
}

func (s mcpSpec) String() string {
	if s.url != "" {
		return s.url
	}
	return strings.Join(s.argv, " ")
}

// listFlag is a flag that may be given more than once.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ", ") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// serverNameRE is what a server name given with "name=" may hold: the
// characters of a tool name.
var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// splitName splits "name=rest" into its name and the rest; s without a
// name is all rest.
func splitName(s string) (name, rest string) {
	if i := strings.IndexByte(s, '='); i > 0 && serverNameRE.MatchString(s[:i]) {
		return s[:i], s[i+1:]
	}
	return "", s
}

// parseMCPSpecs parses the --mcp and --mcp-url values. Each server's name
// is the one given as "name=", else the command's base name or the URL's
// host; two servers may not share a name, as it prefixes their tools.
func parseMCPSpecs(commands, urls []string) ([]mcpSpec, error) {
	var specs []mcpSpec
	for _, v := range commands {
		name, rest := splitName(v)
		argv, err := splitArgs(rest)
		if err != nil {
			return nil, fmt.Errorf("--mcp %q: %w", v, err)
		}
		if len(argv) == 0 {
			return nil, fmt.Errorf("--mcp %q: no command", v)
		}
		if name == "" {
			name = strings.TrimSuffix(filepath.Base(argv[0]), filepath.Ext(argv[0]))
		}
		specs = append(specs, mcpSpec{name: name, argv: argv})
	}
	for _, v := range urls {
		name, rest := splitName(v)
		u, err := url.Parse(rest)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--mcp-url %q: want an http:// or https:// URL", v)
		}
		if name == "" {
			name = u.Hostname()
		}
		specs = append(specs, mcpSpec{name: name, url: rest})
	}
	seen := map[string]bool{}
	for _, s := range specs {
		key := mcptool.ToolName(s.name, "")
		if seen[key] {
			return nil, fmt.Errorf("two MCP servers are named %q; name them apart with name=, as in --mcp \"docs=%s\"", s.name, s)
		}
		seen[key] = true
	}
	return specs, nil
}

// splitArgs splits a command line into its words as a POSIX shell would,
// with single and double quotes and backslashes, but no expansions.
func splitArgs(s string) ([]string, error) {
	var args []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				args = append(args, word.String())
				word.Reset()
				inWord = false
			}
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated ' quote")
			}
			word.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
				}
				word.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, errors.New(`unterminated " quote`)
			}
			inWord = true
		case ch == '\\':
			if i+1 == len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			word.WriteByte(s[i])
			inWord = true
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		args = append(args, word.String())
	}
	return args, nil
}

// secretEnv are the variables an MCP server started by toolrun does not
// inherit: it is other people's code, and needs no Anthropic credentials.
var secretEnv = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"}

// commandDial starts argv for each connection, with the environment of
// this process less secretEnv.
func commandDial(argv []string) mcptool.Dial {
	return func(context.Context) (mcp.Transport, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		for _, kv := range os.Environ() {
			name, _, _ := strings.Cut(kv, "=")
			secret := false
			for _, s := range secretEnv {
				secret = secret || name == s
			}
			if !secret {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		return &mcp.CommandTransport{Command: cmd}, nil
	}
}

// connectMCP connects to the servers of specs and returns them and their
// tools, each configured with configFor(its server's name). On an error it
// closes the servers it connected.
func connectMCP(ctx context.Context, specs []mcpSpec, configFor func(server string) toolrun.ToolConfig, log *slog.Logger) ([]*mcptool.Server, [][]toolrun.Tool, error) {
	var servers []*mcptool.Server
	var tools [][]toolrun.Tool
	fail := func(err error) ([]*mcptool.Server, [][]toolrun.Tool, error) {
		for _, s := range servers {
			s.Close()
		}
		return nil, nil, err
	}
	for _, spec := range specs {
		dial := mcptool.StreamableHTTP(spec.url)
		if spec.url == "" {
			dial = commandDial(spec.argv)
		}
		cctx, cancel := context.WithTimeout(ctx, mcpConnectTimeout)
		srv, err := mcptool.Connect(cctx, spec.name, dial, &mcptool.Options{Logger: log, Config: configFor(spec.name)})
		if err != nil {
			cancel()
			return fail(fmt.Errorf("%s: %w", spec, err))
		}
		servers = append(servers, srv)
		list, err := srv.Tools(cctx)
		cancel()
		if err != nil {
			return fail(fmt.Errorf("%s: listing its tools: %w", spec, err))
		}
		tools = append(tools, list)
	}
	return servers, tools, nil
}
