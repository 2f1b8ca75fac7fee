package toolrun

import (
	"fmt"
	"slices"
)

// This file holds what a driver that schedules a turn's calls itself (the
// temporal module's workflow) needs to follow the executor's rules without
// a Runner: which calls may start now, and how a stop that a call's answer
// made on another machine is recorded in the driver's State.

// CallQueue hands out the planned calls of one turn in the order and
// groups they may run in, and is the one implementation of that rule: the
// runner's executor starts its calls through one, and a driver that
// schedules calls itself uses one to run them as the runner would. The
// rule: the groups of batches, one after another; within a group, at
// most the turn's bound of calls at once ([Options.MaxParallelTools]) and
// at most [ToolConfig.MaxParallel] calls of one tool; and once
// Stop is called (a call's answer ended the run) no call
// starts. It does no I/O and reads no clock, so a
// deterministic workflow may use it.
//
// A CallQueue is not safe for concurrent use.
type callQueue struct {
	batches [][]plannedCall
	limit   int
	batch   int            // the group being run
	next    int            // the next call of that group to start
	running int            // calls started and not done
	perTool map[string]int // running calls by tool name, of tools with a MaxParallel
	byID    map[string]string
	stopped bool
}

// NewCallQueue returns a queue of calls, as driver.Advance returned
// them, with at most maxParallel of them running at once
// ([DefaultMaxParallelTools] if maxParallel is zero or less).
func newCallQueue(calls []plannedCall, maxParallel int) *callQueue {
	if maxParallel <= 0 {
		maxParallel = DefaultMaxParallelTools
	}
	return &callQueue{batches: batches(slices.Clone(calls)), limit: maxParallel, byID: make(map[string]string, len(calls))}
}

// Start returns a call that may start now, and marks it running; false if
// none may: the queue is stopped, every call has started, or the calls
// that may not start yet wait for running ones to be Done. A
// call that waits for its tool's MaxParallel does not hold back a later
// call of its group: each call waits only for its own tool's place.
func (q *callQueue) Start() (plannedCall, bool) { return q.pick(true) }

// Ready reports whether Start would return a call now, and
// changes nothing: a driver that must check something before a call
// starts (whether the run stopped) checks it only then.
func (q *callQueue) Ready() bool {
	_, ok := q.pick(false)
	return ok
}

// pick finds the call that may start now; with start, it marks it running.
func (q *callQueue) pick(start bool) (plannedCall, bool) {
	for !q.stopped && q.batch < len(q.batches) {
		b := q.batches[q.batch]
		if q.next >= len(b) {
			if q.running > 0 {
				return plannedCall{}, false // the next group waits for this one
			}
			q.batch, q.next = q.batch+1, 0
			continue
		}
		if q.running >= q.limit {
			return plannedCall{}, false
		}
		for i := q.next; i < len(b); i++ {
			p := b[i]
			if p.MaxParallel > 0 && q.perTool[p.Call.Name] >= p.MaxParallel {
				continue
			}
			if !start {
				return p, true
			}
			// Keep the group's order: move p to the front of what is left.
			copy(b[q.next+1:i+1], b[q.next:i])
			b[q.next] = p
			q.next++
			q.running++
			if p.MaxParallel > 0 {
				if q.perTool == nil {
					q.perTool = map[string]int{}
				}
				q.perTool[p.Call.Name]++
			}
			q.byID[p.Call.ID] = p.Call.Name
			return p, true
		}
		return plannedCall{}, false
	}
	return plannedCall{}, false
}

// Done marks the started call toolUseID as finished, so that a call that
// waited for its place may start. A call not started, or done already, is
// ignored.
func (q *callQueue) Done(toolUseID string) {
	name, ok := q.byID[toolUseID]
	if !ok {
		return
	}
	delete(q.byID, toolUseID)
	q.running--
	if q.perTool[name] > 0 {
		q.perTool[name]--
	}
}

// Stop makes the queue start no more calls: a call's answer ended the
// run. The calls running finish; the others stay decided, not run.
func (q *callQueue) Stop() { q.stopped = true }

// Running returns the number of calls started and not done.
func (q *callQueue) Running() int { return q.running }

// StopAfterCall records in s the stop that answering one of its calls
// made elsewhere: a runner resumed from s (or from driver.ForCall) ran
// the call with driver.ExecuteCall, and its [Runner.Result] says the run
// stopped, with reason and detail. Only the stops a call's answer makes
// are taken: [StopHook] (AfterTool returned [StopRun]), [StopError]
// (AfterTool failed) and [StopPayloadTooLarge] (the driver could not carry
// the result); any other reason is refused with an error. A stop recorded
// in s already stands, since the first stop of a turn is the one the run
// reports, as in the executor: s is then left as it was, with no error.
func (s *State) stopAfterCall(reason StopReason, detail string) error {
	switch reason {
	case StopHook, StopError, StopPayloadTooLarge:
	default:
		return fmt.Errorf("toolrun: stop after call: a call's answer does not make a %q stop; only %q, %q and %q", reason, StopHook, StopError, StopPayloadTooLarge)
	}
	if s.StopReason != "" {
		return nil
	}
	s.StopReason, s.Detail, s.Budget = reason, detail, ""
	return nil
}
