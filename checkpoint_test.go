package toolrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/storetest"
	"github.com/toolrun/toolrun/toolruntest"
)

// The crash tests run the run in a child process (this test binary, re-run
// with TOOLRUN_CRASH_CHILD set), kill it with SIGKILL at a chosen point, and
// finish the run in a fresh child from the checkpoint store. The tools count
// their executions in a file, per tool_use id, so the count survives the
// kill.

const crashRunID = "crash-run"

// TestCrashChild is the child process; it does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	if os.Getenv("TOOLRUN_CRASH_CHILD") == "" {
		t.Skip("helper process for the crash tests")
	}
	dir := os.Getenv("TOOLRUN_CRASH_DIR")
	blockOn := os.Getenv("TOOLRUN_CRASH_BLOCK") // the tool_use id whose first execution hangs
	record := func(name, id string) {
		f, err := os.OpenFile(filepath.Join(dir, "executions"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(f, "%s %s\n", name, id)
		f.Close()
	}
	hang := func(id string) {
		if id == blockOn {
			// Tell the parent the call is under way, then wait to be killed.
			os.WriteFile(filepath.Join(dir, "started-"+id), nil, 0o644)
			select {}
		}
	}
	type in struct {
		ID string `json:"id"`
	}
	charge := toolrun.NewTool("charge", "Charge a card (not idempotent)", func(ctx context.Context, in in) (string, error) {
		record("charge", in.ID)
		hang(in.ID)
		return "charged " + in.ID, nil
	})
	fetch := toolrun.NewTool("fetch", "Fetch a page (idempotent)", func(ctx context.Context, in in) (string, error) {
		record("fetch", in.ID)
		hang(in.ID)
		return "fetched " + in.ID, nil
	})
	fetch.Idempotent = true
	client := anthropic.NewClient(option.WithBaseURL(os.Getenv("TOOLRUN_CRASH_URL")),
		option.WithAPIKey(toolruntest.TestAPIKey), option.WithMaxRetries(0))
	r, err := toolrun.Open(context.Background(), client, userParams("go"), []toolrun.Tool{charge, fetch}, &toolrun.Options{
		Store: &filestore.Store{Dir: filepath.Join(dir, "store")},
		RunID: crashRunID,
		// One call at a time, so when a call hangs every call before it
		// has finished and been saved, and none after it has started.
		MaxParallelTools: 1,
	})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	res, err := r.Run(context.Background())
	fmt.Printf("stop=%s err=%v\n", res.StopReason, err)
	os.Exit(0)
}

// startChild runs TestCrashChild against the server at url.
func startChild(t *testing.T, url, dir, blockOn string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), "TOOLRUN_CRASH_CHILD=1", "TOOLRUN_CRASH_URL="+url,
		"TOOLRUN_CRASH_DIR="+dir, "TOOLRUN_CRASH_BLOCK="+blockOn)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// waitFor polls until cond holds; it fails the test after a generous bound
// so a broken child cannot hang CI.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func executions(t *testing.T, dir string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "executions"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	got := map[string]int{}
	for line := range strings.Lines(string(data)) {
		got[strings.TrimSpace(line)]++
	}
	return got
}

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	tests := []struct {
		name     string
		replies  []toolruntest.Reply
		blockOn  string // the call the first child hangs in; "" to kill it during a request
		wantRuns map[string]int
		// wantResult is the text of the result the model got for the
		// interrupted call, in the last request.
		wantResult string
	}{
		{
			name: "killed mid-tool, not idempotent: never run twice",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("f0", "fetch", map[string]string{"id": "f0"}), toolruntest.ToolUse("c1", "charge", map[string]string{"id": "c1"})),
				toolruntest.Message(toolruntest.Text("done")),
			},
			blockOn:    "c1",
			wantRuns:   map[string]int{"charge c1": 1, "fetch f0": 1},
			wantResult: "interrupted",
		},
		{
			name: "killed mid-tool, idempotent: run again",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("f1", "fetch", map[string]string{"id": "f1"})),
				toolruntest.Message(toolruntest.Text("done")),
			},
			blockOn:    "f1",
			wantRuns:   map[string]int{"fetch f1": 2},
			wantResult: "fetched f1",
		},
		{
			name: "killed mid-request: finished calls are not run again",
			replies: []toolruntest.Reply{
				toolruntest.Message(toolruntest.ToolUse("c2", "charge", map[string]string{"id": "c2"})),
				// The second request hangs until the child is killed.
				{Content: []toolruntest.Block{toolruntest.Text("never sent")}, Fault: toolruntest.Fault{EventDelay: time.Hour}},
				toolruntest.Message(toolruntest.Text("done")),
			},
			wantRuns:   map[string]int{"charge c2": 1},
			wantResult: "charged c2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(tt.replies...))
			dir := t.TempDir()
			child, out := startChild(t, s.URL, dir, tt.blockOn)
			if tt.blockOn != "" {
				waitFor(t, "the call to start", func() bool {
					_, err := os.Stat(filepath.Join(dir, "started-"+tt.blockOn))
					return err == nil
				})
			} else {
				waitFor(t, "the second request", func() bool { return len(s.Requests()) >= 2 })
			}
			child.Process.Signal(syscall.SIGKILL)
			child.Wait()

			child, out = startChild(t, s.URL, dir, "")
			if err := child.Wait(); err != nil {
				t.Fatalf("second child: %v\n%s", err, out)
			}
			if !strings.Contains(out.String(), "stop=end_turn err=<nil>") {
				t.Fatalf("second child did not finish the run:\n%s", out)
			}
			if diff := cmp.Diff(tt.wantRuns, executions(t, dir)); diff != "" {
				t.Errorf("executions per tool_use id (-want +got):\n%s", diff)
			}
			reqs := s.Requests()
			last := reqs[len(reqs)-1]
			var texts []string
			for _, m := range last.Conversation {
				for _, b := range m.Content {
					if b.Type == "tool_result" {
						texts = append(texts, b.ResultText())
					}
				}
			}
			if !strings.Contains(strings.Join(texts, "\n"), tt.wantResult) {
				t.Errorf("results the model saw = %q, want one containing %q", texts, tt.wantResult)
			}
		})
	}
}

// TestCheckpointSaveFailureStopsRun: a run whose journal cannot be written
// stops before running anything it could not record.
func TestCheckpointSaveFailureStopsRun(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"}))))
	var calls counter
	dir := t.TempDir()
	blocker := filepath.Join(dir, "not-a-dir")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{weatherTool(&calls)}, &toolrun.Options{
		Logger: discard(),
		Store:  &filestore.Store{Dir: filepath.Join(blocker, "store")}, // cannot be created
		RunID:  "r1",
	}).Run(t.Context())
	if err == nil || res.StopReason != toolrun.StopError || !strings.Contains(err.Error(), "saving the state") {
		t.Fatalf("Run = %q, %v; want StopError about saving the state", res.StopReason, err)
	}
	if calls.get("get_weather") != 0 {
		t.Error("a call ran although its start could not be journaled")
	}
}

// TestOpenResumesOrStarts: Open starts a new run when nothing is saved and
// resumes the saved one otherwise.
func TestOpenResumesOrStarts(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/x", Text: "y"})),
		toolruntest.Message(toolruntest.Text("done")),
	))
	store := &filestore.Store{Dir: t.TempDir()}
	var writes counter
	tools := func() []toolrun.Tool {
		w := writeTool(&writes)
		w.Policy = policy.RequireApproval("writes")
		return []toolrun.Tool{w}
	}
	opts := &toolrun.Options{Logger: discard(), Store: store, RunID: "approval-1"}
	r, err := toolrun.Open(t.Context(), client(s), userParams("go"), tools(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := r.Run(t.Context()); res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("StopReason = %q, want awaiting_approval", res.StopReason)
	}
	// Another process, a day later.
	r2, err := toolrun.Open(t.Context(), client(s), userParams("ignored: the saved run is resumed"), tools(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := r2.Result(); got == nil || len(got.Pending) != 1 {
		t.Fatalf("resumed Result = %+v, want one pending call", got)
	}
	if err := r2.Decide("w1", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	res, err := r2.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopEndTurn || writes.get("/tmp/x") != 1 {
		t.Fatalf("Run = %q, %v with %d writes; want end_turn with 1", res.StopReason, err, writes.get("/tmp/x"))
	}
	saved, err := store.Load(t.Context(), "approval-1")
	if err != nil || saved.StopReason != toolrun.StopEndTurn {
		t.Errorf("saved state = %+v, %v; want the finished run", saved, err)
	}
}

// The two-resumer race with real processes is storetest.RunResumers, run
// on filestore.Store by storetest's TestTwoResumersRunACallOnce and on sqlitestore
// by its own; the fault-injection suite races resumers under faults.

const resumerRunID = "resumer-run"

// suspendRun runs a run to StopAwaitingApproval in dir/store, with one
// pending call of the append tool, and returns its State.
func suspendRun(t *testing.T, dir string) *toolrun.State {
	t.Helper()
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.ToolUse("a1", "append", map[string]string{"id": "a1"}))))
	r, err := toolrun.Open(t.Context(), client(s), userParams("go"), []toolrun.Tool{storetest.AppendTool(dir)}, &toolrun.Options{
		Logger: discard(), Store: &filestore.Store{Dir: filepath.Join(dir, "store")}, RunID: resumerRunID,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("Run = %q, %v; want awaiting_approval", res.StopReason, err)
	}
	return r.State()
}

// TestStaleStateIsRefused: a State resumed after the store moved on (here,
// another runner finished the run) runs nothing and stops with ErrRunBusy.
func TestStaleStateIsRefused(t *testing.T) {
	dir := t.TempDir()
	stale := suspendRun(t, dir)
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
	opts := &toolrun.Options{Logger: discard(), Store: &filestore.Store{Dir: filepath.Join(dir, "store")}, RunID: resumerRunID}
	tools := []toolrun.Tool{storetest.AppendTool(dir)}
	r, err := toolrun.Open(t.Context(), client(s), userParams("ignored"), tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Decide("a1", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("first Run = %q, %v; want end_turn", res.StopReason, err)
	}
	finished, err := opts.Store.Load(t.Context(), resumerRunID)
	if err != nil {
		t.Fatal(err)
	}

	r, err = toolrun.Resume(client(s), stale, tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Decide("a1", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if !errors.Is(err, toolrun.ErrRunBusy) || res.StopReason != toolrun.StopError {
		t.Fatalf("Run of the stale state = %q, %v; want StopError wrapping ErrRunBusy", res.StopReason, err)
	}
	// It stays refused: the next step does not try again.
	if _, err := r.Next(t.Context()); !errors.Is(err, toolrun.ErrRunBusy) {
		t.Errorf("Next after the refusal: got %v, want ErrRunBusy", err)
	}
	if diff := cmp.Diff(map[string]int{"append a1": 1}, executions(t, dir)); diff != "" {
		t.Errorf("executions (-want +got):\n%s", diff)
	}
	if got := len(s.Requests()); got != 1 {
		t.Errorf("requests: got %d, want 1 (the stale runner sends none)", got)
	}
	after, err := opts.Store.Load(t.Context(), resumerRunID)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(finished)
	now, _ := json.Marshal(after)
	if diff := cmp.Diff(string(before), string(now)); diff != "" {
		t.Errorf("the stale runner changed the saved state (-before +after):\n%s", diff)
	}
}

// storeFiles lists the files of dir.
func storeFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestFileStoreRemovesAKilledSavesFile: the temporary file a save killed
// midway leaves is removed by the next use of the run, which still finds
// the last whole state.
func TestFileStoreRemovesAKilledSavesFile(t *testing.T) {
	for _, tt := range []struct {
		name      string
		use       func(ctx context.Context, s *filestore.Store) error
		wantFiles []string
	}{
		{"Load", func(ctx context.Context, s *filestore.Store) error {
			_, err := s.Load(ctx, "r1")
			return err
		}, []string{"r1.lock", "r1.state.json"}},
		{"Save", func(ctx context.Context, s *filestore.Store) error {
			return s.Save(ctx, "r1", &toolrun.State{Format: 2, Version: 2, Turns: 2}, 1)
		}, []string{"r1.lock", "r1.state.json"}},
		{"Delete", func(ctx context.Context, s *filestore.Store) error {
			return s.Delete(ctx, "r1")
		}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &filestore.Store{Dir: t.TempDir()}
			if err := s.Save(t.Context(), "r1", &toolrun.State{Format: 2, Version: 1, Turns: 1}, 0); err != nil {
				t.Fatal(err)
			}
			// What a save killed after writing half its file leaves.
			if err := os.WriteFile(filepath.Join(s.Dir, "r1.state.json.tmp"), []byte(`{"format":1,"vers`), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tt.use(t.Context(), s); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantFiles, storeFiles(t, s.Dir)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSaverChild saves a state again and again, each over the last, until
// it is killed, and writes the version it last saved to the file in
// TOOLRUN_SAVER_PROGRESS; it does nothing in a normal run.
func TestSaverChild(t *testing.T) {
	dir := os.Getenv("TOOLRUN_SAVER_DIR")
	if dir == "" {
		t.Skip("helper process for TestKillDuringSaves")
	}
	s := &filestore.Store{Dir: dir}
	big := strings.Repeat("x", 256<<10) // so that a kill may land inside a save
	for v := uint64(1); ; v++ {
		st := &toolrun.State{Format: 2, Version: v, Turns: int(v), Params: userParams(big)}
		if err := s.Save(context.Background(), "saver", st, v-1); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(os.Getenv("TOOLRUN_SAVER_PROGRESS"), []byte(strconv.FormatUint(v, 10)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKillDuringSaves kills a process with SIGKILL while it saves a run
// over and over: the next Open finds a whole state, and no temporary file
// is left.
func TestKillDuringSaves(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	tmpSeen := 0
	for rep := range 5 {
		dir, progress := t.TempDir(), filepath.Join(t.TempDir(), "progress")
		cmd := exec.Command(os.Args[0], "-test.run=^TestSaverChild$", "-test.v=false")
		cmd.Env = append(os.Environ(), "TOOLRUN_SAVER_DIR="+dir, "TOOLRUN_SAVER_PROGRESS="+progress)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		want := 3 + 7*rep // vary the moment of the kill
		waitFor(t, "the child's saves", func() bool {
			data, _ := os.ReadFile(progress)
			v, err := strconv.Atoi(string(data))
			return err == nil && v >= want
		})
		cmd.Process.Signal(syscall.SIGKILL)
		if err := cmd.Wait(); err == nil {
			t.Fatalf("the child ended by itself:\n%s", &out)
		}
		if slices.Contains(storeFiles(t, dir), "saver.state.json.tmp") {
			tmpSeen++
		}
		s := toolruntest.New(t, toolruntest.Script())
		r, err := toolrun.Open(t.Context(), client(s), userParams("ignored"), nil, &toolrun.Options{
			Logger: discard(), Store: &filestore.Store{Dir: dir}, RunID: "saver"})
		if err != nil {
			t.Fatalf("repetition %d: Open after the kill: %v", rep, err)
		}
		st := r.State()
		if st.Version < uint64(want) || st.Turns != int(st.Version) {
			t.Errorf("repetition %d: Open after the kill: got version %d with turns %d, want a whole state of version %d or later", rep, st.Version, st.Turns, want)
		}
		if diff := cmp.Diff([]string{"saver.lock", "saver.state.json"}, storeFiles(t, dir)); diff != "" {
			t.Errorf("repetition %d: files after Open (-want +got):\n%s", rep, diff)
		}
	}
	t.Logf("%d of 5 kills left a temporary file behind", tmpSeen)
}

// Two runners (in two processes, say) open the same suspended run and are
// given the same approval: one runs the call, the other is refused before it
// does anything.
func ExampleErrRunBusy() {
	server := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "charge", map[string]int{"cents": 1200})),
		toolruntest.Message(toolruntest.Text("Charged $12.")),
	))
	defer server.Close()
	dir, _ := os.MkdirTemp("", "runs")
	defer os.RemoveAll(dir)
	charge := toolrun.NewTool("charge", "Charge the card", func(ctx context.Context, in struct {
		Cents int `json:"cents"`
	}) (string, error) {
		fmt.Println("charging", in.Cents, "cents")
		return "charged", nil
	})
	charge.Policy = policy.RequireApproval("moves money")
	opts := &toolrun.Options{Store: &filestore.Store{Dir: dir}, RunID: "order-42", Logger: slog.New(slog.DiscardHandler)}
	params := anthropic.BetaMessageNewParams{
		Model:     anthropic.ModelClaudeSonnet5_5,
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Charge $12"))},
	}
	r, _ := toolrun.Open(context.Background(), server.Client(), params, []toolrun.Tool{charge}, opts)
	res, _ := r.Run(context.Background())
	fmt.Println(res.StopReason)

	a, _ := toolrun.Open(context.Background(), server.Client(), params, []toolrun.Tool{charge}, opts)
	b, _ := toolrun.Open(context.Background(), server.Client(), params, []toolrun.Tool{charge}, opts)
	_ = a.Decide("toolu_1", toolrun.Decision{})
	_ = b.Decide("toolu_1", toolrun.Decision{})
	res, _ = a.Run(context.Background())
	fmt.Println("a:", res.StopReason, res.Text())
	_, err := b.Run(context.Background())
	fmt.Println("b:", errors.Is(err, toolrun.ErrRunBusy))
	// Output:
	// awaiting_approval
	// charging 1200 cents
	// a: end_turn Charged $12.
	// b: true
}

// savesStore is a filestore.Store that keeps a copy of every state it saves.
type savesStore struct {
	filestore.Store
	mu    sync.Mutex // guards saved
	saved []*toolrun.State
}

func (s *savesStore) Save(ctx context.Context, id string, st *toolrun.State, prev uint64) error {
	if err := s.Store.Save(ctx, id, st, prev); err != nil {
		return err
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	var c toolrun.State
	if err := json.Unmarshal(data, &c); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saved = append(s.saved, &c)
	return nil
}

// TestCrashAfterAnySaveEndsAsScripted: a run resumed from any state it
// saved, as after a crash right after that save, ends as the run that did
// not crash ended, after as many turns and with the same history. Before
// the final answer and the stop were saved together, a crash between the
// two left a history ending in the answer, and the resumed run asked the
// model again.
func TestCrashAfterAnySaveEndsAsScripted(t *testing.T) {
	reply := func(req *toolruntest.Request) toolruntest.Reply {
		if len(req.Conversation) == 1 {
			return toolruntest.Message(toolruntest.Text("Fetching."), toolruntest.ToolUse("f1", "fetch", map[string]string{"id": "f1"}))
		}
		return toolruntest.Message(toolruntest.Text(fmt.Sprintf("Done, with %d messages.", len(req.Conversation))))
	}
	type in struct {
		ID string `json:"id"`
	}
	fetch := toolrun.NewTool("fetch", "Fetch a page (idempotent)", func(ctx context.Context, in in) (string, error) {
		return "fetched " + in.ID, nil
	})
	fetch.Idempotent = true
	s := toolruntest.New(t, toolruntest.Options{Func: reply})
	store := &savesStore{Store: filestore.Store{Dir: t.TempDir()}}
	opts := &toolrun.Options{Logger: discard(), Store: store, RunID: "r1"}
	want, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{fetch}, opts).Run(t.Context())
	if err != nil || want.StopReason != toolrun.StopEndTurn || want.Turns != 2 {
		t.Fatalf("the run without a crash: got %q after %d turns, %v; want end_turn after 2", want.StopReason, want.Turns, err)
	}
	if len(store.saved) < 4 {
		t.Fatalf("got %d saves, want a save before the first request, for each response, call and commit, and at the stop", len(store.saved))
	}
	for i, st := range store.saved {
		dir := t.TempDir()
		fs := &filestore.Store{Dir: dir}
		if err := fs.Save(t.Context(), "r1", st, 0); err != nil {
			t.Fatal(err)
		}
		r, err := toolrun.Open(t.Context(), client(s), userParams("go"), []toolrun.Tool{fetch}, &toolrun.Options{Logger: discard(), Store: fs, RunID: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Run(t.Context())
		if err != nil || got.StopReason != want.StopReason || got.Turns != want.Turns || len(got.Messages) != len(want.Messages) {
			t.Errorf("resumed after save %d of %d: got %q after %d turns with %d messages, %v; want %q after %d turns with %d messages",
				i+1, len(store.saved), got.StopReason, got.Turns, len(got.Messages), err, want.StopReason, want.Turns, len(want.Messages))
			continue
		}
		checkHistory(t, got.Messages)
	}
}

// TestFileStoreBlobs checks the blobs a filestore.Store keeps next to its
// states: saved and read back whole under any key, replaced by a later
// save, apart from a state of the same id, and gone once deleted.
func TestFileStoreBlobs(t *testing.T) {
	ctx := context.Background()
	f := &filestore.Store{Dir: filepath.Join(t.TempDir(), "store")}
	st := toolrun.New(anthropic.Client{}, anthropic.BetaMessageNewParams{Model: "m", MaxTokens: 1}, nil, nil).State()
	st.Version = 1
	if err := f.Save(ctx, "run/1", st, 0); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 1<<20)
	for _, key := range []string{"run/1", "../escape", "a b/ü", ".hidden", "k"} {
		if err := driver.Blobs(f).PutBlob(ctx, key, []byte("old")); err != nil {
			t.Fatalf("PutBlob(%q): %v", key, err)
		}
		if err := driver.Blobs(f).PutBlob(ctx, key, big); err != nil {
			t.Fatalf("PutBlob(%q): %v", key, err)
		}
		got, err := driver.Blobs(f).GetBlob(ctx, key)
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("GetBlob(%q): got %d bytes, %v; want the %d bytes saved", key, len(got), err, len(big))
		}
		if err := driver.Blobs(f).DeleteBlob(ctx, key); err != nil {
			t.Fatalf("DeleteBlob(%q): %v", key, err)
		}
		if _, err := driver.Blobs(f).GetBlob(ctx, key); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("GetBlob(%q) after DeleteBlob: got %v, want fs.ErrNotExist", key, err)
		}
		if err := driver.Blobs(f).DeleteBlob(ctx, key); err != nil {
			t.Fatalf("DeleteBlob(%q) of no blob: %v", key, err)
		}
	}
	if _, err := f.Load(ctx, "run/1"); err != nil {
		t.Fatalf("the state of a blob's key: %v", err)
	}
	entries, err := os.ReadDir(f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") || strings.HasSuffix(e.Name(), ".blob") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
