// Command oldworker is a worker of the previous release's workflow code,
// for TestUpgradeFromRecordedRelease: the test unpacks that release's
// tree (d629b06.tar.gz, next to this directory) into a temporary
// directory, builds this program against it and runs it. Its tools are
// the test's (upgradeTools in upgrade_test.go): the same names, inputs and
// journal, so that the new workers can take the runs over.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "oldworker:", err)
		os.Exit(1)
	}
}

func run() error {
	// Warnings and errors only: the test shows this log when it fails.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := client.Dial(client.Options{
		HostPort: os.Getenv("TEMPORAL_ADDRESS"),
		Logger:   log.NewStructuredLogger(logger),
		Identity: os.Getenv("TOOLRUN_UPGRADE_IDENTITY"),
		ConnectionOptions: client.ConnectionOptions{
			DialOptions: []grpc.DialOption{temporal.DrainOnShutdown()},
		},
	})
	if err != nil {
		return err
	}
	defer c.Close()
	dir := os.Getenv("TOOLRUN_UPGRADE_DIR")
	acts := temporal.NewActivities(anthropic.NewClient(), tools(dir), &toolrun.Options{
		Logger: logger,
		Store:  &toolrun.FileStore{Dir: filepath.Join(dir, "states")},
	})
	w := temporal.NewWorker(c, os.Getenv("TOOLRUN_UPGRADE_QUEUE"), acts, worker.Options{
		DeploymentOptions: worker.DeploymentOptions{
			UseVersioning: true,
			Version: worker.WorkerDeploymentVersion{
				DeploymentName: os.Getenv("TOOLRUN_UPGRADE_DEPLOYMENT"),
				BuildID:        os.Getenv("TOOLRUN_UPGRADE_BUILD"),
			},
			DefaultVersioningBehavior: workflow.VersioningBehaviorAutoUpgrade,
		},
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	w.Stop()
	return nil
}

type callIn struct {
	ID string `json:"id"`
}

// tools journals each call's start in dir (a file per tool and id);
// charge then waits until the file "release" exists.
func tools(dir string) []toolrun.Tool {
	journaled := func(name string, blocks bool) *toolrun.FuncTool {
		return toolrun.NewTool(name, "A tool of the upgrade test", func(ctx context.Context, in callIn) (string, error) {
			f, err := os.OpenFile(filepath.Join(dir, "runs-"+name+"-"+in.ID), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return "", err
			}
			if _, err := f.WriteString("old\n"); err != nil {
				f.Close()
				return "", err
			}
			if err := f.Close(); err != nil {
				return "", err
			}
			for blocks {
				if _, err := os.Stat(filepath.Join(dir, "release")); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
			return name + " did " + in.ID, nil
		})
	}
	write := journaled("write_file", false)
	write.Policy = toolrun.RequireApproval("writes change files")
	return []toolrun.Tool{journaled("quick", false), journaled("charge", true), write}
}
