package transcript_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
	"github.com/toolrun/toolrun/transcript"
)

// helperEnv names the transcript a helper process writes; it is set only
// in the process that TestKillMidTool starts.
const helperEnv = "TOOLRUN_TRANSCRIPT_HELPER_OUT"

// TestHelperProcess is not a test: run by TestKillMidTool in a process of
// its own, it records a run whose tool blocks forever, until it is killed.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("a helper process for TestKillMidTool")
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := transcript.NewRecorder(f, nil) // an *os.File: no buffer between a line and the kernel
	s := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.Text("Let me wait."), toolruntest.ToolUse("toolu_wait", "wait_forever", nil)),
		toolruntest.Message(toolruntest.Text("never sent")),
	))
	defer s.Close()
	block := toolrun.NewTool("wait_forever", "Blocks", func(ctx context.Context, in struct{}) (string, error) {
		<-ctx.Done() // never: the process is killed first
		return "", ctx.Err()
	})
	toolrun.New(client(s), userParams("wait"), []toolrun.Tool{block}, &toolrun.Options{Logger: discard(), OnEvent: rec.Observe}).Run(context.Background())
	t.Fatal("the run returned; it should have been killed in its tool")
}

// TestKillMidTool kills a process with SIGKILL while its run is in a tool
// call, and reads back its transcript: valid, and whole up to that call.
func TestKillMidTool(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Wait until the transcript shows the tool started.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for started := false; !started; {
		select {
		case err := <-exited:
			t.Fatalf("the helper exited before its tool started: %v\n%s", err, stderr.Bytes())
		case <-ctx.Done():
			t.Fatalf("the helper's tool did not start in time\n%s", stderr.Bytes())
		case <-tick.C:
			b, _ := os.ReadFile(path)
			started = bytes.Contains(b, []byte(`"type":"tool_started"`))
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := <-exited
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the helper ended with %v, want it killed by SIGKILL\n%s", err, stderr.Bytes())
	}

	tr, err := transcript.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the transcript of the killed run: %v", err)
	}
	want := []string{"1:request", "1:response", "1:decision", "1:tool_started"}
	if diff := cmp.Diff(want, types(tr)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if tr.Torn != "" || tr.Stop() != nil {
		t.Errorf("Torn = %q, Stop() = %v; want no torn line and no stop", tr.Torn, tr.Stop())
	}
	turns := tr.Turns()
	if len(turns) != 1 || len(turns[0].Calls) != 1 {
		t.Fatalf("Turns() = %+v, want one turn with one call", turns)
	}
	c := turns[0].Calls[0]
	if c.ID != "toolu_wait" || c.Started == nil || c.Finished != nil {
		t.Errorf("call = %+v, want toolu_wait started and not finished", c)
	}
}
