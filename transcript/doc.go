// Package transcript records runs of [github.com/toolrun/toolrun] as JSON
// Lines, replays a recorded run offline against real tools, and renders a
// recorded run as a self-contained HTML report.
//
// # Recording
//
// A [Recorder] is one more observer of the run's events: pass its Observe
// method as [toolrun.Options].OnEvent. It writes each request and response
// body, each decision, each tool call with its input, output, error, stack
// and duration, each turn's usage and the run's stop, with timestamps, as the
// run goes. Every line is written with one Write call and flushed, so a
// process that crashes or is killed loses nothing already written:
//
//	f, err := os.Create("run.jsonl")
//	if err != nil {
//		return err
//	}
//	defer f.Close()
//	rec := transcript.NewRecorder(f, &transcript.RecorderOptions{Meta: map[string]string{"name": "nightly report"}})
//	r := toolrun.New(client, params, tools, &toolrun.Options{OnEvent: rec.Observe})
//	res, err := r.Run(ctx)
//	if err := rec.Err(); err != nil {
//		log.Printf("the transcript is incomplete: %v", err)
//	}
//
// Secrets are redacted before anything is written: every string goes
// through the redaction a runner's log gets (API keys and tokens,
// Authorization, Cookie and X-Api-Key header values, fields named like
// secrets, the values of secret environment variables such as
// ANTHROPIC_API_KEY; see [toolrun.Options].Logger) and then
// [RecorderOptions].Redact, if set. The client's own headers are never
// recorded.
//
// # Reading, replaying, viewing
//
// [Read] parses a transcript, tolerating a last line cut short by a crash.
// [Replay] runs the recorded run again with the given tools against its
// recorded model turns, served in-process by a
// [github.com/toolrun/toolrun/toolruntest] server, and reports each tool
// call whose result differs from the recording. [WriteHTML] renders a
// report: a timeline of turns, tool calls and their decisions, with each
// wait for a person drawn as its own segment; failures with their stacks;
// tokens per turn; the decision trail (every decision of a rule or a
// person: when, who, the call, the decision, its reason and any edited
// input); and the conversation. The toolrun command runs these as
// "toolrun replay --workdir ./work run.jsonl" (with the tools it is given;
// it starts none the transcript names unless asked with
// --tools-from-transcript) and "toolrun view run.jsonl -o report.html"
// ([ReplayFile], [ViewFile]).
//
// # Format
//
// This is version 1 of the format "toolrun.transcript". A transcript is
// UTF-8 text, one JSON object per line, each line ending with "\n". Every
// object has a "type" and a "time" (RFC 3339 with nanoseconds, UTC); all but
// the header have a "turn", counting from 1, which is left out when it is 0
// (a run that stopped before its first response). Fields that are zero,
// false or empty are left out. The first line is the header:
//
//	{"type":"header","time":"…","format":"toolrun.transcript","version":1,"meta":{"name":"…"}}
//
// The lines after it, one per event, as the events happen:
//
//   - "request": a request went out. "body" is the request's params as sent,
//     the JSON the API receives (model, max_tokens, system, messages, tools,
//     …) without "stream"; "streamed" is true if the response was streamed;
//     "betas" lists the beta headers; "compaction" is true for the request
//     of a compaction, which is not a turn's (its turn is the one it comes
//     before).
//   - "response": a response arrived whole. "body" is the API's message
//     object (id, model, content, stop_reason, usage, …); "duration_ms" is
//     the time since its request, retries included; "compaction" is true
//     for the response to a compaction's request.
//   - "decision": a tool call was decided. "tool_use_id", "tool" and
//     "input" name the call; "decision" is {"kind", "reason", "input"
//     (input that replaced the model's), "result" (a skip's content),
//     "always", "who", "at"}, of kind "allow", "deny", "skip" or "defer";
//     "by" is who decided: "policy", "approval", "always" or "default" (an
//     older transcript may say "options" for Options.Policy). For a
//     person's decision ("by": "approval"), "who" names the person and
//     "at" is when they decided (RFC 3339), as the caller of Decide gave
//     them ([toolrun.Decision].Who and At; "toolrun serve" gives the
//     token's or the inbox session's name); the line's own "time" is when
//     the run took the decision up, which for a person is when the run
//     went on. Either is left out when unknown. A call rejected before it
//     could be decided (an unknown tool, invalid input) has no decision
//     line.
//   - "tool_started": a call started to run (tool_use_id, tool, input).
//   - "tool_finished": a call has its result, after any AfterTool hook:
//     "output" is the tool_result's content blocks, "is_error" whether it
//     is sent as an error, "error" why it failed, "stack" the stack of a
//     tool that panicked, "ran" whether the tool ran, "duration_ms" how
//     long it ran, and "truncated" whether the model received the output
//     cut short to the tool's result limit (the output recorded is whole).
//   - "turn_finished": a turn was committed to the history; "usage" is its
//     tokens ({"input_tokens","output_tokens","cache_creation_input_tokens",
//     "cache_read_input_tokens"}).
//   - "stream_retried": a streamed response failed part way and is asked
//     for again: "attempt" (from 2), "error", "delay_ms", "discarded",
//     the ids of the calls of the failed response whose results were
//     dropped, and "usage", what the failed attempt reported it used
//     ([toolrun.TurnError].Usage; absent if it reported nothing), which
//     the run's usage counts and no response line holds.
//   - "compacted": the history was compacted between turns: "summary" is
//     the summary that replaced it, "before" and "after" count its
//     messages, "client_side" says the runner summarised it with a request
//     of its own, and "usage" is what the compaction cost.
//   - "run_stopped": the run stopped. "stop_reason" is a
//     [toolrun.StopReason], "detail" says more, "error" is the error for
//     "error" and "canceled", "usage" is the run's total, and "turns",
//     "tool_calls", "tool_failures" and "tool_denials" (the calls denied,
//     which are no failures) are its counters. A run that is
//     resumed and stops again writes another.
//   - "event": an event this version does not record in full; "event" is
//     its Go type.
//
// A transcript without a "run_stopped" line is of a run that was killed,
// crashed, or is still going. Readers must ignore fields and line types they
// do not know: a new field or a new line type keeps the version; a change of
// a field's meaning, or a field removed, makes a new version, which [Read]
// refuses with [ErrVersion] until this package learns it.
package transcript
