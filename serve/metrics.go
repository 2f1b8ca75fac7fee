package serve

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// metrics are the counters /metrics shows.
type metrics struct {
	runsStarted  atomic.Int64
	runsFinished atomic.Int64
	turns        atomic.Int64
	turnNanos    atomic.Int64
	refused      atomic.Int64
}

// handleMetrics writes the metrics in the Prometheus text format.
//
// The calls awaiting a person are counted by the tenant of their thread,
// under the label tenant, as [Handler.pendingOf] says. The other
// metrics are the server's, whoever asks.
func (h *Handler) handleMetrics(w http.ResponseWriter, r *http.Request, id identity) {
	tenant, pending, err := h.pendingOf(r.Context(), id)
	if err != nil {
		h.writeError(w, err)
		return
	}
	h.mu.Lock()
	active := len(h.runs)
	h.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP toolrun_serve_runs_started_total Runs started.\n# TYPE toolrun_serve_runs_started_total counter\ntoolrun_serve_runs_started_total %d\n", h.metrics.runsStarted.Load())
	fmt.Fprintf(w, "# HELP toolrun_serve_runs_finished_total Runs finished.\n# TYPE toolrun_serve_runs_finished_total counter\ntoolrun_serve_runs_finished_total %d\n", h.metrics.runsFinished.Load())
	fmt.Fprintf(w, "# HELP toolrun_serve_runs_active Runs in flight.\n# TYPE toolrun_serve_runs_active gauge\ntoolrun_serve_runs_active %d\n", active)
	fmt.Fprintf(w, "# HELP toolrun_serve_pending_approvals Calls awaiting a person's decision, by the tenant of their thread.\n# TYPE toolrun_serve_pending_approvals gauge\n")
	fmt.Fprintf(w, "toolrun_serve_pending_approvals{tenant=\"%s\"} %d\n", labelValue(tenant), pending)
	fmt.Fprintf(w, "# HELP toolrun_serve_turn_seconds Model request latency.\n# TYPE toolrun_serve_turn_seconds summary\ntoolrun_serve_turn_seconds_sum %s\ntoolrun_serve_turn_seconds_count %d\n",
		strconv.FormatFloat(time.Duration(h.metrics.turnNanos.Load()).Seconds(), 'f', -1, 64), h.metrics.turns.Load())
	fmt.Fprintf(w, "# HELP toolrun_serve_requests_refused_total Requests refused for want of a token or scope.\n# TYPE toolrun_serve_requests_refused_total counter\ntoolrun_serve_requests_refused_total %d\n", h.metrics.refused.Load())
}

// pendingOf counts the calls awaiting a person's decision of the tenant
// of id, the tenant the series is labeled with. Read acts within a
// tenant: in a server with tenants, id sees its own tenant's count and
// nothing of another tenant, its name included (scrape each tenant with
// a read token of its own); a thread whose owner no token names any more
// belongs to no tenant and is counted for none. A server without tenants
// is one, tenant "" (which Prometheus reads as no label), and counts
// every call. The series is there even at 0, so that a gauge falls to 0
// rather than going stale.
func (h *Handler) pendingOf(ctx context.Context, id identity) (string, int64, error) {
	rows, err := h.cfg.DB.QueryContext(ctx, `SELECT t.owner, COUNT(*) FROM serve_interrupts i LEFT JOIN serve_threads t ON t.id = i.thread_id WHERE i.status = ? AND i.kind = ? GROUP BY t.owner`, statusPending, kindApproval)
	if err != nil {
		return "", 0, err
	}
	defer rows.Close()
	tenanted := h.tenanted()
	var total int64
	for rows.Next() {
		var owner sql.NullString
		var n int64
		if err := rows.Scan(&owner, &n); err != nil {
			return "", 0, err
		}
		if tenanted && (!owner.Valid || !h.sameTenant(id.tenant, owner.String)) {
			continue
		}
		total += n
	}
	if !tenanted {
		return "", total, rows.Err()
	}
	return id.tenant, total, rows.Err()
}

// labelValue escapes s as a label value of the Prometheus text format.
var labelValue = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace
