// Package toolrunotel records the runs of a [toolrun.Runner] as
// OpenTelemetry spans and metrics, in the GenAI semantic conventions
// (go.opentelemetry.io/otel/semconv/v1.41.0). It is one more observer of the
// runner's [toolrun.Event] stream: plug an [Observer] into
// [toolrun.Options.OnEvent].
//
//	client := anthropic.NewClient(toolrunotel.ClientOptions()...)
//	obs := toolrunotel.New(toolrunotel.Options{AgentName: "weather-bot"})
//	r := toolrun.New(client, params, tools, &toolrun.Options{OnEvent: obs.Observe})
//	res, err := r.Run(ctx)
//
// The package uses only the OpenTelemetry API; the application chooses the
// SDK and exporters, and [Options] takes its providers (the global ones if
// nil). It is a module of its own, github.com/toolrun/toolrun/toolrunotel,
// so programs that do not import it never build OpenTelemetry beyond what
// the anthropic client brings.
//
// # Spans
//
// Each run is one span, with a child span for each model request and one
// for each tool call:
//
//   - "invoke_agent" (or "invoke_agent {AgentName}"), kind internal, a child
//     of the span in the context of the run's first event: gen_ai.operation.name
//     invoke_agent, gen_ai.provider.name anthropic, gen_ai.agent.name,
//     gen_ai.request.model of its first request; when it ends, the token
//     counts of its responses (as on the chat spans) and toolrun.stop_reason,
//     plus toolrun.pending_calls for a run awaiting approval. A run that
//     stops with [toolrun.StopError] has an error status, an exception event
//     and error.type: the request's error type ("api_error", "529", ...),
//     "hook" for a hook's error, or "_OTHER". A cancelled run has no status.
//   - "chat {model}", kind client, from [toolrun.RequestSent] to
//     [toolrun.ResponseReceived], the client's retries included:
//     gen_ai.operation.name chat, gen_ai.provider.name, gen_ai.request.model,
//     gen_ai.request.max_tokens, gen_ai.request.stream, toolrun.turn,
//     toolrun.compaction (true for a compaction's request, which is not a
//     turn's: its toolrun.turn is the turn it comes before),
//     gen_ai.response.id, gen_ai.response.model,
//     gen_ai.response.finish_reasons (the stop_reason),
//     gen_ai.usage.input_tokens, gen_ai.usage.output_tokens,
//     gen_ai.usage.cache_read.input_tokens,
//     gen_ai.usage.cache_creation.input_tokens, and, for a streamed
//     response, gen_ai.response.time_to_first_chunk and a
//     toolrun.stream_retried event for each attempt streamed again (a
//     [toolrun.RequestSent] with Attempt above 1). As the
//     conventions define it, gen_ai.usage.input_tokens counts the tokens read
//     from and written to the cache too, which the API's input_tokens
//     leaves out. The token counts are those billed: a compaction's
//     (usage.iterations of type "compaction") are added to the top-level
//     usage, which leaves them out; and a streamed request's failed
//     attempts are added to the chat span of the request (and to the
//     run span), as their [toolrun.TurnError] reports them (its Usage,
//     carried by the RequestSent.Err of the retry, or by the run's error
//     when the attempts are spent), so that the spans add up to
//     [toolrun.Result.Usage]. A failed attempt's output is what the API
//     reported of it; the bound on what it did not report
//     ([toolrun.Usage].UnreportedOutputTokens) is the attribute
//     toolrun.usage.unreported_output_tokens, set when not zero. One
//     failed attempt is left out: the last one of a request whose retry
//     the budget refused (the run stops with [toolrun.StopBudget], and
//     no event carries that attempt's error). A request that fails has
//     an error status.
//   - "execute_tool {tool}", kind internal, for every call answered, from
//     [toolrun.ToolStarted] to [toolrun.ToolFinished]: gen_ai.operation.name
//     execute_tool, gen_ai.tool.name, gen_ai.tool.call.id, gen_ai.tool.type
//     function, toolrun.turn, toolrun.decision and toolrun.decided_by (when
//     the call was decided), and toolrun.tool.ran. A call answered without
//     running (denied, skipped, unknown tool, invalid input, not run) has a
//     span too, of no length, with toolrun.tool.ran false, so that every
//     tool_result the model receives has a span. A call deferred to a person
//     has none until it is answered, in the run span of the run that
//     answers it.
//
// A tool span has an error status exactly when the model received an
// is_error result, with error.type one of "panic", "timeout",
// "invalid_input", "unknown_tool", "denied", "not_run", "interrupted" or
// "tool_error" (the tool's own error, or a result a hook made an error), and
// an exception event with the error when there is one. A result that a hook
// or a Skip decision made an error, without an error value, has the status
// description "result marked as error": never the result's text.
//
// Tool inputs and results and the messages are not recorded: they may hold
// anything. An error's message (a tool's, a hook's, a failed request's),
// which may quote any of them, is recorded in a status and an exception
// event only after the redaction the runner's log gets (see
// [toolrun.Options].Logger); so is the name of a tool the model called,
// which for an unknown tool is whatever the model wrote. That redaction is a
// safety net: it cannot recognise a secret of the application's own, so a
// tool that puts one in its error puts it in the trace.
//
// # One chat span per request: the client's own spans are off
//
// The anthropic client emits OpenTelemetry spans of its own whenever a
// global tracer provider is registered: an "anthropic.messages.create"
// span, kind client, gen_ai.operation.name chat, for every call. Next to
// an Observer that is two chat spans for each request. Build the runner's
// client with [ClientOptions], which turns the client's spans off
// (option.WithoutOpenTelemetry), and each request has one chat span, this
// package's, under the run span.
//
// This package turns the client's spans off rather than build on them
// because they describe another unit of work. The client opens one span
// per call it is given, and a request of the runner can be several calls:
// a stream that broke and is streamed again, a thread the server forgot
// and the request sent again without it. Those would be several chat
// spans for one request, each with a part of the usage, where a chat span
// here covers the request whole, with the tokens billed for all its
// attempts, the turn, and whether it was a compaction's. The client's
// spans also cannot be children of the run span: the runner hands the
// client its caller's context, which observers do not change, so they
// would hang from the caller's span beside the run. The client's spans
// name the cache writes gen_ai.usage.cache_write.input_tokens, where the
// conventions say gen_ai.usage.cache_creation.input_tokens, as here.
//
// With the client's spans off, the client sends no trace-context headers
// either: the API's own traces are not linked to the run's.
//
// # Metrics
//
//   - gen_ai.client.token.usage ({token}), for each response, once with
//     gen_ai.token.type input and once output, its request's failed
//     attempts included (and for a request whose attempts were all
//     spent, what they reported);
//   - gen_ai.client.operation.duration (s), for each model request that got
//     a response or failed, with error.type if it failed (a request the
//     caller cancelled is not recorded);
//   - gen_ai.client.operation.time_to_first_chunk (s), for each streamed
//     response;
//   - gen_ai.execute_tool.duration (s, [ToolDurationName]), for each call that
//     ran to a result, with gen_ai.operation.name execute_tool,
//     gen_ai.tool.name, and error.type if it failed.
//
// The model metrics have gen_ai.operation.name chat, gen_ai.provider.name
// anthropic and gen_ai.request.model, and all but the time to first chunk
// gen_ai.response.model. The histograms have the bucket boundaries the
// conventions advise.
package toolrunotel
