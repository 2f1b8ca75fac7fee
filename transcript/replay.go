package transcript

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// ErrNothingToReplay is returned by [Replay] for a transcript with no
// request or no response: there is no conversation to start from, or no
// model turn to serve.
var ErrNothingToReplay = errors.New("transcript: nothing to replay")

// ReplayOptions configures [Replay]. The zero value is ready to use.
type ReplayOptions struct {
	// Options are the runner's options for the replay: a logger, a tool
	// timeout, an AfterTool hook like the recorded run's, an OnEvent
	// observer (to record the replay, say). Policy is replaced by the
	// recorded decisions, MaxTurns by the recorded run's, and Compaction
	// by none.
	Options toolrun.Options

	// Redact, if non-nil, is applied to the replay's tool results after
	// the runner's own redaction, before they are compared with the recorded ones:
	// pass the [RecorderOptions].Redact the transcript was written with.
	Redact func(string) string
}

// Outcome is how a tool call of a replay compares with its recording.
type Outcome string

// The outcomes of a call. All but [Same] and [Reproduced] are divergences.
const (
	// Same: the call's result is the recorded one.
	Same Outcome = "same"
	// Reproduced: the call failed as recorded, with the same error.
	Reproduced Outcome = "failure reproduces"
	// OutputChanged: the call succeeded, as recorded, with another result.
	OutputChanged Outcome = "output differs"
	// Fixed: the recorded call failed; it no longer does.
	Fixed Outcome = "no longer fails"
	// NowFails: the recorded call succeeded; it now fails.
	NowFails Outcome = "now fails"
	// FailsDifferently: the call failed as recorded, with another error.
	FailsDifferently Outcome = "fails differently"
	// DecidedDifferently: the call was decided another way (a tool's
	// policy changed, say).
	DecidedDifferently Outcome = "decided differently"
	// Missing: the recorded call was not answered in the replay.
	Missing Outcome = "missing"
	// Extra: the replay answered a call the recording has no result for.
	Extra Outcome = "extra"
	// Unfinished: the replay answered a call the recorded run never
	// finished, because it was killed or cancelled during it. Not a
	// divergence: the recording says nothing about it.
	Unfinished Outcome = "unfinished in the recording"
)

// Diverged reports whether o is a divergence from the recording.
func (o Outcome) Diverged() bool { return o != Same && o != Reproduced && o != Unfinished }

// CallResult is a tool call's result, as recorded or replayed.
type CallResult struct {
	// Decision is the kind of the call's decision: "allow", "deny",
	// "skip", "defer", or "" if it had none (the tool was unknown, the
	// input invalid).
	Decision string
	// IsError reports that the result was sent as an error.
	IsError bool
	// Error is why the call failed, redacted.
	Error string
	// Output is the result's content blocks as JSON, redacted.
	Output json.RawMessage
}

// Text returns the text of the result's content.
func (c *CallResult) Text() string { return contentText(c.Output) }

// CallReport compares one tool call of a replay with its recording.
type CallReport struct {
	// Turn is the recorded call's turn; 0 for a call only the replay made.
	Turn int
	// ID is the call's tool_use id and Tool the tool's name.
	ID   string
	Tool string
	// Outcome is how the replayed call compares with the recorded one.
	Outcome Outcome
	// Recorded and Replayed are the call's results, nil where there is
	// none.
	Recorded, Replayed *CallResult
}

// ReplayReport is what [Replay] found.
type ReplayReport struct {
	// Calls compares each tool call, in the order of the recording, then
	// calls only the replay made.
	Calls []CallReport
	// RecordedStop is how the recorded run stopped, "" if its transcript
	// has no stop; ReplayedStop is how the replay did, "" if it ran to the
	// end of the recording without stopping.
	RecordedStop, ReplayedStop toolrun.StopReason
	// Result is the replayed run's result.
	Result *toolrun.Result
	// ServerErrors are the fake server's complaints about the replay's
	// requests (see [toolruntest.Server.Errors]), but for running out of
	// recorded responses.
	ServerErrors []string
}

// StopDiverged reports whether the replay stopped otherwise than the
// recording.
func (r *ReplayReport) StopDiverged() bool {
	rec, rep := r.RecordedStop, r.ReplayedStop
	if rep == "" {
		// The replay used up the recorded turns and asked for another: it
		// is where the recording ends, whatever ended it.
		return rec != "" && rec != toolrun.StopError && rec != toolrun.StopCanceled
	}
	if rec == toolrun.StopCanceled && rep == toolrun.StopError {
		return false
	}
	return rec != rep
}

// Diverged reports whether the replay diverged from the recording: a call
// with an [Outcome] that is a divergence, the run stopping otherwise, or
// the fake server rejecting a request.
func (r *ReplayReport) Diverged() bool {
	if r.StopDiverged() || len(r.ServerErrors) > 0 {
		return true
	}
	for _, c := range r.Calls {
		if c.Outcome.Diverged() {
			return true
		}
	}
	return false
}

// String reports the replay for a person: one line per call, the details of
// each divergence, and the stops.
func (r *ReplayReport) String() string {
	var b strings.Builder
	verdict := "matches the recording"
	if r.Diverged() {
		verdict = "DIVERGED from the recording"
	}
	fmt.Fprintf(&b, "replay %s: %d tool calls\n", verdict, len(r.Calls))
	for _, c := range r.Calls {
		mark := " "
		if c.Outcome.Diverged() {
			mark = "!"
		}
		fmt.Fprintf(&b, "%s turn %d  %s  %s: %s\n", mark, c.Turn, c.ID, c.Tool, c.Outcome)
		switch c.Outcome {
		case Reproduced:
			fmt.Fprintf(&b, "      error: %s\n", oneLine(c.Recorded.errorText()))
		case Same, Unfinished:
		default:
			if c.Recorded != nil {
				fmt.Fprintf(&b, "      recorded: %s\n", c.Recorded.summary())
			}
			if c.Replayed != nil {
				fmt.Fprintf(&b, "      replayed: %s\n", c.Replayed.summary())
			}
		}
	}
	rec, rep := string(r.RecordedStop), string(r.ReplayedStop)
	if rec == "" {
		rec = "none (the transcript ends without a stop)"
	}
	if rep == "" {
		rep = "at the end of the recording"
	}
	mark := " "
	if r.StopDiverged() {
		mark = "!"
	}
	fmt.Fprintf(&b, "%s stop: recorded %s, replayed %s\n", mark, rec, rep)
	for _, e := range r.ServerErrors {
		fmt.Fprintf(&b, "! fake server: %s\n", e)
	}
	return b.String()
}

func (c *CallResult) errorText() string {
	if c.Error != "" {
		return c.Error
	}
	return c.Text()
}

func (c *CallResult) summary() string {
	var parts []string
	if c.Decision != "" && c.Decision != "allow" {
		parts = append(parts, "decision "+c.Decision)
	}
	if c.IsError {
		parts = append(parts, "error: "+oneLine(c.errorText()))
		if t := c.Text(); t != "" && t != c.Error && c.Error != "" {
			parts = append(parts, "output: "+oneLine(t)) // a hook changed what the model got
		}
	} else {
		parts = append(parts, "output: "+oneLine(c.Text()))
	}
	return strings.Join(parts, "; ")
}

// oneLine returns s on one line, cut to a length a terminal shows.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const max = 160
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return fmt.Sprintf("%q", s)
}

// Replay runs the recorded run again, with tools, against its recorded
// model turns, and compares each tool call's result with the recorded one.
//
// The model's turns are served by a [toolruntest] server started in this
// process, which answers the n-th request with the n-th recorded response,
// whatever the request holds: nothing goes over the network. The run
// starts from the params of the first recorded request (tools named like
// one of tools are replaced by it), and each call is decided as it was in
// the recording: a call that was denied, skipped or deferred is again,
// through [toolrun.Options].Decide, and a person's decision is given again
// with [toolrun.Runner.Decide] when the replay awaits it. A call allowed by default or by its tool's policy
// is put to the tool's policy again. Model requests that failed in the
// recording are not replayed, nor are compactions: the replay does not
// compact (Options.Compaction is ignored).
//
// Calls are matched by tool_use id. A tool that now returns something
// else, a failure that reproduces or no longer does, and a run that stops
// otherwise are in the report; [ReplayReport.Diverged] sums it up. The
// error is for a replay that could not run: a transcript with nothing to
// replay, params that do not decode. ctx bounds the replay: a tool that
// blocks, as the one the recorded run was killed in may, is cancelled with
// it.
func Replay(ctx context.Context, t *Transcript, tools []toolrun.Tool, opts *ReplayOptions) (*ReplayReport, error) {
	var o ReplayOptions
	if opts != nil {
		o = *opts
	}
	var first *Entry
	var replies []toolruntest.Reply
	for i := range t.Entries {
		e := &t.Entries[i]
		switch e.Type {
		case TypeRequest:
			if first == nil && !e.Compaction {
				first = e
			}
		case TypeResponse:
			if e.Compaction {
				continue // the replay does not compact
			}
			reply, err := replyOf(e)
			if err != nil {
				return nil, err
			}
			replies = append(replies, reply)
		}
	}
	if first == nil || len(replies) == 0 {
		return nil, fmt.Errorf("%w: the transcript has %d responses and no request", ErrNothingToReplay, len(replies))
	}
	params, err := paramsOf(first, tools)
	if err != nil {
		return nil, err
	}

	turns := t.Turns()
	recStop := t.Stop()
	decisions := map[string]toolrun.Decision{}
	approvals := map[string]toolrun.Decision{}
	for _, tn := range turns {
		for _, c := range tn.Calls {
			if c.Decision == nil || c.Decision.Decision == nil || c.Discarded {
				continue
			}
			d := *c.Decision.Decision
			switch {
			case c.Decision.By == string(toolrun.ByApproval) && d.Kind == toolrun.Allow:
				// A person's approval is given again when the replay
				// awaits it: through Options.Policy it would not answer
				// the tool's deferral (deny rules and deferrals come
				// first). A person's denial or skip is replayed through
				// Options.Policy below, which always honours it.
				approvals[c.ID] = d
			case d.Kind == toolrun.Allow && len(d.Input) == 0:
				// allowed by default, by the tool's policy or by an Always
				// approval: asked again
			default:
				decisions[c.ID] = d
			}
		}
	}

	s := toolruntest.New(nil, toolruntest.Script(replies...))
	defer s.Close()

	runOpts := o.Options
	runOpts.MaxTurns = -1 // no bound
	// The recorded turns are served whatever the requests hold, so the
	// replay need not compact; a compaction's request would be served the
	// next turn's response.
	runOpts.Compaction = toolrun.Compaction{}
	if recStop != nil && recStop.StopReason == toolrun.StopMaxTurns {
		runOpts.MaxTurns = len(replies)
	}
	runOpts.Policy = func(ctx context.Context, call toolrun.PolicyCall) toolrun.Decision {
		return decisions[call.ID] // the zero Decision allows
	}
	var mu sync.Mutex // guards replayed, decided
	replayed := map[string]*toolrun.ToolResult{}
	decided := map[string]toolrun.Decision{}
	var order []string // ids in the order the replay answered them
	observe := o.Options.OnEvent
	runOpts.OnEvent = func(ctx context.Context, e toolrun.Event) {
		mu.Lock()
		switch e := e.(type) {
		case toolrun.ToolDecided:
			decided[e.Call.ID] = e.Decision
		case toolrun.ToolFinished:
			if _, ok := replayed[e.Result.Call.ID]; !ok {
				order = append(order, e.Result.Call.ID)
			}
			replayed[e.Result.Call.ID] = e.Result
		}
		mu.Unlock()
		if observe != nil {
			observe(ctx, e)
		}
	}

	r := toolrun.New(s.Client(option.WithMaxRetries(0)), params, tools, &runOpts)
	res, _ := r.Run(ctx) // how the run ended is in res, and compared below
	for res.StopReason == toolrun.StopAwaitingApproval {
		given := 0
		for _, p := range res.Pending {
			if d, ok := approvals[p.Call.ID]; ok && r.Decide(p.Call.ID, d) == nil {
				given++
			}
		}
		if given < len(res.Pending) {
			break // the recording awaited a person here too, or diverged
		}
		res, _ = r.Run(ctx)
	}

	rep := &ReplayReport{Result: res, ReplayedStop: res.StopReason}
	if recStop != nil {
		rep.RecordedStop = recStop.StopReason
	}
	for _, err := range s.Errors() {
		if errors.Is(err, toolruntest.ErrScriptEnded) {
			rep.ReplayedStop = ""
			continue
		}
		rep.ServerErrors = append(rep.ServerErrors, err.Error())
	}

	mu.Lock()
	defer mu.Unlock()
	lastTurn := 0
	if len(turns) > 0 {
		lastTurn = turns[len(turns)-1].Number
	}
	seen := map[string]bool{}
	for _, tn := range turns {
		for _, c := range tn.Calls {
			if c.Discarded {
				continue
			}
			seen[c.ID] = true
			cr := CallReport{Turn: tn.Number, ID: c.ID, Tool: c.Tool}
			if c.Finished != nil {
				cr.Recorded = recordedResult(c)
			}
			if res, ok := replayed[c.ID]; ok {
				cr.Replayed = replayedResult(res, decided, o.Redact)
			}
			switch {
			case cr.Recorded == nil && cr.Replayed == nil:
				continue // a call left pending in both: at a turn limit, awaiting approval
			case cr.Recorded == nil:
				cr.Outcome = Extra
				if tn.Number == lastTurn && (recStop == nil || recStop.StopReason == toolrun.StopCanceled || recStop.StopReason == toolrun.StopError) {
					cr.Outcome = Unfinished
				}
			case cr.Replayed == nil:
				cr.Outcome = Missing
			default:
				cr.Outcome = compare(cr.Recorded, cr.Replayed)
			}
			rep.Calls = append(rep.Calls, cr)
		}
	}
	for _, id := range order {
		if seen[id] {
			continue
		}
		res := replayed[id]
		if res == nil {
			continue
		}
		rep.Calls = append(rep.Calls, CallReport{ID: id, Tool: res.Call.Name, Outcome: Extra,
			Replayed: replayedResult(res, decided, o.Redact)})
	}
	return rep, nil
}

// compare returns how replayed compares with recorded.
func compare(recorded, replayed *CallResult) Outcome {
	if recorded.Decision != replayed.Decision {
		return DecidedDifferently
	}
	switch {
	case recorded.IsError && replayed.IsError:
		if recorded.Error == replayed.Error && jsonEqual(recorded.Output, replayed.Output) {
			return Reproduced
		}
		return FailsDifferently
	case recorded.IsError:
		return Fixed
	case replayed.IsError:
		return NowFails
	case !jsonEqual(recorded.Output, replayed.Output):
		return OutputChanged
	}
	return Same
}

func recordedResult(c *Call) *CallResult {
	r := &CallResult{IsError: c.Finished.IsError, Error: c.Finished.Error, Output: c.Finished.Output}
	if c.Decision != nil && c.Decision.Decision != nil {
		r.Decision = c.Decision.Decision.Kind.String()
	}
	return r
}

func replayedResult(res *toolrun.ToolResult, decided map[string]toolrun.Decision, extra func(string) string) *CallResult {
	r := &CallResult{IsError: res.IsError}
	if d, ok := decided[res.Call.ID]; ok {
		r.Decision = d.Kind.String()
	}
	if res.Err != nil {
		r.Error = redactWith(res.Err.Error(), extra)
	}
	if len(res.Content) > 0 {
		if b, err := json.Marshal(res.Content); err == nil {
			r.Output = redactJSONWith(b, extra)
		}
	}
	return r
}

// jsonEqual reports whether a and b are the same JSON value; two empty
// documents are equal.
func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

// replyOf returns the fake server's reply that sends the recorded response
// e again: its content blocks verbatim, its stop reason and usage.
func replyOf(e *Entry) (toolruntest.Reply, error) {
	r, err := parseResponse(e)
	if err != nil {
		return toolruntest.Reply{}, err
	}
	reply := toolruntest.Reply{
		ID:         r.ID,
		Model:      r.Model,
		StopReason: r.StopReason,
		Usage: &toolruntest.Usage{
			InputTokens:              r.Usage.InputTokens,
			OutputTokens:             r.Usage.OutputTokens,
			CacheCreationInputTokens: r.Usage.CacheCreationInputTokens,
			CacheReadInputTokens:     r.Usage.CacheReadInputTokens,
		},
	}
	for _, raw := range r.Content {
		reply.Content = append(reply.Content, toolruntest.Block{Raw: raw})
	}
	return reply, nil
}

// paramsOf decodes the params of the recorded request e, without the
// definitions of the tools that tools replaces.
func paramsOf(e *Entry, tools []toolrun.Tool) (anthropic.BetaMessageNewParams, error) {
	var p anthropic.BetaMessageNewParams
	if err := json.Unmarshal(e.Body, &p); err != nil {
		return p, fmt.Errorf("transcript: the request of turn %d does not decode: %w", e.Turn, err)
	}
	for _, b := range e.Betas {
		p.Betas = append(p.Betas, anthropic.AnthropicBeta(b))
	}
	given := map[string]bool{}
	for _, t := range tools {
		given[t.Name()] = true
	}
	p.Tools = slices.DeleteFunc(p.Tools, func(u anthropic.BetaToolUnionParam) bool {
		name := u.GetName()
		return name != nil && given[*name]
	})
	return p, nil
}

// ReplayFile replays the transcript in the named file with tools (see
// [Replay]) and writes the report to w. It is the command line's "replay"
// command, which can replay only the tools it has; call Replay with your own
// tools for any other run.
func ReplayFile(ctx context.Context, name string, tools []toolrun.Tool, w io.Writer) (*ReplayReport, error) {
	t, err := ReadFile(name)
	if err != nil {
		return nil, err
	}
	// The report says how each call went; the runner's records of failures
	// that reproduce would only repeat it, unless ANTHROPIC_LOG asks.
	var logger *slog.Logger
	if os.Getenv("ANTHROPIC_LOG") == "" {
		logger = slog.New(slog.DiscardHandler)
	}
	rep, err := Replay(ctx, t, tools, &ReplayOptions{Options: toolrun.Options{Logger: logger}})
	if err != nil {
		return nil, err
	}
	_, err = io.WriteString(w, rep.String())
	return rep, err
}
