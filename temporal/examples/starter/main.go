// Command starter starts a toolrun run on the workers of ../worker and
// answers its approvals: it polls the calls awaiting a decision and asks at
// the terminal (y approves; anything else, or the end of input, denies), or
// approves them all with -yes. It prints how the run ended.
//
//	go run ./examples/starter
//	go run ./examples/starter -yes -prompt "Release v2.0.0 if main is green."
//
// The run lives in Temporal, not in this process: stop the starter, and
// approve later with the same -id.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
)

func main() {
	address := flag.String("address", envOr("TEMPORAL_ADDRESS", client.DefaultHostPort), "the Temporal server's `host:port`")
	queue := flag.String("queue", "toolrun-example", "the workers' task `queue`")
	id := flag.String("id", fmt.Sprintf("toolrun-example-%d", time.Now().Unix()), "the run's workflow `id`")
	prompt := flag.String("prompt", "Release v1.4.1 if the tests on main pass.", "the user's `message`")
	yes := flag.Bool("yes", false, "approve every call without asking")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *address, *queue, *id, *prompt, *yes, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, address, queue, id, prompt string, yes bool, in io.Reader, out io.Writer) error {
	c, err := client.Dial(client.Options{HostPort: address, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return err
	}
	defer c.Close()

	params := anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(prompt))},
	}
	r, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, params, &temporal.RunOptions{MaxTurns: 10})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "user: %s\nstarted run %s\n", prompt, r.GetID())

	type result struct {
		out temporal.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		res.err = r.Get(ctx, &res.out)
		done <- res
	}()
	answers := bufio.NewReader(in)
	asked := map[string]bool{}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case res := <-done:
			if res.err != nil {
				return res.err
			}
			fmt.Fprintf(out, "claude: %s\nstopped: %s after %d turns\n", res.out.Text, res.out.StopReason, res.out.State.Turns)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		pending, err := temporal.Pending(ctx, c, id, nil)
		if err != nil {
			continue // the workflow may not have started yet
		}
		for _, p := range pending {
			if asked[p.Call.ID] {
				continue
			}
			asked[p.Call.ID] = true
			d := toolrun.Decision{}
			if !yes {
				d = ask(answers, out, p)
			}
			if err := temporal.Decide(ctx, c, id, p.Call.ID, d, nil); err != nil {
				return err
			}
		}
	}
}

// ask asks at the terminal whether p may run.
func ask(in *bufio.Reader, out io.Writer, p toolrun.PendingCall) toolrun.Decision {
	fmt.Fprintf(out, "%s %s needs approval: %s.\napprove [y]es / [n]o? ", p.Call.Name, p.Call.Input, p.Reason)
	line, err := in.ReadString('\n')
	switch answer := strings.ToLower(strings.TrimSpace(line)); {
	case answer == "y" || answer == "yes":
		fmt.Fprintln(out, "approved")
		return toolrun.Decision{}
	case err != nil && answer == "":
		fmt.Fprintln(out, "no answer: denied")
		return policy.Deny("nobody answered the approval prompt")
	}
	fmt.Fprintln(out, "denied")
	return policy.Deny("a person said no")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
