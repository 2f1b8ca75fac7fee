package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/redact"
	"github.com/toolrun/toolrun/transcript"
)

// clientReason is the reason of the deferral that hands a client tool's
// call to the client. It is temporal.ClientToolReason too, with which the
// workers of an [Executor] on Temporal defer a client tool's call.
const clientReason = "a client tool: the client runs it"

// liveRun is a run in flight, or one whose events are being written: its
// events go to the database first and then to every stream that follows
// it, so a stream that reconnects reads what it missed from the database.
type liveRun struct {
	id, thread, owner string
	h                 *Handler
	cancel            context.CancelFunc
	// unlock frees the run's thread for the next run, before the run's
	// terminal event, so a client that starts the next run as soon as it
	// reads that event finds the thread free. Nil for a run closed after
	// a restart.
	unlock func()

	// peer is the client's protocol version: what the run's events may
	// carry.
	peer peer
	// byDecision is set on a run a decision started (runInput.byDecision),
	// which a client's next run on the thread waits for rather than
	// being refused (see DecidedRunWait), and freed is closed once unlock
	// has freed the thread (nil for a run reattach follows again).
	byDecision bool
	freed      chan struct{}

	mu     sync.Mutex // guards seq, notify, ending
	seq    int64
	notify chan struct{} // closed and replaced at every event
	// ending is set for the run's last write of events, which records
	// the run's end with them: a client that reads the terminal event
	// and at once resumes under the run's id finds the run ended.
	ending bool

	recentMu sync.Mutex // guards recent
	// recent are the run's last events as recorded (at most recentEvents
	// of at most recentBytes in all), which the streams that follow the
	// run live take from memory rather than read back from the database:
	// reading every event back once per stream was a sixth of a busy
	// server's CPU. One slice for the run, however many streams: a stream
	// that falls behind it reads the database, in pages, as any does.
	recent []storedEvent
}

// What a run keeps of its last events for its live streams.
const (
	recentEvents = 32
	recentBytes  = 32 << 10
)

// keep adds evs, just recorded, to the run's recent events, dropping
// the oldest past the bound. An event larger than recentBytes is not
// kept, and neither is anything before it: a stream finds it in the
// database.
func (lr *liveRun) keep(evs []storedEvent) {
	lr.recentMu.Lock()
	defer lr.recentMu.Unlock()
	for _, e := range evs {
		if len(e.data) > recentBytes || len(e.data) > eventChunk {
			lr.recent = lr.recent[:0]
			continue
		}
		lr.recent = append(lr.recent, e)
	}
	size := 0
	for _, e := range lr.recent {
		size += len(e.data)
	}
	drop := 0
	for len(lr.recent)-drop > recentEvents || size > recentBytes {
		size -= len(lr.recent[drop].data)
		drop++
	}
	if drop > 0 {
		// Moved down in place, not copied to a new slice at every
		// event; the slots let go are cleared, so their events' bytes
		// are not kept.
		n := copy(lr.recent, lr.recent[drop:])
		clear(lr.recent[n:])
		lr.recent = lr.recent[:n]
	}
}

// since returns the run's recent events from the one numbered after+1
// on, and whether it had that one: if not, the stream reads the
// database. Where a number is missing, the stream ends, as it does at a
// gap in the database.
func (lr *liveRun) since(after int64) ([]storedEvent, bool) {
	lr.recentMu.Lock()
	defer lr.recentMu.Unlock()
	for i, e := range lr.recent {
		if e.seq == after+1 {
			return slices.Clone(lr.recent[i:]), true
		}
	}
	return nil, false
}

// loadSeq sets the run's last event number from the database.
func (lr *liveRun) loadSeq(ctx context.Context) error {
	return lr.h.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM serve_events WHERE run_id = ?`, lr.id).Scan(&lr.seq)
}

// emit records events as the run's next ones and wakes its streams. They
// are one write to the database, so the events one toolrun event makes
// (a response's text and tool calls, say) cost one commit, not one each;
// events that cannot be recorded are logged and their numbers stay
// unused: the run goes on, and its streams end at the gap rather than
// send events out of order or miss one.
func (lr *liveRun) emit(events ...event) { lr.emitKnown(nil, events...) }

// emitKnown is emit that also records, in the same transaction, the
// message ids known names, which the thread has from the events: a client
// that sends them back is not taken to bring them anew.
func (lr *liveRun) emitKnown(known []string, events ...event) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	b, ok := lr.encode(known, events)
	if !ok {
		return
	}
	lr.recorded(b, lr.h.writes.do(lr.h.base, b.insert))
}

// eventBatch is events of a run encoded and numbered, to be recorded
// in one write: by emitKnown, or with a State's save (carriedStore).
type eventBatch struct {
	lr     *liveRun
	events []event
	data   [][]byte
	known  []string
	first  int64
	// ending is set on the run's last write of events, which records the
	// run's end with them.
	ending bool
}

// encode encodes events as the run's next ones, with known, for a write
// of the caller's. The caller holds lr.mu until it has called recorded.
// An event that does not encode is logged, the events' numbers are left
// unused and their streams woken, and ok is false: there is nothing to
// write.
func (lr *liveRun) encode(known []string, events []event) (b *eventBatch, ok bool) {
	now := lr.h.cfg.Now().UnixMilli()
	data := make([][]byte, len(events))
	var buf []byte // each event's JSON in turn, copied out at its size
	for i, e := range events {
		e["timestamp"] = now
		var err error
		buf, err = appendEvent(buf[:0], e)
		if err != nil {
			lr.h.log.Error("serve: encoding an event", "run", lr.id, "type", e["type"], "err", err)
			lr.seq += int64(len(events))
			lr.wake()
			if lr.ending {
				lr.ending = false
				lr.recordEnd()
			}
			return nil, false
		}
		data[i] = slices.Clone(buf)
	}
	b = &eventBatch{lr: lr, events: events, data: data, known: known, first: lr.seq + 1, ending: lr.ending}
	lr.ending = false
	return b, true
}

// insert records b in q: its events, its known ids and, if it is the
// run's last, the run's end.
func (b *eventBatch) insert(ctx context.Context, q querier) error {
	lr := b.lr
	if err := insertEvents(ctx, q, lr.id, b.first, b.data, lr.thread, b.known); err != nil {
		return err
	}
	if b.ending {
		_, err := q.ExecContext(ctx, sqlRunStatus, runFinished, lr.id)
		return err
	}
	return nil
}

// recorded ends b's write, whose error is err: the events are kept for
// the run's live streams if they were recorded, logged if not (their
// numbers stay unused), and the streams woken either way.
func (lr *liveRun) recorded(b *eventBatch, err error) {
	if err != nil && b.ending {
		lr.recordEnd()
	}
	if err != nil {
		lr.h.log.Error("serve: recording events", "run", lr.id, "first", b.first, "events", len(b.events), "err", err)
	} else {
		// Kept for the live streams once recorded, never before: a
		// stream sends nothing the database does not have. Numbers
		// left unused by a failure are in neither, and a stream ends
		// there.
		kept := make([]storedEvent, len(b.data))
		for i, d := range b.data {
			t := b.events[i]["type"]
			kept[i] = storedEvent{seq: b.first + int64(i), size: len(d), data: d, terminal: t == "RUN_FINISHED" || t == "RUN_ERROR"}
		}
		lr.keep(kept)
	}
	lr.seq += int64(len(b.events))
	lr.wake()
}

// recordEnd records the run's end alone, its events' write having
// failed.
func (lr *liveRun) recordEnd() {
	err := lr.h.writes.do(lr.h.base, func(ctx context.Context, q querier) error {
		_, err := q.ExecContext(ctx, sqlRunStatus, runFinished, lr.id)
		return err
	})
	if err != nil {
		lr.h.log.Error("serve: recording a run's end", "run", lr.id, "err", err)
	}
}

// isFreed reports whether the run has freed its thread; one with no
// freed channel (a run a restarted server follows again) is not known to
// have, and counts as holding it while it is in flight.
func (lr *liveRun) isFreed() bool {
	if lr.freed == nil {
		return false
	}
	select {
	case <-lr.freed:
		return true
	default:
		return false
	}
}

// wake tells the run's streams that it has new event numbers.
func (lr *liveRun) wake() {
	if lr.notify != nil {
		close(lr.notify)
	}
	lr.notify = make(chan struct{})
}

// wait returns a channel closed at the run's next event.
func (lr *liveRun) wait() <-chan struct{} {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.notify == nil {
		lr.notify = make(chan struct{})
	}
	return lr.notify
}

// prepared is what a request to run asks for, checked and recorded.
type prepared struct {
	newThread bool
	// users are the content of the user messages the run gives the
	// model, in order, and userRecs their records as the thread's
	// (serve_user_messages), from position usersFrom on.
	users     [][]toolrun.Content
	userRecs  []userRec
	usersFrom int
	// branch, if not -1, is where the client's history leaves the
	// thread's: the position of the first of the thread's user messages
	// the client edited, dropped or asks to be answered again. The run
	// goes on from the conversation before it (see branchAt).
	branch int
	// preamble is what the client adds to the run's first new user
	// message: its system and developer messages and its context.
	preamble string
	// clientTools are the thread's client tools: those this run declares
	// and those earlier runs did, whose calls may still be answered (a
	// result in this run's messages is routed to its call). offered are
	// the ones the model is offered: this run's (RunAgentInput.tools), or,
	// for a run a decision started, those of the thread's last client run.
	// A call of a client tool the run does not offer is answered by the
	// runner as a call of an unknown tool (toolrun.ErrUnknownTool).
	clientTools []clientTool
	offered     map[string]bool
	cancelOnEOF bool
	// carried are the ids of the messages that users and preamble carry
	// (user, system and developer messages) and of those of other roles
	// the model is not given, and digest the context the
	// preamble gives, if any: the thread has them only once the run's
	// conversation does (see carriedStore), so a run that fails before
	// loses neither, and the client's retry brings them again.
	carried []string
	digest  string
	// peer is the client's protocol version, and warnings what the run
	// tells its developer in CUSTOM "toolrun.warning" events: members and
	// parts stripped, resume entries ignored.
	peer     peer
	warnings []string
	// caught are the interrupts the request answers that were decided
	// already, elsewhere (the inbox, the JSON API, another client): the
	// run tells the client what was decided instead of refusing it.
	caught []*interrupt
	// reused is set on a run that resumes an interrupted run under its
	// runId: its events follow that run's, numbered on.
	reused bool
	// differs is set when the client's history differs from the
	// thread's in what the server keeps (a tool message for a call the
	// server ran or a person decided), and caught says the same of the
	// run that went on elsewhere: the run sends a MESSAGES_SNAPSHOT of
	// the thread's conversation (snapshots.mdx), built with the ids of
	// history, the client's messages.
	differs bool
	history []message
	// answers is set on a request that answers calls (resume entries,
	// a client tool's result): it goes on from the thread's run, rather
	// than asking the thread again.
	answers bool
	// reattach is set on a run a killed server left in flight, which
	// this one goes on with on its Executor (see Handler.reattach).
	reattach bool
}

// handleRun starts a run from a RunAgentInput and streams its events.
func (h *Handler) handleRun(w http.ResponseWriter, r *http.Request, id identity) {
	var in *runInput
	var warnings []string
	err := h.readBody(w, func() (err error) {
		in, warnings, err = h.readInput(r.Context(), r.Body, id)
		return err
	})
	if err != nil {
		h.writeError(w, err)
		return
	}
	if !validID(in.ThreadID) || !validID(in.RunID) {
		httpError(w, http.StatusBadRequest, "bad_input", "threadId and runId must be 1 to 200 printable ASCII characters")
		return
	}
	pr, warn := negotiate(in.ProtocolVersion)
	if warn != "" {
		warnings = append(warnings, warn)
	}
	in.peer, in.warnings = pr, warnings
	cancelOnEOF, err := h.be.start(r.Context(), in, id)
	if err != nil {
		h.writeError(w, err)
		return
	}
	h.stream(w, r, in.RunID, in.firstSeq)
	if cancelOnEOF && r.Context().Err() != nil {
		h.be.cancel(in.RunID, id.name)
	}
}

// holdThread marks thread as having a run in flight, counted against
// owner's runs and waited for by a drain (h.wg), and returns the unlock
// that frees the thread and the owner's count, once however often it is
// called. The caller holds h.mu and calls h.wg.Done when the run is gone.
func (h *Handler) holdThread(thread, owner string) (unlock func()) {
	h.threads[thread] = true
	h.perToken[owner]++
	h.wg.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.threads, thread)
			h.perToken[owner]--
			h.mu.Unlock()
		})
	}
}

// startRun checks and records a request to run, and starts the run, whose
// first event (RUN_STARTED) is recorded when it returns. ctx bounds the
// checks, not the run.
func (h *Handler) startRun(ctx context.Context, in *runInput, id identity) (*liveRun, *prepared, error) {
	if err := h.claimThread(ctx, in, id); err != nil {
		return nil, nil, err
	}
	hold := h.holdThread(in.ThreadID, id.name)
	h.mu.Unlock()
	freed := make(chan struct{})
	var freeOnce sync.Once
	unlock := func() {
		hold()
		freeOnce.Do(func() { close(freed) })
	}
	release := func() {
		unlock()
		h.mu.Lock()
		delete(h.runs, in.RunID)
		h.mu.Unlock()
		h.wg.Done()
	}

	p, err := h.prepare(ctx, in, id)
	if err != nil {
		release()
		return nil, nil, err
	}
	p.peer, p.warnings = in.peer, append(in.warnings, p.warnings...)
	if p.peer.speaks == "" {
		p.peer.speaks = ProtocolVersion // a run no client asked for: the inbox's
	}
	tools, err := h.tools(p.clientTools)
	if err != nil {
		release()
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(h.base)
	lr := &liveRun{id: in.RunID, thread: in.ThreadID, owner: id.name, h: h, cancel: cancel, unlock: unlock, freed: freed, peer: p.peer, byDecision: in.byDecision}
	if p.reused {
		// The run resumes the interrupted run whose id it reuses: its
		// events are numbered after that run's.
		if err := lr.loadSeq(ctx); err != nil {
			cancel()
			release()
			return nil, nil, err
		}
		in.firstSeq = lr.seq
	}
	h.mu.Lock()
	h.runs[in.RunID] = lr
	h.mu.Unlock()
	h.metrics.runsStarted.Add(1)
	started := event{"type": "RUN_STARTED", "threadId": in.ThreadID, "runId": in.RunID, "protocolVersion": p.peer.speaks}
	if in.ParentRunID != "" {
		started["parentRunId"] = in.ParentRunID
	}
	evs := []event{started}
	for _, w := range p.warnings {
		h.log.Warn("serve: "+w, "thread", in.ThreadID, "run", in.RunID)
		evs = append(evs, event{"type": "CUSTOM", "name": "toolrun.warning", "value": map[string]any{"message": w}})
	}
	evs = append(evs, h.caughtUp(ctx, in, p)...)
	lr.emit(evs...)
	go func() {
		defer h.released(lr, release)
		defer cancel()
		h.run(runCtx, lr, p, tools)
	}()
	return lr, p, nil
}

// released lets go of lr, a run that has ended: release frees its thread
// and drops it from the runs in flight. Then its streams are woken once
// more. A stream waits for a run's next event only while the run is in
// flight, and its last event wakes it; but when that event could not be
// recorded (the database refused the write), the stream found nothing
// new, took the run as still in flight, and waits again. Woken after the
// run is gone, it reads what was recorded and ends there, rather than
// wait for an event that never comes.
func (h *Handler) released(lr *liveRun, release func()) {
	h.mu.Lock()
	hook := h.beforeRelease
	h.mu.Unlock()
	if hook != nil {
		hook(lr.id)
	}
	release()
	lr.mu.Lock()
	lr.wake()
	lr.mu.Unlock()
}

// DecidedRunWait bounds how long a run waits for its thread's run in
// flight when that run is one a decision started (in the inbox or over
// the JSON API, while no client ran the thread): a chat whose interrupt
// was decided elsewhere sends its next message as soon as it learns of
// the decision, often while the run the decision continued still takes
// its turn (over Temporal, a workflow step), and CopilotKit, like most
// AG-UI clients, does not retry a refused run. The message is taken once
// that run ends, as if it had come a moment later; past the bound, or
// while the thread's run is one a client started (the client's own
// stream, which it should wait for or cancel), the run is refused with
// 409 thread_busy, naming the run in flight. The bound is well within the
// five minutes Node's fetch waits for a response's headers.
const DecidedRunWait = 2 * time.Minute

// claimThread returns, with h.mu held, once in's thread has no run in
// flight and the token may start one more, or refuses the run (h.mu not
// held). A thread whose run in flight is one a decision started is
// waited for, within ctx and [DecidedRunWait] (see there); any other
// refuses the run at once.
func (h *Handler) claimThread(ctx context.Context, in *runInput, id identity) error {
	var deadline <-chan time.Time
	for {
		h.mu.Lock()
		switch {
		case h.draining:
			h.mu.Unlock()
			return refuse(http.StatusServiceUnavailable, "draining", "the server is shutting down; no new run starts")
		case h.threads[in.ThreadID]:
			var holder *liveRun
			for _, lr := range h.runs {
				if lr.thread == in.ThreadID && !lr.isFreed() {
					holder = lr
				}
			}
			h.mu.Unlock()
			busy := ""
			if holder != nil {
				busy = fmt.Sprintf(" (run %q: GET /runs/%s/events streams it)", holder.id, holder.id)
			}
			if holder == nil || !holder.byDecision || in.byDecision {
				return refuse(http.StatusConflict, "thread_busy", "thread %q has a run in flight%s; wait for it to finish or cancel it", in.ThreadID, busy)
			}
			if deadline == nil {
				h.log.Info("serve: a run waits for the run a decision started on its thread", "thread", in.ThreadID, "run", in.RunID, "decided", holder.id)
				t := time.NewTimer(DecidedRunWait)
				defer t.Stop()
				deadline = t.C
			}
			select {
			case <-holder.freed:
				continue
			case <-ctx.Done():
				return refuse(http.StatusConflict, "thread_busy", "thread %q has a run in flight%s, which a decision started; the request ended while it waited for it", in.ThreadID, busy)
			case <-deadline:
				return refuse(http.StatusConflict, "thread_busy", "thread %q has a run in flight%s, which a decision started and which did not end within %s; wait for it to finish or cancel it", in.ThreadID, busy, DecidedRunWait)
			}
		case h.perToken[id.name] >= id.maxRuns:
			h.mu.Unlock()
			return refuse(http.StatusTooManyRequests, "too_many_runs", "the token %q has %d runs in flight, its limit", id.name, id.maxRuns)
		default:
			return nil
		}
	}
}

// tools returns the tools of a run: the server's and the client's.
func (h *Handler) tools(client []clientTool) ([]toolrun.Tool, error) {
	tools := slices.Clone(h.cfg.Tools)
	for _, ct := range client {
		for _, t := range h.cfg.Tools {
			if t.Name() == ct.Name {
				return nil, refuse(http.StatusBadRequest, "bad_tool", "client tool %q has the name of a tool of the server", ct.Name)
			}
		}
		t, err := toolrun.NewRawTool(ct.Name, ct.Description, ct.Parameters, func(context.Context, json.RawMessage) (string, error) {
			return "", errors.New("a client tool runs in the client, not on the server")
		})
		if err != nil {
			return nil, refuse(http.StatusBadRequest, "bad_tool", "client tool %q: %v", ct.Name, err)
		}
		t.Policy = func(context.Context, toolrun.PolicyCall) toolrun.Decision { return policy.Defer(clientReason) }
		tools = append(tools, t)
	}
	return tools, nil
}

// mergeTools returns the thread's client tools, had, with those of this
// run, add, in their place: a tool of add replaces the one of its name,
// which moves to the end. It takes one pass, for a request may declare
// many tools.
func mergeTools(had, add []clientTool) []clientTool {
	last := make(map[string]int, len(add)) // the index in add of the last tool of each name
	for i, ct := range add {
		last[ct.Name] = i
	}
	out := make([]clientTool, 0, len(had)+len(add))
	for _, t := range had {
		if _, ok := last[t.Name]; !ok {
			out = append(out, t)
		}
	}
	for i, ct := range add {
		if last[ct.Name] == i {
			out = append(out, ct)
		}
	}
	return out
}

// MaxClientTools is how many client tools (RunAgentInput.tools) a thread
// may have, counting those earlier runs declared and this run does not
// replace. Each is a tool of the run, with its schema compiled, on every
// turn; a request past the bound is refused with 400 too_many_tools and
// changes nothing. The Messages API takes far fewer tools in practice.
const MaxClientTools = 1000

// prepare checks a request to run against the thread and records what it
// brings (the thread, the run, the decisions of its resume entries, the
// results of client tools and their message ids) in one transaction: a
// request refused changes nothing. The ids of the messages the model is
// to read, and the context, are recorded once the run's conversation has
// them (prepared.carried). Each step is a function of its own, in the
// order the checks depend on one another.
func (h *Handler) prepare(ctx context.Context, in *runInput, id identity) (*prepared, error) {
	if err := checkClientTools(in.Tools); err != nil {
		return nil, err
	}
	if _, ok := h.cfg.Executor.(BusyReporter); ok {
		// The executor is asked, in the transaction, whether the thread
		// is busy: a call the write queue must not wait for.
		tx, err := h.cfg.DB.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer tx.Rollback()
		p, err := h.prepareIn(ctx, newPreparedTx(tx, h.db.s), in, id)
		if err != nil {
			return nil, err
		}
		return p, tx.Commit()
	}
	// A write of the queue, committed with the other runs' writes: a
	// transaction (and a sync) of its own was a seventh of the CPU of
	// 1,000 runs at once. A refusal is an error of the write, which
	// takes none of its rows.
	var p *prepared
	err := h.writes.do(ctx, func(ctx context.Context, q querier) error {
		var err error
		p, err = h.prepareIn(ctx, q, in, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// prepareIn is prepare's checks and records in q, a transaction. It may
// run twice (see writeQueue.commit), and changes nothing but q.
func (h *Handler) prepareIn(ctx context.Context, q querier, in *runInput, id identity) (*prepared, error) {
	p := &prepared{history: in.Messages, branch: -1}
	if err := p.readForwarded(in.ForwardedProps); err != nil {
		return nil, err
	}
	rq := &runRequest{h: h, q: q, in: in, id: id, p: p, now: h.cfg.Now()}
	if err := rq.thread(ctx); err != nil {
		return nil, err
	}
	if err := rq.claimRun(ctx); err != nil {
		return nil, err
	}
	if err := rq.loadThread(ctx); err != nil {
		return nil, err
	}
	unknown, err := rq.takeResumes(ctx)
	if err != nil {
		return nil, err
	}
	if err := rq.findBranch(ctx); err != nil {
		return nil, err
	}
	if err := rq.takeMessages(ctx); err != nil {
		return nil, err
	}
	if err := rq.checkReady(ctx); err != nil {
		return nil, err
	}
	if err := h.addPreamble(ctx, rq.q, in, p, rq.instructions); err != nil {
		return nil, err
	}
	if err := rq.recordThread(ctx); err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		p.warnings = append(p.warnings, fmt.Sprintf("%d resume entries (the first for interrupt %q) answer interrupts this server did not raise; they were ignored", len(unknown), unknown[0]))
	}
	return p, nil
}

// The statements of a request to run, prepared at New (they run in its
// transaction).
const (
	sqlThreadGet      = `SELECT owner, client_tools FROM serve_threads WHERE id = ?`
	sqlThreadInsert   = `INSERT INTO serve_threads (id, owner, client_tools, created_at) VALUES (?, ?, ?, ?)`
	sqlThreadTools    = `UPDATE serve_threads SET client_tools = ? WHERE id = ?`
	sqlRunGet         = `SELECT thread_id, owner, status FROM serve_runs WHERE id = ?`
	sqlRunInsert      = `INSERT INTO serve_runs (id, thread_id, owner, status, created_at) VALUES (?, ?, ?, ?, ?)`
	sqlMessagesOf     = `SELECT id FROM serve_messages WHERE thread_id = ?`
	sqlContextGet     = `SELECT digest FROM serve_thread_context WHERE thread_id = ?`
	sqlUserRecords    = `SELECT id, digest FROM serve_user_messages WHERE thread_id = ? ORDER BY seq`
	sqlUserDropFrom   = `DELETE FROM serve_user_messages WHERE thread_id = ? AND seq >= ?`
	sqlUserInsert     = `INSERT INTO serve_user_messages (thread_id, seq, id, digest) VALUES (?, ?, ?, ?)`
	sqlContextPut     = `INSERT INTO serve_thread_context (thread_id, digest) VALUES (?, ?) ON CONFLICT (thread_id) DO UPDATE SET digest = excluded.digest`
	sqlDecide         = `UPDATE serve_interrupts SET status = ?, decision = ?, decided_by = ?, decided_at = ? WHERE id = ? AND status = ?`
	sqlGatedCount     = `SELECT COUNT(*) FROM serve_interrupts WHERE thread_id = ? AND tool_call_id = ? AND kind = ?`
	whereThreadStatus = `thread_id = ? AND status = ?`
	whereID           = `id = ?`
)

// inRequest are the statements of a request to run, and of the writes of
// the State that carry its records.
var inRequest = []string{
	sqlThreadGet, sqlThreadInsert, sqlThreadTools, sqlRunGet, sqlRunInsert,
	sqlMessagesOf, sqlContextGet, sqlUserRecords, sqlUserDropFrom, sqlUserInsert,
	sqlContextPut, sqlDecide, sqlGatedCount,
	interruptQuery(whereThreadStatus), interruptQuery(whereID),
}

// runRequest is a request to run being checked and recorded, in the
// transaction q: what prepare's steps share.
type runRequest struct {
	h   *Handler
	q   querier
	in  *runInput
	id  identity
	p   *prepared
	now time.Time

	hadRow bool // the thread has a row of serve_threads
	tools  []threadTool
	known  map[string]bool       // the message ids the thread has
	open   map[string]*interrupt // pending, and not answered by this request
	recs   []userRec             // the thread's user messages

	newIDs       []string // message ids the request brings that the thread has from now on
	instructions []string // the text of the request's system and developer messages
}

// readForwarded takes what the run's forwardedProps ask of the server.
func (p *prepared) readForwarded(fp json.RawMessage) error {
	if len(fp) == 0 {
		return nil
	}
	var props struct {
		CancelOnDisconnect bool `json:"cancelOnDisconnect"`
	}
	if err := json.Unmarshal(fp, &props); err != nil {
		// Any JSON value may be the client's: one that is not an
		// object asks nothing of the server.
		var v any
		if json.Unmarshal(fp, &v) != nil {
			return refuse(http.StatusBadRequest, "bad_input", "forwardedProps is not JSON: %v", err)
		}
		return nil
	}
	p.cancelOnEOF = props.CancelOnDisconnect
	return nil
}

// checkClientTools refuses client tools without a name, or too many.
func checkClientTools(tools []clientTool) error {
	for _, ct := range tools {
		if ct.Name == "" {
			return refuse(http.StatusBadRequest, "bad_tool", "a client tool has no name")
		}
	}
	if len(tools) > MaxClientTools {
		return refuse(http.StatusBadRequest, "too_many_tools", "the run declares %d client tools; a thread may have at most %d", len(tools), MaxClientTools)
	}
	return nil
}

// thread checks that the thread is the token's, if it exists, and takes
// its client tools with the run's.
func (rq *runRequest) thread(ctx context.Context) error {
	in, p := rq.in, rq.p
	var owner, toolsJSON string
	err := rq.q.QueryRowContext(ctx, sqlThreadGet, in.ThreadID).Scan(&owner, &toolsJSON)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		p.newThread = true
		toolsJSON = "[]"
	case err != nil:
		return err
	case owner != rq.id.name:
		return rq.h.foreignThread(rq.id, in.ThreadID, owner)
	}
	rq.hadRow = !p.newThread
	// The thread's client tools: those declared before, replaced by name
	// by this run's, so a call made in an earlier run can be answered;
	// the model is offered this run's alone (see prepared.offered).
	var had []threadTool
	if err := json.Unmarshal([]byte(toolsJSON), &had); err != nil {
		return fmt.Errorf("thread %q: its client tools: %w", in.ThreadID, err)
	}
	threadTools := make([]clientTool, len(had))
	last := map[string]bool{} // the tools of the thread's last client run
	for i, t := range had {
		threadTools[i] = t.clientTool
		if !t.Earlier {
			last[t.Name] = true
		}
	}
	p.offered = map[string]bool{}
	if in.byDecision {
		// No client asked for the run: it offers what the thread's
		// client offered last.
		p.clientTools, p.offered = threadTools, last
	} else {
		p.clientTools = mergeTools(threadTools, in.Tools)
		for _, ct := range in.Tools {
			p.offered[ct.Name] = true
		}
	}
	if len(p.clientTools) > MaxClientTools {
		return refuse(http.StatusBadRequest, "too_many_tools", "with the %d client tools it declared before, the thread would have %d; a thread may have at most %d", len(threadTools), len(p.clientTools), MaxClientTools)
	}
	rq.tools = make([]threadTool, len(p.clientTools))
	for i, ct := range p.clientTools {
		rq.tools[i] = threadTool{clientTool: ct, Earlier: !p.offered[ct.Name]}
	}
	return nil
}

// threadTool is a client tool as the thread keeps it (serve_threads'
// client_tools): Earlier is set on one the thread's last client run did
// not declare, which a run a decision starts does not offer either.
type threadTool struct {
	clientTool
	Earlier bool `json:"earlier,omitempty"`
}

// claimRun records the run, or takes up the interrupted run whose id a
// resume reuses.
func (rq *runRequest) claimRun(ctx context.Context) error {
	in := rq.in
	var runThread, runOwner, runStatus string
	err := rq.q.QueryRowContext(ctx, sqlRunGet, in.RunID).Scan(&runThread, &runOwner, &runStatus)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err := rq.q.ExecContext(ctx, sqlRunInsert, in.RunID, in.ThreadID, rq.id.name, runRunning, timestamp(rq.now))
		return err
	case err != nil:
		return err
	case runThread == in.ThreadID && runOwner == rq.id.name && runStatus != runRunning && len(in.Resume) > 0:
		// A resume under the interrupted run's own id (CopilotKit's):
		// the run goes on under that id, its events numbered after the
		// interrupted run's, so one Last-Event-ID sequence covers both.
		if _, err := rq.q.ExecContext(ctx, sqlRunStatus, runRunning, in.RunID); err != nil {
			return err
		}
		rq.p.reused = true
		return nil
	default:
		return refuse(http.StatusConflict, "run_exists", "run %q exists already; every run needs a new runId (a run that answers interrupts may reuse the id of its thread's run that raised them)", in.RunID)
	}
}

// loadThread reads the message ids the thread has, its calls pending and
// its user messages.
func (rq *runRequest) loadThread(ctx context.Context) error {
	thread := rq.in.ThreadID
	known, err := messageIDs(ctx, rq.q, thread)
	if err != nil {
		return err
	}
	rq.known = known
	// A thread none of whose messages its conversation has is new still:
	// its first run failed before it took them (a foreign workflow under
	// the thread's id, say), so whatever holds the thread's id is not
	// this thread's conversation.
	if len(known) == 0 {
		rq.p.newThread = true
	}
	pending, err := queryInterrupts(ctx, rq.q, whereThreadStatus, thread, statusPending)
	if err != nil {
		return err
	}
	rq.open = map[string]*interrupt{}
	for _, it := range pending {
		rq.open[it.ID] = it
	}
	rq.recs, err = userRecords(ctx, rq.q, thread)
	return err
}

// messageIDs returns the message ids thread has.
func messageIDs(ctx context.Context, q querier, thread string) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, sqlMessagesOf, thread)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	known := map[string]bool{}
	for rows.Next() {
		var mid string
		if err := rows.Scan(&mid); err != nil {
			return nil, err
		}
		known[mid] = true
	}
	return known, rows.Err()
}

// takeResumes records the decisions of the resume entries, each for an
// approval interrupt of this thread, and returns the ids of those the
// server never raised, which are ignored with a warning
// (interrupt-resume.mdx, "An unrecognised entry"); one decided already
// is what the client missed, and the run tells it.
func (rq *runRequest) takeResumes(ctx context.Context) ([]string, error) {
	in, p := rq.in, rq.p
	seen := map[string]bool{}
	var unknown []string
	for _, re := range in.Resume {
		if seen[re.InterruptID] {
			return nil, refuse(http.StatusBadRequest, "bad_resume", "interrupt %q is answered twice", re.InterruptID)
		}
		seen[re.InterruptID] = true
		its, err := queryInterrupts(ctx, rq.q, whereID, re.InterruptID)
		if err != nil {
			return nil, err
		}
		if len(its) == 0 {
			unknown = append(unknown, re.InterruptID)
			continue
		}
		it := its[0]
		if it.Thread == in.ThreadID && it.Kind == kindApproval && it.Status != statusPending {
			p.caught = append(p.caught, it)
			continue
		}
		d, err := rq.resumeDecision(it, re)
		if err != nil {
			return nil, err
		}
		if err := decide(ctx, rq.q, it, d, rq.id.name, rq.now); err != nil {
			return nil, err
		}
		delete(rq.open, it.ID)
	}
	return unknown, nil
}

// resumeDecision returns the decision a resume entry gives the pending
// interrupt it, if the token may give it.
func (rq *runRequest) resumeDecision(it *interrupt, re resumeEntry) (toolrun.Decision, error) {
	h := rq.h
	if err := h.checkDecidable(it, rq.in.ThreadID); err != nil {
		return toolrun.Decision{}, err
	}
	if !rq.id.can(ScopeApprove) && !h.userApproves(it.ToolName) {
		return toolrun.Decision{}, refuse(http.StatusForbidden, "approver_only", "interrupt %q: a call of %q is an approver's to decide (a token with the approve scope, or the inbox); this token may not answer it", it.ID, it.ToolName)
	}
	switch re.Status {
	case "cancelled":
		return policy.Deny("the client cancelled the approval"), nil
	case "resolved":
		if !rq.now.Before(it.ExpiresAt) {
			return toolrun.Decision{}, refuse(http.StatusConflict, "expired", "interrupt %q expired at %s; cancel it to continue the thread", it.ID, timestamp(it.ExpiresAt))
		}
		var dp decisionPayload
		if err := strictJSON(re.Payload, &dp); err != nil {
			return toolrun.Decision{}, refuse(http.StatusBadRequest, "bad_resume", "interrupt %q: the payload is not a decision (see the interrupt's responseSchema): %v", it.ID, err)
		}
		return h.decision(it, dp)
	default:
		return toolrun.Decision{}, refuse(http.StatusBadRequest, "bad_resume", "interrupt %q: status %q; want resolved or cancelled", re.InterruptID, re.Status)
	}
}

// findBranch compares the client's history with the thread's: a client
// that shows the thread any of its messages sends the conversation as it
// has it, and where that leaves the thread's (an earlier user message
// edited or dropped, the last answer dropped to have it again), the run
// goes on from the client's (run-input.mdx, "messages": the complete
// history). A client that shows none sends only what it adds, as
// toolrun's clients always could. The calls of the part of the thread
// the client leaves behind wait no more: their records stay, denied as
// left behind.
func (rq *runRequest) findBranch(ctx context.Context) error {
	in, p, recs := rq.in, rq.p, rq.recs
	var clientUsers []userRec
	shows := false
	answers := len(in.Resume) > 0
	p.answers = answers
	for _, m := range in.Messages {
		shows = shows || rq.known[m.ID]
		switch m.Role {
		case "user":
			clientUsers = append(clientUsers, userRec{ID: m.ID, Digest: contentDigest(m.Content)})
		case "tool":
			answers = true
		}
	}
	if !shows || p.newThread {
		return nil
	}
	j := 0
	for j < len(recs) && j < len(clientUsers) && recs[j] == clientUsers[j] {
		j++
	}
	lastUser := len(in.Messages) > 0 && in.Messages[len(in.Messages)-1].Role == "user"
	// A history that keeps the model's answers (one with an assistant
	// message, or a conversation of one user message) and ends with a
	// user message the thread answered asks for that answer again. One of
	// user messages alone is a client that sends what it said, which the
	// same messages again leave as it was.
	full := len(clientUsers) == 1 || slices.ContainsFunc(in.Messages, func(m message) bool { return m.Role == "assistant" })
	switch {
	case j < len(recs):
		p.branch = j // edited or dropped
	case j > 0 && j == len(clientUsers) && lastUser && !answers && full:
		p.branch = j - 1 // answered again: regenerate
	default:
		return nil
	}
	if _, ok := rq.h.cfg.Executor.(StateLoader); rq.h.cfg.Executor != nil && !ok {
		return refuse(http.StatusConflict, "cannot_branch", "the client's history leaves thread %q at its user message %d; going on from an earlier point of a thread needs an Executor that loads the thread's State (a StateLoader): start a new thread", in.ThreadID, p.branch+1)
	}
	for _, it := range rq.open {
		d := policy.Deny("the client's history left this call behind")
		if err := decide(ctx, rq.q, it, d, rq.id.name, rq.now); err != nil {
			return err
		}
	}
	clear(rq.open)
	return nil
}

// takeMessages takes the messages the thread does not have yet. Those a
// decision carries (a client tool's result) are known with the
// decision, in this transaction; those the model is to read, once the
// run's conversation has them.
func (rq *runRequest) takeMessages(ctx context.Context) error {
	in, p := rq.in, rq.p
	p.usersFrom = len(rq.recs)
	if p.branch >= 0 {
		p.usersFrom = p.branch
	}
	nUser := 0
	for _, m := range in.Messages {
		if m.Role == "user" {
			nUser++
			if p.branch >= 0 && nUser > p.branch {
				// From the branch on, every user message of the client's is
				// the run's, known or not.
				if err := rq.h.takeUser(p, m); err != nil {
					return err
				}
				continue
			}
		}
		if rq.known[m.ID] {
			continue
		}
		rq.known[m.ID] = true // a map, not a search of newIDs: a request may bring many
		switch m.Role {
		case "user":
			if err := rq.h.takeUser(p, m); err != nil {
				return err
			}
		case "system", "developer":
			text, err := m.text()
			if err != nil {
				return refuse(http.StatusBadRequest, "bad_message", "%v", err)
			}
			rq.instructions = append(rq.instructions, text)
		case "tool":
			if err := rq.takeResult(ctx, m); err != nil {
				return err
			}
			continue
		}
		// The message is the thread's once its run's conversation has
		// it. Another role (the client's own assistant greeting, say)
		// gives the model nothing, and is known with the run's messages
		// too: a thread whose first run failed is new still (loadThread)
		// however many such messages that run brought.
		p.carried = append(p.carried, m.ID)
	}
	return nil
}

// takeResult records the tool message m as the result of the client
// tool's call it answers, or, for a call the server ran or a person
// decided, ignores it with a warning.
func (rq *runRequest) takeResult(ctx context.Context, m message) error {
	in, p := rq.in, rq.p
	it, err := rq.h.clientCall(ctx, rq.q, in.ThreadID, m)
	if err != nil {
		var re *requestError
		if !errors.As(err, &re) || (re.code != "not_pending" && re.code != "already_answered") {
			return err
		}
		gated, gerr := gatedOrRan(ctx, rq.q, in.ThreadID, m.ToolCallID, rq.known)
		if gerr != nil {
			return gerr
		}
		if !gated {
			return err
		}
		// A call the server ran or a person decided: the client's
		// message for it (CopilotKit's echo of the decision, or its own
		// idea of the result) is not its result. The server's stands.
		p.warnings = append(p.warnings, fmt.Sprintf("tool message %q answers call %q, which the server ran or a person decided; the server's result stands and the message was ignored", m.ID, m.ToolCallID))
		// One the server ran already: the client shows a result the
		// model did not read. (A gated call this request decided has
		// none yet: the run gives it.)
		p.differs = p.differs || rq.known["result_"+m.ToolCallID]
		rq.newIDs = append(rq.newIDs, m.ID)
		return nil
	}
	content, warns, err := m.blocks()
	if err != nil {
		return refuse(http.StatusBadRequest, "bad_result", "the result of tool call %q has the wrong shape: %v", m.ToolCallID, err)
	}
	p.warnings = append(p.warnings, warns...)
	d := policy.Skip(content...)
	if m.Error != "" {
		d = policy.Skip(append(content, toolrun.Text(m.Error))...)
		if textOf(content) == "" {
			d = policy.Skip(toolrun.Text(m.Error))
		}
		d.IsError = true
	}
	if err := decide(ctx, rq.q, it, d, rq.id.name, rq.now); err != nil {
		return err
	}
	delete(rq.open, it.ID)
	rq.newIDs = append(rq.newIDs, m.ID)
	rq.p.answers = true
	return nil
}

// checkReady refuses a run that cannot start: a new message while calls
// still wait for an answer, a thread an Executor is running a turn of, a
// new thread without a user message.
func (rq *runRequest) checkReady(ctx context.Context) error {
	in, p := rq.in, rq.p
	if len(p.users) > 0 && len(rq.open) > 0 {
		var ids []string
		for _, it := range rq.open {
			ids = append(ids, fmt.Sprintf("%s (%s call %s)", it.ID, it.Kind, it.ToolCallID))
		}
		slices.Sort(ids)
		return refuse(http.StatusConflict, "pending_calls", "thread %q has calls awaiting an answer: %s; answer them (resume entries, tool messages) before a new message", in.ThreadID, strings.Join(ids, ", "))
	}
	if br, ok := rq.h.cfg.Executor.(BusyReporter); ok && len(p.users) > 0 && !p.newThread {
		busy, err := br.Busy(ctx, in.ThreadID)
		if err != nil {
			return err
		}
		if busy {
			return refuse(http.StatusConflict, "thread_busy", "thread %q is taking a turn; send the message once its run has stopped", in.ThreadID)
		}
	}
	if p.newThread && len(p.users) == 0 {
		return refuse(http.StatusBadRequest, "bad_input", "a new thread needs a user message")
	}
	return nil
}

// recordThread records the message ids the request made known, and the
// thread with its client tools.
func (rq *runRequest) recordThread(ctx context.Context) error {
	in := rq.in
	for _, mid := range rq.newIDs {
		if _, err := rq.q.ExecContext(ctx, sqlMessageInsert, in.ThreadID, mid); err != nil {
			return err
		}
	}
	tb, err := json.Marshal(rq.tools)
	if err != nil {
		return fmt.Errorf("thread %q: its client tools: %w", in.ThreadID, err)
	}
	if !rq.hadRow {
		_, err = rq.q.ExecContext(ctx, sqlThreadInsert, in.ThreadID, rq.id.name, string(tb), timestamp(rq.now))
	} else {
		_, err = rq.q.ExecContext(ctx, sqlThreadTools, string(tb), in.ThreadID)
	}
	return err
}

// turnsPerRun is how many turns an AG-UI run may take: o.MaxTurns, or
// the runner's default ([toolrun.DefaultMaxTurns]) if it is zero; 0 if
// it is negative, for no limit. A thread is one toolrun run that goes on
// over many AG-UI runs, and the runner counts its turns in its State
// (State.Turns): each AG-UI run sets the State's limit that many turns
// past the count it starts at, so that a thread is not stopped for good
// once its turns in all reach the limit, and the runner, not the server,
// stops the run at it.
func turnsPerRun(o toolrun.Options) int {
	switch {
	case o.MaxTurns < 0:
		return 0
	case o.MaxTurns == 0:
		return toolrun.DefaultMaxTurns
	}
	return o.MaxTurns
}

// takeUser adds the user message m to the run's: its content as Claude's
// blocks, and its record as the thread's.
func (h *Handler) takeUser(p *prepared, m message) error {
	content, warns, err := m.blocks()
	if err != nil {
		return refuse(http.StatusBadRequest, "bad_message", "%v", err)
	}
	p.warnings = append(p.warnings, warns...)
	p.users = append(p.users, content)
	p.userRecs = append(p.userRecs, userRec{ID: m.ID, Digest: contentDigest(m.Content)})
	p.carried = append(p.carried, m.ID)
	return nil
}

// addPreamble sets p's preamble from the client's system and developer
// messages new to the thread and the run's context, when that differs
// from the context the thread was last given (clients send theirs on every
// run). The preamble goes before the run's first new user message, as
// text of that message: the system prompt is the server's, set by its
// operator and the same on every turn, so a client's instructions are
// given to the model as the client's words, not as the operator's. A run
// that brings instructions or a new context but no user message to carry
// them is refused, rather than have them dropped.
func (h *Handler) addPreamble(ctx context.Context, q querier, in *runInput, p *prepared, instructions []string) error {
	var digest string
	if len(in.Context) > 0 {
		b, err := json.Marshal(in.Context)
		if err != nil {
			return fmt.Errorf("the run's context: %w", err)
		}
		sum := sha256.Sum256(b)
		digest = hex.EncodeToString(sum[:])
		var had string
		err = q.QueryRowContext(ctx, sqlContextGet, in.ThreadID).Scan(&had)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if had == digest && p.branch < 0 {
			digest = "" // the thread has it (a branch may have left behind the message that gave it)
		}
	}
	if len(instructions) == 0 && digest == "" {
		return nil
	}
	if len(p.users) == 0 {
		what := "a context that differs from the thread's"
		if len(instructions) > 0 {
			what = "system or developer messages"
		}
		return refuse(http.StatusBadRequest, "no_user_message", "the run brings %s but no new user message to give them to the model with; send them with the next user message", what)
	}
	var b strings.Builder
	for _, text := range instructions {
		b.WriteString("Instructions from the client application:\n")
		b.WriteString(text)
		b.WriteString("\n\n")
	}
	if digest != "" {
		b.WriteString("Context from the client application:\n")
		for _, c := range in.Context {
			fmt.Fprintf(&b, "- %s: %s\n", c.Description, c.Value)
		}
		p.digest = digest
	}
	p.preamble = strings.TrimSuffix(b.String(), "\n")
	return nil
}

// strictJSON decodes b into v, refusing unknown fields.
func strictJSON(b []byte, v any) error {
	if len(b) == 0 {
		return errors.New("no payload")
	}
	if err := oneObject(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// oneObject refuses a decision that could be read two ways: an object
// whose keys are not each there once, or one followed by more JSON.
// encoding/json takes the last of a key given twice and ignores what
// follows the first value, so {"decision":"deny","decision":"approve"}
// would approve what a reader of its first key takes for a denial. What
// is not an object is left to the decoding, which refuses it.
func oneObject(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := k.(string)
		if seen[key] {
			return fmt.Errorf("the key %q is given twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return nil
}

// checkDecidable refuses a decision for it from a request on thread: one
// of another thread, not an approval, or not pending.
func (h *Handler) checkDecidable(it *interrupt, thread string) error {
	switch {
	case thread != "" && it.Thread != thread:
		return refuse(http.StatusConflict, "foreign_interrupt", "interrupt %q belongs to another thread", it.ID)
	case it.Kind != kindApproval:
		return refuse(http.StatusConflict, "not_pending", "interrupt %q is a client tool's call; answer it with a tool message", it.ID)
	case it.Status != statusPending:
		return refuse(http.StatusConflict, "already_decided", "interrupt %q was decided already, by %s at %s", it.ID, it.DecidedBy, it.DecidedAt)
	}
	return nil
}

// clientCall returns the pending client call a tool message answers.
func (h *Handler) clientCall(ctx context.Context, q querier, thread string, m message) (*interrupt, error) {
	if m.ToolCallID == "" {
		return nil, refuse(http.StatusBadRequest, "bad_result", "tool message %q has no toolCallId", m.ID)
	}
	its, err := queryInterrupts(ctx, q, `thread_id = ? AND tool_call_id = ? AND kind = ?`, thread, m.ToolCallID, kindClient)
	if err != nil {
		return nil, err
	}
	for _, it := range its {
		if it.Status == statusPending {
			return it, nil
		}
	}
	if len(its) > 0 {
		return nil, refuse(http.StatusConflict, "already_answered", "tool call %q was answered already", m.ToolCallID)
	}
	return nil, refuse(http.StatusConflict, "not_pending", "tool call %q is not a pending client tool call of thread %q", m.ToolCallID, thread)
}

// decision turns a decision payload for it into a toolrun decision,
// checking an edit's input against the tool's schema.
func (h *Handler) decision(it *interrupt, dp decisionPayload) (toolrun.Decision, error) {
	dp, err := dp.normalize()
	if err != nil {
		return toolrun.Decision{}, refuse(http.StatusBadRequest, "bad_decision", "interrupt %q: %v", it.ID, err)
	}
	switch dp.Decision {
	case "approve":
		return toolrun.Decision{}, nil
	case "deny":
		reason := dp.Reason
		if reason == "" {
			reason = "a person denied the call"
		}
		return policy.Deny(reason), nil
	case "edit":
		if !h.serverTool(it.ToolName) {
			return toolrun.Decision{}, refuse(http.StatusBadRequest, "bad_decision", "interrupt %q: the call of client tool %q cannot be edited: the client runs it with the input it was sent; approve or deny it", it.ID, it.ToolName)
		}
		if len(dp.Input) == 0 {
			return toolrun.Decision{}, refuse(http.StatusBadRequest, "bad_decision", "interrupt %q: an edit needs an input", it.ID)
		}
		if err := h.validateInput(it.ToolName, dp.Input); err != nil {
			return toolrun.Decision{}, refuse(http.StatusUnprocessableEntity, "invalid_input", "interrupt %q: the edited input does not fit tool %q's schema: %v", it.ID, it.ToolName, err)
		}
		return toolrun.Decision{Kind: toolrun.Allow, Input: dp.Input}, nil
	case "respond":
		return respondDecision(it, dp.Response)
	}
	return toolrun.Decision{}, refuse(http.StatusBadRequest, "bad_decision", "interrupt %q: decision %q; want approve, deny, edit or respond", it.ID, dp.Decision)
}

// serverTool reports whether name is one of the server's own tools; any
// other tool a call names is a client's.
func (h *Handler) serverTool(name string) bool {
	return slices.ContainsFunc(h.cfg.Tools, func(t toolrun.Tool) bool { return t.Name() == name })
}

// validateInput checks input against the schema of the server's tool
// name. The runner checks it again, with its own validator, before the
// call runs.
func (h *Handler) validateInput(name string, input json.RawMessage) error {
	var v map[string]any
	if err := json.Unmarshal(input, &v); err != nil {
		return errors.New("not a JSON object")
	}
	for _, t := range h.cfg.Tools {
		if t.Name() != name {
			continue
		}
		raw := t.InputSchema()
		if len(raw) == 0 {
			return nil
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil // a schema this checker cannot read: the runner's check stands
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			return nil
		}
		return rs.Validate(v)
	}
	return nil
}

// decide records d for it, if it is still pending: the first decision
// wins, here as in the runner. The decision carries by and now
// ([toolrun.Decision].Who and At), so that the run's State, its events
// and its transcript name the person and the moment, not the resume.
func decide(ctx context.Context, q querier, it *interrupt, d toolrun.Decision, by string, now time.Time) error {
	d.Who, d.At = by, now.UTC()
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	status := statusDecided
	if it.Kind == kindClient {
		status = statusAnswered
	}
	res, err := q.ExecContext(ctx, sqlDecide, status, b, by, timestamp(now), it.ID, statusPending)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return refuse(http.StatusConflict, "already_decided", "interrupt %q was decided already", it.ID)
	}
	return nil
}

// run runs the thread's runner for lr and writes the run's end.
func (h *Handler) run(ctx context.Context, lr *liveRun, p *prepared, tools []toolrun.Tool) {
	defer h.metrics.runsFinished.Add(1)
	clientTools := map[string]bool{}
	for _, ct := range p.clientTools {
		clientTools[ct.Name] = true
	}
	m := &mapper{lr: lr, client: clientTools}
	opts := h.cfg.Options
	store := &carriedStore{sqlStore: h.store, thread: lr.thread}
	opts.Store, opts.RunID, opts.OnEvent = store, lr.thread, m.on
	var observers []func(context.Context, toolrun.Event)
	if h.cfg.RecordDir != "" {
		rec, closeRec, err := h.recorder(lr.thread, lr.id)
		if err != nil {
			h.finish(ctx, lr, m, nil, toolrun.Usage{}, fmt.Errorf("opening the thread's transcript: %w", err))
			return
		}
		defer closeRec()
		observers = append(observers, rec.Observe)
	}
	if h.cfg.Options.OnEvent != nil {
		observers = append(observers, h.cfg.Options.OnEvent)
	}
	if len(observers) > 0 {
		opts.OnEvent = func(ctx context.Context, e toolrun.Event) {
			m.on(ctx, e)
			for _, o := range observers {
				o(ctx, e)
			}
		}
	} else {
		// The mapper alone observes the run, and reads no request's
		// params: the copy of the history an observer gets at every
		// request would be for nothing.
		driver.ShareEvents(&opts)
	}
	if opts.Logger == nil {
		opts.Logger = h.log
	}
	params := h.cfg.Params
	params.Messages = nil
	var userMsgs []anthropic.BetaMessageParam
	for i, content := range p.users {
		blocks := userBlocks(content)
		if i == 0 && p.preamble != "" {
			blocks = append([]anthropic.BetaContentBlockParamUnion{anthropic.NewBetaTextBlock(p.preamble)}, blocks...)
		}
		userMsgs = append(userMsgs, anthropic.NewBetaUserMessage(blocks...))
	}
	if h.cfg.Executor != nil {
		h.runExecutor(ctx, lr, m, p, tools[len(h.cfg.Tools):], opts.OnEvent, userMsgs)
		return
	}
	// A response's and a tool result's events are recorded with the
	// State the runner saves next (see mapper.saves).
	store.events, m.saves = m, true
	if p.newThread {
		params.Messages = userMsgs
		store.carry(p) // in the State from its first save on
	}
	// The runner has the server's tools and the client tools the run
	// offers: the model is offered no other (a run that declares tools: []
	// none of the client's), and calls one of them as an unknown tool.
	inRunner := map[string]bool{}
	var runTools []toolrun.Tool
	for i, t := range tools {
		if i < len(h.cfg.Tools) || p.offered[t.Name()] {
			runTools = append(runTools, t)
			inRunner[t.Name()] = true
		}
	}
	r, err := toolrun.Open(ctx, h.cfg.Client, params, runTools, &opts)
	if err != nil {
		h.finish(ctx, lr, m, nil, toolrun.Usage{}, err)
		return
	}
	st := r.State()
	base := st.Usage
	if p.branch >= 0 {
		// The client's history leaves the thread's at its p.branch-th user
		// message: the run goes on from the conversation before it.
		msgs, ok := branchAt(r.Messages(), p.branch)
		if !ok {
			h.finish(ctx, lr, m, nil, base, fmt.Errorf("the client's history leaves the thread at its user message %d, which the thread no longer has as such (its history was compacted): start a new thread", p.branch+1))
			return
		}
		r.SetMessages(msgs)
		st = r.State()
	}
	// The decisions recorded for the thread reach its State here, on every
	// run, so a decision recorded before a crash is never lost.
	awaiting := map[string]bool{}
	for _, pc := range st.AwaitingApproval() {
		awaiting[pc.Call.ID] = true
	}
	if len(awaiting) > 0 {
		decided, err := queryInterrupts(ctx, h.db, `thread_id = ? AND status IN (?, ?)`, lr.thread, statusDecided, statusAnswered)
		if err != nil {
			h.finish(ctx, lr, m, nil, base, err)
			return
		}
		for _, it := range decided {
			if !awaiting[it.ToolCallID] {
				continue
			}
			var d toolrun.Decision
			if err := json.Unmarshal(it.Decision, &d); err != nil {
				h.finish(ctx, lr, m, nil, base, fmt.Errorf("the decision of interrupt %q: %w", it.ID, err))
				return
			}
			if !inRunner[it.ToolName] && clientTools[it.ToolName] && (d.Kind == toolrun.Skip || d.Kind == toolrun.Deny) {
				// A call of an earlier run's client tool this run does not
				// offer: its answer is recorded as the call's result, as
				// the runner would give it, for the runner has no tool to
				// decide it with. One still unanswered (or approved, and
				// handed to the client) needs no tool either: the runner
				// takes no step while a call awaits an answer, so it is
				// not answered as an unknown tool's.
				res := &toolrun.ToolResult{Content: d.Result, IsError: d.IsError}
				if d.Kind == toolrun.Deny {
					res = &toolrun.ToolResult{Err: fmt.Errorf("%w: %s", toolrun.ErrDenied, d.Reason)}
				}
				if err := r.SetResult(it.ToolCallID, res); err != nil {
					h.finish(ctx, lr, m, nil, base, err)
					return
				}
				continue
			}
			if it.Kind == kindApproval && clientTools[it.ToolName] && d.Kind == toolrun.Allow {
				// An approved call of a client tool is the client's to run:
				// it stays deferred in the State, and waits now for the
				// client's result instead of a person's decision.
				if err := h.handOver(ctx, lr, it); err != nil {
					h.finish(ctx, lr, m, nil, base, err)
					return
				}
				continue
			}
			if err := r.Decide(it.ToolCallID, d); err != nil && !errors.Is(err, toolrun.ErrNotAwaitingApproval) {

				h.finish(ctx, lr, m, nil, base, err)
				return
			}
		}
	}
	if p.differs || len(p.caught) > 0 || resultsDiffer(r.Messages(), p.history) {
		// The client's history is not the thread's: it shows a result the
		// server did not keep, or lacks what a run that went on elsewhere
		// said. The snapshot shows it the conversation the model is sent.
		users, err := userRecords(ctx, h.cfg.DB, lr.thread)
		if err != nil {
			h.finish(ctx, lr, m, nil, base, err)
			return
		}
		m.write(nil, snapshotEvent(lr.thread, r.Messages(), users, p.history, clientTools))
	}
	if !p.newThread && len(userMsgs) == 0 && st.StopReason == toolrun.StopEndTurn && p.branch < 0 {
		// Nothing to do: the thread's last turn was answered, and the
		// request brings no message (a client that caught up with a
		// decision taken elsewhere, say). The run ends at once, with no
		// model request.
		h.finish(ctx, lr, m, &toolrun.Result{StopReason: toolrun.StopEndTurn, Usage: base}, base, nil)
		return
	}
	if !p.newThread && len(userMsgs) > 0 {
		// After the results of the calls this request answered, if a turn
		// awaited them: the model gets both in one request.
		r.AppendMessages(userMsgs...)
	}
	if !p.newThread {
		store.carry(p)
	}
	if n := turnsPerRun(h.cfg.Options); n > 0 {
		r.SetMaxTurns(st.Turns + n)
	}
	res, err := r.Run(ctx)
	h.finish(ctx, lr, m, res, base, err)
}

// handOver makes the approved call of it a client tool's call awaiting
// the client's result, unless it is one already.
func (h *Handler) handOver(ctx context.Context, lr *liveRun, it *interrupt) error {
	its, err := queryInterrupts(ctx, h.cfg.DB, `thread_id = ? AND tool_call_id = ? AND kind = ?`, it.Thread, it.ToolCallID, kindClient)
	if err != nil || len(its) > 0 {
		return err
	}
	now := h.cfg.Now()
	input := []byte(it.Input)
	if len(input) == 0 {
		input = []byte("{}")
	}
	_, err = h.cfg.DB.ExecContext(ctx, `INSERT INTO serve_interrupts (`+interruptColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, ?, ?)`,
		newID("int_"), it.Thread, lr.id, it.ToolCallID, it.ToolName, input, clientReason, kindClient, statusPending, timestamp(now), timestamp(now.Add(h.cfg.ApprovalTTL)))
	return err
}

// recorder returns a transcript recorder writing the run's file, named
// by hashes of the thread and run ids (which are the client's, so never
// a path).
func (h *Handler) recorder(thread, run string) (*transcript.Recorder, func(), error) {
	if err := os.MkdirAll(h.cfg.RecordDir, 0o700); err != nil {
		return nil, nil, err
	}
	ts, rs := sha256.Sum256([]byte(thread)), sha256.Sum256([]byte(run))
	name := hex.EncodeToString(ts[:8]) + "-" + hex.EncodeToString(rs[:8]) + ".jsonl"
	f, err := os.OpenFile(filepath.Join(h.cfg.RecordDir, name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	rec := transcript.NewRecorder(f, &transcript.RecorderOptions{Meta: map[string]string{"name": "toolrun serve", "thread": thread, "run": run}})
	return rec, func() {
		if err := rec.Err(); err != nil {
			h.log.Error("serve: recording a transcript", "err", err)
		}
		f.Close()
	}, nil
}

// finish writes the run's terminal event and records its end.
func (h *Handler) finish(ctx context.Context, lr *liveRun, m *mapper, res *toolrun.Result, base toolrun.Usage, err error) {
	m.closeStep()
	dbctx := context.WithoutCancel(ctx)
	var announced []string // the client tools' calls this run announces, as known ids
	var announce []event
	end := func(e event) {
		if lr.unlock != nil {
			lr.unlock()
		}
		lr.mu.Lock()
		lr.ending = true
		lr.mu.Unlock()
		m.write(announced, append(announce, e)...) // with the last step's STEP_FINISHED, and the run's end
		h.inbox.notify()                           // the calls the run answered or made, at once
	}
	if ctx.Err() != nil && (res == nil || res.StopReason == toolrun.StopCanceled || errors.Is(res.Err, context.Canceled)) {
		// Cancelled (POST /runs/{run}/cancel, a drain past its grace),
		// wherever the run was: before its first step too.
		fin := cancelledEvent(lr)
		if res != nil && res.Usage != base {
			// Usage the run measured; a run cancelled before it knew any
			// (before its first response, or one whose executor was not
			// heard from) reports none rather than a zero.
			fin["usage"] = usageOf(h.cfg.Params.Model, res.Usage, base)
		}
		end(fin)
		return
	}
	if res == nil {
		end(event{"type": "RUN_ERROR", "code": string(toolrun.StopError), "message": redact.String(err.Error())})
		return
	}
	usage := usageOf(h.cfg.Params.Model, res.Usage, base)
	fin := event{"type": "RUN_FINISHED", "threadId": lr.thread, "runId": lr.id, "usage": usage}
	switch res.StopReason {
	case toolrun.StopEndTurn, toolrun.StopHook:
		fin["outcome"] = map[string]any{"type": "success"}
		if t := res.Text(); t != "" && len(t) <= maxResultBytes {
			fin["result"] = t
		}
	case toolrun.StopCanceled:
		fin = cancelledEvent(lr)
		fin["usage"] = usage
	case toolrun.StopAwaitingApproval:
		outcome, evs, ids, err := h.interrupts(dbctx, lr, m, res.Pending)
		announce, announced = evs, ids
		if err != nil {
			end(event{"type": "RUN_ERROR", "code": string(toolrun.StopError), "message": redact.String(err.Error()), "usage": usage})
			return
		}
		fin["outcome"] = outcome
	default:
		msg := res.Detail
		if res.Err != nil {
			msg = res.Err.Error()
		} else if err != nil {
			msg = err.Error()
		}
		if msg == "" {
			msg = string(res.StopReason)
		}
		fin = event{"type": "RUN_ERROR", "code": string(res.StopReason), "message": redact.String(msg), "usage": usage}
	}
	end(fin)
}

// cancelledEvent is the terminal event of a cancelled run: RUN_FINISHED
// with outcome cancelled, or, for a client that declared no
// protocolVersion, RUN_ERROR with code "cancelled". @ag-ui/core before
// 1.0 (the @ag-ui/client CopilotKit pins) knows only the outcomes
// success and interrupt and refuses the event, so such a client would
// read a cancelled run as a broken stream; a RUN_ERROR it reads as the
// end of the run, and its code says why.
func cancelledEvent(lr *liveRun) event {
	if lr.peer.legacy {
		return event{"type": "RUN_ERROR", "code": "cancelled", "message": "the run was cancelled"}
	}
	return event{"type": "RUN_FINISHED", "threadId": lr.thread, "runId": lr.id, "outcome": map[string]any{"type": "cancelled"}}
}

// usageOf is the AG-UI usage of a run whose thread had used base before
// it and u after.
func usageOf(model anthropic.Model, u, base toolrun.Usage) []map[string]any {
	in := (u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens) - (base.InputTokens + base.CacheCreationInputTokens + base.CacheReadInputTokens)
	out := u.OutputTokens - base.OutputTokens
	return []map[string]any{{
		"provider":              "anthropic",
		"model":                 string(model),
		"inputTokens":           in,
		"outputTokens":          out,
		"totalTokens":           in + out,
		"cachedInputTokens":     u.CacheReadInputTokens - base.CacheReadInputTokens,
		"cacheWriteInputTokens": u.CacheCreationInputTokens - base.CacheCreationInputTokens,
	}}
}

// interrupts records the calls a run stopped for and returns the run's
// outcome: an interrupt for each call awaiting a person, or a success
// naming the client tools' calls when only those wait. A client tool's
// call reaches the client (TOOL_CALL_START, ARGS and END) only here, in
// the run that hands it over: once no approval waits, so a call under an
// approval policy is announced only once approved, and a denied one
// never. pendingToolCallIds names the calls this run announces, and is
// left out for a client that declared no protocolVersion (@ag-ui/core
// before 1.0 refuses it; such a client derives the calls from the
// stream). It also returns the announcing events and their known ids.
func (h *Handler) interrupts(ctx context.Context, lr *liveRun, m *mapper, pending []toolrun.PendingCall) (map[string]any, []event, []string, error) {
	now := h.cfg.Now()
	var approvals []map[string]any
	var clientCalls []toolrun.PendingCall
	for _, pc := range pending {
		kind := kindApproval
		if m.client[pc.Call.Name] && pc.Reason == clientReason {
			kind = kindClient
		}
		its, err := queryInterrupts(ctx, h.cfg.DB, `thread_id = ? AND tool_call_id = ? AND status = ?`, lr.thread, pc.Call.ID, statusPending)
		if err != nil {
			return nil, nil, nil, err
		}
		var it *interrupt
		if len(its) > 0 {
			it = its[0]
		} else {
			it = &interrupt{ID: newID("int_"), Thread: lr.thread, Run: lr.id, ToolCallID: pc.Call.ID, ToolName: pc.Call.Name, Input: pc.Call.Input, Reason: pc.Reason, Kind: kind, Status: statusPending, CreatedAt: now, ExpiresAt: now.Add(h.cfg.ApprovalTTL)}
			if err := insertInterrupt(ctx, h.cfg.DB, it); err != nil {
				return nil, nil, nil, err
			}
			h.callWaiting(ctx, it)
		}
		if it.Kind == kindClient {
			clientCalls = append(clientCalls, pc)
			continue
		}
		var schema json.RawMessage
		for _, t := range h.cfg.Tools {
			if t.Name() == pc.Call.Name {
				schema = t.InputSchema()
			}
		}
		approvals = append(approvals, map[string]any{
			"id":             it.ID,
			"reason":         "tool_call",
			"toolCallId":     pc.Call.ID,
			"message":        fmt.Sprintf("%s wants to run with %s: %s", pc.Call.Name, compact(pc.Call.Input), pc.Reason),
			"responseSchema": responseSchema(schema, h.serverTool(pc.Call.Name)),
			"expiresAt":      timestamp(it.ExpiresAt),
			"metadata":       map[string]any{"toolName": pc.Call.Name, "input": json.RawMessage(orEmpty(pc.Call.Input))},
		})
	}
	if len(approvals) > 0 {
		return map[string]any{"type": "interrupt", "interrupts": approvals}, nil, nil, nil
	}
	var evs []event
	var ids, known []string
	for _, pc := range clientCalls {
		if h.announced(ctx, lr.thread, pc.Call.ID) {
			continue
		}
		start := event{"type": "TOOL_CALL_START", "toolCallId": pc.Call.ID, "toolCallName": pc.Call.Name}
		if parent := m.parents[pc.Call.ID]; parent != "" {
			start["parentMessageId"] = parent
		}
		evs = append(evs, start,
			event{"type": "TOOL_CALL_ARGS", "toolCallId": pc.Call.ID, "delta": string(orEmpty(pc.Call.Input))},
			event{"type": "TOOL_CALL_END", "toolCallId": pc.Call.ID})
		ids = append(ids, pc.Call.ID)
		known = append(known, announcedID(pc.Call.ID))
	}
	outcome := map[string]any{"type": "success"}
	if len(ids) > 0 && !lr.peer.legacy {
		outcome["pendingToolCallIds"] = ids
	}
	return outcome, evs, known, nil
}

// announcedID is the id under which serve_messages records that a client
// tool's call was announced to the client.
func announcedID(call string) string { return "toolcall_" + call }

// announced reports whether the client tool call was announced to the
// thread's client.
func (h *Handler) announced(ctx context.Context, thread, call string) bool {
	var n int
	h.cfg.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM serve_messages WHERE thread_id = ? AND id = ?`, thread, announcedID(call)).Scan(&n)
	return n > 0
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

// compact returns b as one line, cut at 200 bytes, redacted.
func compact(b json.RawMessage) string {
	s := redact.String(string(orEmpty(b)))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// mapper turns a run's toolrun events into AG-UI events, in order.
type mapper struct {
	lr     *liveRun
	client map[string]bool
	// parents are the assistant messages of the client tools' calls this
	// run's responses made, by call: the calls are announced at the run's
	// end (interrupts), not with their response.
	parents map[string]string
	step    int // the turn of the open step, 0 if none
	// saves is set when the run's Store records the events held (out)
	// with every State it saves (carriedStore.events). The runner saves
	// its State at once after a response and after a tool's result: the
	// events of those are held for that save, one write with it, rather
	// than a write and a commit of their own before it. They are
	// recorded, and sent, as the State that has them is.
	saves bool

	mu sync.Mutex // guards out and known; held while they are written
	// out are events made and not written yet, and known the message
	// ids they make known: a STEP_FINISHED waits for what the run
	// writes next (the next step's start, the run's end, a save), so
	// that the two are one commit, and so do the events held for a
	// save.
	out   []event
	known []string
}

// openStep opens turn's step, closing the one open. m.mu is held.
func (m *mapper) openStep(turn int) {
	if m.step == turn {
		return
	}
	m.endStep()
	m.step = turn
	m.out = append(m.out, event{"type": "STEP_STARTED", "stepName": "turn " + strconv.Itoa(turn)})
}

// closeStep closes the step open, if any.
func (m *mapper) closeStep() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endStep()
}

// endStep is closeStep with m.mu held.
func (m *mapper) endStep() {
	if m.step != 0 {
		m.out = append(m.out, event{"type": "STEP_FINISHED", "stepName": "turn " + strconv.Itoa(m.step)})
		m.step = 0
	}
}

// write records the events made so far and then evs, with the message
// ids known, as one commit, and sends them.
func (m *mapper) write(known []string, evs ...event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flush(known, evs...)
}

// flush is write with m.mu held.
func (m *mapper) flush(known []string, evs ...event) {
	m.hold(known, evs...)
	all, ids := m.take()
	if len(all) > 0 || len(ids) > 0 {
		m.lr.emitKnown(ids, all...)
	}
}

// hold adds evs and known to what the next write records: the run's
// next save, if its Store records them (m.saves), else its next write of
// events. m.mu is held.
func (m *mapper) hold(known []string, evs ...event) {
	m.out = append(m.out, evs...)
	m.known = append(m.known, known...)
}

// take returns what is held, and holds nothing. m.mu is held.
func (m *mapper) take() ([]event, []string) {
	all, ids := m.out, m.known
	m.out, m.known = nil, nil
	return all, ids
}

// held writes evs, with known, as a response's or a tool result's events:
// held for the State's save that follows, if the Store records them,
// else at once. m.mu is held.
func (m *mapper) held(known []string, evs ...event) {
	if m.saves {
		m.hold(known, evs...)
		return
	}
	m.flush(known, evs...)
}

// on is the runner's OnEvent. The events of a response are sent once it
// has arrived whole, so nothing of a failed stream attempt reaches the
// client. Each toolrun event's AG-UI events are one commit, a step's
// STEP_FINISHED with the events after it, a response's and a result's
// with the State the runner saves next if the Store records them.
func (m *mapper) on(ctx context.Context, e toolrun.Event) {
	h := m.lr.h
	m.mu.Lock()
	defer m.mu.Unlock()
	switch e := e.(type) {
	case toolrun.RequestSent:
		if !e.Compaction && e.Attempt <= 1 {
			m.openStep(e.Turn)
		}
		m.flush(nil) // before the request, which may take long
	case toolrun.ResponseReceived:
		if e.Compaction || e.Message == nil {
			return
		}
		h.metrics.turns.Add(1)
		h.metrics.turnNanos.Add(int64(e.Duration))
		m.openStep(e.Turn)
		// The run's id makes the message's unique on the thread, whatever
		// ids the model's platform gives.
		msgID := m.lr.id + "/" + e.Message.ID
		ids := []string{msgID}
		texts := 0
		var evs []event
		// The calls before a response's last fallback block are the
		// attempt a server-side fallback declined: the runner neither runs
		// nor answers them, so the client is not told of them either.
		seam := -1
		for i, b := range e.Message.Content {
			if b.Type == "fallback" {
				seam = i
			}
		}
		for i, b := range e.Message.Content {
			if b.Type == "tool_use" && i < seam {
				continue
			}
			switch b.Type {
			case "text":
				id := msgID
				if texts > 0 {
					id = fmt.Sprintf("%s_%d", msgID, texts)
					ids = append(ids, id)
				}
				texts++
				evs = append(evs, event{"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"})
				if b.Text != "" {
					evs = append(evs, event{"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": b.Text})
				}
				evs = append(evs, event{"type": "TEXT_MESSAGE_END", "messageId": id})
			case "thinking", "redacted_thinking":
				id := fmt.Sprintf("%s/reasoning_%d", msgID, len(ids))
				ids = append(ids, id)
				evs = append(evs, reasoning(id, b, m.lr.peer)...)
			case "tool_use":
				if m.client[b.Name] {
					if m.parents == nil {
						m.parents = map[string]string{}
					}
					m.parents[b.ID] = msgID
					continue
				}
				evs = append(evs,
					event{"type": "TOOL_CALL_START", "toolCallId": b.ID, "toolCallName": b.Name, "parentMessageId": msgID},
					event{"type": "TOOL_CALL_ARGS", "toolCallId": b.ID, "delta": string(orEmpty(b.Input))},
					event{"type": "TOOL_CALL_END", "toolCallId": b.ID})
			}
		}
		// The response's events and ids are one write: one commit, and
		// all of them or none; with the State that has the response, if
		// the Store records them.
		m.held(ids, evs...)
	case toolrun.ToolStarted:
		m.openStep(e.Turn)
		m.flush(nil)
	case toolrun.ToolFinished:
		m.openStep(e.Turn)
		res := e.Result
		var evs []event
		known := []string{"result_" + res.Call.ID}
		if m.client[res.Call.Name] && !h.announced(ctx, m.lr.thread, res.Call.ID) {
			if res.Decision.Kind == toolrun.Skip || res.Decision.Kind == toolrun.Deny {
				// The client's own result, which it has; or the denial
				// of a call it was never shown, and never is.
				m.flush(nil)
				return
			}
			// A call that failed before it could be handed over (its
			// input did not fit the tool's schema): the client sees the
			// call with its result, so it knows not to run it.
			evs = append(evs,
				event{"type": "TOOL_CALL_START", "toolCallId": res.Call.ID, "toolCallName": res.Call.Name},
				event{"type": "TOOL_CALL_ARGS", "toolCallId": res.Call.ID, "delta": string(orEmpty(res.Call.Input))},
				event{"type": "TOOL_CALL_END", "toolCallId": res.Call.ID})
			if parent := m.parents[res.Call.ID]; parent != "" {
				evs[0]["parentMessageId"] = parent
			}
			known = append(known, announcedID(res.Call.ID))
		} else if m.client[res.Call.Name] && res.Decision.Kind == toolrun.Skip {
			m.flush(nil)
			return // the client's own result: it has it
		}
		id := "result_" + res.Call.ID
		evs = append(evs, event{"type": "TOOL_CALL_RESULT", "messageId": id, "toolCallId": res.Call.ID, "role": "tool", "content": redact.String(resultText(res))})
		m.held(known, evs...) // with the State that has the result, if the Store records them
	case toolrun.TurnFinished:
		if m.step == e.Turn {
			m.endStep()
		}
	}
}

// reasoning returns the events of a thinking block: its text as a
// reasoning message, and its signature (or a redacted block's data) as
// REASONING_ENCRYPTED_VALUE, which a client stores with the message and
// may send back. The thread keeps its own copy with the signature, which
// is what the model is sent again.
func reasoning(id string, b anthropic.BetaContentBlockUnion, pr peer) []event {
	evs := []event{
		{"type": "REASONING_START", "messageId": id},
		{"type": "REASONING_MESSAGE_START", "messageId": id, "role": "reasoning"},
	}
	value, kind := b.Signature, "anthropic.thinking.signature"
	if b.Type == "redacted_thinking" {
		value, kind = b.Data, "anthropic.redacted_thinking"
	} else if b.Thinking != "" {
		evs = append(evs, event{"type": "REASONING_MESSAGE_CONTENT", "messageId": id, "delta": b.Thinking})
	}
	evs = append(evs, event{"type": "REASONING_MESSAGE_END", "messageId": id})
	if value != "" {
		ev := event{"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": id, "encryptedValue": value}
		if pr.speaks == ProtocolVersion {
			ev["encryptedValueType"] = kind // 1.1's
		}
		evs = append(evs, ev)
	}
	return append(evs, event{"type": "REASONING_END", "messageId": id})
}

// resultText is a tool result's text, as the client is shown it.
func resultText(res *toolrun.ToolResult) string {
	if t := contentText(res.Content); t != "" || res.Err == nil {
		return t
	}
	return res.Err.Error()
}

// contentText is a tool result's content as the client is shown it: its
// text parts, and a placeholder for each image or document.
func contentText(content []toolrun.Content) string {
	var b strings.Builder
	for i, c := range content {
		if i > 0 {
			b.WriteString("\n")
		}
		switch {
		case c.OfText != nil:
			b.WriteString(c.OfText.Text)
		case c.OfImage != nil:
			b.WriteString("[image]")
		case c.OfDocument != nil:
			b.WriteString("[document]")
		default:
			b.WriteString("[content]")
		}
	}
	return b.String()
}

// maxStreams caps the event streams a token may have open at once: each
// holds a connection, a goroutine and up to a page of events, and a client
// that opens them by the thousand must not hold the server's memory.
const maxStreams = 64

// oneLineID returns a client's Last-Event-ID cut to 64 bytes for an error
// message: the header may be as long as the server's header limit.
func oneLineID(v string) string {
	if len(v) > 64 {
		return strings.ToValidUTF8(v[:64], "") + "…"
	}
	return v
}

// handleEvents streams a run's events after Last-Event-ID.
func (h *Handler) handleEvents(w http.ResponseWriter, r *http.Request, id identity) {
	runID := r.PathValue("run")
	owner, err := h.be.runOwner(r.Context(), runID)
	if errors.Is(err, errNoRun) || (err == nil && owner != id.name && !(id.can(ScopeRead) && h.sameTenant(id.tenant, owner))) {
		httpError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no run %q", runID))
		return
	}
	if err != nil {
		h.writeError(w, err)
		return
	}
	var after int64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			httpError(w, http.StatusBadRequest, "bad_event_id", fmt.Sprintf("Last-Event-ID %q is not an event id of this server", oneLineID(v)))
			return
		}
	}
	h.mu.Lock()
	if h.streams[id.name] >= maxStreams {
		h.mu.Unlock()
		httpError(w, http.StatusTooManyRequests, "too_many_streams", fmt.Sprintf("the token %q has %d event streams open, its limit", id.name, maxStreams))
		return
	}
	h.streams[id.name]++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if h.streams[id.name]--; h.streams[id.name] == 0 {
			delete(h.streams, id.name)
		}
		h.mu.Unlock()
	}()
	h.stream(w, r, runID, after)
}

// handleCancel cancels a run in flight: it stops with the outcome
// cancelled, its State saved.
func (h *Handler) handleCancel(w http.ResponseWriter, r *http.Request, id identity) {
	runID := r.PathValue("run")
	if !h.be.cancel(runID, id.name) {
		httpError(w, http.StatusNotFound, "not_running", fmt.Sprintf("no run %q in flight", runID))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, "{\"runId\":%q,\"status\":\"cancelling\"}\n", runID)
}
