package serve

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestClaimThreadWaitsForADecidedRun: a run on a thread whose running run
// a decision started waits for that run, is taken the moment it frees the
// thread, and is refused with 409 thread_busy once DecidedRunWait has
// passed; a thread a client's own run holds is refused at once. The
// clock is the synctest bubble's.
func TestClaimThreadWaitsForADecidedRun(t *testing.T) {
	tests := []struct {
		name       string
		byDecision bool
		freeAfter  time.Duration // 0: never freed
		wantWait   time.Duration
		wantErr    string // "": taken
	}{
		{name: "decided run ends within the wait", byDecision: true, freeAfter: DecidedRunWait - time.Second, wantWait: DecidedRunWait - time.Second},
		{name: "decided run outlasts the wait", byDecision: true, wantWait: DecidedRunWait, wantErr: "did not end within 2m0s"},
		{name: "a client's own run", byDecision: false, freeAfter: time.Second, wantWait: 0, wantErr: "has a run in flight"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := &Handler{
					log:      slog.New(slog.DiscardHandler),
					threads:  map[string]bool{},
					runs:     map[string]*liveRun{},
					perToken: map[string]int{},
				}
				h.mu.Lock()
				unlock := h.holdThread("t", "alice")
				held := &liveRun{id: "run-1", thread: "t", byDecision: tt.byDecision, freed: make(chan struct{})}
				h.runs[held.id] = held
				h.mu.Unlock()
				if tt.freeAfter > 0 {
					go func() {
						time.Sleep(tt.freeAfter)
						unlock()
						close(held.freed)
					}()
				}
				start := time.Now()
				err := h.claimThread(t.Context(), &runInput{ThreadID: "t", RunID: "run-2"}, identity{name: "alice", maxRuns: 4})
				waited := time.Since(start)
				if err == nil {
					h.mu.Unlock() // claimThread returns holding it, for the caller's holdThread
				}
				switch {
				case tt.wantErr == "" && err != nil:
					t.Fatalf("claimThread = %v, want the thread taken", err)
				case tt.wantErr != "":
					var re *requestError
					if !errors.As(err, &re) || re.status != http.StatusConflict || re.code != "thread_busy" || !strings.Contains(re.msg, tt.wantErr) {
						t.Fatalf("claimThread = %v, want 409 thread_busy saying %q", err, tt.wantErr)
					}
				}
				if waited != tt.wantWait {
					t.Errorf("claimThread took %v, want %v", waited, tt.wantWait)
				}
				time.Sleep(DecidedRunWait) // lets the freeing goroutine end: the bubble's clock, no wall time
			})
		})
	}
}
