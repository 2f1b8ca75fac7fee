package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
)

// noTerminalReason is what the model is told when a call needing approval
// is denied because nobody can be asked.
const noTerminalReason = "no terminal to ask for approval; rerun with --approve auto"

// noAnswerReason is what the model is told when the prompt's input ended
// before an answer.
const noAnswerReason = "no answer at the approval prompt"

// approveMode is the value of --approve: who decides the calls that need
// approval.
type approveMode string

const (
	approveAsk  approveMode = "ask"  // a person at the terminal
	approveAuto approveMode = "auto" // approved without asking
	approveDeny approveMode = "deny" // denied without asking
)

func (m *approveMode) String() string { return string(*m) }

func (m *approveMode) Set(s string) error {
	switch v := approveMode(s); v {
	case approveAsk, approveAuto, approveDeny:
		*m = v
		return nil
	}
	return errors.New("want ask, auto or deny")
}

// denyFlagReason is what the model is told of a call denied by --approve
// deny.
const denyFlagReason = "calls that need approval are denied in this run (--approve deny)"

// approver decides a call that awaits approval, and prints the decision.
type approver interface {
	approve(ctx context.Context, p toolrun.PendingCall) (toolrun.Decision, error)
}

// newApprover returns the approver for mode: everything approved (auto,
// printed as approved by autoFlag), everything denied (deny), or a prompt
// if a person is at stdin (ask). With ask and nobody at stdin it denies
// every call, telling the model noTerminal, or returns nil if noTerminal is
// empty: the run then stops awaiting approval. Decisions are printed to
// out and the prompt's questions to ask.
func (c *cli) newApprover(mode approveMode, autoFlag, noTerminal string, out, ask io.Writer) approver {
	switch {
	case mode == approveAuto:
		return approveAll{w: out, flag: autoFlag}
	case mode == approveDeny:
		return denyAll{w: out, reason: denyFlagReason}
	case c.interactive:
		return &prompt{in: bufio.NewReaderSize(c.stdin, maxAnswer), out: out, ask: ask}
	case noTerminal != "":
		return denyAll{w: out, reason: noTerminal}
	}
	return nil
}

// runWithApproval runs r to its end, asking a for a decision each time the
// run stops to await approval. It returns the run's result; on an error of
// a, the run stays awaiting approval and the error is returned with it. A
// nil a leaves the run awaiting approval.
func runWithApproval(ctx context.Context, r *toolrun.Runner, a approver) (*toolrun.Result, error) {
	for {
		res, err := r.Run(ctx)
		if err != nil || res.StopReason != toolrun.StopAwaitingApproval || a == nil {
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

// approveAll approves every call, for --approve auto or the demo's --yes.
type approveAll struct {
	w    io.Writer
	flag string // the flag that said so
}

func (a approveAll) approve(_ context.Context, p toolrun.PendingCall) (toolrun.Decision, error) {
	fmt.Fprintf(a.w, "  ✓ %s approved (%s)\n", p.Call.Name, a.flag)
	return toolrun.Decision{}, nil
}

// denyAll denies every call with reason: for --approve deny, or when
// nobody can be asked.
type denyAll struct {
	w      io.Writer
	reason string
}

func (a denyAll) approve(_ context.Context, p toolrun.PendingCall) (toolrun.Decision, error) {
	fmt.Fprintf(a.w, "  ✗ %s denied: %s\n", p.Call.Name, a.reason)
	return policy.Deny(a.reason), nil
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
		if errors.Is(err, errAnswerTooLong) {
			fmt.Fprintln(p.ask)
			fmt.Fprintf(p.out, "  ✗ %s denied: %s\n", pc.Call.Name, noAnswerReason)
			return policy.Deny(noAnswerReason), nil
		}
		if errors.Is(err, io.EOF) && answer == "" {
			fmt.Fprintln(p.ask)
			fmt.Fprintf(p.out, "  ✗ %s denied: %s\n", pc.Call.Name, noAnswerReason)
			return policy.Deny(noAnswerReason), nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return toolrun.Decision{}, err
		}
		switch strings.ToLower(answer) {
		case "y", "yes":
			fmt.Fprintf(p.out, "  ✓ %s approved\n", pc.Call.Name)
			return toolrun.Decision{}, nil
		case "a", "always":
			fmt.Fprintf(p.out, "  ✓ %s approved, and every later call of it in this run\n", pc.Call.Name)
			return toolrun.Decision{Kind: toolrun.Allow, Always: true}, nil
		case "n", "no":
			fmt.Fprint(p.ask, "  reason, sent to the model (optional): ")
			reason, err := p.readLine(ctx)
			if errors.Is(err, errAnswerTooLong) {
				reason, err = "", nil
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return toolrun.Decision{}, err
			}
			if reason == "" {
				reason = "the user denied it"
			}
			fmt.Fprintf(p.out, "  ✗ %s denied: %s\n", pc.Call.Name, reason)
			return policy.Deny(reason), nil
		}
		if errors.Is(err, io.EOF) {
			fmt.Fprintln(p.ask)
			fmt.Fprintf(p.out, "  ✗ %s denied: %s\n", pc.Call.Name, noAnswerReason)
			return policy.Deny(noAnswerReason), nil
		}
		fmt.Fprintf(p.ask, "  please answer y, n or a\n")
	}
}

// maxAnswer bounds a line read at the approval prompt. What a person types
// is short; a stream with no newline in it (/dev/zero) must not fill the
// memory.
const maxAnswer = 4096

// errAnswerTooLong is the error of a line at the prompt longer than
// maxAnswer.
var errAnswerTooLong = errors.New("the answer is too long")

// readLine reads one line, trimmed, of at most maxAnswer bytes: a longer
// one is errAnswerTooLong. It returns when ctx is done, for a
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
		b, err := p.in.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			err = errAnswerTooLong
		}
		ch <- line{strings.TrimSpace(string(b)), err}
	}()
	select {
	case l := <-ch:
		return l.s, l.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// mcpConfig is the ToolConfig an MCP server's tools get under mode: a
// person decides each call (ask), every call is denied (deny), or none is
// asked about (auto). run, resume and serve apply the same rule.
func (mode approveMode) mcpConfig(server string) toolrun.ToolConfig {
	switch mode {
	case approveAsk:
		return toolrun.ToolConfig{Policy: policy.RequireApproval(fmt.Sprintf("a tool of MCP server %q", server))}
	case approveDeny:
		return toolrun.ToolConfig{Policy: func(context.Context, toolrun.PolicyCall) toolrun.Decision { return policy.Deny(denyFlagReason) }}
	}
	return toolrun.ToolConfig{}
}
