package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/mcptool"
)

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

// mcpFlags are the flags that say how toolrun starts and reaches the MCP
// servers of --mcp and --mcp-url. They travel in a transcript's header and
// a saved run with the other tool flags, but for the values of --mcp-env,
// of which only the names are written (see mcpEnv).
type mcpFlags struct {
	MCPEnv     mcpEnv        `json:"mcp_env,omitempty"`
	MCPTimeout time.Duration `json:"mcp_timeout,omitempty"`
}

// defineMCP defines the flags of f on fs.
func (f *mcpFlags) defineMCP(fs *flag.FlagSet) {
	fs.Var(&f.MCPEnv, "mcp-env", "give the MCP servers of --mcp the variable `NAME` of this environment, or set NAME=VALUE (repeatable); else they get only the variables that \"toolrun help run\" lists")
	fs.DurationVar(&f.MCPTimeout, "mcp-timeout", mcpConnectTimeout, "give each MCP server `duration` to start, answer and list its tools")
}

// mcpConnectTimeout is the default of --mcp-timeout.
const mcpConnectTimeout = 30 * time.Second

// envNameRE is what a variable named with --mcp-env may be called.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// mcpEnv are the --mcp-env values: NAME, passed from this process's
// environment, or NAME=VALUE, set.
type mcpEnv []string

func (e *mcpEnv) String() string {
	if e == nil {
		return ""
	}
	return strings.Join(e.names(), ", ")
}

func (e *mcpEnv) Set(v string) error {
	name, _, _ := strings.Cut(v, "=")
	if !envNameRE.MatchString(name) {
		return fmt.Errorf("want NAME or NAME=VALUE, with a NAME of letters, digits and '_'")
	}
	*e = append(*e, v)
	return nil
}

// names returns the names of e, each once.
func (e mcpEnv) names() []string {
	var out []string
	for _, v := range e {
		name, _, _ := strings.Cut(v, "=")
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// MarshalJSON writes the names of e and never a value: a value given on
// the command line, a token most often, does not belong in a file. A
// resume or replay passes the variables it names from its own
// environment.
func (e mcpEnv) MarshalJSON() ([]byte, error) { return json.Marshal(e.names()) }

// options splits e into the options' PassEnv (the names) and Env (the
// NAME=VALUE settings).
func (e mcpEnv) options() (pass, set []string) {
	for _, v := range e {
		if strings.Contains(v, "=") {
			set = append(set, v)
		} else {
			pass = append(pass, v)
		}
	}
	return pass, set
}

// errMCPTimeout is the cause of a connection cut short by --mcp-timeout.
var errMCPTimeout = errors.New("--mcp-timeout")

// connectMCP connects to the servers of specs, as f says, and returns them
// and their tools, each configured with configFor(its server's name). Each
// server has f's timeout to start, initialize and list its tools. Tools of
// two servers that would have the same name are an error: the set is
// refused, as a run with one tool in the place of another would mislead
// the model. On an error it closes the servers it connected; the error
// wraps ctx's error if ctx ended.
func connectMCP(ctx context.Context, specs []mcpSpec, f mcpFlags, configFor func(server string) toolrun.ToolConfig, log *slog.Logger) ([]*mcptool.Server, [][]toolrun.Tool, error) {
	var servers []*mcptool.Server
	var tools [][]toolrun.Tool
	fail := func(err error) ([]*mcptool.Server, [][]toolrun.Tool, error) {
		for _, s := range servers {
			s.Close()
		}
		return nil, nil, err
	}
	timeout := f.MCPTimeout
	if timeout <= 0 {
		timeout = mcpConnectTimeout
	}
	pass, set := f.MCPEnv.options()
	var all []toolrun.Tool
	for _, spec := range specs {
		dial := mcptool.StreamableHTTP(spec.url)
		if spec.url == "" {
			dial = mcptool.Command(spec.argv[0], spec.argv[1:]...)
		}
		cctx, cancel := context.WithTimeoutCause(ctx, timeout, errMCPTimeout)
		why := func(err error) error {
			switch {
			case ctx.Err() != nil:
				return fmt.Errorf("%s: interrupted while it started: %w", spec, ctx.Err())
			case context.Cause(cctx) == errMCPTimeout:
				return fmt.Errorf("%s: did not start, answer and list its tools within %s; give it longer with --mcp-timeout", spec, timeout)
			}
			return fmt.Errorf("%s: %w", spec, err)
		}
		srv, err := mcptool.Connect(cctx, spec.name, dial, &mcptool.Options{Logger: log, Config: configFor(spec.name), PassEnv: pass, Env: set})
		if err != nil {
			err = why(err)
			cancel()
			return fail(err)
		}
		servers = append(servers, srv)
		list, err := srv.Tools(cctx)
		if err != nil {
			err = why(fmt.Errorf("listing its tools: %w", err))
			cancel()
			return fail(err)
		}
		cancel()
		tools = append(tools, list)
		all = append(all, list...)
	}
	if err := mcptool.CheckNames(all); err != nil {
		return fail(fmt.Errorf("tools of two servers would have one name, so none is started: %w", err))
	}
	return servers, tools, nil
}
