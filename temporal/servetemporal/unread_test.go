package servetemporal_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/temporal/servetemporal"
	"go.temporal.io/sdk/worker"
)

// TestRunFollowsUnreadEnd is a thread whose run stopped reading its
// workflow before the workflow's end (its server was killed once the
// workflow started), and whose workflow then ended: the thread's next
// run, which brings nothing new, reports what the workflow did, its
// answer and its end, rather than ending as if nothing were left; the run
// after it reports nothing; and a run that reattaches (the server goes on
// with a run a killed server left) is told there is nothing to follow.
func TestRunFollowsUnreadEnd(t *testing.T) {
	c := dialTemporal(t, nil)
	queue := newName("servetemporal-unread")
	model := scenes(t, script)
	w := temporal.NewWorker(c, queue, temporal.NewActivities(model.Client(), nil, &toolrun.Options{Logger: discard()}).DeferClientTools(), worker.Options{WorkerStopTimeout: 5 * time.Second})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ex := servetemporal.New(servetemporal.Config{Client: c, TaskQueue: queue, WorkflowIDPrefix: queue + "/"})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	params := anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024}

	// The first run: the workflow starts, and the server dies as it
	// records the thread's cursor.
	var cursor string
	died := errors.New("the server is killed here")
	_, err := ex.Run(ctx, &serve.ExecutorRun{
		Thread: "t", Run: "run1", NewThread: true, Params: params, MaxTurns: 5,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("hi"))},
		SetCursor: func(c string) error { cursor = c; return died },
	})
	if !errors.Is(err, died) {
		t.Fatalf("the first run: %v, want %v", err, died)
	}
	if err := c.GetWorkflow(ctx, queue+"/t", "").Get(ctx, nil); err != nil {
		t.Fatalf("the thread's workflow: %v", err)
	}

	// next runs the thread's next run with no message and returns what
	// it reported.
	next := func(reattach bool) ([]string, *toolrun.Result, error) {
		var got []string
		res, err := ex.Run(ctx, &serve.ExecutorRun{
			Thread: "t", Run: "run2", Params: params, MaxTurns: 5, Cursor: cursor, Reattach: reattach,
			SetCursor: func(c string) error { cursor = c; return nil },
			OnEvent: func(_ context.Context, e toolrun.Event) {
				if r, ok := e.(toolrun.ResponseReceived); ok {
					for _, b := range r.Message.Content {
						got = append(got, fmt.Sprintf("turn %d: %s", r.Turn, b.Text))
					}
				}
			},
		})
		return got, res, err
	}
	got, res, err := next(false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"turn 1: hello"}, got); diff != "" {
		t.Errorf("the run after the workflow ended unread: responses (-want +got):\n%s", diff)
	}
	if res.StopReason != toolrun.StopEndTurn || res.Text() != "hello" {
		t.Errorf("the run after the workflow ended unread: stop %q, text %q; want end_turn, hello", res.StopReason, res.Text())
	}

	got, res, err = next(false)
	if err != nil || len(got) > 0 || res.StopReason != toolrun.StopEndTurn {
		t.Errorf("the run after that: responses %q, result %+v, error %v; want none, end_turn, nil", got, res, err)
	}
	if _, _, err := next(true); !errors.Is(err, serve.ErrNothingToFollow) {
		t.Errorf("a reattaching run once the workflow's end was read: error %v, want %v", err, serve.ErrNothingToFollow)
	}
}
