package temporal

import (
	"container/list"
	"encoding/json"
	"slices"
	"sync"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
)

// DefaultStateCacheRuns is how many runs a worker keeps in its state cache
// unless [Activities.SetStateCacheRuns] says otherwise.
const DefaultStateCacheRuns = 128

// DefaultStateCacheBytes is how much memory, about, a worker's state
// cache may take unless [Activities.SetStateCacheBytes] says otherwise.
const DefaultStateCacheBytes = 256 << 20

// stateCache is a worker's cache of the runners of the runs it stepped:
// the runner of a run's last step, which holds the run's state decoded and
// the request JSON of its messages encoded (the runner's own cache of
// them), so that the next step of the run on this worker neither loads,
// decodes nor resumes the whole state, and encodes only the messages that
// are new. It is keyed by workflow id, and an entry is used only if it
// is the state the step is given (see cachedRun.resume); anything else
// is a miss, and the step loads the state as it would without the cache:
// correctness never depends on it. An entry is taken out while its step
// runs and put back when the step succeeds, so that no two steps share a
// runner, and a failed step leaves no entry. It holds at most max runs,
// dropping the least recently used.
type stateCache struct {
	max      int
	maxBytes int64      // 0: no bound in bytes
	mu       sync.Mutex // guards runs, order, bytes
	bytes    int64      // the sizes of the entries held
	// runs maps a workflow id to its element of order, whose value is a
	// *cachedRun; order runs from the most recently put.
	runs  map[string]*list.Element
	order list.List
}

// cachedRun is the runner of a run's last step on this worker and what
// identifies the state it holds.
type cachedRun struct {
	workflowID string
	runner     *toolrun.Runner
	// size is about the memory the entry takes (see
	// Activities.SetStateCacheBytes), 0 if not known.
	size int64
	// ref is the Store key the step saved the runner's state under, unique
	// to the step's attempt; "" without a Store.
	ref string
	// Without a Store, the state the step returned as the workflow holds
	// it: its turns, stop, number of messages, the JSON of its last two
	// messages (the earlier ones were checked when they were last, or
	// decoded from the step's input on a miss).
	turns int
	stop  toolrun.StopReason
	msgs  int
	tail  []byte
	// calls are the pending turn's calls, answered those of them with a
	// result, awaiting those awaiting a person's decision.
	calls    []toolrun.ToolCall
	answered map[string]bool
	awaiting []string
	// tools and removed are the run's tools as the step left them: the
	// JSON of its added definitions and the names taken out, which a
	// [ClientTools] change in the workflow since makes another run's.
	tools   string
	removed []string
	// digest identifies the history the step returned, as its result
	// reported it ([StepResult.Digest]), and whole is the state it
	// returned: the history from which the next step's delta is cut, and
	// which a next step that the runner cannot take (a person's decision
	// since) resumes from rather than asking the workflow; "" and nil but
	// for a step with deltas.
	digest string
	whole  *toolrun.State
}

// history returns the whole state the entry holds for s, the state
// without its history that a step is given with digest and msgs, or nil
// if the entry holds another history.
func (e *cachedRun) history(s *toolrun.State, digest string, msgs int) *toolrun.State {
	if e == nil || e.whole == nil || digest == "" || digest != e.digest || msgs != e.msgs {
		return nil
	}
	return merge(s, e.whole)
}

// take removes and returns the entry of workflow id, or nil.
func (c *stateCache) take(id string) *cachedRun {
	if c == nil || id == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.runs[id]
	if !ok {
		return nil
	}
	delete(c.runs, id)
	c.order.Remove(e)
	r := e.Value.(*cachedRun)
	c.bytes -= r.size
	return r
}

// put keeps r as the entry of its workflow, dropping the least recently
// used entries over max runs or maxBytes; a run larger than maxBytes
// alone is not kept.
func (c *stateCache) put(r *cachedRun) {
	if c == nil || c.max <= 0 || r.workflowID == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]*list.Element{}
	}
	if old, ok := c.runs[r.workflowID]; ok {
		c.order.Remove(old)
		delete(c.runs, r.workflowID)
		c.bytes -= old.Value.(*cachedRun).size
	}
	if c.maxBytes > 0 && r.size > c.maxBytes {
		return // larger than the bound alone: not kept
	}
	c.runs[r.workflowID] = c.order.PushFront(r)
	c.bytes += r.size
	for c.order.Len() > c.max || (c.maxBytes > 0 && c.bytes > c.maxBytes && c.order.Len() > 0) {
		last := c.order.Back()
		c.order.Remove(last)
		lr := last.Value.(*cachedRun)
		delete(c.runs, lr.workflowID)
		c.bytes -= lr.size
	}
}

// len returns the number of runs cached.
func (c *stateCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// newCachedRun returns the entry of runner r of workflow id, whose state
// whole was saved under ref (or "" without a Store).
func newCachedRun(id string, r *toolrun.Runner, whole *toolrun.State, ref string) *cachedRun {
	e := &cachedRun{workflowID: id, runner: r, ref: ref, turns: whole.Turns, stop: whole.StopReason, calls: whole.Calls(), answered: map[string]bool{}}
	for _, c := range e.calls {
		if _, ok := whole.CallResult(c.ID); ok {
			e.answered[c.ID] = true
		}
	}
	e.awaiting = awaitingIDs(whole)
	e.tools, e.removed = toolsKey(whole), slices.Clone(whole.Removed)
	if ref == "" {
		e.msgs = len(whole.Params.Messages)
		tail, err := lastMessages(whole.Params.Messages)
		if err != nil {
			return nil
		}
		e.tail = tail
	}
	return e
}

// resume returns the entry's runner brought up to s, the state the
// workflow gives the step (with ref, the key of the whole state in the
// Store; with digest, the state without its history, of msgs messages
// of that digest, which the workflow holds), or nil if s is not the state the runner holds with what the
// workflow recorded since: the results of the pending calls, which it
// sets on the runner. A person's decision since, or anything else the
// runner does not hold, is a miss. On nil, the runner may have been
// changed, and the caller drops it.
func (e *cachedRun) resume(s *toolrun.State, ref, digest string, msgs int) *toolrun.Runner {
	if ref != e.ref || s.Turns != e.turns || s.StopReason != e.stop {
		return nil
	}
	if digest != "" {
		if ref != "" || digest != e.digest || msgs != e.msgs {
			return nil
		}
	} else if ref == "" {
		if len(s.Params.Messages) != e.msgs {
			return nil
		}
		tail, err := lastMessages(s.Params.Messages)
		if err != nil || string(tail) != string(e.tail) {
			return nil
		}
	}
	if !slices.Equal(awaitingIDs(s), e.awaiting) || !sameCalls(s.Calls(), e.calls) {
		return nil
	}
	if !slices.Equal(s.Removed, e.removed) || toolsKey(s) != e.tools {
		return nil // the workflow changed the run's tools (a ClientTools change)
	}
	for _, c := range e.calls {
		res, ok := s.CallResult(c.ID)
		switch {
		case e.answered[c.ID]:
			if !ok {
				return nil
			}
		case ok:
			if err := e.runner.SetResult(c.ID, res); err != nil {
				return nil
			}
		}
	}
	return e.runner
}

// toolsKey returns the JSON of the definitions added to s, which tells
// apart the tools of two states of one run.
func toolsKey(s *toolrun.State) string {
	added := s.AddedTools()
	if len(added) == 0 {
		return ""
	}
	b, err := json.Marshal(added)
	if err != nil {
		return "?" // never equal to a key that encoded
	}
	return string(b)
}

// awaitingIDs returns the ids of the calls of s awaiting a decision.
func awaitingIDs(s *toolrun.State) []string {
	var ids []string
	for _, p := range s.AwaitingApproval() {
		ids = append(ids, p.Call.ID)
	}
	return ids
}

func sameCalls(a, b []toolrun.ToolCall) bool {
	return slices.EqualFunc(a, b, func(x, y toolrun.ToolCall) bool {
		return x.ID == y.ID && x.Name == y.Name && string(x.Input) == string(y.Input)
	})
}

// lastMessages returns the JSON of the last two of msgs.
func lastMessages(msgs []anthropic.BetaMessageParam) ([]byte, error) {
	return json.Marshal(msgs[max(0, len(msgs)-2):])
}
