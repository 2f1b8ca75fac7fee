package temporal_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
)

// The integration test re-executes the test binary as a worker process,
// configured by these variables.
const (
	workerEnv    = "TOOLRUN_TEMPORAL_WORKER"     // "1" in a worker process
	taskQueueEnv = "TOOLRUN_TEMPORAL_TASK_QUEUE" // the worker's task queue
	dirEnv       = "TOOLRUN_TEMPORAL_DIR"        // where the tools keep their marks
	identityEnv  = "TOOLRUN_TEMPORAL_IDENTITY"   // the worker's client identity, if set
	namespaceEnv = "TOOLRUN_TEMPORAL_NAMESPACE"  // the worker's namespace, if not "default"
)

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		if err := runWorker(); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// temporalAddress is the Temporal server the integration test uses:
// TEMPORAL_ADDRESS, or the dev server's default address.
func temporalAddress() string {
	if a := os.Getenv("TEMPORAL_ADDRESS"); a != "" {
		return a
	}
	return "127.0.0.1:7233"
}

// dialTemporal connects to the server, or skips the test if there is none,
// unless CI is set: CI starts one (see ci.sh), so there it is a failure.
func dialTemporal(t *testing.T) client.Client {
	t.Helper()
	return dialTemporalIn(t, "default")
}

// pollsKeptNamespace is the namespace of ci.sh's dev server whose stopping
// workers' polls the server does not end (the dynamic config
// frontend.enableCancelWorkerPollsOnShutdown off, as on servers before
// 1.32 and by default on later ones), with a long poll of 10 s: the tests
// of what a worker does on such a server run in it. In "default" the
// server ends them.
const pollsKeptNamespace = "polls-kept"

// inPollsKept is the environment entry of a worker process (startWorker)
// that serves pollsKeptNamespace.
const inPollsKept = namespaceEnv + "=" + pollsKeptNamespace

// dialTemporalIn is dialTemporal in the given namespace.
func dialTemporalIn(t *testing.T, namespace string) client.Client {
	t.Helper()
	addr := temporalAddress()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: namespace, Logger: nopLogger})
	if err == nil {
		_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
		if err == nil {
			_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		}
		if err != nil {
			c.Close()
		}
	}
	if err != nil {
		msg := fmt.Sprintf("missing component: Temporal dev server with the namespace %q; none at %s (%v); run temporal/ci.sh, or set TEMPORAL_ADDRESS to a server started as it starts one", namespace, addr, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; skipped because CI is not set")
	}
	t.Cleanup(c.Close)
	return c
}

// mark appends a line to the file name in dir: a record that survives a
// killed process.
func mark(dir, name string) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString("x\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// marks counts the lines of the file name in dir.
func marks(dir, name string) int {
	data, _ := os.ReadFile(filepath.Join(dir, name))
	return strings.Count(string(data), "\n")
}

// crashTools are the tools of the integration test's workers. Each counts
// its runs in dir by tool_use id; charge and fetch then wait until the test
// releases them.
func crashTools(dir string) []toolrun.Tool {
	type noInput struct{}
	counted := func(name string, idempotent, blocks bool) toolrun.Tool {
		var tool *toolrun.FuncTool
		tool = toolrun.NewTool(name, "A tool of the crash test", func(ctx context.Context, in noInput) (string, error) {
			if err := mark(dir, "runs-"+name); err != nil {
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
			return name + " done", nil
		})
		tool.Idempotent = idempotent
		return tool
	}
	return []toolrun.Tool{
		counted("quick", false, false),
		counted("charge", false, true), // not idempotent: never run twice
		counted("fetch", true, true),   // idempotent: may run again
		perCall(dir),
	}
}

// perCall is the tool of the scale test: it counts its runs by tool_use id
// and takes a moment, so that a worker killed at any time has calls in
// flight. It is not idempotent: no call may run twice.
func perCall(dir string) toolrun.Tool {
	return toolrun.NewTool("step", "A step of the scale test", func(ctx context.Context, in struct {
		ID string `json:"id"`
	}) (string, error) {
		if err := mark(dir, "calls-"+in.ID); err != nil {
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		return "did " + in.ID, nil
	})
}

// runWorker is the worker process: it serves the task queue until it is
// killed or interrupted, in the namespace namespaceEnv names (default if
// none). The model is the test's fake server, reached through
// ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY.
func runWorker() error {
	opts := client.Options{HostPort: temporalAddress(), Namespace: os.Getenv(namespaceEnv), Logger: nopLogger, Identity: os.Getenv(identityEnv)}
	c, err := client.Dial(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	dir := os.Getenv(dirEnv)
	// The workers of a queue share a Store: the workflow holds only a key
	// to the state.
	w := temporal.NewWorker(c, os.Getenv(taskQueueEnv), temporal.NewActivities(anthropic.NewClient(), crashTools(dir), &toolrun.Options{
		Logger: discard(),
		Store:  &filestore.Store{Dir: filepath.Join(dir, "states")},
	}), worker.Options{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	// The mark says the worker was asked to stop: a test starts work
	// only then, to see whether the stopping worker takes it.
	if err := os.WriteFile(filepath.Join(dir, "stopping-"+os.Getenv(identityEnv)), nil, 0o644); err != nil {
		return err
	}
	w.Stop()
	return nil
}

// startWorker starts a worker process for the test.
func startWorker(t *testing.T, dir, queue, modelURL, name string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANTHROPIC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env,
		workerEnv+"=1", taskQueueEnv+"="+queue, dirEnv+"="+dir,
		"TEMPORAL_ADDRESS="+temporalAddress(),
		"ANTHROPIC_BASE_URL="+modelURL, "ANTHROPIC_API_KEY="+toolruntest.TestAPIKey,
	)
	cmd.Env = append(cmd.Env, env...)
	logFile, err := os.Create(filepath.Join(dir, name+".log"))
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
			t.Logf("%s output:\n%s", name, out)
		}
	})
	return cmd
}

// unanswered returns the ids of the pending calls without a result in the
// workflow's state, or nil if the query fails.
func unanswered(t *testing.T, c client.Client, workflowID string) []string {
	t.Helper()
	v, err := c.QueryWorkflow(t.Context(), workflowID, "", temporal.StateQuery)
	if err != nil {
		return nil
	}
	var s toolrun.State
	if v.Get(&s) != nil {
		return nil
	}
	var ids []string
	for _, c := range s.Calls() {
		if _, ok := s.CallResult(c.ID); !ok {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWorkerKilledMidRun runs a workflow on a real Temporal server, kills
// its worker (SIGKILL) while two tools are running, starts another worker,
// and checks that the run completes with each call executed once: the call
// that had finished is not run again, the call of the tool that is not
// idempotent is answered as interrupted, and only the idempotent one runs
// again.
func TestWorkerKilledMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	c := dialTemporal(t)
	dir := t.TempDir()
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.Text("Working."),
			toolruntest.ToolUse("toolu_quick", "quick", map[string]any{}),
			toolruntest.ToolUse("toolu_charge", "charge", map[string]any{}),
			toolruntest.ToolUse("toolu_fetch", "fetch", map[string]any{}),
		),
		toolruntest.Message(toolruntest.Text("All done.")),
	))
	id := make([]byte, 6)
	rand.Read(id)
	queue := "toolrun-test-" + hex.EncodeToString(id)

	first := startWorker(t, dir, queue, model.URL, "worker1")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), &temporal.RunOptions{
		HeartbeatTimeout: 2 * time.Second,
		ModelRetry:       &sdktemporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 5},
		ToolRetry:        &sdktemporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 5},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the quick call to finish and charge and fetch to start", func() bool {
		return marks(dir, "runs-charge") == 1 && marks(dir, "runs-fetch") == 1 && marks(dir, "runs-quick") == 1
	})
	// Let the quick call's completion reach the server before the crash.
	waitFor(t, 30*time.Second, "the quick call's result in the workflow", func() bool {
		return cmp.Equal(unanswered(t, c, run.GetID()), []string{"toolu_charge", "toolu_fetch"})
	})
	// The tools run on past the heartbeat timeout: their heartbeats keep
	// them alive.
	time.Sleep(3 * time.Second)
	if got := unanswered(t, c, run.GetID()); !cmp.Equal(got, []string{"toolu_charge", "toolu_fetch"}) {
		t.Fatalf("after 1.5 heartbeat timeouts, unanswered calls = %v, want charge and fetch still running", got)
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	startWorker(t, dir, queue, model.URL, "worker2")

	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Text != "All done." {
		t.Errorf("outcome = %q %q (%s), want end_turn %q", out.StopReason, out.Text, out.Detail, "All done.")
	}
	runs := map[string]int{}
	for _, name := range []string{"quick", "charge", "fetch"} {
		runs[name] = marks(dir, "runs-"+name)
	}
	if diff := cmp.Diff(map[string]int{"quick": 1, "charge": 1, "fetch": 2}, runs); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
	seen := seenResults(model)
	want := []string{
		"toolu_quick error=false quick done",
		`toolu_charge error=true tool call interrupted: it started but did not finish (the worker running it stopped responding), and tool "charge" is not declared idempotent, so it was not run again; its effects, if any, are unknown`,
		"toolu_fetch error=false fetch done",
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("results the model saw (-want +got):\n%s", diff)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the run took longer than its deadline")
	}
}
