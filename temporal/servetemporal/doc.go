// Package servetemporal runs the runs of a toolrun server (package
// github.com/toolrun/toolrun/serve, "toolrun serve --temporal") as
// Temporal workflows: each thread is an execution of the temporal
// module's [temporal.Workflow], run by the workers of a task queue, which
// may be on other machines, or not running at all.
//
// [Executor] is the server's [serve.Executor]. A thread is a workflow
// whose id is the thread's id (after [Config.WorkflowIDPrefix]). A run
// that answers calls awaiting a person follows the workflow that waits
// for them; a run that brings a new user message once the thread's last
// workflow has ended starts the next one, with the same id, from the
// previous one's final state and the new message. The run's events are
// read from the workflow's history with [temporal.Follow], so they need
// no worker, and the server turns them into AG-UI events as it does a
// run in process. The calls awaiting a person are listed from the
// workflows' search attributes and memo ([temporal.ListAwaitingApproval],
// [temporal.Pending]) and decided with [temporal.DecideBySignal]: all
// three with no worker running.
//
//	c, _ := client.Dial(client.Options{HostPort: "127.0.0.1:7233"})
//	ex := servetemporal.New(servetemporal.Config{Client: c, TaskQueue: "toolrun"})
//	h, err := serve.New(ctx, serve.Config{Client: model, Params: params, DB: db, Executor: ex})
//
// The workers run [temporal.NewWorker] on the same task queue with the
// server's tools and options (approval policy included), and activities
// that defer client tools ([temporal.Activities.DeferClientTools]): the
// workers decide the calls, the server records and sends a person's
// decisions and a client's results. The tools a client declares join its
// thread's run with [toolrun.Runner.AddTools], so that the workflow's
// State carries their definitions to every worker; a call of one waits
// as a call awaiting approval does, and the client's result is sent as a
// decision (a Skip decision).
//
// The server and a worker may be one process ("toolrun serve --temporal"),
// killed at any point. What the workflow does meanwhile is in its history,
// and the thread's cursor in the server's database says how far the
// server read it: when the server starts again it goes on with each run
// the kill cut ([serve.ExecutorRun].Reattach), following the workflow from
// the cursor, so that a client that reconnects to the run (GET
// /runs/{run}/events with Last-Event-ID) reads its results, its answer and
// its end, whether the workflow still runs or has ended. A client that
// asks the thread again instead, with the history it has and nothing new
// (as an AG-UI client does), is sent a MESSAGES_SNAPSHOT of the
// conversation when its history lacks the thread's last answer. A
// workflow whose end no run read (its run could not go on) is followed by
// the thread's next run. Nothing runs twice: a tool call the kill cut is
// answered "interrupted" by the workflow unless its tool is idempotent.
//
// A client's history that leaves the thread's at an earlier message (an
// edit, a regenerate: [serve.ExecutorRun].Branch) stops the thread's
// workflow if it runs, and starts the next one from the conversation
// before the changed message, with the client's messages from there on;
// the decision records stay in the server's database.
package servetemporal
