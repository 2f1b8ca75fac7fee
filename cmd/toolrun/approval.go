package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/toolrun/toolrun"
)

// noTerminalReason is what the model is told when a call needing approval
// is denied because nobody can be asked.
const noTerminalReason = "no terminal to ask for approval; rerun with --yes"

// noAnswerReason is what the model is told when the prompt's input ended
// before an answer.
const noAnswerReason = "no answer at the approval prompt"

// approver decides a call that awaits approval, and prints the decision.
type approver interface {
	approve(ctx context.Context, p toolrun.PendingCall) (toolrun.Decision, error)
}

// newApprover returns the approver for c: everything approved with yes,
// else a prompt if a person is at stdin, else everything denied.
func (c *cli) newApprover(yes bool) approver {
	switch {
	case yes:
		return approveAll{w: c.stdout}
	case c.interactive:
		return &prompt{in: bufio.NewReader(c.stdin), out: c.stdout, ask: c.stderr}
	default:
		return denyAll{w: c.stdout}
	}
}

// runWithApproval runs r to its end, asking a for a decision each time the
// run stops to await approval. It returns the run's result; on an error of
// a, the run stays awaiting approval and the error is returned with it.
func runWithApproval(ctx context.Context, r *toolrun.Runner, a approver) (*toolrun.Result, error) {
	for {
		res, err := r.Run(ctx)
		if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
			return res, err
		}
		for _, p := range res.Pending {
			d, err := a.approve(ctx, p)
			if err != nil {
				return res, err
			}
			if err := r.Decide(p.Call.ID, d); err != nil {
				return res, err
			}
		}
	}
}

// approveAll approves every call, for --yes.
type approveAll struct{ w io.Writer }

func (a approveAll) approve(_ context.Context, p toolrun.PendingCall) (toolrun.Decision, error) {
	fmt.Fprintf(a.w, "  ✓ %s approved (--yes)\n", p.Call.Name)
	return toolrun.AllowCall(), nil
}

// denyAll denies every call, when nobody can be asked.
type denyAll struct{ w io.Writer }

func (a denyAll) approve(_ context.Context, p toolrun.PendingCall) (toolrun.Decision, error) {
	fmt.Fprintf(a.w, "  ✗ %s denied: %s\n", p.Call.Name, noTerminalReason)
	return toolrun.DenyCall(noTerminalReason), nil
}

// prompt asks a person about each call: approve, deny with a reason, or
// approve every call of the tool for the rest of the run. Questions go to
// ask, so that out holds the run's record alone; decisions go to out.
type prompt struct {
	in       *bufio.Reader
	out, ask io.Writer
}

func (p *prompt) approve(ctx context.Context, pc toolrun.PendingCall) (toolrun.Decision, error) {
	for {
		fmt.Fprint(p.ask, "  approve [y]es / [n]o / [a]lways? ")
		answer, err := p.readLine(ctx)
		if errors.Is(err, io.EOF) && answer == "" {
			fmt.Fprintln(p.ask)
			fmt.Fprintf(p.out, "  ✗ %s denied: %s\n", pc.Call.Name, noAnswerReason)
			return toolrun.DenyCall(noAnswerReason), nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return toolrun.Decision{}, err
		}
		switch strings.ToLower(answer) {
		case "y", "yes":
			fmt.Fprintf(p.out, "  ✓ %s approved\n", pc.Call.Name)
			return toolrun.AllowCall(), nil
		case "a", "always":
			fmt.Fprintf(p.out, "  ✓ %s approved, and every later call of it in this run\n", pc.Call.Name)
			return toolrun.Decision{Kind: toolrun.Allow, Always: true}, nil
		case "n", "no":
			fmt.Fprint(p.ask, "  reason, sent to the model (optional): ")
			reason, err := p.readLine(ctx)
			if err != nil && !errors.Is(err, io.EOF) {
				return toolrun.Decision{}, err
			}
			if reason == "" {
				reason = "the user denied it"
			}
			fmt.Fprintf(p.out, "  ✗ %s denied: %s\n", pc.Call.Name, reason)
			return toolrun.DenyCall(reason), nil
		}
		if errors.Is(err, io.EOF) {
			fmt.Fprintln(p.ask)
			fmt.Fprintf(p.out, "  ✗ %s denied: %s\n", pc.Call.Name, noAnswerReason)
			return toolrun.DenyCall(noAnswerReason), nil
		}
		fmt.Fprintf(p.ask, "  please answer y, n or a\n")
	}
}

// readLine reads one line, trimmed. It returns when ctx is done, for a
// person who presses Ctrl-C at the prompt: the read goes on in the
// background until the line or the end of input comes, and the command
// exits without reading again.
func (p *prompt) readLine(ctx context.Context) (string, error) {
	type line struct {
		s   string
		err error
	}
	ch := make(chan line, 1)
	go func() {
		s, err := p.in.ReadString('\n')
		ch <- line{strings.TrimSpace(s), err}
	}()
	select {
	case l := <-ch:
		return l.s, l.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
