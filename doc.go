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
// limit the caller set ([ErrMaxTurns], [ErrBudget]), or an answer cut
// short ([ErrMaxTokens], [ErrContextWindow], both [ErrIncomplete]) — so a
// caller who checks only err cannot miss it; a refusal is the model's
// answer, and awaiting approval is a suspension, not an error.
//
// To drive the loop turn by turn, range over [Runner.Turns] or call
// [Runner.Next]. Each [Turn] is the model's response before the runner acts
// on it; in the loop body the caller may read and change the history
// ([Runner.Messages], [Runner.SetMessages], [Runner.AppendMessages],
// [Runner.RetryTurn]). When the body changed the history, the runner does not
// append that turn's response and tool results itself, as the official tool
// runners do.
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
// decide it, in one order written once (see [Policy]; [DenyTools],
// [AllowOnly] and [Chain] build the common ones): allow (possibly with other input), deny with a reason the
// model receives, skip with a result the caller supplies, or defer to a
// person. Deny rules from every source win; a person's decision and a
// remembered Always approval only answer a deferral. A deferred call
// suspends the run with [StopAwaitingApproval]; [Runner.State] is plain
// data that round-trips through JSON (signed with [Options.StateKey]), and
// [Resume] continues it — in another process if need be — once
// [Runner.Decide] has the decisions. No call that already ran runs again.
//
// # How a turn flows
//
// A run is one state machine. The engine looks at the run's [State] and
// says what happens next: hand out a turn, run these calls, or stopped.
// Every driver is a short loop over it: [Runner.Next], [Runner.Turns],
// [Runner.Run], [Runner.Events], and [Runner.Advance] with
// [Runner.ExecuteCall] for runs whose calls go elsewhere (the Temporal
// module). The calls go to one executor, a bounded errgroup that runs them
// in the groups [Batches] gives (an exclusive tool's call alone), journals
// each as started before it runs, and answers it. A call's life is one
// phase: new, decided, started, answered. Before a turn's calls start, one
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
//	executor: one bounded errgroup; batches from Batches
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
// history; no call starts before its response is whole.
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
// # Durable runs
//
// With [Options.Store] (a [FileStore], or any [Store]) the run's state is
// saved at every step, each call journaled before it runs; [Open] resumes it
// after a crash without running a finished call again, or a started one
// unless its tool is [ToolConfig.Idempotent]. Each save is a
// compare-and-swap, so of two processes that resume one run only one goes
// on; the other stops with [ErrRunBusy].
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
// Info, and "debug" adds the request and response bodies; every record is
// redacted first (see [Options].Logger for what is removed), so keys and
// tokens never reach the log.
// Package [github.com/toolrun/toolrun/transcript] records a run as JSON
// Lines, replays it offline against the tools, and renders it as an HTML
// report.
//
// # Testing
//
// Package [github.com/toolrun/toolrun/toolruntest] is a fake Messages API
// server: point the real client at it and script the model's replies.
package toolrun
