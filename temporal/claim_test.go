package temporal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/filestore"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// payloadSizes returns the size of the data of every payload in m, with
// where it is, walking every message field, list and map of m.
func payloadSizes(m protoreflect.Message, where string, out map[string]int) {
	if p, ok := m.Interface().(*commonpb.Payload); ok {
		out[where] = max(out[where], len(p.GetData()))
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := where + "." + string(fd.Name())
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				payloadSizes(v.List().Get(i).Message(), name, out)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				payloadSizes(mv.Message(), name, out)
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			payloadSizes(v.Message(), name, out)
		}
		return true
	})
}

// largePayloads returns the payloads of workflow id's history (every
// execution of it) over limit bytes, as "event type field: size", and
// how many events it read.
func largePayloads(t *testing.T, c client.Client, id string, limit int) ([]string, int) {
	t.Helper()
	it := c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var large []string
	events := 0
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		events++
		sizes := map[string]int{}
		payloadSizes(proto.Clone(e).ProtoReflect(), "", sizes)
		for where, n := range sizes {
			if n > limit {
				large = append(large, fmt.Sprintf("event %d %s%s: %d bytes", e.GetEventId(), e.GetEventType(), where, n))
			}
		}
	}
	return large, events
}

// blobs lists the claims a filestore.Store in dir holds.
func blobs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".blob") {
			out = append(out, e.Name())
		}
	}
	return out
}

type bigIn struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

// TestClaimCheckOnServer runs values of 1 MB through a run on a real
// server, with the workers' Store a filestore.Store: a tool result (the
// workers' MaxResultBytes raised), a person's edited input and a deny
// reason. Each reaches the model or the tool whole, no payload of the
// workflow's history is over the claim threshold, and the Store holds no
// claim once the run has ended. The same decisions with no Store on the
// client are refused with ErrDecisionTooLarge.
func TestClaimCheckOnServer(t *testing.T) {
	c := dialTemporal(t)
	big := strings.Repeat("x", 1<<20)
	tests := []struct {
		name    string
		history string // the golden history to record it as, if any
		// approval makes the tool need one, and decide gives it.
		approval bool
		decide   func(ctx context.Context, id string, opts *temporal.ClientOptions) error
		result   string // what the tool returns
		wantSeen string // the result the model sees
		wantRun  string // what the tool ran with, "" for not run
	}{
		{
			name:     "1 MB tool result",
			history:  "claim-result",
			result:   big,
			wantSeen: "b1 error=false " + big,
			wantRun:  "/a 0",
		},
		{
			name:     "1 MB edited input",
			history:  "claim-decision",
			approval: true,
			decide: func(ctx context.Context, id string, opts *temporal.ClientOptions) error {
				in := fmt.Sprintf(`{"path":"/edited","text":%q}`, big)
				return temporal.Decide(ctx, c, id, "b1", toolrun.Decision{Kind: toolrun.Allow, Input: []byte(in)}, opts)
			},
			result:   "ok",
			wantSeen: "b1 error=false ok",
			wantRun:  fmt.Sprintf("/edited %d", len(big)),
		},
		{
			name:     "1 MB deny reason by signal",
			approval: true,
			decide: func(ctx context.Context, id string, opts *temporal.ClientOptions) error {
				return temporal.DecideBySignal(ctx, c, id, "b1", policy.Deny(big), opts)
			},
			wantSeen: "b1 error=true tool call denied: " + big,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var ran []string
			tool := toolrun.NewTool("put", "Puts a file", func(ctx context.Context, in bigIn) (string, error) {
				mu.Lock()
				ran = append(ran, fmt.Sprintf("%s %d", in.Path, len(in.Text)))
				mu.Unlock()
				return tt.result, nil
			})
			if tt.approval {
				tool.Policy = policy.RequireApproval("puts need a person")
			}
			model := toolruntest.New(t, toolruntest.Script(
				toolruntest.Message(toolruntest.ToolUse("b1", "put", bigIn{Path: "/a"})),
				toolruntest.Message(toolruntest.Text("Done."))))
			dir := filepath.Join(t.TempDir(), "store")
			store := &filestore.Store{Dir: dir}
			queue := newQueue("toolrun-claim")
			inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{tool},
				&toolrun.Options{Logger: discard(), Store: store, MaxResultBytes: 2 << 20}))
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.approval {
				waitFor(t, 30*time.Second, "b1 in Pending", func() bool {
					p, err := temporal.Pending(ctx, c, queue, nil)
					return err == nil && len(p) == 1
				})
				// Without the Store, the decision is refused before it
				// is sent, and says what would let it through.
				err := tt.decide(ctx, queue, nil)
				if !errors.Is(err, temporal.ErrDecisionTooLarge) || !strings.Contains(err.Error(), "ClientOptions.Store") {
					t.Fatalf("without a Store: got %v, want ErrDecisionTooLarge naming ClientOptions.Store", err)
				}
				if err := tt.decide(ctx, queue, &temporal.ClientOptions{Store: store}); err != nil {
					t.Fatalf("with the Store: %v", err)
				}
			}
			var out temporal.Outcome
			if err := run.Get(ctx, &out); err != nil {
				t.Fatal(err)
			}
			if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
				t.Fatalf("got outcome %q (%s) %q, want end_turn %q", out.StopReason, out.Detail, out.Text, "Done.")
			}
			seen := seenResults(model)
			if len(seen) != 1 || seen[0] != tt.wantSeen {
				t.Errorf("the model saw %d results, %.200q…; want %.200q…", len(seen), seen, tt.wantSeen)
			}
			mu.Lock()
			gotRan := strings.Join(ran, ",")
			mu.Unlock()
			if gotRan != tt.wantRun {
				t.Errorf("the tool ran with %q, want %q", gotRan, tt.wantRun)
			}
			large, events := largePayloads(t, c, queue, temporal.DefaultClaimThreshold)
			if events == 0 {
				t.Fatal("no history read")
			}
			if len(large) > 0 {
				t.Errorf("payloads over the claim threshold of %d bytes:\n%s", temporal.DefaultClaimThreshold, strings.Join(large, "\n"))
			}
			if tt.history != "" {
				recordHistory(t, c, queue, tt.history)
			}
			if left := blobs(t, dir); len(left) > 0 {
				t.Errorf("claims left in the Store after the run ended: %q", left)
			}
			whole, err := temporal.LoadState(ctx, store, &out)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(whole.Params.Messages); got != 4 {
				t.Errorf("got a final state of %d messages, want 4", got)
			}
		})
	}
}

// blobStore is a toolrun.Store in memory that keeps blobs too, and
// records the most blobs it held at once. With lose set, it keeps no
// blob it is given.
type blobStore struct {
	memStore
	lose  bool
	mu    sync.Mutex // guards blobs, most
	blobs map[string][]byte
	most  int
}

func (b *blobStore) PutBlob(ctx context.Context, key string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lose {
		return nil
	}
	if b.blobs == nil {
		b.blobs = map[string][]byte{}
	}
	b.blobs[key] = append([]byte(nil), data...)
	b.most = max(b.most, len(b.blobs))
	return nil
}

func (b *blobStore) GetBlob(ctx context.Context, key string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.blobs[key]
	if !ok {
		return nil, fmt.Errorf("blob %q: %w", key, os.ErrNotExist)
	}
	return data, nil
}

func (b *blobStore) DeleteBlob(ctx context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.blobs, key)
	return nil
}

func (b *blobStore) count() (now, most int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.blobs), b.most
}

// TestClaimsDeletedAsTheRunGoes runs 6 turns of 100 KB results through
// the claim check: every activity's input and result stays under the
// threshold, the model sees each page whole, each claim is deleted by
// the step after the one that read it (so the Store never holds more
// than the claims of two turns), and none is left at the end.
func TestClaimsDeletedAsTheRunGoes(t *testing.T) {
	const turns = 6
	s := toolruntest.New(t, toolruntest.Options{Func: bigRun(turns)})
	store := &blobStore{}
	var p payloads
	env := measuredEnv(t, temporal.NewActivities(s.Client(), []toolrun.Tool{fetchTool()}, &toolrun.Options{Logger: discard(), Store: store, MaxResultBytes: 1 << 20}), &p)
	env.RegisterActivityWithOptions(temporal.NewActivities(s.Client(), nil, &toolrun.Options{Logger: discard(), Store: store}).DeleteClaims,
		activity.RegisterOptions{Name: temporal.DeleteClaimsActivity})
	ro := fastRetries
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("read"), &ro))
	out := outcome(t, env)
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Read them all." {
		t.Fatalf("got %q (%s) %q, want end_turn", out.StopReason, out.Detail, out.Text)
	}
	if p.max > temporal.DefaultClaimThreshold {
		t.Errorf("got a payload of %d bytes, want at most the claim threshold, %d", p.max, temporal.DefaultClaimThreshold)
	}
	seen := seenResults(s)
	if len(seen) != turns {
		t.Fatalf("the model saw %d results, want %d", len(seen), turns)
	}
	for i, r := range seen {
		if !strings.HasPrefix(r, fmt.Sprintf("f%d error=false page %d: lorem", i, i)) || len(r) < 100<<10 {
			t.Errorf("result %d: got %d bytes %.60q…, want page %d whole", i, len(r), r, i)
		}
	}
	now, most := store.count()
	if now != 0 || most > 2 {
		t.Errorf("the Store holds %d claims at the end and held %d at most; want 0, and at most 2", now, most)
	}
}

// TestClaimMissing: a claim gone from the Store when a step or a call
// needs it stops the run with StopError and an Outcome whose Detail
// names ErrClaimMissing: no panic, no workflow task failing again and
// again, no call run.
func TestClaimMissing(t *testing.T) {
	t.Run("a tool result", func(t *testing.T) {
		s := toolruntest.New(t, toolruntest.Options{Func: bigRun(1)})
		store := &blobStore{lose: true}
		env := newEnv(t, s, []toolrun.Tool{fetchTool()}, &toolrun.Options{Store: store})
		env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("read"), &fastRetries))
		out := outcome(t, env)
		if out.StopReason != toolrun.StopError || !strings.Contains(out.Detail, temporal.ErrClaimMissing.Error()) {
			t.Errorf("got %q (%s), want error naming %q", out.StopReason, out.Detail, temporal.ErrClaimMissing)
		}
		if n := len(s.Requests()); n != 1 {
			t.Errorf("got %d requests, want 1: the step that lacks the result sends none", n)
		}
	})
	t.Run("an edited input", func(t *testing.T) {
		s := toolruntest.New(t, toolruntest.Script(
			toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"})),
			toolruntest.Message(toolruntest.Text("Done."))))
		var calls counter
		env := newEnv(t, s, []toolrun.Tool{writeTool(&calls, policy.RequireApproval("writes change files"))}, &toolrun.Options{Store: &blobStore{}})
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "claim-missing"})
		// A decision whose input is a claim of this run that the Store
		// does not hold.
		lost := toolrun.Decision{Kind: toolrun.Allow, Input: []byte(`"\u0000toolrun-claim:claim-missing/claim-gone"`)}
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(temporal.DecideSignal, temporal.Approval{ToolUseID: "t1", Decision: lost})
		}, time.Hour)
		env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &fastRetries))
		out := outcome(t, env)
		if out.StopReason != toolrun.StopError || !strings.Contains(out.Detail, temporal.ErrClaimMissing.Error()) {
			t.Errorf("got %q (%s), want error naming %q", out.StopReason, out.Detail, temporal.ErrClaimMissing)
		}
		if got := calls.all(); len(got) != 0 {
			t.Errorf("the tool ran: %v", got)
		}
	})
}

// TestClaimWhileAnotherCallWaits: a 100 KB result of one call of a turn
// whose other call awaits a person stays in the Store through the steps
// that wait (each refers to it, none holds it), reaches the model whole
// once the person decides, and is deleted when the run ends.
func TestClaimWhileAnotherCallWaits(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(
			toolruntest.ToolUse("t1", "write_file", writeIn{Path: "/a"}),
			toolruntest.ToolUse("f0", "fetch", map[string]any{"page": 0})),
		toolruntest.Message(toolruntest.Text("Done."))))
	store := &blobStore{}
	var calls counter
	var p payloads
	acts := temporal.NewActivities(s.Client(), []toolrun.Tool{writeTool(&calls, policy.RequireApproval("writes change files")), fetchTool()},
		&toolrun.Options{Logger: discard(), Store: store, MaxResultBytes: 1 << 20})
	env := measuredEnv(t, acts, &p)
	env.RegisterActivityWithOptions(acts.DeleteClaims, activity.RegisterOptions{Name: temporal.DeleteClaimsActivity})
	env.RegisterDelayedCallback(func() {
		if now, _ := store.count(); now != 1 {
			t.Errorf("while t1 waits, the Store holds %d claims, want 1 (f0's result)", now)
		}
		env.SignalWorkflow(temporal.DecideSignal, temporal.Approval{ToolUseID: "t1", Decision: toolrun.Decision{}})
	}, time.Hour)
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("go"), &fastRetries))
	out := outcome(t, env)
	if out.StopReason != toolrun.StopEndTurn {
		t.Fatalf("got %q (%s), want end_turn", out.StopReason, out.Detail)
	}
	if p.max > temporal.DefaultClaimThreshold {
		t.Errorf("got a payload of %d bytes, want at most %d", p.max, temporal.DefaultClaimThreshold)
	}
	seen := seenResults(s)
	if len(seen) != 2 || seen[0] != "t1 error=false wrote /a" || !strings.HasPrefix(seen[1], "f0 error=false page 0: lorem") || len(seen[1]) < 100<<10 {
		t.Errorf("the model saw %.200q, want t1's result and f0's whole", seen)
	}
	if now, _ := store.count(); now != 0 {
		t.Errorf("the Store holds %d claims at the end, want 0", now)
	}
}

// TestClaimKeptByTheOutcome: a run that stops in a turn (AfterTool's
// StopRun after a 100 KB result) keeps the claim its Outcome's State
// refers to, and only that one, and LoadState reads the result back.
func TestClaimKeptByTheOutcome(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("f0", "fetch", map[string]any{"page": 0})),
		toolruntest.Message(toolruntest.Text("never"))))
	store := &blobStore{}
	env := newEnv(t, s, []toolrun.Tool{fetchTool()}, &toolrun.Options{Store: store, MaxResultBytes: 1 << 20,
		AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error { return toolrun.StopRun("enough") }})
	env.ExecuteWorkflow(temporal.WorkflowName, temporal.NewInput(userParams("read"), &fastRetries))
	out := outcome(t, env)
	if out.StopReason != toolrun.StopHook {
		t.Fatalf("got %q (%s), want hook", out.StopReason, out.Detail)
	}
	if now, _ := store.count(); now != 1 {
		t.Errorf("the Store holds %d claims, want 1: the result the Outcome refers to", now)
	}
	whole, err := temporal.LoadState(t.Context(), store, out)
	if err != nil {
		t.Fatal(err)
	}
	res, ok := whole.CallResult("f0")
	if !ok || len(res.Content) != 1 || !strings.HasPrefix(res.Content[0].OfText.Text, "page 0: lorem") || len(res.Content[0].OfText.Text) < 100<<10 {
		t.Errorf("LoadState: got f0's result %v, want page 0 whole", ok)
	}
}
