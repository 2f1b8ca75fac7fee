// Command approval shows terminal approval of tool calls with toolrun: a
// tool whose policy asks a person before each call, a run that suspends
// when the model calls it, its state saved to a JSON file and resumed from
// there, as another process would, and the person's answer given with
// Runner.Decide before the run goes on.
//
// Without ANTHROPIC_API_KEY the model is a scripted one on a local fake
// server, so the example runs offline; with it, the same tools and prompt
// go to the Anthropic API. Answers are read from stdin, one per line, so it
// also runs from a script:
//
//	go run ./examples/approval              # asks at the terminal
//	echo y | go run ./examples/approval     # approves
//	go run ./examples/approval </dev/null   # no answer: denies
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

func main() {
	stateFile := flag.String("state", "", "the `file` to save the suspended run in (default: a temporary file)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *stateFile == "" {
		dir, err := os.MkdirTemp("", "toolrun-approval-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "approval:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(dir)
		*stateFile = filepath.Join(dir, "state.json")
	}
	live := os.Getenv("ANTHROPIC_API_KEY") != ""
	res, err := run(ctx, os.Stdin, os.Stdout, os.Stderr, *stateFile, live)
	if err != nil {
		fmt.Fprintln(os.Stderr, "approval:", err)
		stop()
		os.Exit(1)
	}
	if res.StopReason != toolrun.StopEndTurn {
		stop()
		os.Exit(1)
	}
}

const prompt = "Release v1.4.1 if the tests on main pass."

type (
	statusIn struct {
		Branch string `json:"branch" jsonschema:"the branch to check"`
	}
	releaseIn struct {
		Version string `json:"version" jsonschema:"the version to release, such as v1.2.3"`
		Notes   string `json:"notes,omitempty" jsonschema:"release notes"`
	}
)

// tools returns the example's tools: check_ci runs freely; publish_release
// asks a person first.
func tools() []toolrun.Tool {
	check := toolrun.NewTool("check_ci", "Reports the CI status of a branch.",
		func(ctx context.Context, in statusIn) (string, error) {
			return fmt.Sprintf("%s: all 412 tests passed", in.Branch), nil
		})
	publish := toolrun.NewTool("publish_release", "Publishes a release to every user.",
		func(ctx context.Context, in releaseIn) (string, error) {
			return fmt.Sprintf("published %s", in.Version), nil
		})
	publish.Policy = toolrun.RequireApproval("publishes a release to every user")
	return []toolrun.Tool{check, publish}
}

// script is the model's side of the offline run. Its last answer reads
// right whether the release was approved or not.
func script() []toolruntest.Reply {
	return []toolruntest.Reply{
		toolruntest.Message(
			toolruntest.Text("Checking CI on main."),
			toolruntest.ToolUse("toolu_01", "check_ci", map[string]any{"branch": "main"}),
		),
		toolruntest.Message(
			toolruntest.Text("The tests pass. Publishing v1.4.1."),
			toolruntest.ToolUse("toolu_02", "publish_release", map[string]any{"version": "v1.4.1", "notes": "Bug fixes."}),
		),
		toolruntest.Message(toolruntest.Text("CI on main is green. The publish_release result says whether v1.4.1 went out.")),
	}
}

// run runs the example: until the run suspends for approval, then from the
// state saved in stateFile, asking for each pending call on in. Without
// live, the model is the offline script.
func run(ctx context.Context, in io.Reader, out, errOut io.Writer, stateFile string, live bool) (*toolrun.Result, error) {
	var client anthropic.Client
	model := anthropic.ModelClaudeSonnet5_5
	if live {
		client = anthropic.NewClient() // reads ANTHROPIC_API_KEY
	} else {
		s := toolruntest.New(nil, toolruntest.Script(script()...))
		defer s.Close()
		client = s.Client()
	}
	opts := &toolrun.Options{
		Logger: slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnEvent: func(ctx context.Context, e toolrun.Event) {
			switch e := e.(type) {
			case toolrun.ToolDecided:
				fmt.Fprintf(out, "model calls %s %s\n", e.Call.Name, e.Call.Input)
			case toolrun.ToolFinished:
				fmt.Fprintf(out, "  %s → %s\n", e.Result.Call.Name, text(e.Result))
			}
		},
	}
	params := anthropic.BetaMessageNewParams{
		Model:     model,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(prompt))},
	}
	fmt.Fprintf(out, "user: %s\n", prompt)

	r := toolrun.New(client, params, tools(), opts)
	answers := bufio.NewReader(in)
	for {
		res, err := r.Run(ctx)
		if err != nil {
			return res, err
		}
		if res.StopReason != toolrun.StopAwaitingApproval {
			fmt.Fprintf(out, "claude: %s\nstopped: %s after %d turns\n", res.Text(), res.StopReason, res.Turns)
			return res, nil
		}

		// The run is suspended. Its state is plain data: save it, and
		// this process could exit here and another pick it up later.
		if err := save(stateFile, r.State()); err != nil {
			return res, err
		}
		fmt.Fprintf(out, "run suspended: %s; state saved to %s\n", res.Detail, stateFile)

		// Resume from the file with the same client, tools and options,
		// as that other process would.
		s, err := load(stateFile)
		if err != nil {
			return res, err
		}
		r, err = toolrun.Resume(client, s, tools(), opts)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(out, "resumed from %s\n", stateFile)
		for _, p := range r.Result().Pending {
			d, err := ask(answers, out, p)
			if err != nil {
				return res, err
			}
			if err := r.Decide(p.Call.ID, d); err != nil {
				return res, err
			}
		}
	}
}

// ask asks for a decision about p: y approves, a approves every call of
// the tool for the rest of the run, anything else denies, with the next line
// as the reason. The end of input denies.
func ask(in *bufio.Reader, out io.Writer, p toolrun.PendingCall) (toolrun.Decision, error) {
	var input bytes.Buffer
	if json.Compact(&input, p.Call.Input) != nil {
		input.Write(p.Call.Input)
	}
	fmt.Fprintf(out, "%s %s needs approval: %s.\napprove [y]es / [n]o / [a]lways? ", p.Call.Name, &input, p.Reason)
	answer, err := readLine(in)
	if err != nil {
		fmt.Fprintln(out, "no answer: denied")
		return toolrun.DenyCall("nobody answered the approval prompt"), nil
	}
	switch strings.ToLower(answer) {
	case "y", "yes":
		fmt.Fprintln(out, "approved")
		return toolrun.AllowCall(), nil
	case "a", "always":
		fmt.Fprintln(out, "approved for the rest of the run")
		return toolrun.Decision{Kind: toolrun.Allow, Always: true}, nil
	}
	fmt.Fprint(out, "reason, sent to the model: ")
	reason, err := readLine(in)
	if err != nil || reason == "" {
		reason = "the user denied it"
	}
	fmt.Fprintf(out, "denied: %s\n", reason)
	return toolrun.DenyCall(reason), nil
}

// readLine reads a line, trimmed; at the end of input it returns io.EOF
// only if the line is empty.
func readLine(in *bufio.Reader) (string, error) {
	s, err := in.ReadString('\n')
	s = strings.TrimSpace(s)
	if errors.Is(err, io.EOF) && s != "" {
		err = nil
	}
	return s, err
}

func save(path string, s *toolrun.State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func load(path string) (*toolrun.State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s toolrun.State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return &s, nil
}

// text returns a result's text, or its error.
func text(res *toolrun.ToolResult) string {
	if res.Err != nil {
		return "error: " + res.Err.Error()
	}
	var parts []string
	for _, c := range res.Content {
		if c.OfText != nil {
			parts = append(parts, c.OfText.Text)
		}
	}
	return strings.Join(parts, " ")
}
