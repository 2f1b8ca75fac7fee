package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/toolrun/toolrun"
)

// display prints a run as it happens, from its events: each turn, the
// model's text, each tool call with its input, the decisions that were not
// a plain allow, and each result. It is meant for [toolrun.Options.OnEvent],
// which is never called concurrently.
//
// Results are printed when their turn finishes, in the order of the calls,
// so that calls run in parallel print the same way every time.
type display struct {
	w io.Writer
}

// maxResultLen bounds the length of a successful result as printed.
const maxResultLen = 100

func (d *display) event(_ context.Context, e toolrun.Event) {
	switch e := e.(type) {
	case toolrun.TurnStarted:
		fmt.Fprintf(d.w, "\nturn %d\n", e.Turn)
	case toolrun.ResponseReceived:
		for _, b := range e.Message.Content {
			if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
				d.block("  claude: ", b.Text)
			}
		}
	case toolrun.ToolCallReady:
		fmt.Fprintf(d.w, "  → %s %s\n", e.Call.Name, e.Call.Input)
	case toolrun.ToolDecided:
		switch {
		case e.By == "approval":
			// The approver has printed it as it was given.
		case e.Decision.Kind == toolrun.Defer:
			fmt.Fprintf(d.w, "  ? %s needs approval: %s\n", e.Call.Name, e.Decision.Reason)
		case e.Decision.Kind == toolrun.Deny:
			fmt.Fprintf(d.w, "  ✗ %s denied by %s: %s\n", e.Call.Name, e.By, e.Decision.Reason)
		case e.Decision.Kind == toolrun.Skip:
			fmt.Fprintf(d.w, "  - %s skipped by %s\n", e.Call.Name, e.By)
		case e.By == "always":
			fmt.Fprintf(d.w, "  ✓ %s allowed: approved for the rest of the run\n", e.Call.Name)
		}
	case toolrun.TurnFinished:
		for _, res := range e.Results {
			d.result(res)
		}
	}
}

func (d *display) result(res *toolrun.ToolResult) {
	text := resultText(res.Content)
	switch {
	case !res.IsError:
		fmt.Fprintf(d.w, "  ← %s: %s\n", res.Call.Name, shorten(text))
	case errors.Is(res.Err, toolrun.ErrDenied), errors.Is(res.Err, toolrun.ErrNotRun):
		d.block(fmt.Sprintf("  ✗ %s not run: ", res.Call.Name), text)
	default:
		d.block(fmt.Sprintf("  ✗ %s failed: ", res.Call.Name), text)
	}
}

// block prints text after prefix, with its further lines indented under
// it.
func (d *display) block(prefix, text string) {
	fmt.Fprintf(d.w, "%s%s\n", prefix, strings.ReplaceAll(strings.TrimSpace(text), "\n", "\n      "))
}

// summary prints how the run ended.
func (d *display) summary(res *toolrun.Result) {
	fmt.Fprintf(d.w, "\nstopped: %s after %d turns, %d tool calls (%d failed); tokens in=%d out=%d\n",
		res.StopReason, res.Turns, res.ToolCalls, res.ToolFailures, res.Usage.InputTokens, res.Usage.OutputTokens)
	if res.Detail != "" {
		fmt.Fprintf(d.w, "  %s\n", res.Detail)
	}
}

// resultText returns the text of a result's content, with a placeholder for
// each block that is not text.
func resultText(content []toolrun.Content) string {
	var parts []string
	for _, c := range content {
		switch {
		case c.OfText != nil:
			parts = append(parts, c.OfText.Text)
		case c.OfImage != nil:
			parts = append(parts, "[image]")
		case c.OfDocument != nil:
			parts = append(parts, "[document]")
		default:
			parts = append(parts, "[content]")
		}
	}
	return strings.Join(parts, " ")
}

// shorten returns s on one line, cut to about maxResultLen characters.
func shorten(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= maxResultLen {
		return s
	}
	r := []rune(s)
	return string(r[:maxResultLen]) + "…"
}
