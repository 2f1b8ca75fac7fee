package toolrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

const toolChangeRunID = "tool-change-run"

// TestToolChangeCrashChild is the child process of
// TestToolChangeSurvivesCrash; it does nothing in a normal run. It runs
// the run to its suspension, changes its tools as TOOLRUN_TOOLCHANGE says
// (add, or add then remove), and dies before any other step.
func TestToolChangeCrashChild(t *testing.T) {
	if os.Getenv("TOOLRUN_TOOLCHANGE_CHILD") == "" {
		t.Skip("helper process for TestToolChangeSurvivesCrash")
	}
	var writes, reads counter
	w := writeTool(&writes)
	w.Policy = policy.RequireApproval("writes need a person")
	client := anthropic.NewClient(option.WithBaseURL(os.Getenv("TOOLRUN_TOOLCHANGE_URL")),
		option.WithAPIKey(toolruntest.TestAPIKey), option.WithMaxRetries(0))
	opts := &toolrun.Options{Store: &filestore.Store{Dir: os.Getenv("TOOLRUN_TOOLCHANGE_DIR")}, RunID: toolChangeRunID, Logger: discard()}
	r, err := toolrun.Open(context.Background(), client, userParams("go"), []toolrun.Tool{w}, opts)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	if res, err := r.Run(context.Background()); res.StopReason != toolrun.StopAwaitingApproval {
		fmt.Println("run:", res.StopReason, err)
		os.Exit(1)
	}
	if err := r.AddTools(readPathTool(&reads)); err != nil {
		fmt.Println("add:", err)
		os.Exit(1)
	}
	if os.Getenv("TOOLRUN_TOOLCHANGE") == "remove" {
		r.RemoveTools("read_file", "write_file")
	}
	os.Exit(0) // no other step: what the change saved is all there is
}

// TestToolChangeSurvivesCrash: with a Store, AddTools and RemoveTools save
// the State at once. A process that changes the tools of a run held
// awaiting approval and dies before the next turn leaves the change in
// the store, and the run resumed from it sends the model the tools as
// changed.
func TestToolChangeSurvivesCrash(t *testing.T) {
	tests := []struct {
		name      string
		change    string
		wantAdded []string
		wantTools []string // of the request after the resume
	}{
		{"add", "add", []string{"read_file"}, []string{"write_file", "read_file"}},
		{"add then remove", "remove", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/one", Text: "1"})),
				toolruntest.Message(toolruntest.Text("done")),
			))
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestToolChangeCrashChild$", "-test.v=false")
			cmd.Env = append(os.Environ(), "TOOLRUN_TOOLCHANGE_CHILD=1", "TOOLRUN_TOOLCHANGE_URL="+s.URL,
				"TOOLRUN_TOOLCHANGE_DIR="+dir, "TOOLRUN_TOOLCHANGE="+tt.change)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("child: %v\n%s", err, out.String())
			}

			store := &filestore.Store{Dir: dir}
			st, err := store.Load(t.Context(), toolChangeRunID)
			if err != nil {
				t.Fatal(err)
			}
			var added []string
			for _, d := range st.AddedTools() {
				added = append(added, *d.GetName())
			}
			if diff := cmp.Diff(added, tt.wantAdded); diff != "" {
				t.Errorf("the stored State's added tools (-got +want):\n%s", diff)
			}

			var writes, reads counter
			w := writeTool(&writes)
			w.Policy = policy.RequireApproval("writes need a person")
			r, err := toolrun.Open(t.Context(), client(s), userParams("go"), []toolrun.Tool{w, readPathTool(&reads)},
				&toolrun.Options{Store: store, RunID: toolChangeRunID, Logger: discard()})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Decide("w1", toolrun.Decision{}); err != nil {
				t.Fatal(err)
			}
			res, err := r.Run(t.Context())
			if err != nil || res.StopReason != toolrun.StopEndTurn {
				t.Fatalf("Run = %q, %v; want end_turn", res.StopReason, err)
			}
			reqs := s.Requests()
			if diff := cmp.Diff(reqs[len(reqs)-1].ToolNames(), tt.wantTools); diff != "" {
				t.Errorf("the tools of the request after the resume (-got +want):\n%s", diff)
			}
		})
	}
}

// TestToolChangeSaved: with a Store, the State in the store holds a tool
// change as soon as AddTools, AddToolParams or RemoveTools returns, with
// no turn taken since.
func TestToolChangeSaved(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("done"))))
	store := &filestore.Store{Dir: t.TempDir()}
	var reads counter
	r := toolrun.New(client(s), userParams("go"), nil, &toolrun.Options{Store: store, RunID: "r", Logger: discard()})
	stored := func() []string {
		t.Helper()
		st, err := store.Load(t.Context(), "r")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range st.AddedTools() {
			b, _ := json.Marshal(d)
			var def struct {
				Name string `json:"name"`
			}
			json.Unmarshal(b, &def)
			names = append(names, def.Name)
		}
		return names
	}
	if err := r.AddTools(readPathTool(&reads)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored(), []string{"read_file"}); diff != "" {
		t.Errorf("after AddTools (-got +want):\n%s", diff)
	}
	if err := r.AddToolParams(anthropic.BetaToolUnionParam{OfWebSearchTool20250305: &anthropic.BetaWebSearchTool20250305Param{}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored(), []string{"read_file", "web_search"}); diff != "" {
		t.Errorf("after AddToolParams (-got +want):\n%s", diff)
	}
	r.RemoveTools("read_file")
	if diff := cmp.Diff(stored(), []string{"web_search"}); diff != "" {
		t.Errorf("after RemoveTools (-got +want):\n%s", diff)
	}
}

// TestAddedToolMaxParallel: a tool added mid-run runs under its own
// ToolConfig.MaxParallel, as one given to New does: of four calls of it in
// one turn, no more than its bound run at once, while the run's own bound
// is higher.
func TestAddedToolMaxParallel(t *testing.T) {
	const bound = 2
	var calls []toolruntest.Block
	for i := range 4 {
		calls = append(calls, toolruntest.ToolUse(fmt.Sprintf("r%d", i), "read_file", map[string]any{"path": fmt.Sprint(i)}))
	}
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.Text("first")),
		toolruntest.Message(calls...),
		toolruntest.Message(toolruntest.Text("done")),
	))
	var (
		mu           sync.Mutex
		now, highest int
		gate         = make(chan struct{})
		arrived      = make(chan struct{}, 4)
	)
	read := toolrun.NewTool("read_file", "Read a file", func(ctx context.Context, in struct {
		Path string `json:"path"`
	}) (string, error) {
		mu.Lock()
		now++
		highest = max(highest, now)
		mu.Unlock()
		arrived <- struct{}{}
		<-gate
		mu.Lock()
		now--
		mu.Unlock()
		return "contents of " + in.Path, nil
	})
	read.MaxParallel = bound
	r := toolrun.New(client(s), userParams("go"), nil, &toolrun.Options{Logger: discard(), MaxParallelTools: 8})
	if _, err := r.Next(t.Context()); err != nil { // the first turn, before the tool exists
		t.Fatal(err)
	}
	r.AppendMessages(anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("read them")))
	if err := r.AddTools(read); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(context.Background())
		done <- err
	}()
	// Let the calls in as the bound allows: each time the bound is
	// reached, every call in is released, and the next ones may start.
	for range 4 {
		<-arrived
		gate <- struct{}{}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if highest > bound {
		t.Errorf("%d calls of the added tool ran at once, want at most %d", highest, bound)
	}
	if highest < 1 {
		t.Errorf("the added tool never ran")
	}
}

// listedTools returns the names in the tool list of req's body, without
// what the history's blocks add or remove.
func listedTools(req *toolruntest.Request) []string {
	var tools []struct {
		Name string `json:"name"`
	}
	json.Unmarshal(req.Tools, &tools)
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}

// toolBlocks returns the tool_addition and tool_removal blocks of the
// conversation req stands for, in order, as "+name" and "-name".
func toolBlocks(t *testing.T, req *toolruntest.Request) []string {
	t.Helper()
	var out []string
	for _, m := range req.Conversation {
		if m.Role != "system" {
			continue
		}
		for _, b := range m.Content {
			var block struct {
				Tool struct {
					Name       string `json:"name"`
					Definition struct {
						Name string `json:"name"`
					} `json:"definition"`
				} `json:"tool"`
			}
			if err := json.Unmarshal(b.Raw, &block); err != nil {
				t.Fatal(err)
			}
			switch b.Type {
			case "tool_addition":
				out = append(out, "+"+block.Tool.Definition.Name)
			case "tool_removal":
				out = append(out, "-"+block.Tool.Name)
			}
		}
	}
	return out
}

// TestAddedOnlyToolResumed: a tool the run had only through AddTools,
// removed, added again and the run resumed with its function among the
// tools given to Resume, is told the model once: under the inline-tools
// beta in the history's blocks alone, never also in the tool list (the
// API refuses a tool given twice), and without the beta in the list once.
// Resumed while it is removed, it stays out: its calls are answered as
// an unknown tool's, not run, and it may be added again.
func TestAddedOnlyToolResumed(t *testing.T) {
	resume := func(t *testing.T, s *toolruntest.Server, r *toolrun.Runner, params anthropic.BetaMessageNewParams, reads *counter) *toolrun.Runner {
		t.Helper()
		b, err := json.Marshal(r.State())
		if err != nil {
			t.Fatal(err)
		}
		var st toolrun.State
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		var weather counter
		r2, err := toolrun.Resume(client(s), &st, []toolrun.Tool{weatherTool(&weather), readPathTool(reads)}, &toolrun.Options{Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		return r2
	}
	next := func(t *testing.T, r *toolrun.Runner) {
		t.Helper()
		r.AppendMessages(anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("more")))
		if _, err := r.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for _, inline := range []bool{true, false} {
		params := userParams("go")
		name := "tool list"
		if inline {
			params, name = inlineParams("go"), "inline tools"
		}
		t.Run(name+"/re-added then resumed", func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.Text("1")),
				toolruntest.Message(toolruntest.Text("2")),
				toolruntest.Message(toolruntest.ToolUse("r1", "read_file", map[string]any{"path": "/a"})),
				toolruntest.Message(toolruntest.Text("done")),
			))
			var weather, reads counter
			r := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&weather)}, &toolrun.Options{Logger: discard()})
			if _, err := r.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := r.AddTools(readPathTool(&reads)); err != nil {
				t.Fatal(err)
			}
			next(t, r)
			r.RemoveTools("read_file")
			if err := r.AddTools(readPathTool(&reads)); err != nil {
				t.Fatal(err)
			}
			r2 := resume(t, s, r, params, &reads)
			next(t, r2)
			reqs := s.Requests()
			last := reqs[len(reqs)-1]
			wantList, wantBlocks := []string{"get_weather", "read_file"}, []string(nil)
			if inline {
				wantList, wantBlocks = []string{"get_weather"}, []string{"+read_file", "-read_file", "+read_file"}
			}
			if diff := cmp.Diff(listedTools(last), wantList); diff != "" {
				t.Errorf("the tool list after the resume (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(toolBlocks(t, last), wantBlocks); diff != "" {
				t.Errorf("the history's tool blocks after the resume (-got +want):\n%s", diff)
			}
			if reads.get("/a") != 1 {
				t.Errorf("read_file ran %d times, want once", reads.get("/a"))
			}
		})
		t.Run(name+"/resumed while removed", func(t *testing.T) {
			s := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.Text("1")),
				toolruntest.Message(toolruntest.ToolUse("r1", "read_file", map[string]any{"path": "/a"})),
				toolruntest.Message(toolruntest.Text("2")),
				toolruntest.Message(toolruntest.Text("3")),
			))
			var weather, reads counter
			r := toolrun.New(client(s), params, []toolrun.Tool{weatherTool(&weather)}, &toolrun.Options{Logger: discard()})
			if _, err := r.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := r.AddTools(readPathTool(&reads)); err != nil {
				t.Fatal(err)
			}
			r.RemoveTools("read_file")
			r2 := resume(t, s, r, params, &reads)
			next(t, r2) // the model calls read_file, which is gone
			if reads.get("/a") != 0 {
				t.Errorf("read_file ran %d times after it was removed, want 0", reads.get("/a"))
			}
			reqs := s.Requests()
			if got := listedTools(reqs[1]); slices.Contains(got, "read_file") {
				t.Errorf("the tool list after the resume = %v, want no read_file", got)
			}
			if got := toolruntest.ResultTexts(r2.Messages())["r1"]; !strings.Contains(got, "unknown") {
				t.Errorf("the removed tool's call got %q, want it answered as an unknown tool", got)
			}
			if err := r2.AddTools(readPathTool(&reads)); err != nil {
				t.Fatalf("AddTools of the removed tool after the resume = %v, want nil", err)
			}
			next(t, r2)
			last := s.Requests()[len(s.Requests())-1]
			if diff := cmp.Diff(last.ToolNames(), []string{"get_weather", "read_file"}); diff != "" {
				t.Errorf("the model's tools once added again (-got +want):\n%s", diff)
			}
			if got := listedTools(last); inline && slices.Contains(got, "read_file") {
				t.Errorf("under the beta the tool list = %v, want no read_file", got)
			}
		})
	}
}
