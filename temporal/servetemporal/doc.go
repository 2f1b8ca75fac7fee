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
// decision ([toolrun.SkipCall]).
package servetemporal
