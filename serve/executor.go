package serve

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
)

// Executor runs the server's runs somewhere other than in the server's
// process: on the workers of a Temporal task queue, say (package
// github.com/toolrun/toolrun/temporal/servetemporal). Set it in
// [Config.Executor]; nil runs every run in process, with its State in
// [Config.DB].
//
// The server keeps its own database in every mode: threads, runs, the
// AG-UI events it sent (so a stream resumes from Last-Event-ID as
// always), interrupts and decisions, where the first decision wins. What
// an Executor changes is who runs a run and where its State lives: the
// server hands it a run's new messages and the decisions recorded for the
// thread, turns the progress it reports into AG-UI events with the same
// mapper as in process, and asks it which calls of which threads await a
// person, so that an executor whose runs wait without a process of their
// own (a workflow) lists and takes decisions while nothing runs them.
//
// Its methods may be called concurrently, for different threads.
type Executor interface {
	// Run runs the next run of a thread, as r describes it: it starts or
	// continues the thread's run with r's messages and decisions, calls
	// r.OnEvent with the run's progress in order, and returns once the
	// run stops (the model answered, a limit, an error) or waits for a
	// decision (StopAwaitingApproval, with the calls waiting in
	// Result.Pending), or ctx is done (with ctx's error: the run itself
	// goes on, and the thread's next run follows it). Result.Usage is the
	// thread's usage in total. An error is a run that could not be run or
	// followed; the server ends the AG-UI run with RUN_ERROR.
	Run(ctx context.Context, r *ExecutorRun) (*toolrun.Result, error)
	// Pending returns the calls awaiting a person's decision, of thread,
	// or of every thread if thread is "".
	Pending(ctx context.Context, thread string) ([]ThreadCall, error)
	// Decide gives d to the call callID of thread's run, once the server
	// has recorded it: durably, and without waiting for the run to apply
	// it, so that a decision is taken while nothing runs the thread.
	Decide(ctx context.Context, thread, callID string, d toolrun.Decision) error
	// Cancel cancels the run of thread, which stops with the outcome
	// cancelled.
	Cancel(ctx context.Context, thread string) error
}

// StateLoader is implemented by an [Executor] that can read a thread's
// [toolrun.State] as its run last recorded it, so that the inbox shows
// the conversation, turns and cost of a call's thread. An Executor
// without it leaves those out of the inbox.
type StateLoader interface {
	// LoadState returns thread's State, or an error wrapping
	// fs.ErrNotExist if the thread has none yet.
	LoadState(ctx context.Context, thread string) (*toolrun.State, error)
}

// BusyReporter is implemented by an [Executor] whose runs go on without
// the server (a workflow's turn, through a restart of the server), so
// that a run bringing a new user message while the thread's run is taking
// a turn is refused with 409 thread_busy before anything of it is
// recorded, as in process, rather than failing once its messages are
// taken. An Executor without it is asked nothing: its Run refuses such a
// run itself.
type BusyReporter interface {
	// Busy reports whether thread's run is taking a turn (a model request
	// or its tools), which a new user message would race.
	Busy(ctx context.Context, thread string) (bool, error)
}

// ExecutorRun is one run of a thread, as the server hands it to an
// [Executor].
type ExecutorRun struct {
	// Thread is the thread's id: the executor's name for the
	// conversation (a workflow id, say).
	Thread string
	// Run is the AG-UI run's id.
	Run string
	// NewThread is set on a thread's first run: whatever the executor
	// holds under the thread's id is not this server's thread (another
	// server's, or one whose database was lost) and must not be
	// continued.
	NewThread bool
	// Params are the request params of [Config.Params], without messages.
	Params anthropic.BetaMessageNewParams
	// Messages are the user messages the run brings, the client's
	// preamble included: a new thread's first messages, or the ones
	// that continue a thread.
	Messages []anthropic.BetaMessageParam
	// ClientTools are the tools the thread's client declared, which the
	// client runs: every call of one is deferred with the reason
	// temporal.ClientToolReason ("a client tool: the client runs it"),
	// and answered by a decision of Decisions that carries the client's
	// result (a Skip decision). Their functions never run.
	ClientTools []toolrun.Tool
	// EarlierTools names those of ClientTools this run does not offer the
	// model: declared by the thread's earlier runs only (a run that
	// declares tools: [] offers none of them). Their calls that earlier
	// runs made are still answered by Decisions; the model's requests
	// carry only the other ClientTools. Nil offers every one of
	// ClientTools.
	EarlierTools []string
	// Decisions are the decisions recorded for the thread's calls, by the
	// tool_use id of the call: the executor gives those its run still
	// awaits (a decision it may have received already, as one recorded
	// before a crash may not have): a person's, or a client tool's result.
	Decisions map[string]toolrun.Decision
	// MaxTurns is how many turns the run may take: [Config.Options]'s
	// MaxTurns, or [toolrun.DefaultMaxTurns] if that is zero; negative
	// for no limit.
	MaxTurns int
	// Cursor is what the executor said, with SetCursor, when the
	// thread's last run stopped; "" for a thread's first run.
	Cursor string
	// SetCursor records cursor for the thread's next run, durably, in the
	// server's database: the executor calls it as the run goes on, with
	// what it needs to go on from where this run's events stopped.
	SetCursor func(cursor string) error
	// MessagesTaken records Messages' ids as the thread's, durably, in the
	// server's database: the executor calls it once its run has Messages
	// for good (a workflow started with them, or that accepted them), so
	// that the client sending them again is not a new message. Until then
	// the thread does not have them: a run that fails first loses nothing,
	// and the client's retry with the same message ids brings them again.
	// An executor that never calls it has them recorded when its Run
	// returns without an error.
	MessagesTaken func() error
	// Branch is set when the client's history leaves the thread's
	// conversation at an earlier point (it edited or dropped a message,
	// or asks for the last answer again): the run goes on from History,
	// the thread's conversation before the first user message the client
	// changed, with Messages, which replace the rest. A thread's run in
	// flight stops first (its calls waiting were denied as left behind).
	// Only an Executor that is a [StateLoader] is given it: the server
	// reads History from the State it loads.
	Branch  bool
	History []anthropic.BetaMessageParam
	// Reattach is set on a run that a killed server left in flight,
	// which the server goes on with when it starts again, under the
	// same run id and with no messages: the executor reports what the
	// thread's run did from Cursor on (its results, its answer, its end;
	// or the calls it waits for), whether the run still goes on or has
	// ended since. With nothing to report (the thread's run ended and
	// its end was read, or the run never started one, its messages not
	// taken), Run returns an error wrapping [ErrNothingToFollow], and the
	// run ends "interrupted": the client runs the thread again.
	Reattach bool
	// OnEvent receives the run's progress as toolrun's events, in order:
	// RequestSent for a turn's start, ResponseReceived with the turn's
	// text and tool_use blocks, ToolFinished for each result.
	OnEvent func(context.Context, toolrun.Event)
}

// ErrNothingToFollow is the error of an [Executor]'s Run for an
// [ExecutorRun] with Reattach set when the thread's run has nothing the
// server has not read.
var ErrNothingToFollow = errors.New("serve: the thread's run has nothing left to follow")

// ThreadCall is a call of a thread awaiting a person's decision, as an
// [Executor] lists it.
type ThreadCall struct {
	Thread string
	Call   toolrun.PendingCall
}

// execBackend is the [backend] of a server whose runs an [Executor]
// runs: the server's database, as sqlBackend keeps it, for threads, runs,
// events, interrupts and decisions, and the executor for what awaits a
// decision and for sending it.
type execBackend struct {
	sqlBackend
	ex Executor
}

// pending lists the calls the executor says await a person and the
// server's database has pending, oldest first. A call the executor lists
// that the database lacks (its run stopped while the server was down) is
// recorded first, so that it is decided like any other; one the database
// has decided and the executor still lists (the run has not applied the
// decision yet) is not listed.
func (b execBackend) pending(ctx context.Context, thread string) ([]*interrupt, error) {
	calls, err := b.ex.Pending(ctx, thread)
	if err != nil {
		return nil, fmt.Errorf("listing the pending calls: %w", err)
	}
	if thread == "" {
		// A list of every thread's may come from an index that lags
		// behind the runs (Temporal's visibility store): the threads the
		// database has calls pending for are asked one by one too.
		listed := map[string]bool{}
		for _, tc := range calls {
			listed[tc.Thread] = true
		}
		threads, err := b.pendingThreads(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range threads {
			if listed[t] {
				continue
			}
			more, err := b.ex.Pending(ctx, t)
			if err != nil {
				return nil, fmt.Errorf("listing the pending calls of thread %q: %w", t, err)
			}
			calls = append(calls, more...)
		}
	}
	var out []*interrupt
	for _, tc := range calls {
		its, err := queryInterrupts(ctx, b.h.cfg.DB, `thread_id = ? AND tool_call_id = ?`, tc.Thread, tc.Call.Call.ID)
		if err != nil {
			return nil, err
		}
		if len(its) == 0 {
			it, err := b.record(ctx, tc)
			if err != nil {
				return nil, err
			}
			if it != nil {
				out = append(out, it)
			}
			continue
		}
		for _, it := range its {
			if it.Status == statusPending && it.Kind == kindApproval {
				out = append(out, it)
			}
		}
	}
	slices.SortFunc(out, func(a, b *interrupt) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// pendingThreads returns the threads with approvals pending in the
// database.
func (b execBackend) pendingThreads(ctx context.Context) ([]string, error) {
	rows, err := b.h.cfg.DB.QueryContext(ctx, `SELECT DISTINCT thread_id FROM serve_interrupts WHERE status = ? AND kind = ? ORDER BY thread_id`, statusPending, kindApproval)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// record records a call the executor lists and the database lacks, under
// the thread's last run; a call of a thread the server does not have is
// not the server's, and a client tool's call is its client's: both are
// left out.
func (b execBackend) record(ctx context.Context, tc ThreadCall) (*interrupt, error) {
	if tc.Call.Reason == clientReason {
		return nil, nil
	}
	var run string
	err := b.h.cfg.DB.QueryRowContext(ctx, `SELECT id FROM serve_runs WHERE thread_id = ? ORDER BY created_at DESC, id DESC LIMIT 1`, tc.Thread).Scan(&run)
	if err != nil {
		return nil, nil
	}
	now := b.h.cfg.Now()
	it := &interrupt{ID: newID("int_"), Thread: tc.Thread, Run: run, ToolCallID: tc.Call.Call.ID, ToolName: tc.Call.Call.Name, Input: tc.Call.Call.Input, Reason: tc.Call.Reason, Kind: kindApproval, Status: statusPending, CreatedAt: now, ExpiresAt: now.Add(b.h.cfg.ApprovalTTL)}
	if err := insertInterrupt(ctx, b.h.cfg.DB, it); err != nil {
		return nil, err
	}
	b.h.callWaiting(ctx, it)
	return it, nil
}

// decide records d, then gives it to the executor. A decision recorded
// and not sent (the executor could not be reached) is sent again by the
// thread's next run, which gives its run every decision recorded for the
// calls it awaits.
func (b execBackend) decide(ctx context.Context, it *interrupt, d toolrun.Decision, by string, now time.Time) error {
	if err := decide(ctx, b.h.cfg.DB, it, d, by, now); err != nil {
		return err
	}
	if it.Kind == kindApproval && d.Kind == toolrun.Allow && !b.h.serverTool(it.ToolName) {
		// An approved call of a client tool is the client's to run: its
		// run keeps it waiting, and the thread's next run hands it over
		// (runExecutor), as in process. Sent, the Allow would run the
		// worker's stand-in.
		return nil
	}
	d.Who, d.At = by, now.UTC()
	if err := b.ex.Decide(ctx, it.Thread, it.ToolCallID, d); err != nil {
		b.h.log.Warn("serve: a decision recorded was not sent to its run yet; the thread's next run sends it", "thread", it.Thread, "interrupt", it.ID, "err", err)
	}
	return nil
}

// goOn starts the run that follows thread once no call of it waits for
// a person: the executor's run goes on with the decisions, and this run
// streams what it does.
func (b execBackend) goOn(thread string) string { return b.h.inbox.goOn(thread) }

// cancel cancels run, if it is in flight here and owner started it: the
// executor's run too.
func (b execBackend) cancel(run, owner string) bool {
	b.h.mu.Lock()
	lr := b.h.runs[run]
	b.h.mu.Unlock()
	if lr == nil || lr.owner != owner {
		return false
	}
	// The stream stops following first, so that the run ends cancelled
	// here rather than with the executor's report of the cancellation.
	lr.cancel()
	if err := b.ex.Cancel(context.WithoutCancel(b.h.base), lr.thread); err != nil {
		b.h.log.Error("serve: cancelling a thread's run", "thread", lr.thread, "err", err)
	}
	return true
}

// fingerprint changes whenever a pending call is made or decided.
func (b execBackend) fingerprint(ctx context.Context) (string, error) {
	its, err := b.pending(ctx, "")
	if err != nil {
		return "", err
	}
	var s strings.Builder
	for _, it := range its {
		s.WriteString(it.ID)
		s.WriteByte(',')
	}
	var decided int64
	if err := b.h.cfg.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM serve_interrupts WHERE status <> ?`, statusPending).Scan(&decided); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%d", s.String(), decided), nil
}

// insertInterrupt records it.
func insertInterrupt(ctx context.Context, q querier, it *interrupt) error {
	input := []byte(it.Input)
	if len(input) == 0 {
		input = []byte("{}")
	}
	_, err := q.ExecContext(ctx, `INSERT INTO serve_interrupts (`+interruptColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, ?, ?)`,
		it.ID, it.Thread, it.Run, it.ToolCallID, it.ToolName, input, it.Reason, it.Kind, it.Status, timestamp(it.CreatedAt), timestamp(it.ExpiresAt))
	return err
}

// runExecutor runs lr on the executor and writes the run's end, as run
// does in process.
func (h *Handler) runExecutor(ctx context.Context, lr *liveRun, m *mapper, p *prepared, clientTools []toolrun.Tool, onEvent func(context.Context, toolrun.Event), userMsgs []anthropic.BetaMessageParam) {
	dbctx := context.WithoutCancel(ctx)
	// A client that asks again with nothing new may lack the end of the
	// thread's last run: its run went on without the server that streamed
	// it (killed), and the client never read what it did.
	asksAgain := len(userMsgs) == 0 && len(p.history) > 0 && !p.answers
	if sl, ok := h.cfg.Executor.(StateLoader); ok && (p.differs || len(p.caught) > 0 || showsResults(p.history) || asksAgain) {
		// The snapshot of a client whose history differs from the
		// thread's (see run), from the executor's State: the thread's
		// conversation as the run starts.
		if st, err := sl.LoadState(ctx, lr.thread); err == nil {
			if p.differs || len(p.caught) > 0 || resultsDiffer(st.Params.Messages, p.history) || (asksAgain && lacksAnswer(st.Params.Messages, p.history)) {
				users, err := userRecords(ctx, h.cfg.DB, lr.thread)
				if err != nil {
					h.finish(ctx, lr, m, nil, toolrun.Usage{}, err)
					return
				}
				m.write(nil, snapshotEvent(lr.thread, st.Params.Messages, users, p.history, m.client))
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			h.log.Warn("serve: loading the thread's state for a MESSAGES_SNAPSHOT", "thread", lr.thread, "err", err)
		}
	}
	var cursor string
	var base toolrun.Usage
	var usage []byte
	err := h.cfg.DB.QueryRowContext(ctx, `SELECT cursor, usage FROM serve_exec_cursors WHERE thread_id = ?`, lr.thread).Scan(&cursor, &usage)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		h.finish(ctx, lr, m, nil, base, err)
		return
	}
	json.Unmarshal(usage, &base)
	decisions := map[string]toolrun.Decision{}
	decided, err := queryInterrupts(ctx, h.cfg.DB, `thread_id = ? AND status IN (?, ?)`, lr.thread, statusDecided, statusAnswered)
	if err != nil {
		h.finish(ctx, lr, m, nil, base, err)
		return
	}
	client := map[string]bool{}
	for _, t := range clientTools {
		client[t.Name()] = true
	}
	for _, it := range decided {
		var d toolrun.Decision
		if err := json.Unmarshal(it.Decision, &d); err != nil {
			h.finish(ctx, lr, m, nil, base, fmt.Errorf("the decision of interrupt %q: %w", it.ID, err))
			return
		}
		if it.Kind == kindApproval && d.Kind == toolrun.Allow && (client[it.ToolName] || !h.serverTool(it.ToolName)) {
			// An approved call of a client tool is the client's to run:
			// it stays waiting in the workflow, now for the client's
			// result (a Skip with it) rather than a person's decision.
			if err := h.handOver(ctx, lr, it); err != nil {
				h.finish(ctx, lr, m, nil, base, err)
				return
			}
			continue
		}
		decisions[it.ToolCallID] = d
	}
	var history []anthropic.BetaMessageParam
	if p.branch >= 0 {
		// The client's history leaves the thread's at its p.branch-th user
		// message (see run): the run goes on from the conversation before
		// it, which the thread's State holds (prepare refuses a branch on
		// an Executor that cannot load it).
		sl, _ := h.cfg.Executor.(StateLoader)
		var st *toolrun.State
		if sl != nil {
			st, err = sl.LoadState(ctx, lr.thread)
		}
		if sl == nil || err != nil {
			h.finish(ctx, lr, m, nil, base, fmt.Errorf("loading the thread's state to go on from the client's history: %w", err))
			return
		}
		msgs, ok := branchAt(st.Params.Messages, p.branch)
		if !ok {
			h.finish(ctx, lr, m, nil, base, fmt.Errorf("the client's history leaves the thread at its user message %d, which the thread no longer has as such (its history was compacted): start a new thread", p.branch+1))
			return
		}
		history = append([]anthropic.BetaMessageParam{}, msgs...)
	}
	params := h.cfg.Params
	params.Messages = nil
	maxTurns := turnsPerRun(h.cfg.Options)
	if maxTurns == 0 {
		maxTurns = -1 // no limit, as Options.MaxTurns says
	}
	var earlier []string
	for _, t := range clientTools {
		if !p.offered[t.Name()] {
			earlier = append(earlier, t.Name())
		}
	}
	er := &ExecutorRun{
		Thread: lr.thread, Run: lr.id, NewThread: p.newThread, Params: params, Messages: userMsgs, ClientTools: clientTools, EarlierTools: earlier,
		Decisions: decisions, MaxTurns: maxTurns, Cursor: cursor, Reattach: p.reattach, Branch: p.branch >= 0, History: history,
		SetCursor: func(c string) error {
			_, err := h.cfg.DB.ExecContext(dbctx, `INSERT INTO serve_exec_cursors (thread_id, cursor, usage) VALUES (?, ?, ?) ON CONFLICT (thread_id) DO UPDATE SET cursor = excluded.cursor`, lr.thread, c, usage)
			return err
		},
		OnEvent: onEvent,
	}
	var takenMu sync.Mutex
	taken := len(p.carried) == 0 && p.digest == "" && len(p.userRecs) == 0
	er.MessagesTaken = func() error {
		takenMu.Lock()
		defer takenMu.Unlock()
		if taken {
			return nil
		}
		tx, err := h.cfg.DB.BeginTx(dbctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := recordCarried(dbctx, tx, lr.thread, p.carried, p.digest); err != nil {
			return err
		}
		if len(p.userRecs) > 0 {
			if err := recordUsers(dbctx, tx, lr.thread, p.usersFrom, p.userRecs); err != nil {
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		taken = true
		return nil
	}
	res, err := h.cfg.Executor.Run(ctx, er)
	if p.reattach && errors.Is(err, ErrNothingToFollow) {
		// Nothing of the thread's run to follow: the run ends as a killed
		// server's run in process does.
		lr.unlock()
		m.closeStep()
		m.write(nil, interruptedEvent())
		if _, err := h.cfg.DB.ExecContext(dbctx, `UPDATE serve_runs SET status = ? WHERE id = ?`, runInterrupted, lr.id); err != nil {
			h.log.Error("serve: recording a run's end", "run", lr.id, "err", err)
		}
		return
	}
	if err == nil {
		// An executor that never said: its run had them, as it ran.
		if err := er.MessagesTaken(); err != nil {
			h.log.Error("serve: recording a run's message ids", "thread", lr.thread, "run", lr.id, "err", err)
		}
	}
	if res != nil {
		if b, err := json.Marshal(res.Usage); err == nil {
			if _, err := h.cfg.DB.ExecContext(dbctx, `INSERT INTO serve_exec_cursors (thread_id, cursor, usage) VALUES (?, '', ?) ON CONFLICT (thread_id) DO UPDATE SET usage = excluded.usage`, lr.thread, b); err != nil {
				h.log.Error("serve: recording a thread's usage", "thread", lr.thread, "err", err)
			}
		}
	}
	if res == nil && err != nil && ctx.Err() != nil {
		res = &toolrun.Result{StopReason: toolrun.StopCanceled, Err: err, Usage: base}
	}
	h.finish(ctx, lr, m, res, base, err)
}

// reattach goes on with the runs of ids, which a killed server left in
// flight, on the executor, whose runs went on without it: each follows
// its thread's run from the thread's cursor, under its own id and with
// the thread's client tools, and writes what the run did since (the
// results, the answer, the calls it waits for) and its end as its next
// events. A client that reconnects to it (GET /runs/{run}/events with
// Last-Event-ID) reads them, however late: while the thread's run still
// goes on, or once it has ended. A run that cannot be set up again, or
// whose thread's run has nothing unread ([ErrNothingToFollow]: it never
// started, its messages not taken), ends "interrupted", as in process,
// and its client runs the thread again.
func (h *Handler) reattach(ctx context.Context, ids []string) error {
	for _, id := range ids {
		err := h.reattachRun(ctx, id)
		if err == nil {
			continue
		}
		h.log.Warn("serve: a run the server left in flight could not be followed again; it ends interrupted", "run", id, "err", err)
		lr := &liveRun{id: id, h: h}
		if err := lr.loadSeq(ctx); err != nil {
			return err
		}
		lr.emit(interruptedEvent())
		if _, err := h.cfg.DB.ExecContext(ctx, `UPDATE serve_runs SET status = ? WHERE id = ?`, runInterrupted, id); err != nil {
			return err
		}
	}
	return nil
}

// reattachRun starts the run that goes on with run id; see reattach.
func (h *Handler) reattachRun(ctx context.Context, id string) error {
	var thread, owner, toolsJSON string
	if err := h.cfg.DB.QueryRowContext(ctx, `SELECT thread_id, owner FROM serve_runs WHERE id = ?`, id).Scan(&thread, &owner); err != nil {
		return err
	}
	if err := h.cfg.DB.QueryRowContext(ctx, `SELECT client_tools FROM serve_threads WHERE id = ?`, thread).Scan(&toolsJSON); err != nil {
		return err
	}
	var declared []clientTool
	if err := json.Unmarshal([]byte(toolsJSON), &declared); err != nil {
		return err
	}
	tools, err := h.tools(declared)
	if err != nil {
		return err
	}
	client := map[string]bool{}
	for _, ct := range declared {
		client[ct.Name] = true
	}
	// The run's client and its step as the run's events left them: the
	// protocol version RUN_STARTED declared (1.0 is taken for a client
	// that declared none, whose schema is the narrower), and the turn of
	// a step started and not finished, which the run's next events go on
	// with rather than start again.
	rows, err := h.cfg.DB.QueryContext(ctx, `SELECT data FROM serve_events WHERE run_id = ? ORDER BY seq`, id)
	if err != nil {
		return err
	}
	speaks, step := "", 0
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			rows.Close()
			return err
		}
		var e struct {
			Type            string `json:"type"`
			ProtocolVersion string `json:"protocolVersion"`
			StepName        string `json:"stepName"`
		}
		if json.Unmarshal(data, &e) != nil {
			continue // an event larger than its first part: none of these
		}
		switch e.Type {
		case "RUN_STARTED":
			speaks = e.ProtocolVersion
		case "STEP_STARTED":
			step, _ = strconv.Atoi(strings.TrimPrefix(e.StepName, "turn "))
		case "STEP_FINISHED":
			step = 0
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	pr := peer{speaks: speaks}
	if speaks == "" || speaks == "1.0" {
		pr, _ = negotiate("")
	}

	h.mu.Lock()
	unlock := h.holdThread(thread, owner)
	h.mu.Unlock()
	runCtx, cancel := context.WithCancel(h.base)
	lr := &liveRun{id: id, thread: thread, owner: owner, h: h, cancel: cancel, unlock: unlock, peer: pr}
	if err := lr.loadSeq(ctx); err != nil {
		cancel()
		unlock()
		h.wg.Done()
		return err
	}
	h.mu.Lock()
	h.runs[id] = lr
	h.mu.Unlock()
	m := &mapper{lr: lr, client: client, step: step}
	onEvent := m.on
	if o := h.cfg.Options.OnEvent; o != nil {
		onEvent = func(ctx context.Context, e toolrun.Event) {
			m.on(ctx, e)
			o(ctx, e)
		}
	}
	h.metrics.runsStarted.Add(1)
	go func() {
		defer h.released(lr, func() {
			unlock()
			h.mu.Lock()
			delete(h.runs, id)
			h.mu.Unlock()
			h.wg.Done()
		})
		defer cancel()
		defer h.metrics.runsFinished.Add(1)
		h.runExecutor(runCtx, lr, m, &prepared{reattach: true, branch: -1}, tools[len(h.cfg.Tools):], onEvent, nil)
	}()
	return nil
}

// lacksAnswer reports whether the client's history, in, lacks the last
// assistant message of the thread's conversation, msgs: it shows none of
// its tool calls, and none of its text blocks as an assistant message's
// content (the events of a response give each text block its own
// message).
func lacksAnswer(msgs []anthropic.BetaMessageParam, in []message) bool {
	var last *anthropic.BetaAssistantMessageParam // the union's
	for _, mp := range msgs {
		if mp.OfAssistant != nil {
			last = mp.OfAssistant
		}
	}
	if last == nil {
		return false
	}
	calls, texts := map[string]bool{}, map[string]bool{}
	for _, m := range in {
		if m.Role != "assistant" {
			continue
		}
		for _, tc := range m.ToolCalls {
			calls[tc.ID] = true
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil && s != "" {
			texts[s] = true
		}
	}
	said := false
	for _, b := range last.Content {
		switch {
		case b.OfToolUse != nil:
			if calls[b.OfToolUse.ID] {
				return false
			}
			said = true
		case b.OfText != nil && b.OfText.Text != "":
			if texts[b.OfText.Text] {
				return false
			}
			said = true
		}
	}
	return said
}
