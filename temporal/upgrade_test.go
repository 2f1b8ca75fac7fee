package temporal_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// The worker processes of TestUpgradeFromRecordedRelease, old and new,
// are configured by these variables; oldworker/main.go reads the same.
const (
	upgradeWorkerEnv = "TOOLRUN_UPGRADE_WORKER" // "1": this test binary is the new worker
	upgradeAddrEnv   = "TEMPORAL_ADDRESS"
	upgradeIDEnv     = "TOOLRUN_UPGRADE_IDENTITY"
	upgradeDirEnv    = "TOOLRUN_UPGRADE_DIR"
	upgradeQueueEnv  = "TOOLRUN_UPGRADE_QUEUE"
	upgradeDeplEnv   = "TOOLRUN_UPGRADE_DEPLOYMENT"
	upgradeBuildEnv  = "TOOLRUN_UPGRADE_BUILD"
)

// upgradeRelease is the recorded release the upgrade starts from:
// testdata/upgrade/<upgradeRelease>.tar.gz.
const upgradeRelease = "d629b06"

// The runs of TestUpgradeFromRecordedRelease, of each kind.
const upgradeRuns = 8

func init() {
	// Before TestMain: this binary, re-executed, is the new release's
	// worker of the upgrade test.
	if os.Getenv(upgradeWorkerEnv) != "1" {
		return
	}
	if err := runUpgradeWorker(); err != nil {
		fmt.Fprintln(os.Stderr, "new worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runUpgradeWorker is the new release's worker: the tree under test, as
// a Worker Deployment Version, until SIGTERM.
func runUpgradeWorker() error {
	c, err := client.Dial(client.Options{
		HostPort: os.Getenv(upgradeAddrEnv), Logger: nopLogger, Identity: os.Getenv(upgradeIDEnv),
	})
	if err != nil {
		return err
	}
	defer c.Close()
	dir := os.Getenv(upgradeDirEnv)
	acts := temporal.NewActivities(anthropic.NewClient(), upgradeTools(dir, "new"), &toolrun.Options{
		Logger: discard(),
		Store:  &filestore.Store{Dir: filepath.Join(dir, "states")},
	})
	w := temporal.NewWorker(c, os.Getenv(upgradeQueueEnv), acts, worker.Options{
		DeploymentOptions: temporal.Deployment(os.Getenv(upgradeDeplEnv), os.Getenv(upgradeBuildEnv)),
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

// upgradeTools are the tools of the upgrade test's workers, as
// oldworker/main.go has them: each journals its call's start in dir, in
// a file per tool and id, with the line who (which release ran it);
// charge then waits until the file "release" exists; write_file needs a
// person's approval. None is idempotent.
func upgradeTools(dir, who string) []toolrun.Tool {
	type callIn struct {
		ID string `json:"id"`
	}
	journaled := func(name string, blocks bool) *toolrun.FuncTool {
		return toolrun.NewTool(name, "A tool of the upgrade test", func(ctx context.Context, in callIn) (string, error) {
			f, err := os.OpenFile(filepath.Join(dir, "runs-"+name+"-"+in.ID), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return "", err
			}
			if _, err := f.WriteString(who + "\n"); err != nil {
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
	write.Policy = policy.RequireApproval("writes change files")
	return []toolrun.Tool{journaled("quick", false), journaled("charge", true), write}
}

// buildOldWorker unpacks the recorded release into a temporary directory
// and builds oldworker/main.go against it, with the dependency versions
// that release's go.mod files name. It skips the test when the go command
// is missing, unless CI is set.
func buildOldWorker(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		msg := "missing component: the go command, to build the recorded release's worker"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; skipped because CI is not set")
	}
	root := t.TempDir()
	if err := untarGz(filepath.Join("testdata", "upgrade", upgradeRelease+".tar.gz"), root); err != nil {
		t.Fatalf("unpacking the recorded release: %v", err)
	}
	src, err := os.ReadFile(filepath.Join("testdata", "upgrade", "oldworker", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(root, "oldworker")
	if err := os.MkdirAll(main, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod := "module oldworker\n\ngo 1.26.0\n\nrequire github.com/toolrun/toolrun/temporal v0.0.0\n\n" +
		"replace github.com/toolrun/toolrun => ../\n\nreplace github.com/toolrun/toolrun/temporal => ../temporal\n"
	var sums []byte
	for _, f := range []string{"go.sum", filepath.Join("temporal", "go.sum")} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b...)
	}
	for name, data := range map[string][]byte{"main.go": src, "go.mod": []byte(gomod), "go.sum": sums} {
		if err := os.WriteFile(filepath.Join(main, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(root, "oldworker.bin")
	cmd := exec.Command(gobin, "build", "-o", bin, ".")
	cmd.Dir = main
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the recorded release's worker: %v\n%s", err, out)
	}
	return bin
}

// untarGz unpacks the gzipped tarball path into dir.
func untarGz(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, dir+string(filepath.Separator)) {
			return fmt.Errorf("%s: a path outside the tree", h.Name)
		}
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := os.WriteFile(name, data, 0o644); err != nil {
			return err
		}
	}
}

// startUpgradeWorker starts a worker process of build build: bin, or
// this test binary when bin is empty.
func startUpgradeWorker(t *testing.T, bin, dir, queue, modelURL, build string) *exec.Cmd {
	t.Helper()
	var cmd *exec.Cmd
	if bin == "" {
		cmd = exec.Command(os.Args[0], "-test.run=^$")
	} else {
		cmd = exec.Command(bin)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANTHROPIC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env,
		upgradeAddrEnv+"="+temporalAddress(), upgradeIDEnv+"="+build, upgradeDirEnv+"="+dir,
		upgradeQueueEnv+"="+queue, upgradeDeplEnv+"="+queue, upgradeBuildEnv+"="+build,
		"ANTHROPIC_BASE_URL="+modelURL, "ANTHROPIC_API_KEY="+toolruntest.TestAPIKey,
	)
	if bin == "" {
		cmd.Env = append(cmd.Env, upgradeWorkerEnv+"=1")
	}
	logFile, err := os.Create(filepath.Join(dir, build+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logFile.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logFile.Name())
			t.Logf("%s worker output:\n%s", build, out)
		}
	})
	return cmd
}

// setCurrentVersion makes build the current version of deployment, once
// its workers poll (until then the server does not know the version).
func setCurrentVersion(t *testing.T, ctx context.Context, c client.Client, deployment, build string) {
	t.Helper()
	h := c.WorkerDeploymentClient().GetHandle(deployment)
	var last error
	waitFor(t, time.Minute, fmt.Sprintf("version %s to become current (last: %v)", build, &last), func() bool {
		_, last = h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: build})
		if last != nil {
			time.Sleep(200 * time.Millisecond)
		}
		return last == nil
	})
}

// TestUpgradeFromRecordedRelease upgrades a Worker Deployment from the
// previous release's workflow code (testdata/upgrade, built from the
// recorded tree) to the tree under test while runs are in flight: 8 runs
// await approval of a call, and 8 are mid-turn (one call answered, one
// still running on the old worker). The new release's worker starts as a
// new version, becomes current, and the old worker is SIGTERMed; the
// waiting runs are approved. Every run must finish as its script says,
// every call must have run once, the approved calls and every workflow
// task after the switch on the new worker, and the old worker must exit
// cleanly once its running calls end.
func TestUpgradeFromRecordedRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the recorded release and starts worker processes")
	}
	c := dialTemporal(t)
	bin := buildOldWorker(t)
	dir := t.TempDir()
	model := toolruntest.New(t, toolruntest.Options{Func: func(req *toolruntest.Request) toolruntest.Reply {
		msgs := req.Conversation
		kind, n, _ := strings.Cut(msgs[0].Content[0].Text, " ")
		if len(msgs) > 1 {
			return toolruntest.Message(toolruntest.Text("Done " + kind + " " + n + "."))
		}
		if kind == "approve" {
			return toolruntest.Message(toolruntest.ToolUse("toolu_w"+n, "write_file", map[string]any{"id": "w" + n}))
		}
		return toolruntest.Message(
			toolruntest.ToolUse("toolu_q"+n, "quick", map[string]any{"id": "q" + n}),
			toolruntest.ToolUse("toolu_c"+n, "charge", map[string]any{"id": "c" + n}))
	}})
	queue := newQueue("toolrun-upgrade")
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	old := startUpgradeWorker(t, bin, dir, queue, model.URL, "old")
	setCurrentVersion(t, ctx, c, queue, "old")

	type started struct {
		id   string
		want string
		run  client.WorkflowRun
	}
	var runs []started
	for _, kind := range []string{"approve", "midturn"} {
		for i := range upgradeRuns {
			id := fmt.Sprintf("%s-%s-%d", queue, kind, i)
			run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, userParams(fmt.Sprintf("%s %d", kind, i)), nil)
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, started{id, fmt.Sprintf("Done %s %d.", kind, i), run})
		}
	}
	waitFor(t, 2*time.Minute, "the old release's runs to await approval or run charge", func() bool {
		for i := range upgradeRuns {
			if marks(dir, fmt.Sprintf("runs-quick-q%d", i)) != 1 || marks(dir, fmt.Sprintf("runs-charge-c%d", i)) != 1 {
				return false
			}
			p, err := temporal.Pending(ctx, c, fmt.Sprintf("%s-approve-%d", queue, i), nil)
			if err != nil || len(p) != 1 {
				return false
			}
		}
		return true
	})
	// The quick calls' results are in the mid-turn runs' histories before
	// the switch: the new code takes up a turn the old one half did.
	waitFor(t, time.Minute, "the quick calls' results in the histories", func() bool {
		for i := range upgradeRuns {
			if n := countEvents(t, c, fmt.Sprintf("%s-midturn-%d", queue, i), enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED); n < 2 {
				return false // the first step and quick
			}
		}
		return true
	})

	startUpgradeWorker(t, "", dir, queue, model.URL, "new")
	setCurrentVersion(t, ctx, c, queue, "new")
	switched := time.Now()
	if err := old.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The old worker lets its running calls finish (its stop timeout).
	time.Sleep(500 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range upgradeRuns {
		if err := temporal.Decide(ctx, c, fmt.Sprintf("%s-approve-%d", queue, i), fmt.Sprintf("toolu_w%d", i), toolrun.Decision{}, nil); err != nil {
			t.Errorf("approving run %d: %v", i, err)
		}
	}

	// A new worker that cannot replay an old history fails the run's
	// workflow tasks over and over: say so at once rather than at the
	// deadline.
	waitFor(t, 3*time.Minute, "every run to close", func() bool {
		for _, r := range runs {
			if msg := failedTask(t, c, r.id); msg != "" {
				t.Fatalf("%s: a workflow task failed after the upgrade: %s", r.id, msg)
			}
		}
		for _, r := range runs {
			d, err := c.DescribeWorkflowExecution(ctx, r.id, "")
			if err != nil || d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				time.Sleep(200 * time.Millisecond)
				return false
			}
		}
		return true
	})
	var wg sync.WaitGroup
	outs := make([]temporal.Outcome, len(runs))
	errs := make([]error, len(runs))
	for i, r := range runs {
		wg.Go(func() { errs[i] = r.run.Get(ctx, &outs[i]) })
	}
	wg.Wait()
	for i, r := range runs {
		if errs[i] != nil {
			t.Errorf("%s: %v", r.id, errs[i])
			continue
		}
		if outs[i].StopReason != toolrun.StopEndTurn || outs[i].Text != r.want {
			t.Errorf("%s: got %q %q (%s), want end_turn %q", r.id, outs[i].StopReason, outs[i].Text, outs[i].Detail, r.want)
		}
		if after := tasksAfter(t, c, r.id, switched); len(after) == 0 || strings.Contains(strings.Join(after, " "), "old") {
			t.Errorf("%s: workflow tasks after the switch taken by %v, want the new worker's only", r.id, after)
		}
	}
	// Who ran each call, from the journal: the quick and charge calls
	// on the old worker, before the switch; the approved writes on the
	// new one; each once.
	got := map[string]string{}
	want := map[string]string{}
	for i := range upgradeRuns {
		for _, call := range []struct{ name, who string }{
			{fmt.Sprintf("quick-q%d", i), "old"}, {fmt.Sprintf("charge-c%d", i), "old"}, {fmt.Sprintf("write_file-w%d", i), "new"},
		} {
			data, _ := os.ReadFile(filepath.Join(dir, "runs-"+call.name))
			got[call.name], want[call.name] = strings.TrimSpace(string(data)), call.who
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("calls run, by release (-want +got):\n%s", diff)
	}
	for _, r := range seenResults(model) {
		if strings.Contains(r, "error=true") {
			t.Errorf("the model got a failed result: %s", r)
		}
	}
	if err := old.Wait(); err != nil {
		t.Errorf("the old worker: %v", err)
	}
}

// countEvents counts the events of type typ in workflow id's history.
func countEvents(t *testing.T, c client.Client, id string, typ enumspb.EventType) int {
	t.Helper()
	n := 0
	it := c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return n
		}
		if e.GetEventType() == typ {
			n++
		}
	}
	return n
}

// tasksAfter lists the identities of the workers that started the
// workflow tasks of id's history after t0.
func tasksAfter(t *testing.T, c client.Client, id string, t0 time.Time) []string {
	t.Helper()
	var who []string
	it := c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			break
		}
		if a := e.GetWorkflowTaskStartedEventAttributes(); a != nil && e.GetEventTime().AsTime().After(t0) {
			who = append(who, a.GetIdentity())
		}
	}
	return who
}

// failedTask returns the failure of the last failed workflow task in
// workflow id's history, or "" if none failed.
func failedTask(t *testing.T, c client.Client, id string) string {
	t.Helper()
	msg := ""
	it := c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			break
		}
		if a := e.GetWorkflowTaskFailedEventAttributes(); a != nil {
			msg = fmt.Sprintf("%s: %s", a.GetCause(), a.GetFailure().GetMessage())
		}
	}
	return msg
}
