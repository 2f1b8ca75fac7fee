package servetemporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/temporal/internal/described"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// Config configures an [Executor]. Client and TaskQueue are required;
// every other field's zero value is its default.
type Config struct {
	// Client reaches the Temporal server.
	Client client.Client
	// TaskQueue is the task queue of the workers that run the workflows.
	TaskQueue string
	// WorkflowIDPrefix goes before a thread's id to make its workflow's
	// id. Empty means none: the workflow id is the thread id.
	WorkflowIDPrefix string
	// RunOptions schedule each workflow's activities (see
	// [temporal.RunOptions]); MaxTurns is the server's, per run.
	RunOptions temporal.RunOptions
	// DataConverter is the converter the workers encode payloads with (a
	// codec that encrypts them, say). Nil means the converter Client was
	// built with, read through a workflow's description as
	// [temporal.Pending] reads it: give the converter to the client once.
	DataConverter converter.DataConverter
	// Store is the workers' [toolrun.Store], if they keep states in one
	// (see [temporal.NewActivities]): a thread's next workflow starts
	// from its last one's state, which is there. Nil means the states
	// travel whole through Temporal.
	Store toolrun.Store
}

// Executor is a [serve.Executor] whose runs are Temporal workflows. Build
// it with [New]; it is safe for concurrent use, and keeps nothing of its
// own: what a thread's next run needs is in the server's database (its
// cursor) and in Temporal.
type Executor struct {
	cfg  Config
	opts *temporal.ClientOptions
}

// New returns the executor for cfg.
func New(cfg Config) *Executor {
	return &Executor{cfg: cfg, opts: &temporal.ClientOptions{DataConverter: cfg.DataConverter}}
}

var (
	_ serve.Executor     = (*Executor)(nil)
	_ serve.StateLoader  = (*Executor)(nil)
	_ serve.BusyReporter = (*Executor)(nil)
)

// Busy reports whether thread's workflow is taking a turn: running, with
// no call awaiting a decision (the memo [temporal.PendingMemo] lists
// none), so that serve refuses a new user message then with 409
// thread_busy, before it records anything of the run, as it does in
// process while the thread's run is in flight.
func (e *Executor) Busy(ctx context.Context, thread string) (bool, error) {
	id := e.workflowID(thread)
	desc, err := e.describe(ctx, id)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("servetemporal: describing the thread's workflow %s: %w", id, err)
	}
	info := desc.info()
	if info.GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return false, nil
	}
	raw, ok := info.GetMemo().GetFields()[temporal.PendingMemo]
	if !ok {
		pending, err := temporal.Pending(ctx, e.cfg.Client, id, e.opts)
		return err == nil && len(pending) == 0, err
	}
	var p temporal.PendingApprovals
	if err := desc.dc.FromPayload(raw, &p); err != nil {
		return false, fmt.Errorf("servetemporal: the memo %s of workflow %s: %w", temporal.PendingMemo, id, err)
	}
	return len(p.Calls) == 0 && p.More == 0, nil
}

// cursor is where a thread's last run stopped reading its workflow: the
// workflow's first execution, the last event read, the last turn shown
// and the thread's usage then.
type cursor struct {
	Run   string        `json:"run"`
	Seq   int64         `json:"seq"`
	Turn  int           `json:"turn"`
	Usage toolrun.Usage `json:"usage"`
	// Done is set once the workflow's end was read: a thread's run that
	// stopped before it (its server was killed) left the rest of the
	// workflow unread, and the thread's next run reports it.
	Done bool `json:"done,omitempty"`
}

func (e *Executor) workflowID(thread string) string { return e.cfg.WorkflowIDPrefix + thread }

// ErrThreadRunning is the error of a run that brings a new user message
// while the thread's workflow is running and cannot take it: its turn is
// in flight (a model request or its tools), which the message would race,
// or it awaits decisions on calls the run does not answer. A run that
// answers every call the workflow awaits and brings a message is not
// refused: the message follows the calls' results, as in process.
var ErrThreadRunning = errors.New("servetemporal: the thread's workflow is still running")

// Run starts or follows the thread's workflow, as [serve.Executor]
// describes: a workflow that is running is given the decisions on the
// calls it awaits and followed from the cursor; otherwise, with new
// messages, a new execution of the workflow id starts from the last one's
// final state. It returns when the workflow ends, or waits for calls no
// decision of r answers.
//
// New messages for a workflow that is running go to it with
// [temporal.AppendMessages] when r answers every call it awaits: they
// follow the calls' results in the model's next request, as in process.
// That needs a worker to take the update (Run waits for one while ctx
// lasts). Otherwise the run fails with [ErrThreadRunning]: the workflow's
// turn is in flight, or it awaits calls r does not answer.
func (e *Executor) Run(ctx context.Context, r *serve.ExecutorRun) (*toolrun.Result, error) {
	var cur cursor
	if r.Cursor != "" {
		if err := json.Unmarshal([]byte(r.Cursor), &cur); err != nil {
			return nil, fmt.Errorf("servetemporal: the thread's cursor: %w", err)
		}
	}
	id := e.workflowID(r.Thread)
	desc, err := e.describe(ctx, id)
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		desc = nil
	case err != nil:
		return nil, fmt.Errorf("servetemporal: describing the thread's workflow %s: %w", id, err)
	}
	running := desc != nil && desc.info().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	if r.Branch && !r.NewThread && running {
		// The client's history leaves the thread's at an earlier point:
		// the workflow, which goes on from the thread's, stops first (its
		// calls waiting were denied as left behind), and the next one
		// starts from the client's history.
		if err := e.Cancel(ctx, r.Thread); err != nil {
			return nil, fmt.Errorf("servetemporal: cancelling the thread's workflow %s to go on from the client's history: %w", id, err)
		}
		if desc, err = e.describe(ctx, id); err != nil {
			return nil, fmt.Errorf("servetemporal: describing the thread's workflow %s: %w", id, err)
		}
		if running = desc.info().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING; running {
			return nil, fmt.Errorf("%w: it did not stop within %s of its cancellation, to go on from the client's history", ErrThreadRunning, CancelWait)
		}
	}
	if r.NewThread {
		if running {
			return nil, fmt.Errorf("%w: workflow %s runs under the id of this new thread: it is not this server's; give the thread another id", ErrThreadRunning, id)
		}
		desc = nil // a workflow that ended under this id is another thread's
	}
	switch {
	case running && len(r.Messages) > 0:
		// Messages that come with the answers to every call the workflow
		// awaits go to it first, so that they follow the results in the
		// request after the decisions, as in process; the decisions are
		// sent after them (below), since a workflow whose last call is
		// decided takes its next turn at once.
		pending, err := temporal.Pending(ctx, e.cfg.Client, id, e.opts)
		if err != nil {
			return nil, err
		}
		if len(pending) == 0 {
			return nil, fmt.Errorf("%w: its turn in flight ends first", ErrThreadRunning)
		}
		var open []string
		for _, pc := range pending {
			if _, ok := r.Decisions[pc.Call.ID]; !ok {
				open = append(open, pc.Call.ID)
			}
		}
		if len(open) > 0 {
			return nil, fmt.Errorf("%w: it awaits decisions on calls this run does not answer (%s); answer them with the message, or first", ErrThreadRunning, strings.Join(open, ", "))
		}
		offered, err := offeredTools(r)
		if err != nil {
			return nil, err
		}
		if err := temporal.AppendMessagesWithTools(ctx, e.cfg.Client, id, offered, r.Messages...); err != nil {
			if errors.Is(err, temporal.ErrNotAwaiting) {
				return nil, fmt.Errorf("%w: %w", ErrThreadRunning, err)
			}
			return nil, fmt.Errorf("servetemporal: giving the thread's workflow %s the run's messages: %w", id, err)
		}
		if err := taken(r); err != nil {
			return nil, err
		}
		fallthrough
	case running:
		info := desc.info()
		if first := info.GetFirstRunId(); first != "" && first != cur.Run {
			cur = cursor{Run: first, Usage: cur.Usage, Turn: cur.Turn}
		}
		if err := e.sendDecisions(ctx, id, r.Decisions, nil); err != nil {
			return nil, err
		}
		// A run that brings no decision for any call the workflow waits
		// for (a client tool's call handed over to its client, say) has
		// nothing to follow: the workflow's history gets no new event, so
		// the run stops at once as the thread is, as it does in process.
		pending, err := temporal.Pending(ctx, e.cfg.Client, id, e.opts)
		if err != nil {
			return nil, err
		}
		if len(pending) > 0 && !slices.ContainsFunc(pending, func(pc toolrun.PendingCall) bool { _, ok := r.Decisions[pc.Call.ID]; return ok }) {
			return &toolrun.Result{StopReason: toolrun.StopAwaitingApproval, Pending: pending, Usage: cur.Usage, Turns: cur.Turn}, nil
		}
	case len(r.Messages) == 0 && desc != nil && unread(cur, desc.info()):
		// The thread's last workflow ended while no run of this server
		// read it to its end (the server was killed while it ran): the
		// run reports what it did from where the thread's last run
		// stopped reading, its results, its answer and its end, so that
		// the client sees the run's end however late it comes back.
		if first := desc.info().GetFirstRunId(); first != "" && first != cur.Run {
			cur = cursor{Run: first, Usage: cur.Usage, Turn: cur.Turn}
		}
	case r.Reattach:
		// A run the server left in flight whose workflow has nothing
		// unread: it never started one, or its end was read.
		return nil, fmt.Errorf("servetemporal: workflow %s: %w", id, serve.ErrNothingToFollow)
	case len(r.Messages) == 0:
		// Nothing new for a thread that ended: as in process, the run
		// ends as the thread did, with nothing sent.
		return &toolrun.Result{StopReason: toolrun.StopEndTurn, Usage: cur.Usage, Turns: cur.Turn}, nil
	default:
		in, err := e.nextInput(ctx, id, desc, r)
		if err != nil {
			return nil, err
		}
		run, err := e.cfg.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                       id,
			TaskQueue:                e.cfg.TaskQueue,
			WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
			Memo:                     map[string]any{temporal.PendingMemo: temporal.PendingApprovals{Calls: []toolrun.PendingCall{}}},
		}, temporal.WorkflowName, in)
		if err != nil {
			return nil, fmt.Errorf("servetemporal: starting the thread's workflow %s: %w", id, err)
		}
		if err := taken(r); err != nil {
			return nil, err
		}
		cur = cursor{Run: run.GetRunID(), Turn: in.State.Turns, Usage: in.State.Usage}
		if err := e.save(r, cur); err != nil {
			return nil, err
		}
	}
	return e.follow(ctx, id, r, cur)
}

// offeredTools returns the definitions of the client tools r offers the
// model (those of r.ClientTools not in r.EarlierTools), as a runner adds
// them, for the workflow that takes r's messages: they replace the client
// tools of its earlier runs, so that the model is offered this run's
// alone (none for a run that declares tools: []), as a new workflow is
// (see nextInput) and as in process.
func offeredTools(r *serve.ExecutorRun) (temporal.ClientTools, error) {
	out := temporal.ClientTools{Tools: []anthropic.BetaToolParam{}}
	var tools []toolrun.Tool
	for _, t := range r.ClientTools {
		if !slices.Contains(r.EarlierTools, t.Name()) {
			tools = append(tools, t)
		}
	}
	if len(tools) == 0 {
		return out, nil
	}
	// The runner is built only for the definitions AddTools makes, the
	// same as those of the workflow's first run.
	runner := toolrun.New(anthropic.Client{}, anthropic.BetaMessageNewParams{}, nil, &toolrun.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := runner.AddTools(tools...); err != nil {
		return out, fmt.Errorf("servetemporal: the client's tools: %w", err)
	}
	for _, d := range runner.State().AddedTools() {
		if d.OfTool != nil {
			out.Tools = append(out.Tools, *d.OfTool)
		}
	}
	return out, nil
}

// unread reports whether the workflow execution info describes, which
// has closed, has events the thread's runs did not read, as cur records
// them: its end was never read, or it is a chain cur does not name (its
// first workflow, or a next one, started by a run that stopped before it
// recorded its cursor).
func unread(cur cursor, info *workflowpb.WorkflowExecutionInfo) bool {
	if first := info.GetFirstRunId(); first != "" && first != cur.Run {
		return true
	}
	return !cur.Done
}

// taken tells the server that the thread's workflow has r's messages.
func taken(r *serve.ExecutorRun) error {
	if r.MessagesTaken == nil {
		return nil
	}
	if err := r.MessagesTaken(); err != nil {
		return fmt.Errorf("servetemporal: recording the run's messages as the thread's: %w", err)
	}
	return nil
}

// nextInput returns the input of the thread's next workflow: the last
// one's final state, or a new one's, with the run's messages.
func (e *Executor) nextInput(ctx context.Context, id string, desc *description, r *serve.ExecutorRun) (temporal.Input, error) {
	opts := e.cfg.RunOptions
	opts.MaxTurns = 0
	var st *toolrun.State
	if desc.info() != nil {
		var err error
		if st, err = e.lastState(ctx, id, desc); err != nil {
			return temporal.Input{}, err
		}
	}
	// The runner is built only for its State: it sends nothing and logs
	// nothing.
	quiet := &toolrun.Options{Logger: slog.New(slog.DiscardHandler)}
	// The client's tools join the run with AddTools, so that the State
	// holds their definitions for the workers, which defer their calls
	// (temporal.Activities.DeferClientTools). Those added before are given
	// to Resume, which needs them; the server keeps every tool its
	// client declared, so it has them all. The workflow offers the model
	// this run's client tools alone (r.EarlierTools are not): one an
	// earlier run added and this run does not offer is taken out with
	// RemoveTools, and added again by the first run that offers it.
	added := map[string]bool{}
	if st != nil {
		for _, d := range st.AddedTools() {
			if d.OfTool != nil {
				added[d.OfTool.Name] = true
			}
		}
	}
	earlier := map[string]bool{}
	for _, name := range r.EarlierTools {
		earlier[name] = true
	}
	var had, tools []toolrun.Tool
	var dropped []string
	for _, t := range r.ClientTools {
		switch name := t.Name(); {
		case added[name]:
			had = append(had, t)
			if earlier[name] {
				dropped = append(dropped, name)
			}
		case !earlier[name]:
			tools = append(tools, t)
		}
	}
	var runner *toolrun.Runner
	if st == nil {
		params := r.Params
		params.Messages = r.Messages
		if r.Branch {
			params.Messages = append(slices.Clone(r.History), r.Messages...)
		}
		runner = toolrun.New(anthropic.Client{}, params, nil, quiet)
	} else {
		var err error
		if runner, err = toolrun.Resume(anthropic.Client{}, st, had, quiet); err != nil {
			return temporal.Input{}, fmt.Errorf("servetemporal: the thread's last state: %w", err)
		}
		if r.Branch {
			// The conversation goes on from the client's history: the
			// thread's before the message the client changed.
			runner.SetMessages(r.History)
		}
		runner.AppendMessages(r.Messages...)
	}
	if len(dropped) > 0 {
		runner.RemoveTools(dropped...)
	}
	if len(tools) > 0 {
		if err := runner.AddTools(tools...); err != nil {
			return temporal.Input{}, fmt.Errorf("servetemporal: the client's tools: %w", err)
		}
	}
	turns := 0
	if st != nil {
		turns = st.Turns
	}
	if r.MaxTurns < 0 {
		runner.SetMaxTurns(-1) // no limit, as serve.ExecutorRun.MaxTurns says
	} else {
		runner.SetMaxTurns(turns + r.MaxTurns)
	}
	return temporal.Input{State: runner.State(), Options: opts}, nil
}

// lastState returns the state of the thread's last workflow execution,
// as desc describes it: its Outcome's if it completed, or otherwise
// (running, cancelled, failed, terminated, timed out) the state its last
// step returned, or the one it started from.
func (e *Executor) lastState(ctx context.Context, id string, desc *description) (*toolrun.State, error) {
	info := desc.info()
	runID := info.GetExecution().GetRunId()
	if info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		var out temporal.Outcome
		if err := e.cfg.Client.GetWorkflow(ctx, id, runID).Get(ctx, &out); err != nil {
			return nil, fmt.Errorf("servetemporal: the outcome of the thread's last workflow %s: %w", id, err)
		}
		return e.load(ctx, out.State, out.Ref)
	}
	dc := desc.dc
	var st *toolrun.State
	var ref string
	steps := map[int64]bool{} // the scheduled events of steps
	it := e.cfg.Client.GetWorkflowHistory(ctx, id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("servetemporal: the history of the thread's last workflow %s: %w", id, err)
		}
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			var in temporal.Input
			if err := dc.FromPayloads(a.GetInput(), &in); err != nil {
				return nil, fmt.Errorf("servetemporal: the input of workflow %s: %w", id, err)
			}
			st, ref = in.State, in.Ref
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && (a.GetActivityType().GetName() == temporal.StepActivity || a.GetActivityType().GetName() == temporal.StepDeltaActivity) {
			steps[ev.GetEventId()] = true
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && steps[a.GetScheduledEventId()] {
			var res temporal.StepResult
			if err := dc.FromPayloads(a.GetResult(), &res); err != nil {
				return nil, fmt.Errorf("servetemporal: a step's result in workflow %s: %w", id, err)
			}
			if st, err = temporal.ApplyStep(st, &res); err != nil {
				return nil, fmt.Errorf("servetemporal: a step's result in workflow %s: %w", id, err)
			}
			ref = res.Ref
		}
	}
	if st == nil {
		return nil, fmt.Errorf("servetemporal: the thread's last workflow %s has no state", id)
	}
	return e.load(ctx, st, ref)
}

// load returns the whole state of st, whose history is in the Store
// under ref if ref is set.
func (e *Executor) load(ctx context.Context, st *toolrun.State, ref string) (*toolrun.State, error) {
	if ref != "" && e.cfg.Store == nil {
		return nil, fmt.Errorf("servetemporal: the thread's state is in the workers' Store (%s), and the executor has none (Config.Store)", ref)
	}
	return temporal.LoadState(ctx, e.cfg.Store, &temporal.Outcome{State: st, Ref: ref})
}

// sendDecisions gives the workflow id the decisions on the calls it
// awaits, save those sent already (by call id), which it adds to.
func (e *Executor) sendDecisions(ctx context.Context, id string, decisions map[string]toolrun.Decision, sent map[string]bool) error {
	if len(decisions) == 0 {
		return nil
	}
	pending, err := temporal.Pending(ctx, e.cfg.Client, id, e.opts)
	if err != nil {
		return err
	}
	for _, pc := range pending {
		d, ok := decisions[pc.Call.ID]
		if !ok || sent[pc.Call.ID] {
			continue
		}
		if err := temporal.DecideBySignal(ctx, e.cfg.Client, id, pc.Call.ID, d, nil); err != nil {
			return fmt.Errorf("servetemporal: sending the decision on call %s: %w", pc.Call.ID, err)
		}
		if sent != nil {
			sent[pc.Call.ID] = true
		}
	}
	return nil
}

// save records cur as the thread's cursor.
func (e *Executor) save(r *serve.ExecutorRun, cur cursor) error {
	if r.SetCursor == nil {
		return nil
	}
	b, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	return r.SetCursor(string(b))
}

// follow reads the workflow's events after cur and reports them to r as
// toolrun's events, until the workflow ends or waits for calls that r
// has no decision for.
func (e *Executor) follow(ctx context.Context, id string, r *serve.ExecutorRun, cur cursor) (*toolrun.Result, error) {
	var res *toolrun.Result
	var ferr error
	sent := map[string]bool{}
	emit := func(ev toolrun.Event) {
		if r.OnEvent != nil {
			r.OnEvent(ctx, ev)
		}
	}
	got := false // an event came after cur
	err := temporal.Follow(ctx, e.cfg.Client, id, cur.Run, cur.Seq, func(ev temporal.RunEvent) bool {
		got = true
		switch ev.Kind {
		case temporal.StepFinished:
			prev := cur.Usage
			cur.Usage = ev.Usage
			if ev.Turn > cur.Turn {
				cur.Turn = ev.Turn
				msg := &anthropic.BetaMessage{ID: fmt.Sprintf("turn_%d", ev.Turn), Role: "assistant"}
				if text := ev.Text; text != "" {
					msg.Content = append(msg.Content, anthropic.BetaContentBlockUnion{Type: "text", Text: text})
				}
				for _, c := range ev.Calls {
					msg.Content = append(msg.Content, anthropic.BetaContentBlockUnion{Type: "tool_use", ID: c.Call.ID, Name: c.Call.Name, Input: c.Call.Input})
				}
				// The request's params are the server's: the conversation
				// is the workflow's, in its history, not here.
				params := r.Params
				emit(toolrun.RequestSent{Turn: ev.Turn, Attempt: 1, Params: &params})
				// The turn's latency is its step's time on a worker, as the
				// history records it: the model request (the one a step
				// sends) with the step's loading and saving of the state,
				// as close as the history comes to the request's time that
				// a run in process measures.
				var took time.Duration
				if !ev.Started.IsZero() && ev.Completed.After(ev.Started) {
					took = ev.Completed.Sub(ev.Started)
				}
				emit(toolrun.ResponseReceived{Turn: ev.Turn, Message: msg, Duration: took, Usage: toolrun.Usage{
					InputTokens:              ev.Usage.InputTokens - prev.InputTokens,
					OutputTokens:             ev.Usage.OutputTokens - prev.OutputTokens,
					CacheCreationInputTokens: ev.Usage.CacheCreationInputTokens - prev.CacheCreationInputTokens,
					CacheReadInputTokens:     ev.Usage.CacheReadInputTokens - prev.CacheReadInputTokens,
					UnreportedOutputTokens:   ev.Usage.UnreportedOutputTokens - prev.UnreportedOutputTokens,
				}})
			}
		case temporal.ToolFinished:
			res := ev.Result
			if d, ok := r.Decisions[res.Call.ID]; ok && res.Decision.Kind == toolrun.Allow && d.Kind == toolrun.Deny {
				// A denied call's result as the history gives it, without
				// its decision (committed with the step's request): the
				// denial is the one the server recorded and sent, so that
				// a client tool's call a person denied is known as denied,
				// and never announced to the client that was never shown
				// it, as in process. (A client's own result, a Skip, is
				// left as the history gives it: the server keeps it as
				// the call's answer, which a second result cannot replace.)
				withDecision := *res
				withDecision.Decision = d
				res = &withDecision
			}
			emit(toolrun.ToolFinished{Turn: cur.Turn, Result: res})
		case temporal.Awaiting:
			var waiting []toolrun.PendingCall
			for _, pc := range ev.Pending {
				if _, ok := r.Decisions[pc.Call.ID]; !ok {
					waiting = append(waiting, pc)
				}
			}
			if err := e.sendDecisions(ctx, id, r.Decisions, sent); err != nil {
				ferr = err
				return false
			}
			if len(waiting) > 0 {
				res = &toolrun.Result{StopReason: toolrun.StopAwaitingApproval, Pending: waiting, Usage: cur.Usage, Turns: cur.Turn}
			}
		case temporal.Finished:
			cur.Done = true
			if ev.Err != nil {
				ferr = ev.Err
				res = nil
				break
			}
			o := ev.Outcome
			res = &toolrun.Result{StopReason: o.StopReason, Detail: o.Detail, Usage: cur.Usage, Turns: cur.Turn}
			if o.State != nil {
				res.Usage, res.Turns = o.State.Usage, o.State.Turns
			}
			if o.Text != "" {
				res.Message = &anthropic.BetaMessage{Role: "assistant", Content: []anthropic.BetaContentBlockUnion{{Type: "text", Text: o.Text}}}
			}
		}
		cur.Seq = ev.Seq
		if err := e.save(r, cur); err != nil {
			ferr = err
			return false
		}
		return res == nil && ferr == nil
	}, e.opts)
	if ferr != nil {
		return nil, ferr
	}
	if err != nil {
		return nil, err
	}
	if res == nil && !got {
		// A workflow that had ended, every event of which was read
		// already (its end too, by a cursor from before Done): nothing
		// is left to report.
		if r.Reattach {
			return nil, fmt.Errorf("servetemporal: workflow %s: %w", id, serve.ErrNothingToFollow)
		}
		cur.Done = true
		if err := e.save(r, cur); err != nil {
			return nil, err
		}
		return &toolrun.Result{StopReason: toolrun.StopEndTurn, Usage: cur.Usage, Turns: cur.Turn}, nil
	}
	if res == nil {
		return nil, fmt.Errorf("servetemporal: the thread's workflow %s ended without an outcome", id)
	}
	return res, nil
}

// Pending lists the calls awaiting a person: of thread's workflow, or,
// for thread "", of every workflow of the executor's task queue and
// prefix that the namespace's visibility store finds awaiting approval
// (which lags a moment behind the workflows). No worker is needed.
//
// The list of every thread's is read from the visibility store alone: one
// request a page of workflows, whose memo [temporal.PendingMemo] lists
// their calls, and no request for each workflow, so that the inbox, which
// polls it, costs the same with a thousand threads waiting as with one.
// Only a workflow listed without the memo (one started by a toolrun older
// than it) is asked on its own.
func (e *Executor) Pending(ctx context.Context, thread string) ([]serve.ThreadCall, error) {
	if thread == "" {
		return e.awaiting(ctx)
	}
	id := e.workflowID(thread)
	pending, err := temporal.Pending(ctx, e.cfg.Client, id, e.opts)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return e.threadCalls(id, pending), nil
}

// threadCalls returns the calls of workflow id as serve lists them.
func (e *Executor) threadCalls(id string, pending []toolrun.PendingCall) []serve.ThreadCall {
	var out []serve.ThreadCall
	for _, pc := range pending {
		out = append(out, serve.ThreadCall{Thread: strings.TrimPrefix(id, e.cfg.WorkflowIDPrefix), Call: pc})
	}
	return out
}

// Decide sends d for callID to thread's workflow by signal: recorded by
// the Temporal server at once, applied when a worker next runs the
// workflow.
func (e *Executor) Decide(ctx context.Context, thread, callID string, d toolrun.Decision) error {
	return temporal.DecideBySignal(ctx, e.cfg.Client, e.workflowID(thread), callID, d, nil)
}

// CancelWait bounds how long [Executor.Cancel] waits for a cancelled
// workflow to close.
const CancelWait = 30 * time.Second

// Cancel asks thread's workflow to cancel, then waits until it has closed,
// at most [CancelWait]: a step in flight ends first (its activity learns of
// the cancellation with its next heartbeat), so that a new user message
// sent once the cancel request is answered finds the thread free, as in
// process, rather than busy (409 thread_busy). A workflow still running
// after the wait closes by itself later; Cancel returns nil then too.
func (e *Executor) Cancel(ctx context.Context, thread string) error {
	id := e.workflowID(thread)
	if err := e.cfg.Client.CancelWorkflow(ctx, id, ""); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, CancelWait)
	defer cancel()
	_ = e.cfg.Client.GetWorkflow(wctx, id, "").Get(wctx, nil) // its end, whatever it is, is the workflow's to report
	return nil
}

// LoadState returns the State of thread's workflow as its history last
// records it (the last step's, or the one its execution started from; a
// workflow that ended, its Outcome's), read with no worker. It returns an
// error wrapping fs.ErrNotExist for a thread with no workflow.
func (e *Executor) LoadState(ctx context.Context, thread string) (*toolrun.State, error) {
	id := e.workflowID(thread)
	desc, err := e.describe(ctx, id)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil, fmt.Errorf("servetemporal: thread %q: %w", thread, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("servetemporal: describing the thread's workflow %s: %w", id, err)
	}
	return e.lastState(ctx, id, desc)
}

// awaiting returns the calls of the running workflows of the executor's
// task queue and prefix with a call awaiting approval, from their memo as
// the list gives it: the query of [temporal.ListAwaitingApproval],
// narrowed to this server's workflows, so that a namespace shared with
// other task queues costs nothing here.
func (e *Executor) awaiting(ctx context.Context) ([]serve.ThreadCall, error) {
	query := fmt.Sprintf("%s AND TaskQueue = %s", temporal.AwaitingApprovalQuery, quote(e.cfg.TaskQueue))
	if e.cfg.WorkflowIDPrefix != "" {
		query += " AND WorkflowId STARTS_WITH " + quote(e.cfg.WorkflowIDPrefix)
	}
	// The memo comes with the list, so it is decoded without a description:
	// with Config.DataConverter, or else the SDK's default, and only a memo
	// the default cannot read (the client's own converter encrypts or
	// compresses) costs the description that reads it with the client's.
	dc := e.cfg.DataConverter
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var out []serve.ThreadCall
	var token []byte
	for {
		resp, err := e.cfg.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("servetemporal: listing the workflows awaiting approval: %w", err)
		}
		for _, ex := range resp.GetExecutions() {
			id := ex.GetExecution().GetWorkflowId()
			if !strings.HasPrefix(id, e.cfg.WorkflowIDPrefix) {
				continue
			}
			raw, ok := ex.GetMemo().GetFields()[temporal.PendingMemo]
			if !ok {
				more, err := e.Pending(ctx, strings.TrimPrefix(id, e.cfg.WorkflowIDPrefix))
				if err != nil {
					return nil, err
				}
				out = append(out, more...)
				continue
			}
			var p temporal.PendingApprovals
			err := dc.FromPayload(raw, &p)
			if err != nil && e.cfg.DataConverter == nil {
				var desc *description
				if desc, err = e.describe(ctx, id); err == nil {
					p = temporal.PendingApprovals{}
					err = desc.dc.FromPayload(raw, &p)
				}
			}
			if err != nil {
				return nil, fmt.Errorf("servetemporal: the memo %s of workflow %s: %w", temporal.PendingMemo, id, err)
			}
			out = append(out, e.threadCalls(id, p.Calls)...)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// quote returns s as a string of a visibility query.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// description is the server's description of a workflow execution, as
// DescribeWorkflow's raw response holds it (the memo and search
// attributes as the server sent them), with the converter its payloads
// are decoded with.
type description struct {
	raw *workflowservice.DescribeWorkflowExecutionResponse
	// dc is Config.DataConverter, or else the one of the client that
	// described the execution (the converter the client was built with,
	// read through the description as [temporal.Pending] reads it), so
	// that a converter given to the client alone serves the executor's
	// own reads too.
	dc converter.DataConverter
}

// info returns the execution's info, nil for no description.
func (d *description) info() *workflowpb.WorkflowExecutionInfo {
	if d == nil {
		return nil
	}
	return d.raw.GetWorkflowExecutionInfo()
}

// describe returns the description of workflow id's latest run.
func (e *Executor) describe(ctx context.Context, id string) (*description, error) {
	d, err := e.cfg.Client.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return nil, err
	}
	dc := e.cfg.DataConverter
	if dc == nil {
		dc = described.Converter(d)
	}
	return &description{raw: d.RawResponse, dc: dc}, nil
}
