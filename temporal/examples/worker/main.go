// Command worker serves toolrun runs as Temporal workflows: it registers
// the workflow and its activities (one per model step, one per tool call)
// on a task queue, with two tools: check_ci, which runs freely, and
// publish_release, which waits for a person's approval. Start runs with
// ../starter.
//
// Without ANTHROPIC_API_KEY the model is a scripted one on a local fake
// server, so the example runs offline; with it, the requests go to the
// Anthropic API. With a Temporal dev server on localhost:
//
//	temporal server start-dev --headless &
//	go run ./examples/worker &
//	go run ./examples/starter
//
// Kill the worker while a run waits for approval and start it again: the
// run goes on where it was.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
)

func main() {
	address := flag.String("address", envOr("TEMPORAL_ADDRESS", client.DefaultHostPort), "the Temporal server's `host:port`")
	queue := flag.String("queue", "toolrun-example", "the task `queue` to serve")
	flag.Parse()
	if err := run(*address, *queue); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run(address, queue string) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var model anthropic.Client
	if os.Getenv("ANTHROPIC_API_KEY") != "" {
		model = anthropic.NewClient()
	} else {
		s := toolruntest.New(nil, toolruntest.Options{Func: script})
		defer s.Close()
		model = s.Client()
		fmt.Println("no ANTHROPIC_API_KEY: the model is a scripted one")
	}
	c, err := client.Dial(client.Options{HostPort: address, Logger: log.NewStructuredLogger(logger)})
	if err != nil {
		return err
	}
	defer c.Close()

	// NewWorker gives the worker a stop timeout (temporal.DefaultWorkerStopTimeout):
	// on SIGTERM, the calls it runs finish before it exits.
	w := temporal.NewWorker(c, queue, temporal.NewActivities(model, tools(), &toolrun.Options{
		Logger: logger,
		// The workers keep the runs' states here and the workflows hold
		// only a key to them; every worker of the queue must reach it.
		Store: &filestore.Store{Dir: filepath.Join(os.TempDir(), "toolrun-example-states")},
		// Events are the same as in process; here they run in the worker
		// that runs the activity.
		OnEvent: func(ctx context.Context, e toolrun.Event) {
			if e, ok := e.(toolrun.ToolFinished); ok {
				fmt.Printf("turn %d: %s %s → is_error=%v\n", e.Turn, e.Result.Call.Name, e.Result.Call.Input, e.Result.IsError)
			}
		},
	}), worker.Options{})
	fmt.Printf("serving task queue %q on %s\n", queue, address)
	return w.Run(worker.InterruptCh())
}

type (
	statusIn struct {
		Branch string `json:"branch" jsonschema:"the branch to check"`
	}
	releaseIn struct {
		Version string `json:"version" jsonschema:"the version to release, such as v1.2.3"`
	}
)

// tools returns the worker's tools. Every worker of a task queue must have
// the same ones.
func tools() []toolrun.Tool {
	check := toolrun.NewTool("check_ci", "Reports the CI status of a branch.",
		func(ctx context.Context, in statusIn) (string, error) {
			return in.Branch + ": all 412 tests passed", nil
		})
	check.Idempotent = true // a worker lost mid-call: run it again elsewhere
	publish := toolrun.NewTool("publish_release", "Publishes a release to every user.",
		func(ctx context.Context, in releaseIn) (string, error) {
			return "published " + in.Version, nil
		})
	publish.Policy = policy.RequireApproval("publishes a release to every user")
	return []toolrun.Tool{check, publish}
}

// script is the offline model: it checks CI, then publishes, then answers.
func script(req *toolruntest.Request) toolruntest.Reply {
	switch len(req.Params.Messages) {
	case 1:
		return toolruntest.Message(toolruntest.Text("Checking CI on main."),
			toolruntest.ToolUse("toolu_01", "check_ci", statusIn{Branch: "main"}))
	case 3:
		return toolruntest.Message(toolruntest.Text("The tests pass. Publishing v1.4.1."),
			toolruntest.ToolUse("toolu_02", "publish_release", releaseIn{Version: "v1.4.1"}))
	}
	return toolruntest.Message(toolruntest.Text("CI on main is green. The publish_release result says whether v1.4.1 went out."))
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
