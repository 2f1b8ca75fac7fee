package toolrun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// Compaction configures how a long run's history is compacted. The zero
// value never compacts automatically; [Runner.CompactBeforeNextTurn] still
// works.
//
// A compaction happens between turns, after a turn's tool results are in
// the history and before the next request, so it never separates a tool_use
// from its tool_result, always includes the latest turn, and keeps the
// model's last message in what it summarises. It is not counted as a turn.
// After a compaction the next one is due only once a later response reports
// its own input size, so a run never compacts twice in a row; and only once
// the input has doubled from its size right after the compaction, so a
// threshold below what the summary itself takes does not compact every
// turn (the pitfall of client-side compaction in other SDKs).
type Compaction struct {
	// Threshold, if positive, compacts when the last response's input (all
	// input tokens: uncached, cache writes and reads) reached it.
	Threshold int64

	// Instructions, if set, tell the summariser what to keep.
	Instructions string

	// ClientSide summarises with an ordinary request and replaces the
	// history with the summary as a user message, for platforms without the
	// compaction beta. By default the API compacts (the compact-2026-09-04
	// beta, which the runner adds to the request's betas), as the official
	// runner's CompactBeforeNextTurn does, and the history becomes the
	// compaction block the API returns.
	ClientSide bool
}

// Compacted is sent after the history was compacted.
type Compacted struct {
	// Turn is the last turn before the compaction (0 for none); the
	// RequestSent and ResponseReceived of the compaction's request carry
	// the next one, Turn+1, as Options.BeforeRequest is given.
	Turn int
	// Before and After count the history's messages.
	Before, After int
	// InputTokens is the last response's input size that made it due, or 0
	// for a compaction asked for with CompactBeforeNextTurn.
	InputTokens int64
	ClientSide  bool
	Summary     string
	// Usage is what the compaction's request is billed for: for a
	// server-side compaction, the usage.iterations entry of type
	// "compaction" (its top-level usage is 0).
	Usage Usage
}

// EventTurn returns the turn.
func (e Compacted) EventTurn() int { return e.Turn }

// CompactBeforeNextTurn asks for the history to be compacted once the
// current turn has finished, before the next request, with the settings of
// Options.Compaction (automatic or not). The request is kept in the run's
// [State]: a run resumed from it compacts as this one would have.
func (r *Runner) CompactBeforeNextTurn() { r.st.compactNext = true }

// compactDue reports whether the history should be compacted now, and why.
func (r *Runner) compactDue() (bool, int64) {
	msgs := r.st.Params.Messages
	if len(msgs) == 0 || msgs[len(msgs)-1].OfAssistant != nil {
		// Nothing yet, or a paused turn that must be resumed first.
		return false, 0
	}
	if r.st.compactNext {
		return true, 0
	}
	if t := r.opts.Compaction.Threshold; t > 0 && r.lastInput >= t && r.lastInput >= 2*r.compactFloor {
		return true, r.lastInput
	}
	return false, 0
}

// compact replaces the history with a summary of it.
//
// The compaction's request is sent as a turn's is, by the same helpers:
// through Options.BeforeRequest (with the number of the turn it comes
// before), checked against the budget, announced by a [RequestSent] and a
// [ResponseReceived] with Compaction set, with the client options of a
// turn that is not streamed (Timeouts.Request, without which the client
// refuses a large max_tokens unstreamed), and accounted as the API bills
// it. It is never streamed: the runner needs the summary whole, and a
// stream's retries and idle timeout are for turns. AfterResponse is not
// called for it, since it hands out no turn. A hook that stops the run
// (StopRun, an error) stops it here, before the request is sent.
func (r *Runner) compact(ctx context.Context, inputTokens int64) error {
	r.st.compactNext = false
	c := r.opts.Compaction
	before := len(r.st.Params.Messages)
	n := r.st.Turns + 1
	var params anthropic.BetaMessageNewParams
	if c.ClientSide {
		params = r.summaryParams()
	} else {
		params = r.compactionParams()
	}
	if err := r.beforeRequest(ctx, n, &params); err != nil {
		r.hookFailed(ctx, err)
		return nil
	}
	// The compaction's request is bounded by the budget like any other.
	if res, err := r.checkBudget(&params, r.lastInput, r.lastInputMsgs); err != nil || res != nil {
		if res != nil {
			r.stop(ctx, res)
		}
		return err
	}
	start := time.Now()
	r.emit(ctx, RequestSent{Turn: n, Params: &params, Attempt: 1, Compaction: true})
	rctx, opts, g := r.requestOptions(ctx)
	msg, err := r.messages.New(rctx, params, opts...)
	g.stop()
	err = g.failure(ctx, err)
	if err != nil {
		return &TurnError{Turn: n, Attempt: 1, Err: fmt.Errorf("compacting the history: %w", err)}
	}
	// Billed whether or not it holds a summary.
	r.account(ctx, msg, params.Model)
	r.emit(ctx, ResponseReceived{Turn: n, Message: msg, Duration: time.Since(start), Usage: usageOf(msg), Compaction: true})
	var (
		summary string
		history []anthropic.BetaMessageParam
	)
	if c.ClientSide {
		summary = strings.TrimSpace(messageText(msg))
		if summary == "" {
			return &TurnError{Turn: n, Attempt: 1, Err: errors.New("compacting the history: the summary request returned no text")}
		}
		history = []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(
			"This conversation was compacted. A summary of everything until now:\n\n" + summary +
				"\n\nContinue the task from where it stands."))}
	} else {
		for _, b := range msg.Content {
			if b.Type == "compaction" && b.Content.OfString != "" {
				summary = b.Content.OfString
			}
		}
		if summary != "" {
			// The compaction block goes back first, in place of the
			// messages it summarises, and every later request that
			// carries it needs the beta.
			history = []anthropic.BetaMessageParam{msg.ToParam()}
			if !slices.Contains(r.st.Betas, anthropic.AnthropicBetaCompact2026_09_04) {
				r.st.Betas = append(slices.Clone(r.st.Betas), anthropic.AnthropicBetaCompact2026_09_04)
			}
		}
	}
	if history == nil {
		r.log.WarnContext(ctx, "toolrun: compaction returned no summary; the history was kept", "turn", r.st.Turns)
		return nil
	}
	r.setHistory(history)
	r.retellTools() // the system messages of the inline-tools beta went with the history
	r.lastInput, r.lastInputMsgs = 0, 0
	r.compactFloor, r.measureFloor = 0, true
	r.emit(ctx, Compacted{Turn: r.st.Turns, Before: before, After: len(history), InputTokens: inputTokens,
		ClientSide: c.ClientSide, Summary: summary, Usage: usageOf(msg)})
	return r.save(ctx)
}

// compactionParams is the server-side compaction request: the history with
// the compaction param, without the params the API refuses alongside it.
func (r *Runner) compactionParams() anthropic.BetaMessageNewParams {
	p := r.requestParams()
	p.Messages = slices.Clone(p.Messages)
	p.Compaction = anthropic.BetaCompactionConfigUnionParam{OfSummarize: &anthropic.BetaSummarizeCompactionParam{}}
	if r.opts.Compaction.Instructions != "" {
		p.Compaction.OfSummarize.Instructions = anthropic.String(r.opts.Compaction.Instructions)
	}
	if !slices.Contains(p.Betas, anthropic.AnthropicBetaCompact2026_09_04) {
		p.Betas = append(slices.Clone(p.Betas), anthropic.AnthropicBetaCompact2026_09_04)
	}
	p.ContextManagement = anthropic.BetaContextManagementConfigParam{}
	p.StopSequences = nil
	//lint:ignore SA1019 a caller may still set the deprecated field, and a compaction request must send no output format
	p.OutputFormat = anthropic.BetaJSONOutputFormatParam{}
	p.OutputConfig.Format = anthropic.BetaJSONOutputFormatParam{}
	if p.ToolChoice.OfAny != nil || p.ToolChoice.OfTool != nil {
		p.ToolChoice = anthropic.BetaToolChoiceUnionParam{}
	}
	return p
}

// summaryParams is the client-side compaction's request: the history and a
// request for its summary, with no tool use.
func (r *Runner) summaryParams() anthropic.BetaMessageNewParams {
	p := r.requestParams()
	instructions := "Summarize the conversation so far so that it can continue from the summary alone: the task, what was done and found (tool calls and their results, including failures), decisions made, and what remains to do. Answer with the summary only."
	if r.opts.Compaction.Instructions != "" {
		instructions += " " + r.opts.Compaction.Instructions
	}
	p.Messages = append(slices.Clone(p.Messages), anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(instructions)))
	none := anthropic.NewBetaToolChoiceNoneParam()
	p.ToolChoice = anthropic.BetaToolChoiceUnionParam{OfNone: &none}
	p.StopSequences = nil
	return p
}
