// Package temporal runs toolrun's tool loop as a Temporal workflow, for runs
// that must outlive a process: a worker that dies mid-run is replaced and
// the run goes on where it was, no finished tool call runs again, and a run
// can wait days for a person's approval.
//
// It is a Go module of its own, github.com/toolrun/toolrun/temporal, so
// that toolrun's users who do not use Temporal never build it. Its package
// name is temporal, like the SDK's go.temporal.io/sdk/temporal; import one
// of them under another name when both are needed.
//
// # Design
//
// [Workflow] holds the run's [toolrun.State], plain data, and never sends a
// request or runs a tool itself. It drives the run with two activities,
// which a worker serves with the client, the tools and the
// [toolrun.Options] it was given ([NewActivities]):
//
//   - [Activities.Step] resumes a runner from the state and calls
//     [driver.Advance]: it decides the pending turn's calls
//     (Options.Policy and the tools' policies), answers
//     the denied and skipped ones, and once every call is answered, commits
//     the turn and sends one model request. It returns the new state and
//     the calls to run.
//   - [Activities.RunTool] runs one call with [driver.ExecuteCall]:
//     validated, panic-safe, with the tool's timeout and Options.AfterTool,
//     exactly as in process. The workflow writes each result into its
//     state with [driver.SetResult].
//
// The hooks and events of [toolrun.Options] are called in the worker that
// runs the activity, with the activity's context.
//
// # State
//
// With [toolrun.Options.Store] set on the workers, each step saves the
// whole state in the Store under a key of its own, and the workflow holds
// only that key and the state without its history (the claim-check
// pattern), so no payload grows with the conversation; [LoadState] returns
// the whole state of an [Outcome]. Without a Store, the workflow is the
// store: it holds the whole state in memory, a step is given the state
// without its history plus the history's length and digest, and its
// result carries only what the step added, which the workflow appends
// ([ApplyStep]); see "What a turn costs". A payload over
// [RunOptions.PayloadLimit] stops the run with
// [toolrun.StopPayloadTooLarge] rather than letting the server terminate
// it: without a Store, the whole state must fit, since the input of a
// continue-as-new and the Outcome carry it.
//
// # Values of any size
//
// A tool's result is cut to its MaxResultBytes on the worker, as in
// process. With a Store on the workers that keeps blobs ([BlobStore]:
// [github.com/toolrun/toolrun/filestore.Store] and sqlitestore's do), what is left of it over
// [RunOptions.ClaimThreshold] (16 KiB by default) goes through the Store
// as a claim check, never through the history: [Activities.RunTool] puts
// it in the Store and returns a mark, and the step that sends it to the
// model reads it back. So does a decision's edited input, reason or Skip
// result over the threshold, if the client is given the same Store
// ([ClientOptions].Store): [Decide] and [DecideBySignal] put it in the Store and
// send a mark; without one, a decision over [MaxDecisionBytes] is refused
// before it is sent ([ErrDecisionTooLarge]). A claim is deleted by the
// step after the last one that read it, and the claims left when an
// execution ends are deleted then (but those its Outcome's State still
// refers to, which [LoadState] reads); a claim missing when it is needed
// stops the run with [ErrClaimMissing]. The marks are plain text
// ("\x00toolrun-claim:<key>"): [Pending] and [StateQuery] show a mark where
// a value is in the Store. Workers older than the claim check read a mark
// as the value itself, so roll the claim check out as a new Worker
// Deployment Version (see below), or with every worker of the task queue
// on this release, or set RunOptions.ClaimThreshold to -1 until then.
//
// # Retries, crashes and shutdown
//
// A streamed response that fails after it began is retried within the
// step, per [toolrun.Options.StreamRetry], as in process. The anthropic
// client's own retries are off inside the activities; the step's retry
// policy ([RunOptions.ModelRetry]) retries instead, for up to
// [RunOptions.ModelRetryFor] (30 minutes), honouring the API's
// retry-after, and does not retry what would fail again (a bad request).
// Activities heartbeat while they run, with the progress a tool reports
// with [ReportProgress], so a worker that dies is noticed within
// [RunOptions.HeartbeatTimeout]. [NewWorker] gives the worker a stop
// timeout, so a SIGTERM lets running tools finish. A call of a tool that is
// [toolrun.ToolConfig.Idempotent] is then run again elsewhere; a call of
// any other tool is never attempted twice: the model is told it was
// interrupted ([toolrun.ErrInterrupted]), the same rule as toolrun's
// checkpoint stores.
//
// # Approvals
//
// A call deferred to a person (a Defer decision, [github.com/toolrun/toolrun/policy.RequireApproval])
// makes the workflow wait. The memo [PendingMemo] lists the calls awaiting
// a decision, and [Pending] reads it with DescribeWorkflowExecution, with
// no worker running ([PendingQuery] lists them too, but only a worker
// answers a query); [DecideUpdate] (or [Decide]) and [DecideSignal] (or
// [DecideBySignal]) carry one [Approval] per call. An update waits for a
// worker and reports a refusal; a signal is accepted by the server with no
// worker running and applied when one runs the workflow. A call's first
// decision is final: the update is rejected for a call that does not await
// approval or is decided already ([toolrun.ErrNotAwaitingApproval]), and such a signal
// is dropped. The search attributes ([StatusAttribute] and the others) make
// runs findable with a visibility query: [ListAwaitingApproval]. When an
// execution ends they say how, and never that it awaits approval: a
// cancelled run (which ends with Temporal's CanceledError, not an
// [Outcome]) shows "canceled" and an empty memo; see [Workflow].
//
// A user who answers the last calls and says something more at once
// sends the words with [AppendMessages] ([AppendUpdate]) before the
// decisions: the workflow adds them after the calls' results, and the
// model gets both in one request, as [toolrun.Runner.AppendMessages] does
// in process. The update is refused while no decision is awaited, a turn
// being in flight ([ErrNotAwaiting]), and beyond [MaxAppendBytes] a turn
// ([ErrMessagesTooLarge]); a refusal changes nothing. A client that runs
// tools of its own and declares them with each message sends them with
// [AppendMessagesWithTools] ([ClientTools]): they replace the client
// tools the run was given before, from the request after the decisions
// on, so that the model is offered that message's tools alone.
//
// # Long runs
//
// The workflow continues as new with its state once an execution's event
// history is past [RunOptions.ContinueAsNewBytes] (1 MiB) and
// [ContinueAsNewFactor] times the run's state, or when the server
// suggests it: a worker replaying an execution has at most that much to
// replay, and the continue-as-new events of a run, which carry the whole
// state when the workers have no Store, add at most half again to the
// bytes its turns write, however long it runs (see
// [RunOptions.ContinueAsNewBytes] for the bound's terms).
//
// # Use
//
// A worker:
//
//	c, err := client.Dial(client.Options{})
//	acts := temporal.NewActivities(anthropic.NewClient(), tools, &toolrun.Options{Store: store})
//	w := temporal.NewWorker(c, "agents", acts, worker.Options{})
//	err = w.Run(worker.InterruptCh())
//
// A starter:
//
//	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: "order-1234", TaskQueue: "agents"},
//		anthropic.BetaMessageNewParams{Model: anthropic.ModelClaudeSonnet5_5, MaxTokens: 1024, Messages: msgs}, nil)
//	var out temporal.Outcome
//	err = run.Get(ctx, &out)
//	fmt.Println(out.StopReason, out.Text)
//
// The directory examples/ holds both as whole programs. Without
// ANTHROPIC_API_KEY the worker's model is a scripted one, so they run
// offline against `temporal server start-dev`.
//
// # Stopping a worker
//
// A worker of [NewWorker] stopped (SIGTERM, a rolling restart) runs every
// task the server handed it before it exits, and lets its running tools
// finish (its stop timeout, [DefaultWorkerStopTimeout]), so that no call
// is answered "interrupted" unless it had started; no option is needed.
// The SDK's worker cancels its polls under way on a stop unless the
// server says it ends them itself (most servers do not: below), and a task
// the server had handed to a cancelled poll is lost until its heartbeat
// times out; [Register] (which NewWorker calls) switches every worker of
// worker.New to the SDK's drain instead: it stops polling, lets the polls
// under way end and runs what they bring. The SDK's stop gives up at the
// worker's stop timeout, and a poll it leaves open then brings a task the
// stopped worker drops, lost as if cancelled: so the stop timeout of a
// worker of this package is at least [MinWorkerStopTimeout], longer than
// a poll (NewWorker raises a shorter one; Register refuses a worker of
// worker.New with one, and with none, naming NewWorker). A stop returns
// as soon as its polls have ended and its tasks finished. On a server that
// ends a stopping worker's polls (server 1.32 and later, with the dynamic
// config frontend.enableCancelWorkerPollsOnShutdown on: off by default,
// and per namespace) that is at once: an idle worker stops in
// milliseconds, and no task is lost, since the server stops handing tasks
// to those polls before it ends them. On a server that does not (before
// 1.32, or with that setting off), a poll ends when a task comes or when
// the server answers it empty, at its long poll
// (matching.longPollExpirationInterval, a minute by default), so an idle
// worker takes up to that minute to stop. Cancelling the polls from the
// worker is what loses tasks, so no worker of this package does: turn the
// setting on, or where that cannot be done lower the long poll. Give the
// deployment's grace period a little more than the stop timeout.
//
// A data converter of your own (a codec that encrypts or compresses
// payloads) is given once, to the client (client.Options.DataConverter)
// and so to its workers: [Pending], [Follow] and the other functions that
// read what a run shows use the client's.
//
// # What the Store costs
//
// With a Store, each step writes the whole state once (a 2 MB
// conversation is 2 MB written per turn), under a key of its own,
// <workflow id>/<run id>/step-<activity id>.<attempt>, written once so
// that a retried or zombie attempt never overwrites another, and reads it
// only on a miss of the worker's state cache (below). A run keeps at most
// its last two states in the Store while it goes on: each step deletes
// the state its predecessor started from, and the earlier attempts of its
// own; the one before the last stays until the next step, since a step
// whose result is not recorded yet may be retried and read it again. The
// step that ends the run (the model's last answer, a limit, a hook's
// failure) deletes the state it started from too, so that an ended run
// keeps one state, its last, under [Outcome.Ref], until you delete it; a
// retry of that step whose state is gone takes the result its earlier
// attempt saved. A run that ends otherwise (a tool's AfterTool, a step
// that failed for good, a cancellation, the payload guard) keeps its last
// two. Without a Store nothing is written: the workflow holds the state.
// A call's activity times out at its tool's
// timeout plus 30 s, or 24 hours for a tool with none: give your tools a
// timeout.
//
// # What a turn costs
//
// BenchmarkCostPerTurn (in this module's tests) measures a turn against
// a dev server: worker CPU and history bytes per turn, at 10 and at 100
// turns a run, with a Store and without, for a run of one tool on one
// worker and for one of five tools (two calls a turn) on two workers.
// Where it last ran (a quiet two-core machine), worker CPU per turn at
// 100 turns was 0.91× (one worker) and 1.05× (two workers) that at 10
// turns without a Store, and 1.42× and 1.33× with one, whose steps write
// the whole state each turn; history bytes per turn at 100 turns were
// 0.98× to 1.05× those at 10, over every execution of a run (no run of
// that workload reached ContinueAsNewBytes; the module's tests check the
// bytes of runs that continue as new many times). BENCHMARKS.md has the
// figures.
// That is what those workloads measured, not a bound:
// what is left that grows with the conversation is small next to the
// rest of a turn there, and a run whose turns add more, or that runs
// longer, pays more of it. It is:
//
//   - the request, which carries the whole conversation and which the
//     worker encodes (only the messages that are new, on a cache hit);
//   - on a miss (a step on a worker that did not take the run's last
//     step: about half of them with two workers), decoding the whole
//     state, from the Store, or without one from the workflow, which
//     sends only what the worker does not hold when its cache is a few
//     steps behind;
//   - with a Store, writing the whole state each step;
//   - without a Store, the input of each continue-as-new and the
//     Outcome, which carry the whole state.
//
// A step neither copies the conversation through JSON nor compares it
// message by message (the runner's messages are never written into, so
// a message it kept is the same pointer), and the workflow task that
// takes a step's result appends the messages the step added rather than
// copying the history.
//
// Each worker keeps a state cache ([Activities.SetStateCacheRuns],
// [Activities.SetStateCacheBytes]): the runner of each run's last step on
// that worker, so that the run's next step there neither loads nor
// decodes nor resumes the whole state, and encodes for the request only
// the messages that are new. A step on another worker, after a restart
// or after a person's decision is a miss, and gets the state as follows;
// a hit is used only for exactly the state the workflow holds, so no run
// depends on it.
//
// With a Store, the workflow holds the state without its history and the
// key of the whole state; a miss loads it from the Store.
//
// Without a Store, the workflow holds the whole state in memory (from
// its input and, on a replay, from the steps' results). A step's input is
// the state without its history, the history's number of messages and a
// digest of it (the step before reported it: a SHA-256 chained over the
// steps' deltas); its result is the state with only the messages the
// step added after the history it was given ([StepResult.Base]; the whole
// history if it was replaced, by a compaction), which the workflow
// appends ([ApplyStep]). A worker whose cache holds the run at that
// digest goes on; one whose entry is older but of the same history (a
// person's decision since) resumes from the history it holds; any other
// miss asks the workflow with the query [HistoryQuery], on workers built
// with [NewWorker] (their client), naming the earlier history its cache
// holds, if any ([HistorySince]), and checks the answer's length and
// digest. A step that cannot get the history (activities registered
// otherwise, the SDK's test environment, a query that fails) fails with
// the error type toolrun.NeedHistory, and the workflow sends it once more
// with the whole state in its input. A query's answer is at most the
// whole state, which the payload guard keeps within
// [RunOptions.PayloadLimit] (1.5 MiB by default), well below the 4 MiB a
// server's gRPC answers take; a query needs a worker polling the workflow
// task queue, which the worker running the step is. Such steps run as
// [StepDeltaActivity]: a worker of a release without deltas has no
// activity of that name and never takes the state without its history
// for the whole state. A run started by an older release gets deltas
// from its next execution on (toolrun.step-deltas, a workflow.GetVersion
// change).
//
// # What a workflow task does
//
// The SDK's deadlock detector fails a workflow task whose code runs a
// second without blocking, which a loaded machine reaches with work a
// quiet one does in milliseconds. Between an execution's start and its
// end, the workflow's code takes values of a bounded size: a step's
// result (what the step added to the history), one call's result (within
// [RunOptions.PayloadLimit]), one decision (within [MaxDecisionBytes]).
// Values that arrive together in one task (a flood of signals, a turn's
// results) are taken in steps of 256 KiB, between which the workflow
// blocks for a moment and lets the task's other coroutines run, so that
// their number does not add up in one go. What is still converted whole
// in one task, without a Store, is the whole state: the execution's
// input, the input of its continue-as-new, the Outcome, and the input of
// a step whose worker could not get the history (toolrun.NeedHistory,
// above), each at most [RunOptions.PayloadLimit], converted by the SDK in
// one go; a query ([StateQuery], [HistoryQuery]) is answered outside the
// detector, but encodes up to the whole state too. With a Store, none of
// them carries the history. Continuing as new by the history's size
// ([RunOptions.ContinueAsNewBytes]) makes the first two rare in a long
// run. A worker of [NewWorker] gives a task
// [DefaultDeadlockDetectionTimeout] (5 s, not the SDK's second) before
// the detector fails it, so that converting PayloadLimit of JSON on a
// loaded machine is not taken for a deadlock. On a machine loaded enough
// that even that is too short, give the workers a Store or a lower
// PayloadLimit, or dial the workers' client with its DataConverter
// wrapped in the SDK's workflow.DataConverterWithoutDeadlockDetection,
// which stops the detector's clock while a payload is converted.
//
// # Search attributes
//
// Register the attributes once per namespace (temporal operator
// search-attribute create --name ToolrunStatus --type Keyword, and so on
// for ToolrunAwaitingApproval Bool, ToolrunModel Keyword, ToolrunTurns Int
// and ToolrunCostUSD Double; the dev server takes --search-attribute
// ToolrunStatus=Keyword …), or set [RunOptions].NoSearchAttributes. Then,
// with no worker running:
//
//	temporal workflow list --query 'ToolrunAwaitingApproval = true AND ExecutionStatus = "Running"'
//
// # Upgrading toolrun while runs wait
//
// A run waiting for approval may sleep for days in a workflow started by
// an older toolrun, and replays on the newer one when it wakes. The
// procedure:
//
//  1. Drain, always: build the workers with [NewWorker] and stop them
//     with SIGTERM. A SIGTERMed worker stops polling, lets its polls under
//     way end (up to the server's long-poll timeout, about a minute, on a
//     server that does not complete them on shutdown), runs every task
//     they brought, lets its running tools finish (the stop timeout,
//     [DefaultWorkerStopTimeout]), and exits: no task is lost to a
//     heartbeat timeout, and no call is answered "interrupted" unless it
//     started. Give the deployment's grace period (Kubernetes'
//     terminationGracePeriodSeconds) more than the stop timeout plus a
//     minute.
//  2. Deploy the new release as a new Worker Deployment Version: the
//     same deployment name, a new build id, worker.Options'
//     DeploymentOptions set with [Deployment], and the same tools. Start
//     its workers next to the old version's.
//  3. Make it current once its workers poll:
//     `temporal worker deployment set-current-version --deployment-name
//     agents --build-id v2`, or the client's
//     WorkerDeploymentClient().GetHandle("agents").SetCurrentVersion. New
//     runs start on it, and the runs in flight, being
//     [DefaultVersioningBehavior] (auto-upgrade), move to it at their next
//     workflow task: a run awaiting approval is finished by the new
//     workers once decided; a run mid-turn finishes its running calls on
//     the old workers and goes on on the new.
//  4. SIGTERM the old version's workers (step 1 drains them). With the
//     behavior pinned instead (DefaultVersioningBehavior
//     workflow.VersioningBehaviorPinned), keep them until `temporal worker
//     deployment describe-version` says the version is drained.
//
// Without worker versioning, a rolling restart of one task queue works
// too: old and new workers serve it meanwhile, which is safe because of
// the rules below. The Temporal dev server and servers 1.29 to 1.32
// support deployment versions with no dynamic config.
//
// What makes an upgrade safe is that the new workflow code replays the
// old histories. A change to the commands the workflow issues, or to
// their order (activities scheduled, timers, search attribute and memo
// upserts, continue-as-new), is guarded with workflow.GetVersion, the old
// path kept for histories that recorded it; changes inside the activities
// ([Activities.Step], [Activities.RunTool]) need no guard, but their
// input and output formats only grow fields, since old and new workers
// exchange them during an upgrade. Each such change records a golden
// history: a test that runs the new path against a dev server and calls
// recordHistory, run once with `go test -run TestX -update` and
// TEMPORAL_ADDRESS set, writes testdata/histories/<name>.json; commit it
// and keep the older ones, so that TestReplayGoldenHistories replays every
// release's histories and a change that would break a waiting run fails
// CI. TestUpgradeFromRecordedRelease builds the previous release's worker
// from its recorded tree (testdata/upgrade) and moves runs awaiting
// approval and runs mid-turn from it to the tree under test, as in steps
// 2 to 4; a release that changes the workflow records its own tree there
// for the next one. To check your own deployment, download a few
// histories (temporal workflow show --workflow-id … --output json) and
// replay them with worker.NewWorkflowReplayer before you roll out.
//
// # Tests
//
// The tests run the workflow in the SDK's test environment and against a
// real dev server that temporal/ci.sh builds and starts: a worker killed
// with SIGKILL while two tools run, a worker stopped with SIGTERM while a
// tool runs, approvals found by their search attributes, golden histories
// replayed, 50 workflows with a worker killed and no call run twice, a
// rolling restart of the workers of 200 workflows with no call answered
// "interrupted" that had not started, and an upgrade from the previous
// release's workers to this one's with runs waiting and mid-turn.
// Without a server those tests skip, saying "missing component: Temporal
// dev server"; with CI set they fail.
package temporal
