package temporal_test

import (
	"fmt"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestVersionedWorkerRegisters: a worker that uses worker versioning gets
// the workflow registered whether or not its options name a default
// versioning behavior, built with NewWorker or with worker.New and
// Register: the SDK panics on registering a workflow with no behavior on
// such a worker. (TestUpgradeFromRecordedRelease runs a versioned worker
// against a server.)
func TestVersionedWorkerRegisters(t *testing.T) {
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Logger: nopLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bare := worker.DeploymentOptions{UseVersioning: true, Version: worker.WorkerDeploymentVersion{DeploymentName: "agents", BuildID: "v2"}}
	pinned := bare
	pinned.DefaultVersioningBehavior = workflow.VersioningBehaviorPinned
	for _, tc := range []struct {
		name string
		make func(a *temporal.Activities)
	}{
		{"NewWorker with Deployment", func(a *temporal.Activities) {
			temporal.NewWorker(c, "q", a, worker.Options{DeploymentOptions: temporal.Deployment("agents", "v2")})
		}},
		{"NewWorker with no default behavior", func(a *temporal.Activities) {
			temporal.NewWorker(c, "q", a, worker.Options{DeploymentOptions: bare})
		}},
		{"worker.New with no default behavior", func(a *temporal.Activities) {
			temporal.Register(worker.New(c, "q", worker.Options{WorkerStopTimeout: temporal.MinWorkerStopTimeout, DeploymentOptions: bare}), a)
		}},
		{"worker.New pinned", func(a *temporal.Activities) {
			temporal.Register(worker.New(c, "q", worker.Options{WorkerStopTimeout: temporal.MinWorkerStopTimeout, DeploymentOptions: pinned}), a)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := temporal.NewActivities(anthropic.Client{}, nil, &toolrun.Options{Logger: discard()})
			if err := catch(func() { tc.make(a) }); err != nil {
				t.Errorf("got %v, want the workflow registered", err)
			}
		})
	}
	if d := temporal.Deployment("agents", "v2"); !d.UseVersioning || d.Version.DeploymentName != "agents" || d.Version.BuildID != "v2" || d.DefaultVersioningBehavior != temporal.DefaultVersioningBehavior {
		t.Errorf("Deployment gave %+v", d)
	}
}

// catch runs f and returns its panic as an error.
func catch(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	f()
	return nil
}
