package toolrun_test

import (
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/toolruntest"
)

// A finished run re-opened from its store, in a process that received no
// response of its own, still answers Text with the model's final answer:
// the history holds it.
func TestResultTextOfReopenedFinishedRun(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/x", Text: "y"})),
		toolruntest.Message(toolruntest.Text("Refunded.")),
	))
	var writes counter
	opts := &toolrun.Options{Logger: discard(), Store: &filestore.Store{Dir: t.TempDir()}, RunID: "refund-1"}
	r, err := toolrun.Open(t.Context(), client(s), userParams("refund order 42"), []toolrun.Tool{writeTool(&writes)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
	}
	if got, want := res.Text(), "Refunded."; got != want {
		t.Fatalf("first process: Text() = %q, want %q", got, want)
	}

	// Another process opens the finished run: it sends nothing and runs
	// nothing, and its Result reads the answer from the saved history.
	r2, err := toolrun.Open(t.Context(), client(s), userParams("ignored"), []toolrun.Tool{writeTool(&writes)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	res2, err := r2.Run(t.Context())
	if err != nil || res2.StopReason != toolrun.StopEndTurn {
		t.Fatalf("re-opened Run = %q, %v; want end_turn", res2.StopReason, err)
	}
	if got, want := res2.Text(), "Refunded."; got != want {
		t.Errorf("re-opened run: Text() = %q, want %q", got, want)
	}
	if got, want := r2.Result().Text(), "Refunded."; got != want {
		t.Errorf("re-opened run: Result().Text() = %q, want %q", got, want)
	}
	if got := writes.get("/tmp/x"); got != 1 {
		t.Errorf("write_file ran %d times, want 1", got)
	}
	if got := len(s.Requests()); got != 2 {
		t.Errorf("the server got %d requests, want 2 (none from the re-opened run)", got)
	}
}
