// Command policy shows a tool policy with toolrun: a write_file tool whose
// ToolConfig.Policy denies every write outside one directory, before the
// tool runs. The model is told why a write was denied, and the run goes on.
//
// The policy cleans the path, resolves the symbolic links of the part of it
// that exists, and denies ".." escapes, absolute paths elsewhere and links
// that lead out. The tool then writes through an os.Root, which the kernel
// holds to the directory, so a link swapped in after the decision cannot
// lead out either.
//
// Without ANTHROPIC_API_KEY the model is a scripted one on a local fake
// server that tries one allowed and two disallowed writes, so the example
// runs offline; with it, the same tool and prompt go to the Anthropic API.
//
//	go run ./examples/policy                 # in a temporary directory
//	go run ./examples/policy -dir ./sandbox  # in ./sandbox
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

func main() {
	dir := flag.String("dir", "", "the `directory` the model may write in (default: a new temporary one)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *dir == "" {
		tmp, err := os.MkdirTemp("", "toolrun-policy-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "policy:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(tmp)
		*dir = filepath.Join(tmp, "sandbox")
		if err := os.Mkdir(*dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "policy:", err)
			os.Exit(1)
		}
	}
	live := os.Getenv("ANTHROPIC_API_KEY") != ""
	res, err := run(ctx, os.Stdout, os.Stderr, *dir, live)
	if err != nil {
		fmt.Fprintln(os.Stderr, "policy:", err)
		stop()
		os.Exit(1)
	}
	if res.StopReason != toolrun.StopEndTurn {
		stop()
		os.Exit(1)
	}
}

type writeIn struct {
	Path    string `json:"path" jsonschema:"where to write, relative to the working directory"`
	Content string `json:"content" jsonschema:"the text to write"`
}

// errOutside is why a path is refused.
var errOutside = errors.New("outside the directory the model may write in")

// inside returns the path, relative to dir, that p names, or an error
// wrapping errOutside if p is outside dir. A relative p is taken relative to
// dir; an absolute one must lead into it. Symbolic links are resolved as far
// as the path exists, so a link inside dir that leads out is caught.
func inside(dir, p string) (string, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return "", err
	}
	if p == "" {
		return "", errors.New("empty path")
	}
	target := filepath.Clean(p)
	if !filepath.IsAbs(target) {
		target = filepath.Join(root, target)
	}
	resolved, err := resolveExisting(target)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, resolved)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%s is %w (%s)", p, errOutside, dir)
	}
	if rel == "." {
		return "", fmt.Errorf("%s is the directory itself, not a file in it", p)
	}
	return rel, nil
}

// resolveExisting resolves the symbolic links of the longest part of the
// absolute, clean path p that exists, and appends the rest unchanged. A
// link whose target does not exist is followed too, since writing through
// it would create the target.
func resolveExisting(p string) (string, error) {
	var rest []string
	for hops := 0; ; {
		resolved, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{resolved}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if hops++; hops > maxLinks {
				return "", fmt.Errorf("%s: too many links", p)
			}
			target, err := os.Readlink(p)
			if err != nil {
				return "", err
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(p), target)
			}
			p = filepath.Clean(target)
			continue
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// maxLinks bounds the dangling links resolveExisting follows in a row, as
// the kernel bounds the links of a path.
const maxLinks = 40

// writeFileTool returns the write_file tool for dir, with its policy.
func writeFileTool(dir string) *toolrun.FuncTool {
	t := toolrun.NewTool("write_file", fmt.Sprintf("Writes a text file in %s.", dir),
		func(ctx context.Context, in writeIn) (string, error) {
			rel, err := inside(dir, in.Path)
			if err != nil {
				return "", err
			}
			root, err := os.OpenRoot(dir)
			if err != nil {
				return "", err
			}
			defer root.Close()
			if err := root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
				return "", err
			}
			if err := root.WriteFile(rel, []byte(in.Content), 0o644); err != nil {
				return "", err
			}
			return fmt.Sprintf("wrote %d bytes to %s", len(in.Content), rel), nil
		})
	t.Policy = policy.Func(func(ctx context.Context, in writeIn) toolrun.Decision {
		if _, err := inside(dir, in.Path); err != nil {
			return policy.Deny(err.Error())
		}
		return toolrun.Decision{}
	})
	return t
}

// outsidePath is an absolute path outside dir, beside it.
func outsidePath(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return filepath.Join(filepath.Dir(abs), "copy.txt")
}

func prompt(dir string) string {
	return fmt.Sprintf("Save the release plan to notes/plan.txt, and copies to ../plan.txt and %s.", outsidePath(dir))
}

// script is the model's side of the offline run: one write inside dir, one
// that climbs out with "..", one to an absolute path elsewhere.
func script(dir string) []toolruntest.Reply {
	plan := "1. tag v1.4.1\n2. publish\n"
	return []toolruntest.Reply{
		toolruntest.Message(
			toolruntest.Text("Writing the plan and its copies."),
			toolruntest.ToolUse("toolu_01", "write_file", writeIn{Path: "notes/plan.txt", Content: plan}),
			toolruntest.ToolUse("toolu_02", "write_file", writeIn{Path: "../plan.txt", Content: plan}),
			toolruntest.ToolUse("toolu_03", "write_file", writeIn{Path: outsidePath(dir), Content: plan}),
		),
		toolruntest.Message(toolruntest.Text("I saved notes/plan.txt. The copies were refused: they fall outside the directory I may write in.")),
	}
}

// run runs the example with dir as the directory the model may write in.
// Without live, the model is the offline script.
func run(ctx context.Context, out, errOut io.Writer, dir string, live bool) (*toolrun.Result, error) {
	var client anthropic.Client
	if live {
		client = anthropic.NewClient() // reads ANTHROPIC_API_KEY
	} else {
		s := toolruntest.New(nil, toolruntest.Script(script(dir)...))
		defer s.Close()
		client = s.Client()
	}
	opts := &toolrun.Options{
		Logger: slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnEvent: func(ctx context.Context, e toolrun.Event) {
			if e, ok := e.(toolrun.TurnFinished); ok {
				for _, res := range e.Results {
					fmt.Fprintf(out, "%s %s: %s\n", res.Call.Name, res.Call.Input, outcome(res))
				}
			}
		},
	}
	params := anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		System:    []anthropic.BetaTextBlockParam{{Text: "Paths are relative to the directory you may write in."}},
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(prompt(dir)))},
	}
	fmt.Fprintf(out, "directory: %s\nuser: %s\n", dir, prompt(dir))
	r := toolrun.New(client, params, []toolrun.Tool{writeFileTool(dir)}, opts)
	res, err := r.Run(ctx)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(out, "claude: %s\nstopped: %s\n", res.Text(), res.StopReason)
	return res, nil
}

// outcome says what became of a call.
func outcome(res *toolrun.ToolResult) string {
	if res.Err != nil {
		return "refused: " + res.Err.Error()
	}
	var parts []string
	for _, c := range res.Content {
		if c.OfText != nil {
			parts = append(parts, c.OfText.Text)
		}
	}
	return strings.Join(parts, " ")
}
