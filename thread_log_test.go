package toolrun_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestThreadRecoveryLoggedAtInfo checks that a run whose thread the server
// forgot (expired between turns, twice) recovers by creating a new one, and
// says so in one Info record.
func TestThreadRecoveryLoggedAtInfo(t *testing.T) {
	clock := &toolruntest.Clock{}
	var replies []toolruntest.Reply
	for i := range 3 {
		replies = append(replies, toolruntest.Message(toolruntest.ToolUse(fmt.Sprintf("toolu_%d", i), "wait", nil)))
	}
	replies = append(replies, toolruntest.Message(toolruntest.Text("done")))
	opts := toolruntest.Script(replies...)
	opts.Now = clock.Now
	s := toolruntest.New(t, opts)
	wait := toolrun.NewTool("wait", "lets the thread expire", func(ctx context.Context, in struct{}) (string, error) {
		clock.Advance(6 * time.Minute)
		return "waited", nil
	})
	log, logs := newLogger()
	res, err := toolrun.New(client(s), userParams("go"), []toolrun.Tool{wait}, &toolrun.Options{Logger: log}).Run(bounded(t))
	if err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run = %v, %v; want end_turn", res, err)
	}
	refused := 0
	for _, req := range s.Requests() {
		if req.Status == 404 {
			refused++
		}
	}
	if refused < 2 {
		t.Fatalf("%d thread continues refused, want 2 or more", refused)
	}
	var found []map[string]any
	for _, rec := range logs.records(t) {
		if rec["msg"] == "toolrun: the API refused the run's message thread; the request goes again with the whole history (logged once per run)" {
			found = append(found, rec)
		}
	}
	if len(found) != 1 || found[0]["level"] != "INFO" || found[0]["error_code"] != "thread_not_found" {
		t.Errorf("recovery records = %v, want one at INFO naming thread_not_found", found)
	}
}
