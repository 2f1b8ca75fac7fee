package temporal

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolrun/toolrun"
)

// PendingMemo is the key of the workflow's memo entry that lists the calls
// awaiting a person's approval, as a [PendingApprovals]. The workflow keeps
// it current as the run changes (a turn's calls deferred, a decision
// applied, the run's end), so that a client reads it with
// DescribeWorkflowExecution: the server answers from what it stores, with
// no worker running, where [PendingQuery] needs a worker to answer (and,
// with none, fails after the server's 10 s wait). [Pending] reads it.
//
// Unlike a search attribute, a memo needs no registration in the
// namespace and can hold the calls themselves; it is not searchable:
// [ListAwaitingApproval] finds the runs, the memo says what each awaits.
const PendingMemo = "toolrun.pending"

// The bounds of the memo [PendingMemo], so that it stays small (a few
// kilobytes, well under the server's memo limits) whatever the turn holds.
const (
	// MemoMaxCalls is the most calls the memo lists; the others are
	// counted in [PendingApprovals.More], and listed once those before
	// them are decided.
	MemoMaxCalls = 32
	// MemoMaxInput is the largest input, in bytes of JSON, that the memo
	// holds for a call; a larger one is left out (Input is null): read it
	// with [StateQuery], or in the run's [toolrun.Store].
	MemoMaxInput = 1 << 10
	// MemoMaxReason is the most bytes of a call's reason the memo holds;
	// a longer reason is cut at a character boundary and ends in "…".
	MemoMaxReason = 256
)

// PendingApprovals is the value of the memo [PendingMemo]: the calls of the
// run awaiting approval, in the order of the turn, within the bounds
// [MemoMaxCalls], [MemoMaxInput] and [MemoMaxReason]. An empty Calls means
// that no call awaits approval.
type PendingApprovals struct {
	Calls []toolrun.PendingCall `json:"calls"`
	// More counts the calls awaiting approval beyond the first
	// [MemoMaxCalls], which Calls leaves out.
	More int `json:"more,omitempty"`
}

// pendingApprovals returns the memo for calls, within its bounds.
func pendingApprovals(calls []toolrun.PendingCall) PendingApprovals {
	p := PendingApprovals{Calls: []toolrun.PendingCall{}}
	for i, c := range calls {
		if i == MemoMaxCalls {
			p.More = len(calls) - i
			break
		}
		if len(c.Call.Input) > MemoMaxInput {
			c.Call.Input = nil
		}
		c.Reason = cut(c.Reason, MemoMaxReason)
		p.Calls = append(p.Calls, c)
	}
	return p
}

// pendingKey identifies what memo p shows: the calls' ids, which name
// their inputs and reasons too, and the count of the others.
func pendingKey(p PendingApprovals) string {
	var b strings.Builder
	for _, c := range p.Calls {
		b.WriteString(c.Call.ID)
		b.WriteByte(0)
	}
	b.WriteString(strconv.Itoa(p.More))
	return b.String()
}

// cut returns s cut to at most n bytes at a character boundary, with "…"
// at the end if it was cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	n -= len(ellipsis)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ellipsis
}
