package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/toolrun/toolrun"
)

// A thread's story is every run of the thread, in the order they
// started, each with the calls its responses made, the decision a person
// took on each (who, when, what, why) beside the call and its result, the
// time each call waited for that person, how the run ended and what it
// cost. It is read from what the server records already: the runs
// (serve_runs), their events (serve_events, each stamped with its time)
// and the interrupts with their decisions (serve_interrupts). A call
// belongs to the run whose response made it; its result may come in a
// later run, the one a decision let go on, and the story says which.
//
// A denied call is a decision, not a failure: its result is the denial
// the model was told, and the page draws it as the person's decision.
// Who decided is the name of the token (or login) that decided; the
// server records that name with the decision, so the story names it.

// storyResultMax bounds the text of a call's result the story carries.
const storyResultMax = 4 << 10

// storyDecision is a person's decision on a call, as the story shows it.
type storyDecision struct {
	Interrupt string `json:"interrupt"`
	// Status is pending (still waiting) or decided.
	Status string `json:"status"`
	decided
	DecidedBy string `json:"decidedBy,omitempty"`
	DecidedAt string `json:"decidedAt,omitempty"`
	// WaitFrom is when the call began waiting for a person, and
	// ExpiresAt when its approval lapses.
	WaitFrom  time.Time `json:"waitFrom"`
	ExpiresAt time.Time `json:"expiresAt"`
	// WaitMS is how long it waited, to the decision or, still pending,
	// to now.
	WaitMS int64 `json:"waitMs"`
}

// storyCall is one tool call of a run.
type storyCall struct {
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
	// At is when the response that made it arrived.
	At time.Time `json:"at"`
	// Decision is the person's, if the call waited for one.
	Decision *storyDecision `json:"decision,omitempty"`
	// Result is the tool's result (or the denial, or the respond's text)
	// as the model got it, ResultAt when, and ResultRun the run that
	// gave it, which is a later run for a call that waited.
	Result          string     `json:"result,omitempty"`
	ResultTruncated bool       `json:"resultTruncated,omitempty"`
	ResultAt        *time.Time `json:"resultAt,omitempty"`
	ResultRun       string     `json:"resultRun,omitempty"`
}

// storyRun is one run of a thread.
type storyRun struct {
	ID     string `json:"id"`
	Owner  string `json:"owner"`
	Status string `json:"status"` // running, finished or interrupted, as recorded
	// Outcome says how the run ended: success, interrupt (it stopped
	// for a person), cancelled, error, or "" while it runs; Code and
	// Message are an error's.
	Outcome   string     `json:"outcome"`
	Code      string     `json:"code,omitempty"`
	Message   string     `json:"message,omitempty"`
	Answer    string     `json:"answer,omitempty"`
	StartedAt time.Time  `json:"startedAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	// Model, the tokens and CostUSD are the run's, from the usage its
	// end reported, priced as the runner prices (Options.Budget.Prices,
	// then pricing.Default); CostKnown is false when the run
	// reported no usage or its model has no price.
	Model        string  `json:"model,omitempty"`
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CostUSD      float64 `json:"costUSD"`
	CostKnown    bool    `json:"costKnown"`
	// ContinuesFrom names the run whose decided calls this run went on
	// from, if any.
	ContinuesFrom string      `json:"continuesFrom,omitempty"`
	Calls         []storyCall `json:"calls"`
}

// threadStory is the answer of GET /inbox/api/threads/{thread}.
type threadStory struct {
	Thread string     `json:"thread"`
	Owner  string     `json:"owner"`
	Now    time.Time  `json:"now"`
	Runs   []storyRun `json:"runs"`
	// CostUSD is the thread's cost as its State counts it (every
	// response, priced as it came); CostIncomplete says a model had no
	// price.
	CostUSD        float64 `json:"costUSD"`
	CostIncomplete bool    `json:"costIncomplete,omitempty"`
	Turns          int     `json:"turns"`
	Decisions      int     `json:"decisions"`
	Denials        int     `json:"denials"`
	WaitMS         int64   `json:"waitMs"`
}

// threadPage serves a thread's story page, a shell whose script fetches
// the story from the inbox's API.
func (ib *inbox) threadPage(w http.ResponseWriter, r *http.Request) {
	ib.render(w, http.StatusOK, "thread.tmpl", map[string]any{"Thread": r.PathValue("thread")})
}

// thread answers a thread's story. A thread of another tenant is
// answered as one that does not exist.
func (ib *inbox) thread(w http.ResponseWriter, r *http.Request, s *inboxSession) {
	ctx := r.Context()
	thread := r.PathValue("thread")
	if ok, err := ib.h.sees(ctx, s.id.tenant, thread); err != nil {
		ib.h.writeError(w, err)
		return
	} else if !ok {
		httpError(w, http.StatusNotFound, "not_found", fmt.Sprintf("there is no thread %s on this server", thread))
		return
	}
	st, err := ib.story(ctx, thread)
	if err != nil {
		ib.h.writeError(w, err)
		return
	}
	if st == nil {
		httpError(w, http.StatusNotFound, "not_found", fmt.Sprintf("there is no thread %s on this server", thread))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(st)
}

// storyEvent is the part of a recorded event the story reads.
type storyEvent struct {
	Type         string `json:"type"`
	Timestamp    int64  `json:"timestamp"`
	ToolCallID   string `json:"toolCallId"`
	ToolCallName string `json:"toolCallName"`
	Delta        string `json:"delta"`
	Content      string `json:"content"`
	Code         string `json:"code"`
	Message      string `json:"message"`
	Result       string `json:"result"`
	Outcome      *struct {
		Type string `json:"type"`
	} `json:"outcome"`
	Usage []struct {
		Model                 string `json:"model"`
		InputTokens           int64  `json:"inputTokens"`
		OutputTokens          int64  `json:"outputTokens"`
		CachedInputTokens     int64  `json:"cachedInputTokens"`
		CacheWriteInputTokens int64  `json:"cacheWriteInputTokens"`
	} `json:"usage"`
}

// story reads thread's story; nil if the server has no run of it.
func (ib *inbox) story(ctx context.Context, thread string) (*threadStory, error) {
	db := ib.h.cfg.DB
	tv, err := ib.loadThread(ctx, thread)
	if err != nil {
		return nil, err
	}
	now := ib.h.cfg.Now().UTC()
	st := &threadStory{Thread: thread, Owner: tv.owner, Now: now, Runs: []storyRun{}, CostUSD: tv.cost, CostIncomplete: tv.costUnknown, Turns: tv.turns}
	rows, err := db.QueryContext(ctx, `SELECT id, owner, status, created_at FROM serve_runs WHERE thread_id = ? ORDER BY created_at, rowid`, thread)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var run storyRun
		var created string
		if err := rows.Scan(&run.ID, &run.Owner, &run.Status, &created); err != nil {
			rows.Close()
			return nil, err
		}
		run.StartedAt, _ = time.Parse(time.RFC3339Nano, created)
		run.Calls = []storyCall{}
		st.Runs = append(st.Runs, run)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// created_at is RFC 3339 text, whose order is not always the times'
	// (a trailing zero of the fraction is left out).
	slices.SortStableFunc(st.Runs, func(a, b storyRun) int { return a.StartedAt.Compare(b.StartedAt) })
	its, err := queryInterrupts(ctx, db, `thread_id = ?`, thread)
	if err != nil {
		return nil, err
	}
	if len(st.Runs) == 0 && len(its) == 0 && tv.owner == "" {
		return nil, nil
	}
	// The person's decision on each call, by its tool_use id.
	decisions := map[string]*storyDecision{}
	for _, it := range its {
		if it.Kind == kindClient {
			continue // a client tool's result is its client's, not a person's decision
		}
		d := &storyDecision{Interrupt: it.ID, Status: it.Status, DecidedBy: it.DecidedBy, DecidedAt: it.DecidedAt, WaitFrom: it.CreatedAt.UTC(), ExpiresAt: it.ExpiresAt.UTC()}
		end := now
		if it.Status != statusPending {
			d.decided = decisionOf(it)
			if t, err := time.Parse(time.RFC3339Nano, it.DecidedAt); err == nil {
				end = t
			}
		}
		d.WaitMS = max(0, end.Sub(it.CreatedAt).Milliseconds())
		decisions[it.ToolCallID] = d
		if it.Status != statusPending {
			st.Decisions++
			st.WaitMS += d.WaitMS
			if d.Decision == "deny" {
				st.Denials++
			}
		}
	}
	// Where each call is: the run that made it, and its index there.
	type place struct{ run, call int }
	calls := map[string]place{}
	for i := range st.Runs {
		run := &st.Runs[i]
		if err := ib.readRun(ctx, run, func(e *storyEvent) {
			at := time.UnixMilli(e.Timestamp).UTC()
			switch e.Type {
			case "TOOL_CALL_START":
				if _, ok := calls[e.ToolCallID]; ok {
					return // a call of an earlier run, announced again with its result
				}
				calls[e.ToolCallID] = place{i, len(run.Calls)}
				run.Calls = append(run.Calls, storyCall{ToolCallID: e.ToolCallID, ToolName: e.ToolCallName, At: at, Decision: decisions[e.ToolCallID]})
			case "TOOL_CALL_ARGS":
				if p, ok := calls[e.ToolCallID]; ok && p.run == i {
					c := &run.Calls[p.call]
					c.Input = append(c.Input, e.Delta...)
				}
			case "TOOL_CALL_RESULT":
				p, ok := calls[e.ToolCallID]
				if !ok {
					return
				}
				c := &st.Runs[p.run].Calls[p.call]
				c.Result, c.ResultAt, c.ResultRun = e.Content, &at, run.ID
				if len(c.Result) > storyResultMax {
					c.Result, c.ResultTruncated = strings.ToValidUTF8(c.Result[:storyResultMax], ""), true
				}
				if p.run != i && c.Decision != nil && run.ContinuesFrom == "" {
					run.ContinuesFrom = st.Runs[p.run].ID
				}
			case "RUN_FINISHED", "RUN_ERROR":
				run.EndedAt = &at
				if e.Type == "RUN_ERROR" {
					run.Outcome, run.Code, run.Message = "error", e.Code, e.Message
					if e.Code == "cancelled" {
						run.Outcome = "cancelled"
					}
				} else if e.Outcome != nil {
					run.Outcome = e.Outcome.Type
				}
				run.Answer = e.Result
				for _, u := range e.Usage {
					run.Model = u.Model
					run.InputTokens += u.InputTokens
					run.OutputTokens += u.OutputTokens
					usage := toolrun.Usage{
						InputTokens:              u.InputTokens - u.CachedInputTokens - u.CacheWriteInputTokens,
						OutputTokens:             u.OutputTokens,
						CacheCreationInputTokens: u.CacheWriteInputTokens,
						CacheReadInputTokens:     u.CachedInputTokens,
					}
					cost, ok := usage.CostUSD(u.Model, ib.h.cfg.Options.Budget.Prices)
					run.CostUSD += cost
					run.CostKnown = ok
				}
			}
		}); err != nil {
			return nil, err
		}
		if run.Status == runInterrupted && run.Outcome == "" {
			run.Outcome = "interrupted"
		}
	}
	for i := range st.Runs {
		for j := range st.Runs[i].Calls {
			c := &st.Runs[i].Calls[j]
			if len(c.Input) == 0 {
				c.Input = json.RawMessage("{}")
			} else if !json.Valid(c.Input) {
				b, _ := json.Marshal(string(c.Input))
				c.Input = b
			}
			c.Input = asTyped(c.Input)
		}
	}
	return st, nil
}

// readRun calls fn with each event of run that the story reads, in
// order. Text and reasoning are left in the database: the story shows
// calls, decisions and ends, and the conversation is the run page's.
func (ib *inbox) readRun(ctx context.Context, run *storyRun, fn func(*storyEvent)) error {
	rows, err := ib.h.cfg.DB.QueryContext(ctx, `SELECT data FROM serve_events WHERE run_id = ?
		AND (instr(data, '"type":"TOOL_CALL_') > 0 OR instr(data, '"type":"RUN_') > 0) ORDER BY seq`, run.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return err
		}
		var e storyEvent
		if json.Unmarshal(data, &e) != nil {
			continue
		}
		fn(&e)
	}
	return rows.Err()
}
