// Command approval is a refund that a person approves, across processes.
// The run's state lives in a filestore.Store: the first process suspends when
// the model asks for the refund, and exits; a later one re-opens the run
// from the store, gives the person's decision and finishes it. Run it
// again and it prints the answer without refunding again: with a Store, a
// call runs at most once, however often the program is run.
//
//	go run ./examples/approval                 # suspends: refund_order awaits approval
//	go run ./examples/approval -decide allow   # refunds, and the model answers
//	go run ./examples/approval -decide allow   # finished already: the answer, no second refund
//
// Without ANTHROPIC_API_KEY the model is a scripted one on toolruntest's
// fake Messages API, so it runs offline; with it, the prompt goes to the
// Anthropic API. Remove the directory, or give another -dir, to start
// over.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

func main() {
	dir := flag.String("dir", filepath.Join(os.TempDir(), "toolrun-approval"), "the `directory` that holds the run's state and the refunds made")
	decide := flag.String("decide", "", "the decision for the calls awaiting approval: allow or deny")
	flag.Parse()
	if err := run(context.Background(), *dir, *decide); err != nil {
		fmt.Fprintln(os.Stderr, "approval:", err)
		os.Exit(1)
	}
}

type refundIn struct {
	Order string `json:"order" jsonschema:"the order number"`
}

// refundTool refunds an order; its effect, which must not happen twice, is
// a line in dir/refunds.log.
func refundTool(dir string) *toolrun.FuncTool {
	refund := toolrun.NewTool("refund_order", "Refunds an order in full.",
		func(ctx context.Context, in refundIn) (string, error) {
			f, err := os.OpenFile(filepath.Join(dir, "refunds.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return "", err
			}
			defer f.Close()
			if _, err := fmt.Fprintln(f, in.Order); err != nil {
				return "", err
			}
			return "refunded order " + in.Order, nil
		})
	refund.Policy = policy.RequireApproval("refunds cost money")
	return refund
}

func run(ctx context.Context, dir, decide string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	client, stop := model()
	defer stop()
	params := anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages: []anthropic.BetaMessageParam{
			anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Order 42 arrived broken. Refund it.")),
		},
	}
	opts := &toolrun.Options{Store: &filestore.Store{Dir: dir}, RunID: "order-42"}

	// Open re-opens the run from the store, or starts it if none is saved.
	r, err := toolrun.Open(ctx, client, params, []toolrun.Tool{refundTool(dir)}, opts)
	if err != nil {
		return err
	}
	// The calls the saved run is waiting on, if any: decide each.
	for _, p := range r.State().AwaitingApproval() {
		switch decide {
		case "allow":
			err = r.Decide(p.Call.ID, toolrun.Decision{})
		case "deny":
			err = r.Decide(p.Call.ID, policy.Deny("the person said no"))
		default:
			return fmt.Errorf("%s awaits approval: give -decide allow or -decide deny", p.Call.Name)
		}
		if err != nil {
			return err
		}
	}
	res, err := r.Run(ctx) // a finished run returns how it finished, and runs nothing
	if err != nil {
		return err
	}
	if res.StopReason == toolrun.StopAwaitingApproval {
		for _, p := range res.Pending {
			fmt.Printf("awaiting approval: %s %s (%s)\n", p.Call.Name, p.Call.Input, p.Reason)
		}
		fmt.Println("the run is saved; run again with -decide allow or -decide deny")
		return nil
	}
	fmt.Println("claude:", res.Text())
	return nil
}

// model returns the client of the Anthropic API, or without
// ANTHROPIC_API_KEY that of a scripted model on a fake API, and a func that
// stops it.
func model() (anthropic.Client, func()) {
	if os.Getenv("ANTHROPIC_API_KEY") != "" {
		return anthropic.NewClient(), func() {}
	}
	fake := toolruntest.New(nil, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		last := req.Conversation[len(req.Conversation)-1]
		for _, b := range last.Content {
			if b.Type != "tool_result" {
				continue
			}
			if b.IsError {
				return toolruntest.Message(toolruntest.Text("I did not refund order 42: " + b.ResultText()))
			}
			return toolruntest.Message(toolruntest.Text("Refunded order 42."))
		}
		return toolruntest.Message(toolruntest.ToolUse("toolu_01", "refund_order", map[string]string{"order": "42"}))
	}})
	return fake.Client(), fake.Close
}
