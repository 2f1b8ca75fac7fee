package toolrun_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestNestedModulesImportNoInternal: no nested module (bench, cmd/toolrun, serve, sqlitestore,
// temporal, toolrunotel, any later one) depends on a package under the
// root module's internal/. The nested modules are versioned apart from the
// root, so an internal package they used would be a compatibility contract
// nothing checks: a module tagged at one version could fail to compile
// against the root tagged at the next. Tests are included (-test).
func TestNestedModulesImportNoInternal(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		msg := "missing component: the go command, to list the nested modules' dependencies"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; skipped because CI is not set")
	}
	var mods []string
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" && filepath.Dir(p) != "." {
			mods = append(mods, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bench", "cmd/toolrun", "serve", "sqlitestore", "temporal", "toolrunotel"} {
		if !slices.Contains(mods, want) {
			t.Errorf("nested module %s not found (found %v)", want, mods)
		}
	}
	for _, mod := range mods {
		t.Run(mod, func(t *testing.T) {
			// Every package the module's packages and tests reach, with the
			// module it is in and its imports: a package of this module
			// (the nested one) may not import the root's internal/.
			cmd := exec.CommandContext(t.Context(), goBin, "list", "-deps", "-test",
				"-f", "{{with .Module}}{{.Path}}{{end}}\t{{.ImportPath}}\t{{join .Imports \" \"}}", "./...")
			cmd.Dir = mod
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps -test ./... in %s: %v\n%s", mod, err, stderr.String())
			}
			modPath := "github.com/toolrun/toolrun/" + filepath.ToSlash(mod)
			var got []string
			own := 0
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				f := strings.Split(sc.Text(), "\t")
				if len(f) != 3 || f[0] != modPath {
					continue
				}
				own++
				for _, p := range strings.Fields(f[2]) {
					if strings.HasPrefix(p, "github.com/toolrun/toolrun/internal/") && !slices.Contains(got, p) {
						got = append(got, p)
					}
				}
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			if own == 0 {
				t.Fatalf("go list in %s listed no package of module %s", mod, modPath)
			}
			if len(got) > 0 {
				t.Errorf("module %s depends on the root's internal packages %v; export what it needs from the root instead", mod, got)
			}
		})
	}
}

// twoAwaiting runs a turn with two calls of a tool that needs a person
// and returns the State it stops with: w1 and w2 await a decision.
func twoAwaiting(t *testing.T) *toolrun.State {
	t.Helper()
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(
			toolruntest.ToolUse("w1", "write_file", writeIn{Path: "/tmp/one", Text: "1"}),
			toolruntest.ToolUse("w2", "write_file", writeIn{Path: "/tmp/two", Text: "2"})),
	))
	var writes counter
	w := writeTool(&writes)
	w.Policy = policy.RequireApproval("writes need a person")
	r := toolrun.New(client(s), userParams("go"), []toolrun.Tool{w}, &toolrun.Options{Logger: discard()})
	res, _ := r.Run(t.Context())
	if res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("StopReason = %q, want awaiting_approval", res.StopReason)
	}
	return r.State()
}

// TestDriverAPI: what a driver outside the module uses to hold a run as
// data (HasCall, CanDecide, Skeleton, Merge, ForCall) agrees with
// State.Decide and keeps the run whole across a skeleton and a merge.
func TestDriverAPI(t *testing.T) {
	st := twoAwaiting(t)
	if !driver.HasCall(st, "w1") || !driver.HasCall(st, "w2") || driver.HasCall(st, "nope") {
		t.Fatalf("HasCall: w1 %v, w2 %v, nope %v; want true, true, false", driver.HasCall(st, "w1"), driver.HasCall(st, "w2"), driver.HasCall(st, "nope"))
	}
	var nilState *toolrun.State
	if driver.HasCall(nilState, "w1") {
		t.Error("a nil State has call w1")
	}
	allow := toolrun.Decision{Kind: toolrun.Allow}
	if err := driver.CanDecide(st, "w1", allow); err != nil {
		t.Fatalf("CanDecide(w1) = %v, want nil", err)
	}
	if got := len(st.AwaitingApproval()); got != 2 {
		t.Fatalf("CanDecide changed the state: %d calls await, want 2", got)
	}
	if err := driver.CanDecide(st, "w1", toolrun.Decision{Kind: toolrun.Allow, Input: json.RawMessage(`{`)}); err == nil {
		t.Error("CanDecide accepts input that is not JSON")
	}

	skel := driver.Skeleton(st)
	if len(skel.Params.Messages) != 0 {
		t.Errorf("the skeleton holds %d messages, want none", len(skel.Params.Messages))
	}
	if len(st.Params.Messages) == 0 {
		t.Fatal("Skeleton emptied the State it was cut from")
	}
	if err := skel.Decide("w1", allow); err != nil {
		t.Fatalf("Decide on the skeleton: %v", err)
	}
	err := driver.CanDecide(skel, "w1", toolrun.Decision{Kind: toolrun.Deny})
	if !errors.Is(err, toolrun.ErrNotAwaitingApproval) {
		t.Errorf("CanDecide for a decided call = %v, want ErrNotAwaitingApproval", err)
	}
	if err := st.Decide("w1", toolrun.Decision{Kind: toolrun.Deny}); err != nil {
		t.Fatalf("a decision on the skeleton reached the whole State: %v", err)
	}

	whole := driver.Merge(skel, st)
	if len(whole.Params.Messages) != len(st.Params.Messages) {
		t.Errorf("merged history has %d messages, want %d", len(whole.Params.Messages), len(st.Params.Messages))
	}
	if got := whole.AwaitingApproval(); len(got) != 1 || got[0].Call.ID != "w2" {
		t.Errorf("merged state awaits %v, want w2 alone (w1 decided in the skeleton)", got)
	}
	// The merged state is whole: it resumes and its turn ends as the
	// decisions say.
	b, err := json.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	var back toolrun.State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("the merged state does not round-trip: %v", err)
	}

	one := driver.ForCall(st, "w2")
	if !driver.HasCall(one, "w2") || driver.HasCall(one, "w1") {
		t.Errorf("ForCall(w2): has w1 %v, w2 %v; want w2 alone", driver.HasCall(one, "w1"), driver.HasCall(one, "w2"))
	}
	if len(one.Params.Messages) != 0 {
		t.Errorf("ForCall holds %d messages, want none", len(one.Params.Messages))
	}
	if !driver.HasCall(st, "w1") {
		t.Error("ForCall changed the State it was cut from")
	}
}

// TestRetryableExported: the exported rule classifies what the real
// client returns for a refused request (400: not retryable), a rate limit
// (429: retryable, with the wait the server asked for) and an overload
// (529: retryable).
func TestRetryableExported(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Reply{Fault: toolruntest.Fault{Status: http.StatusBadRequest}},
		toolruntest.RateLimited(7*time.Second),
		toolruntest.Overloaded(),
	))
	c := s.Client(option.WithMaxRetries(0))
	for _, tc := range []struct {
		name string
		ok   bool
		wait time.Duration
	}{{"400", false, 0}, {"429", true, 7 * time.Second}, {"529", true, 0}} {
		_, err := c.Beta.Messages.New(t.Context(), userParams("go"))
		if err == nil {
			t.Fatalf("%s: the request succeeded", tc.name)
		}
		ok, wait := driver.Retryable(err)
		if ok != tc.ok || (tc.wait != 0 && wait != tc.wait) {
			t.Errorf("%s: Retryable(%v) = %v, %v; want %v, %v", tc.name, err, ok, wait, tc.ok, tc.wait)
		}
	}
	if toolrun.DefaultMaxParallelTools <= 0 {
		t.Errorf("DefaultMaxParallelTools = %d", toolrun.DefaultMaxParallelTools)
	}
}

// bigTool returns a result of 2 MB of text, over the default result
// limit, with runes of two bytes so that a cut falls inside one.
func bigTool() toolrun.Tool {
	text := strings.Repeat("é", 1<<20)
	return toolrun.NewTool("big", "Returns a lot", func(ctx context.Context, in struct{}) (string, error) {
		return text, nil
	})
}

// TestCutResultAsInProcess: a result cut with CutResult where the call
// runs and recorded in the State (as a driver that carries results
// through an activity does) reaches the model exactly as the whole
// result does in process: one cut, one note, the same bytes.
func TestCutResultAsInProcess(t *testing.T) {
	script := func() toolruntest.Options {
		return toolruntest.Script(
			toolruntest.Message(toolruntest.ToolUse("b1", "big", map[string]any{})),
			toolruntest.Message(toolruntest.Text("ok")))
	}
	sent := func(s *toolruntest.Server) []toolruntest.Block {
		reqs := s.Requests()
		if len(reqs) != 2 {
			t.Fatalf("got %d requests, want 2", len(reqs))
		}
		return toolResults(reqs[1])
	}

	// In process.
	s1 := toolruntest.New(t, script())
	r := toolrun.New(client(s1), userParams("go"), []toolrun.Tool{bigTool()}, &toolrun.Options{Logger: discard()})
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("in process: %v, %v", res.StopReason, err)
	}
	want := sent(s1)

	// A driver: the step plans the call, another runner runs it and cuts
	// its result, the result is recorded in the State, a third runner
	// commits the turn.
	s2 := toolruntest.New(t, script())
	opts := &toolrun.Options{Logger: discard()}
	step := toolrun.New(client(s2), userParams("go"), []toolrun.Tool{bigTool()}, opts)
	calls, err := driver.Advance(t.Context(), step)
	if err != nil || len(calls) != 1 {
		t.Fatalf("Advance = %v, %v; want one call", calls, err)
	}
	st := step.State()
	worker, err := toolrun.Resume(client(s2), driver.ForCall(st, "b1"), []toolrun.Tool{bigTool()}, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := driver.ExecuteCall(t.Context(), worker, "b1")
	if err != nil {
		t.Fatal(err)
	}
	cut := driver.CutResult(worker, res)
	if !cut.Truncated || len(cut.Content) != 2 {
		t.Fatalf("CutResult: truncated %v, %d blocks; want a cut text and its note", cut.Truncated, len(cut.Content))
	}
	if b, _ := json.Marshal(cut); len(b) > 150_000 {
		t.Errorf("the cut result is %d bytes of JSON, want it near the 100 KB limit", len(b))
	}
	if len(res.Content[0].OfText.Text) != 2<<20 {
		t.Errorf("CutResult changed the result it was given")
	}
	if err := driver.SetResult(st, "b1", cut); err != nil {
		t.Fatal(err)
	}
	commit, err := toolrun.Resume(client(s2), st, []toolrun.Tool{bigTool()}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := commit.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("driver: %v, %v", res.StopReason, err)
	}
	if diff := cmp.Diff(want, sent(s2)); diff != "" {
		t.Errorf("the model saw (-in process +driver):\n%.2000s", diff)
	}
	// A result within the limit is returned as it is.
	small := &toolrun.ToolResult{Call: toolrun.ToolCall{Name: "big"}, Content: []toolrun.Content{toolrun.Text("short")}}
	if driver.CutResult(worker, small) != small {
		t.Error("CutResult copied a result within the limit")
	}
}
