package temporal_test

import (
	"context"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
)

// slowCodec is a payload codec that takes delay to decode a payload of
// at least min bytes, as converting a run's state takes on a machine so
// loaded that a second passes before it is done.
type slowCodec struct {
	min   int
	delay time.Duration
}

func (c slowCodec) Encode(p []*commonpb.Payload) ([]*commonpb.Payload, error) { return p, nil }

func (c slowCodec) Decode(p []*commonpb.Payload) ([]*commonpb.Payload, error) {
	for _, q := range p {
		if len(q.GetData()) >= c.min {
			time.Sleep(c.delay)
			break
		}
	}
	return p, nil
}

// TestSlowConversionIsNoDeadlock runs a conversation whose first message
// is 64 KB on a worker of NewWorker whose client's data converter takes
// 1.5 s to decode it: the workflow's first task, which decodes the input,
// runs longer than the SDK's default deadlock detection timeout (1 s),
// as a worker on a loaded machine does converting a large state. The
// worker's own timeout (DefaultDeadlockDetectionTimeout) lets it finish:
// no workflow task fails and the run ends. With worker.New's default, the
// task failed with TMPRL1101 at every attempt and the run never ended.
func TestSlowConversionIsNoDeadlock(t *testing.T) {
	plain := dialTemporal(t)
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), slowCodec{min: 32 << 10, delay: 1500 * time.Millisecond})
	c, err := client.NewClientFromExisting(plain, client.Options{DataConverter: dc, Logger: nopLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	model := toolruntest.New(t, toolruntest.Script(toolruntest.Message(toolruntest.Text("Done."))))
	queue := newQueue("toolrun-slowconv")
	w := temporal.NewWorker(c, queue, temporal.NewActivities(model.Client(), nil, &toolrun.Options{Logger: discard()}), worker.Options{})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams(strings.Repeat("a", 64<<10)), &fastRetries)
	if err != nil {
		t.Fatal(err)
	}
	var out temporal.Outcome
	getErr := run.Get(ctx, &out)
	it := plain.GetWorkflowHistory(context.WithoutCancel(ctx), queue, run.GetRunID(), false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetWorkflowTaskFailedEventAttributes(); a != nil {
			t.Errorf("workflow task failed (%s): %s", a.GetCause(), a.GetFailure().GetMessage())
		}
	}
	if getErr != nil {
		t.Fatalf("run: %v", getErr)
	}
	if out.StopReason != toolrun.StopEndTurn {
		t.Fatalf("stop %q, want end_turn", out.StopReason)
	}
}
