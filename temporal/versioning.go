package temporal

import (
	"reflect"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// DefaultVersioningBehavior is the versioning behavior of [Workflow] on a
// worker that uses Temporal's worker versioning (a Worker Deployment
// Version, [Deployment]) and names no default of its own: auto-upgrade. A
// run then moves to the deployment's current version at its next workflow
// task, so a run that waits days for approval is finished by the new
// workers and the old version's workers can be retired once their running
// tasks end. That is safe because every change to the commands the
// workflow issues is guarded with workflow.GetVersion and the module's
// tests replay the histories of earlier releases. Set
// worker.Options.DeploymentOptions.DefaultVersioningBehavior to
// workflow.VersioningBehaviorPinned to keep each run on the version that
// started it instead; then keep that version's workers until its runs
// close.
const DefaultVersioningBehavior = workflow.VersioningBehaviorAutoUpgrade

// Deployment returns the worker.Options.DeploymentOptions of a worker of
// the Worker Deployment Version buildID of deployment name, for
// [NewWorker]: versioning on, and the workflow's behavior
// [DefaultVersioningBehavior]. The workers of one version must have the
// same workflow code and tools; a new release is a new build id. Make a
// version current (the one new runs and auto-upgrading runs go to) with
// the client's deployment API, once its workers poll:
//
//	c.WorkerDeploymentClient().GetHandle(name).SetCurrentVersion(ctx,
//		client.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID})
//
// or `temporal worker deployment set-current-version`. See the package
// documentation's upgrade procedure.
func Deployment(name, buildID string) worker.DeploymentOptions {
	return worker.DeploymentOptions{
		UseVersioning:             true,
		Version:                   worker.WorkerDeploymentVersion{DeploymentName: name, BuildID: buildID},
		DefaultVersioningBehavior: DefaultVersioningBehavior,
	}
}

// versioned returns opts with [DefaultVersioningBehavior] as the default
// versioning behavior if they turn versioning on and name none: without
// one, the SDK refuses to register a workflow (it panics).
func versioned(opts worker.Options) worker.Options {
	d := &opts.DeploymentOptions
	if d.UseVersioning && d.DefaultVersioningBehavior == workflow.VersioningBehaviorUnspecified {
		d.DefaultVersioningBehavior = DefaultVersioningBehavior
	}
	return opts
}

// versioningBehavior is the versioning behavior [Register] registers
// [Workflow] with on r: [DefaultVersioningBehavior] if r is a worker built
// by the SDK (worker.New) with versioning on and no default behavior, on
// which registering a workflow without one panics; otherwise unspecified,
// so that the worker's own default applies. The SDK does not export the
// options, so they are read as it keeps them.
func versioningBehavior(r Registry) workflow.VersioningBehavior {
	v := reflect.ValueOf(r)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return workflow.VersioningBehaviorUnspecified
	}
	p := v.Elem().FieldByName("executionParams")
	if !p.IsValid() || p.Kind() != reflect.Struct {
		return workflow.VersioningBehaviorUnspecified
	}
	use, d := p.FieldByName("UseBuildIDForVersioning"), p.FieldByName("DeploymentOptions")
	if !use.IsValid() || use.Kind() != reflect.Bool || !use.Bool() || !d.IsValid() || d.Kind() != reflect.Struct {
		return workflow.VersioningBehaviorUnspecified
	}
	b := d.FieldByName("DefaultVersioningBehavior")
	if !b.IsValid() || b.Type() != reflect.TypeFor[workflow.VersioningBehavior]() {
		return workflow.VersioningBehaviorUnspecified
	}
	if workflow.VersioningBehavior(b.Int()) == workflow.VersioningBehaviorUnspecified {
		return DefaultVersioningBehavior
	}
	return workflow.VersioningBehaviorUnspecified
}
