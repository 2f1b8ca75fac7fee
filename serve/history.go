package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// The client's history and the thread's.
//
// A client sends the conversation as it has it on every run (AG-UI's
// messages are "the complete history"). The thread's own copy is its
// toolrun State, which holds what the client never sees whole (thinking
// signatures, tool_use ids, tool results as the model read them, the
// prompt cache's prefix), so where the two agree the model is sent the
// thread's exact blocks, and the client's copy is read only for what it
// adds. Where they part, the client's wins, from the first user message
// they disagree on: serve_user_messages keeps the thread's user messages
// in order, with a digest of each one's content as its client sent it,
// and a client that edits one (the same id, other content), drops one,
// or sends its history back ending with a user message already answered
// (regenerate) has the run go on from the thread's conversation before
// that message, with the client's user messages from there on. The
// records of every decision stay; calls of the part left behind that
// still waited are denied, recorded as left behind.
//
// What a client's message can never do is stand in for a result the
// server made: a tool message for a call the server ran, or whose
// approval a person decided, is ignored (with a warning), so that a
// client cannot write the result of a call it was not given to run, and
// CopilotKit's echo of a decision (a tool message it adds for each
// tool_call interrupt it answers) is not taken for the call's output.

func init() {
	schema = append(schema, `CREATE TABLE IF NOT EXISTS serve_user_messages (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (thread_id, seq))`)
}

// userRec is one of a thread's user messages: its id and the digest of
// its content, as the client sent it.
type userRec struct {
	ID, Digest string
}

// contentDigest is the digest of a message's content, whatever spacing
// the client's JSON has.
func contentDigest(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		b.Reset()
		b.Write(raw)
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:12])
}

// userRecords returns thread's user messages, in order.
func userRecords(ctx context.Context, q querier, thread string) ([]userRec, error) {
	rows, err := q.QueryContext(ctx, sqlUserRecords, thread)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []userRec
	for rows.Next() {
		var r userRec
		if err := rows.Scan(&r.ID, &r.Digest); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// recordUsers records recs as thread's user messages from position from
// on, in place of those there were.
func recordUsers(ctx context.Context, q querier, thread string, from int, recs []userRec) error {
	if _, err := q.ExecContext(ctx, sqlUserDropFrom, thread, from); err != nil {
		return err
	}
	for i, r := range recs {
		if _, err := q.ExecContext(ctx, sqlUserInsert, thread, from+i, r.ID, r.Digest); err != nil {
			return err
		}
	}
	return nil
}

// gatedOrRan reports whether call is one the server ran (the thread's
// events gave its result) or one whose approval a person was asked for.
func gatedOrRan(ctx context.Context, q querier, thread, call string, known map[string]bool) (bool, error) {
	if known["result_"+call] {
		return true, nil
	}
	var n int
	err := q.QueryRowContext(ctx, sqlGatedCount, thread, call, kindApproval).Scan(&n)
	return n > 0, err
}

// userApproves reports whether the approval of a call of tool is the
// user's (Config.UserApproves), which the client running the thread may
// give, rather than an approver's.
func (h *Handler) userApproves(tool string) bool {
	return slices.Contains(h.cfg.UserApproves, tool) || slices.Contains(h.cfg.UserApproves, "*")
}

// branchAt returns the conversation of msgs before the n-th (from 0) of
// its user messages that a client wrote (one with a block other than a
// tool result), and whether it has one: a history compacted since has
// fewer. The tool results a turn's answer shares that message with are
// kept, so the turn before stays answered.
func branchAt(msgs []anthropic.BetaMessageParam, n int) ([]anthropic.BetaMessageParam, bool) {
	k := 0
	for i, m := range msgs {
		if m.OfUser == nil {
			continue
		}
		var results []anthropic.BetaContentBlockParamUnion
		client := false
		for _, b := range m.OfUser.Content {
			if b.OfToolResult != nil {
				results = append(results, b)
			} else {
				client = true
			}
		}
		if !client {
			continue
		}
		if k == n {
			out := slices.Clone(msgs[:i])
			if len(results) > 0 {
				out = append(out, anthropic.NewBetaUserMessage(results...))
			}
			return out, true
		}
		k++
	}
	return nil, false
}

// caughtUp returns the events that tell a client what it missed: for each
// interrupt it answered that was decided already (in the inbox, over the
// JSON API, by another client), a CUSTOM "toolrun.decided" event with the
// decision, who took it and when, and the run that went on with it,
// whose events GET /runs/{run}/events streams.
func (h *Handler) caughtUp(ctx context.Context, in *runInput, p *prepared) []event {
	if len(p.caught) == 0 {
		return nil
	}
	type run struct {
		id string
		at time.Time
	}
	var runs []run
	rows, err := h.cfg.DB.QueryContext(ctx, `SELECT id, created_at FROM serve_runs WHERE thread_id = ?`, in.ThreadID)
	if err == nil {
		for rows.Next() {
			var r run
			var at string
			if rows.Scan(&r.id, &at) == nil {
				r.at, _ = time.Parse(time.RFC3339Nano, at)
				runs = append(runs, r)
			}
		}
		rows.Close()
	}
	slices.SortFunc(runs, func(a, b run) int { return a.at.Compare(b.at) })
	var out []event
	for _, it := range p.caught {
		d := decisionOf(it)
		v := map[string]any{"interruptId": it.ID, "toolCallId": it.ToolCallID, "toolName": it.ToolName, "decision": d.Decision, "decidedBy": it.DecidedBy, "decidedAt": it.DecidedAt}
		if d.Reason != "" {
			v["reason"] = d.Reason
		}
		if d.Response != "" {
			v["response"] = d.Response
		}
		at, _ := time.Parse(time.RFC3339Nano, it.DecidedAt)
		for _, r := range runs {
			if r.id != in.RunID && r.id != it.Run && !r.at.Before(at) {
				v["runId"] = r.id
				break
			}
		}
		out = append(out, event{"type": "CUSTOM", "name": "toolrun.decided", "value": v})
	}
	return out
}
