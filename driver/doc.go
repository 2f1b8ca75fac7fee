// Package driver is the API for those who drive a toolrun run themselves,
// as package database/sql/driver is for those who implement a database: the
// temporal module's workflow, serve's executor, or a program's own driver
// that keeps a run's [toolrun.State] in a durable store, runs the calls of
// a turn on other machines and takes decisions from messages; and for
// those who implement a [toolrun.Store] that saves a step as what it
// changed ([StateAppender]). A program that runs tools with a
// [toolrun.Runner] does not need it.
//
// A driver steps a run with [Advance], which takes it as far as it goes
// without running a tool and returns the calls to run; it runs them, here
// with [ExecuteCall] or elsewhere on a runner resumed from the State (each
// result recorded with [SetResult]), in the order and groups a [CallQueue]
// hands out; then it calls Advance again, until the runner's Result is
// non-nil:
//
//	for {
//		calls, err := driver.Advance(ctx, r)
//		if err != nil || r.Result() != nil {
//			return r.Result(), err
//		}
//		q := driver.NewCallQueue(calls, 0)
//		for pc, ok := q.Start(); ok; pc, ok = q.Start() {
//			if _, err := driver.ExecuteCall(ctx, r, pc.Call.ID); err != nil {
//				return nil, err
//			}
//			q.Done(pc.Call.ID)
//		}
//	}
//
// A driver that keeps the State where size matters (a workflow's history)
// keeps its [Skeleton] there and the whole State in a [toolrun.Store], and
// puts the two together with [Merge]; a worker that runs one call gets
// [ForCall]. Everything that takes a State reads or copies it as plain
// data, with no runner, no client and no I/O, so a deterministic workflow
// may call it.
//
// A program that holds many runs of one client, tools and options at once
// (a server with runs awaiting approval by the thousand) builds their
// runners from one [Template], so they share one copy of that
// configuration.
//
// The functions here are the runner's own, not copies: a run driven
// through this package decides, runs and stops its calls by the rules
// [toolrun.Runner.Run] follows.
package driver
