// Package toolrun runs Claude's tool-use loop for production code: it sends
// the conversation, runs the tools the model asks for, sends their results
// back, and repeats until the model answers without tools. It is built on
// the official client, github.com/anthropics/anthropic-sdk-go/v2, and adds
// what the client's own tool runner leaves out: no tool fails silently, no
// loop runs unbounded, and a person or a policy can step into any turn.
//
// # Tools
//
// [NewTool] builds a tool from a Go function; the input schema is inferred
// from its input type, and the model's input is validated against it before
// the function is called:
//
//	type WeatherIn struct {
//		City  string `json:"city" jsonschema:"the city name"`
//		Units string `json:"units,omitempty" jsonschema:"celsius or fahrenheit"`
//	}
//	weather := toolrun.NewTool("get_weather", "Current weather for a city",
//		func(ctx context.Context, in WeatherIn) (string, error) {
//			return "sunny, 21°C in " + in.City, nil
//		})
//
// [NewRawTool] takes an explicit schema and raw JSON input; any type that
// implements [Tool] works too. A tool returns a string, a value sent as JSON,
// or [Content] blocks ([Text], [Image], [PDF]) for multimodal results.
//
// # Running
//
// [New] takes a client, the request params and the tools; [Runner.Run] runs
// to the end:
//
//	r := toolrun.New(client, anthropic.BetaMessageNewParams{
//		Model:     anthropic.ModelClaudeSonnet5_5,
//		MaxTokens: 1024,
//		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Weather in Paris?"))},
//	}, []toolrun.Tool{weather}, nil)
//	res, err := r.Run(ctx)
//
// Every run ends with a [StopReason] in its [Result]: the model finished,
// the turn limit ([Options.MaxTurns], 25 by default), max_tokens, a refusal,
// the context window, a call awaiting approval, a hook, a budget, a
// malformed response, cancellation or an error. A run that stops short of
// the model's answer returns an error with the Result — a failure, a
// limit the caller set ([ErrMaxTurns], [ErrBudget]), or an answer cut off
// ([ErrIncomplete]: max_tokens, the context window, an unknown stop
// reason) — so a caller who checks only err cannot miss it; a refusal and
// awaiting approval (a suspension) are not errors.
//
// To drive the loop turn by turn, range over [Runner.Turns] or call
// [Runner.Next]. Each [Turn] is the model's response before the runner acts
// on it; in the loop body the caller may read and change the history
// ([Runner.Messages], [Runner.SetMessages], [Runner.AppendMessages],
// [Runner.RetryTurn]). Messages the body appends follow the turn's response
// and tool results; when the body replaced the history (SetMessages) or
// retried the turn, the runner does not append that turn's response and
// tool results itself, as the official tool runners do.
//
// # Failures
//
// A tool's failure reaches the model as an is_error tool_result, and the
// operator through the [Options.Logger] (slog.Default() if nil) with the
// tool's name, tool_use id, turn, duration and error:
//
//   - input that breaks the schema: a [*ValidationError] that names each
//     failing field by JSON pointer, what was expected and what was given;
//     the tool is not called;
//   - an error returned by the tool: its text;
//   - a panic: recovered, with the stack in the log ([*PanicError]); the
//     process keeps running;
//   - an unknown tool name: [ErrUnknownTool], with the list of tools;
//   - a timeout: [*TimeoutError] ([Timeouts.Tool], [ToolConfig.Timeout]).
//
// [Options.AfterTool] sees every result before it is sent and may replace it
// or end the run.
//
// # Approval and policy
//
// Before a call runs, [Options].Policy and the tool's [ToolConfig].Policy
// decide it, in one order written once (see [Policy]; package [github.com/toolrun/toolrun/policy] builds
// the common ones): allow (possibly with other input), deny with a reason the
// model receives, skip with a result the caller supplies, or defer to a
// person. Deny rules from every source win; a person's decision and a
// remembered Always approval only answer a deferral. A deferred call
// suspends the run with [StopAwaitingApproval]; [Runner.State] is plain
// data that round-trips through JSON (signed with [Options.StateKey]), and
// [Resume] continues it — in another process if need be — once
// [Runner.Decide] has the decisions. No call that already ran runs again.
// A decision is recorded in the State and stands in every runner resumed
// from it: the policies are asked once per call, and [ToolDecided] is sent
// once. A person's answer to a deferral is taken by the rules once more, so
// that a deny rule still wins over it.
//
// # Hooks
//
// Hooks are function fields of [Options] called, when non-nil, at fixed
// points of a turn. Each that may change the run has one job:
//
//   - BeforeRequest may change the params of one request. It is given a
//     copy of the history, which shares nothing with the run, and copies of
//     the lists of system blocks and tools; the tool definitions those
//     hold are shared with other runners, so replace an element rather
//     than write into what it points to. Its edits are sent as made, on a
//     thread or not: a changed model, system prompt or tool list, or an
//     edited message, starts a new thread with the whole history.
//   - AfterResponse may end the run when a response arrives;
//   - Policy and each tool's [ToolConfig.Policy] decide the calls (see
//     [Policy] for the order); policy.DenyTools and policy.AllowOnly
//     deny by name and policy.Chain combines several;
//   - AfterTool may change a call's result before it is sent: for calls
//     that ran, failed, were denied, skipped or not run.
//
// OnEvent only observes. The policies are called for the calls of a turn
// one at a time, in order; AfterTool is called as each call finishes, so
// it may be called concurrently for the calls of one turn; OnEvent is
// never called concurrently with itself. A panic in any hook is recovered:
// the run stops with a *[HookError] and the stack is logged.
//
// # How a turn flows
//
// A run is one state machine. The engine looks at the run's [State] and
// says what happens next: hand out a turn, run these calls, or stopped.
// Every driver is a short loop over it: [Runner.Next], [Runner.Turns],
// [Runner.Run], [Runner.Events], and, for runs whose calls go elsewhere
// (the Temporal module, a program's own driver), Advance with ExecuteCall
// of package [github.com/toolrun/toolrun/driver]. The calls go to one
// executor, which starts them as a call queue allows (driver.CallQueue):
// in the groups driver.Batches gives (an exclusive tool's call alone), within [Options].MaxParallelTools and each tool's
// MaxParallel, none after a stop; the Temporal workflow schedules by the
// same queue. The executor journals
// each as started before it runs, and answers it. A call's life is one
// phase: new, decided, started, answered. The phase is in the State, so a
// call is decided once, by whichever runner meets it new; a person's
// answer to a deferral puts it back to new, for the rules to take that
// answer once (see [Policy]). Before a turn's calls start, one
// rule says whether they may: not if the run is stopped, the caller took
// the turn over, the response is final (max_tokens, refusal) or a limit
// holds the turn back. The engine and ExecuteCall both ask it, so no
// driver runs a call another would not.
//
//	drivers:  Run · Turns · Next · Events · Advance/ExecuteCall
//	             │ each a short loop over
//	             ▼
//	engine:   step(State) → hand out a turn │ run these calls │ stopped
//	             │ calls to run
//	             ▼
//	executor: one call queue (groups, parallel bounds, no start after a stop)
//	             │ results
//	             ▼
//	state:    State (plain data, JSON, optionally signed) — the only copy
//
// # Streaming
//
// With [Options.Stream], responses arrive as deltas; [Runner.Events] yields
// every event of the run on the caller's goroutine, with back-pressure, and
// [Runner.Run] streams too, without handing out the events. A stream that
// fails midway, or sends nothing for [Timeouts.StreamIdle], is
// requested again ([Options.StreamRetry]) and nothing from it reaches the
// history; no call starts before its response is whole. A turn's attempts
// share one idle bound, [Timeouts.StreamIdleTotal]: the silence that ended
// each failed attempt and the waits before each retry count against it,
// and a retry gets what is left. Once it is used up the turn fails with a
// [*TimeoutError] whose Total is set, so a model that stalls on every
// attempt ends the turn within about two minutes by default, as a response
// that is not streamed does ([Timeouts.Request]), while a stream that keeps
// sending may take as long as its answer needs.
//
// # Context and cost
//
// Requests use prompt caching by default ([Options.NoCache],
// [Options.CacheTTL]). [Options.Budget] stops a run before any request
// (compaction's and retries' included) or tool calls that could pass a
// token, cost or tool-call bound ([StopBudget]); its wall time is a
// deadline on what is in flight. A cost budget for a model with no known
// price is an error, never a silent $0.
// [Options.Compaction] and [Runner.CompactBeforeNextTurn] compact a long
// history between turns, on the server or client-side. Runs go on a
// message thread by default, so a request sends only what is new, with a
// fallback to the whole history where the platform has no threads
// ([Options.NoThread]). Oversized tool results reach the model
// truncated ([Options.MaxResultBytes]).
//
// # Message threads
//
// Unless [Options.NoThread], a run goes on a message thread (beta): the
// API keeps the history, and each request sends only the messages added
// since the last one, so its size stays flat instead of growing with the
// history, for no more client CPU per turn and, with prompt caching, the
// same billed tokens. The runner still holds the whole history (for
// State, hooks, edits and compaction) and encodes only what is new. A
// request continues the thread only if what it would send begins with
// exactly what the thread holds, with the model, system prompt, other
// params and tools the thread was created with; anything else (an edit by
// the caller, a hook or compaction, another model, a refusal, a failed
// request, a resumed run, a run that stopped and goes on) starts a new
// thread, whose first request carries the whole history. The API stores
// the thread.
//
// A run whose model names Bedrock ("anthropic.…", an ARN) or Vertex
// ("…@version") starts without a thread; a request the API cannot take on
// a thread (thread_unsupported_request) is sent again with the whole
// history, as is every later one; and when a run's first thread request
// fails with a 400 while the same request without the thread succeeds,
// the rest of the run goes without one, with one Warn record naming the
// error. Set NoThread for a platform known to have no threads, or to keep
// the API from storing the conversation.
//
// # Budgets
//
// [Budget] stops a run with [StopBudget] before the step that could exceed
// a bound: before a request whose input (estimated) and output (at most
// max_tokens) could pass a token or cost bound, and before the tool calls
// that would pass ToolCalls.
//
// Input tokens count every input token of a request: uncached, written to
// the cache and read from it. The next request's input is bounded from
// above by the last request's input plus one token per byte added to the
// history since, so the bound holds for any script. A request is counted
// in full, at a token a byte of its JSON, when the last request's count
// does not bound what it repeats: the first request of a runner, the first
// after [Runner.SetMessages] or a compaction, and every request when a
// BeforeRequest hook is set. A streamed response retried after a failure
// mid-stream is checked again before each retry, its input bounded by
// what the failed attempt reported.
//
// Every attempt the API reports usage for is counted in [Result.Usage] and
// [Result.CostUSD], and against the budget. A streamed attempt that failed
// after its message_start counts the input that event reported; its
// output, reported only near the end, counts against the budget as its
// whole output bound (max_tokens, and a compaction's summary on the way),
// kept apart in Usage.UnreportedOutputTokens and priced by the cost budget
// at the output rate of the request it checks, not in Result.CostUSD. An
// attempt that failed before its message_start counts nothing.
//
// A request that the API may compact on its way (a compact_20260112 edit in
// the caller's params.ContextManagement) is billed for the compaction as
// well as the turn: the check counts its input and its max_tokens twice. A
// request whose server tools loop may compact more than once; the check
// counts one compaction.
//
// The cost of the next request is bounded with its input priced at the
// dearest rate it can be billed at: a cache write at the longest TTL of the
// request's breakpoints, else the plain input rate. A response is priced by
// the model it names, or, when that one has no price (a gateway that
// renames models), by its request's, with a Warn. A cost budget for a model
// with no price (see [github.com/toolrun/toolrun/pricing.Default]) is an error at the first request,
// never a silent $0.
//
// WallTime is a deadline on everything in flight, counted from the
// runner's first step and never reset: in this runner, a run stopped by it
// stays stopped. A runner made from its [State] ([Resume], [Open]), in
// this process or another, counts from its own first step, and the run
// goes on.
//
// # Durable runs
//
// With [Options.Store] (a [github.com/toolrun/toolrun/filestore.Store],
// sqlitestore's, or any [Store]) the run's state is saved at every step, each call journaled before it runs; [Open] resumes it
// after a crash without running a finished call again, or a started one
// unless its tool is [ToolConfig.Idempotent]. Each save is a
// compare-and-swap, so of two processes that resume one run only one goes
// on; the other stops with [ErrRunBusy]. The state is saved after each
// response, before each call starts (journaled as started), after it
// finishes, after each turn is committed and when the run stops.
//
// With [Options.StateKey], every [State] the runner exports or saves is
// signed (HMAC-SHA256 over its version and the SHA-256 of each part's
// canonical JSON, RunID included, so that a save signs only the parts a
// step changed), and
// [Resume] and [Open] refuse one whose signature does not match
// ([ErrStateSignature]). Without it, a state is trusted as it is: whoever
// can write it can change what a resumed run does. A signature shows that
// the runner wrote a state and that it is whole, not that it is the
// latest: whoever can write the store can put back an earlier state of the
// same run (a restored backup does the same), and the run goes on from
// there, which can run again a call that ran after that save. Guard write
// access to the store, and restore a backup only of a run that is over.
//
// Many runs of one client, tools and options are best made by one
// [github.com/toolrun/toolrun/driver.Template], whose runners share that configuration: a run held for
// approval then costs little more than its State, and less still when only
// its State is kept, in a store.
//
// # Events
//
// Logging, [Options.OnEvent] and [Runner.Events] all see the same typed
// [Event] values: request sent (a compaction's too, and each retry of a
// stream), response received, tool decided, started and finished, turn
// finished, history compacted, run stopped; and, while a streamed response
// arrives, deltas of text, thinking and tool input.
//
// # Debugging
//
// The environment variable ANTHROPIC_LOG turns a runner's
// logging up: "info" logs each request, response, tool call and stop at
// Info, and "debug" adds the request and response bodies. If
// [Options].Logger is nil, ANTHROPIC_LOG also makes the runner log to a
// text handler on stderr at that level instead of slog.Default().
//
// # Logging
//
// [Options].Logger receives each tool failure at Error with its tool,
// tool_use id, turn, duration, error and, for a panic, the stack; a denial
// or skip at Warn, once, where it was decided; limit stops at Warn; the
// routine records (request sent, response received, tool call finished,
// run stopped) at Debug, or at Info with ANTHROPIC_LOG.
//
// Every record is redacted first, each credential in it replaced by
// "[REDACTED]": the values of Authorization, Proxy-Authorization (whose
// scheme is kept), Cookie and Set-Cookie headers; of fields whose names end
// in api_key, access_key, secret_key, private_key, secret, password,
// passwd, passphrase, token, credential(s) or auth, in text, HTTP dumps,
// JSON and query strings; keys and tokens known by their shape (sk-ant-…,
// other vendors' keys, JSON Web Tokens, bearer and basic credentials); a
// URL's password; a PEM private key's body; and the values (8 bytes or
// more) of environment variables whose names say they hold secrets
// (ANTHROPIC_API_KEY, any name with SECRET, PASSWORD, TOKEN, APIKEY,
// CREDENTIAL, AUTH, COOKIE, SESSION, PRIVATE or PAT as a '_'-separated
// word, or KEY as its last). These are found in JSON strings too, however
// often escaped, and valid JSON stays valid. Redaction is a safety net: it
// cannot know a secret of the application's own. Package transcript and
// package mcptool redact the same way.
// Package [github.com/toolrun/toolrun/transcript] records a run as JSON
// Lines, replays it offline against the tools, and renders it as an HTML
// report.
//
// # Testing
//
// Package [github.com/toolrun/toolrun/toolruntest] is a fake Messages API
// server: point the real client at it and script the model's replies.
package toolrun
