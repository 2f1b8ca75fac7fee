package temporal

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
)

// ReportProgress records progress, any value the data converter can
// encode (a count, a phase, a struct), for the call of a tool running in
// [Activities.RunTool] with ctx: it is sent with a heartbeat at once and
// with every heartbeat after, so the progress shows in Temporal (the
// activity's heartbeat details) and, on a retry of an idempotent call, in
// activity.GetHeartbeatDetails. Outside an activity it does nothing.
func ReportProgress(ctx context.Context, progress any) {
	p, _ := ctx.Value(progressKey{}).(*progressBox)
	if p == nil || !activity.IsActivity(ctx) {
		return
	}
	p.set(progress)
	activity.RecordHeartbeat(ctx, progress)
}

type progressKey struct{}

// progressBox holds the last progress a tool reported.
type progressBox struct {
	mu   sync.Mutex // guards last
	last any
}

func (p *progressBox) set(v any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = v
}

func (p *progressBox) get() any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// withProgress returns ctx with a place for [ReportProgress], which the
// heartbeats of the activity of ctx send, if it has one from [heartbeat].
func withProgress(ctx context.Context) context.Context {
	if _, ok := ctx.Value(progressKey{}).(*progressBox); ok {
		return ctx
	}
	return context.WithValue(ctx, progressKey{}, &progressBox{})
}

// heartbeat records a heartbeat three times per heartbeat timeout until the
// returned func is called, so a worker that dies is noticed and a long tool
// or stream is not; each heartbeat carries the last progress reported with
// [ReportProgress] on a context from [withProgress]. Outside an activity
// it does nothing.
func heartbeat(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	timeout := activity.GetInfo(ctx).HeartbeatTimeout
	if timeout <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(max(timeout/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if p, _ := ctx.Value(progressKey{}).(*progressBox); p != nil {
					if v := p.get(); v != nil {
						activity.RecordHeartbeat(ctx, v)
						continue
					}
				}
				activity.RecordHeartbeat(ctx)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
