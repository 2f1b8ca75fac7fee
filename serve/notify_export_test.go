package serve

import (
	"context"
	"log/slog"
	"time"
)

// DeliverNotification sends the delivery of a call id of thread, of
// tool, to cfg's receiver as the server's notifier does, retries
// included, and returns how it ended; the notify tests run it in a
// testing/synctest bubble, whose clock the retries' waits follow.
func DeliverNotification(ctx context.Context, cfg Notify, log *slog.Logger, id, thread, tool string) error {
	n := newNotifier(cfg, log)
	now := time.Now()
	return n.deliver(ctx, n.event(&interrupt{ID: id, Thread: thread, ToolName: tool, Kind: kindApproval, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, "", ""))
}
