// Package toolruntest provides a fake Anthropic Messages API for tests, in
// the manner of [net/http/httptest].
//
// A [Server] listens on loopback and answers POST /v1/messages the way the
// real API does: with a JSON message, or with server-sent events when the
// request asks for a stream, byte for byte in the API's wire format. Tests
// talk to it through the real SDK client that [Server.Client] returns, so
// what they exercise is the code that runs in production:
//
//	func TestWeather(t *testing.T) {
//		s := toolruntest.New(t, toolruntest.Script(
//			toolruntest.Message(toolruntest.ToolUse("toolu_01", "get_weather", map[string]string{"city": "Paris"})),
//			toolruntest.Message(toolruntest.Text("It is sunny in Paris.")),
//		))
//		client := s.Client()
//		// ... run the code under test with client ...
//	}
//
// [New] is the one constructor. Given a test, it closes the server when the
// test ends and fails the test for every request the server rejected
// ([Server.Errors]), so a passing test knows that every history the code
// under test sent was valid. Given a nil [TB], as in a program that is not
// a test, it leaves Close and Errors to the caller.
//
// # Scripted replies
//
// [Script] makes the [Options] of a server with a script ([Options].Replies):
// it answers the first valid request with the first [Reply], the second with
// the second, and so on. Build replies with [Message] and the block
// constructors [Text], [ToolUse], [Thinking] and [Compaction], or fill in a
// Reply to choose its stop reason, usage, id or model. A request that fails
// validation uses up no reply. A request past the end of the script is
// answered with HTTP 500 and recorded in [Server.Errors] as
// [ErrScriptEnded].
//
// # Replies from a function
//
// [Options].Func, in place of a script, is called with each valid request,
// which suits replies that depend on the request (echoing a tool result
// back, say) and concurrent runs whose requests arrive in no fixed order.
//
// # What the server records
//
// [Server.Requests] returns every POST /v1/messages received, in order,
// including rejected ones, each with its headers, raw body, a decoded view
// of the body ([Params]), the status it was answered with, and its Attempt:
// 1 for a body the server has not seen before, 2 or more when the same bytes
// come again, as they do when the SDK retries. [Server.Errors] returns what
// went wrong on the server's side: every validation failure, every request
// past the end of a script, every panic of a responder function, and every
// request for a path the server does not serve.
//
// The server also answers POST /v1/messages/count_tokens, with input tokens
// approximated as below; those requests are validated but not recorded in
// Requests.
//
// # Options
//
// Besides the replies, [Options] set the server's clock, a minimum cacheable
// prompt length for every model, and threads the server refuses. The zero
// Options is a server with an empty script.
//
// # Faults
//
// A Reply with a non-zero [Fault] fails on purpose: with an HTTP error
// status and the API's error body ([RateLimited], [ServerError] and
// [Overloaded] build the common ones), with an error event in the middle of
// a stream (StreamErrorAfter), with the connection dropped part-way through
// the response (DropAfter), or slowly (EventDelay). A slow handler watches
// its request's context, so a client that gives up ends it, and
// [Server.Close] cuts it short, so Close never waits for a slow stream.
//
// # Retries
//
// The SDK retries HTTP 408, 409, 429 and 5xx answers (529 included) and a
// JSON body cut short by DropAfter, twice by default, waiting in between for
// as long as the retry-after headers say. Set Fault.RetryAfter to a
// millisecond or so to keep such tests fast: without it the SDK backs off by
// itself, about 0.4–0.5s before the first retry and 0.75–1s before the
// second. A stream that fails part-way is not retried, as the SDK has handed
// it to the caller by then. Pass option.WithMaxRetries(0) to [Server.Client]
// to see a fault as the caller would after the last retry. The server's own
// failures (a script that ran out, a responder that panicked) carry
// "x-should-retry: false", so the SDK reports them at once.
//
// # Validation
//
// Before a request reaches the script or the function, the server checks it
// as the real API would, and answers a request that breaks a rule with HTTP
// 400 and an invalid_request_error whose message names the problem in the
// API's words. [Validate] applies the same checks to a body directly. The
// rules:
//
//  1. The body is a JSON object with a non-empty string model, a positive
//     integer max_tokens and a non-empty list of messages. If present,
//     stream is a boolean and system is a string or a list of text blocks.
//  2. Each message has the role "user" or "assistant", and the first is
//     from the user, or is an assistant message that starts with a
//     compaction block.
//  3. An assistant message with tool_use blocks is followed by a user
//     message with a tool_result for each of them, and those tool_result
//     blocks come before any other block of that message. The last message
//     is exempt: a trailing assistant message is a prefill to continue.
//  4. Each tool_result answers a tool_use of the message right before it,
//     and answers it once; tool_use ids are unique across the conversation
//     and match ^[a-zA-Z0-9_-]+$; a tool_use input is a JSON object.
//  5. Consecutive messages with the same role are allowed, as the API
//     merges them, but rules 3 and 4 look only at the message right after
//     or right before, so anything in between breaks the pairing.
//  6. Every message has content, except that a final assistant message may
//     be empty; text blocks are neither empty nor blank; and a final
//     assistant message does not end with whitespace.
//  7. Each tool has a name matching ^[a-zA-Z0-9_-]{1,128}$, unique among
//     the tools, and a client tool (one without a type, or of type
//     "custom") has an input_schema object whose type is "object".
//  8. cache_control, compaction, context_management and thread follow the
//     rules of the sections below, and need their betas in the
//     anthropic-beta header. [Validate], which sees no headers, leaves
//     this rule out.
//  9. The tool_use blocks of an assistant message that come before its
//     last fallback block (the attempt a server-side fallback declined)
//     are stripped, as the API's fallback middleware strips them, before
//     rules 3 and 4 apply: a tool_result for one of them is refused.
//  10. The user turn (every user message up to the next assistant
//     message) that follows an assistant message with a programmatic
//     call, a tool_use whose caller is a code execution tool rather than
//     "direct", holds nothing but tool_result blocks: the code waits for
//     them, and the API refuses any text, even after the results.
//  11. A toolset entry, such as browser_toolset_20260801, has no name: its
//     family ("browser") is its name for rule 7, so no other tool may
//     have it. A tool_use of a member carries the family as toolset_name
//     ([Block].Toolset), and so may the tool_result that answers it.
//
// A body over [MaxRequestBytes] (the API's 32 MB) is refused first, with
// HTTP 413 and a request_too_large error, as the API's edge refuses it.
//
// Block types the rules do not mention, such as image and document, pass
// unchecked. A reply may call a tool the request did not define: the server
// sends what the script says, so tests can check how a runner copes.
//
// # Token counting
//
// Unless a Reply sets [Usage], the server computes a deterministic
// approximation of it, at about four bytes a token. The prompt of a request
// is the tools, system and messages fields as sent, in that order, which is
// the order in which the API builds a prompt: each tool, each system block
// and each content block of a message is one block of it, and the prefix of
// the prompt that ends with a block is every byte from the start of the
// tools field up to that block's last byte. The input tokens of a prefix, or
// of the whole prompt, are its length in bytes divided by four and rounded
// up. What the server counts differs from the bytes as sent in three ways
// only:
//
//   - the cache_control member of a block is not counted;
//   - when a message holds a compaction block with a summary, the messages
//     before it are not counted, as the API drops them (for the last such
//     message);
//   - a block that a context_management edit clears counts as it is after
//     the edit.
//
// So a request without cache_control members, compaction blocks or
// context_management counts as its tools, system and messages fields'
// bytes, as this package always has. output_tokens is the length of the
// reply's text, thinking text and compaction summary and of its tool_use
// inputs as JSON, divided by four and rounded up, and at least 1.
// POST /v1/messages/count_tokens answers with the input tokens of the
// whole prompt.
//
// [Request].Usage records what the server billed each request, and
// [Server.Usage] their sum. [BilledInputTokens] weighs cache writes and
// reads as the API prices them, to compare runs by cost.
//
// # Prompt caching
//
// The server keeps a prompt cache, shared by all its requests and keyed by
// the model and the prefix of the prompt up to a breakpoint, and applies the
// API's rules to it:
//
//   - A cache_control member on a tool, a system block or a content block
//     of a message (or a block in a tool_result's content) is a breakpoint.
//     A top-level cache_control (automatic caching) puts one more on the
//     last block that can take one: any but thinking and redacted_thinking
//     blocks; none more if that block is already a breakpoint.
//   - A request may have at most 4 breakpoints, the automatic one included;
//     with more it is answered with HTTP 400 and the API's message, "A
//     maximum of 4 blocks with cache_control may be provided. Found 5.".
//     cache_control's type must be "ephemeral", its ttl "5m" (the default)
//     or "1h", and a 1-hour breakpoint may not come after a 5-minute one.
//   - A breakpoint whose prefix is shorter than the model's minimum
//     cacheable length ([MinCacheableTokens]) caches nothing.
//   - For each breakpoint the server looks for a cached prefix at the
//     block boundaries from the breakpoint back, 20 of them, the
//     breakpoint's own included. The longest prefix found is read: it
//     counts as cache_read_input_tokens, and its entry lives for its TTL
//     from now on. Two prefixes match when their blocks are the same JSON
//     values, whatever their key order or cache_control, under the same
//     roles.
//   - The prompt from the end of what was read up to the last breakpoint is
//     written: it counts as cache_creation_input_tokens, each stretch under
//     the TTL of the breakpoint that ends it (usage.cache_creation splits it
//     into ephemeral_5m_input_tokens and ephemeral_1h_input_tokens), and each
//     breakpoint's prefix is cached, for 5 minutes or 1 hour.
//   - input_tokens is the rest: the prompt after the last breakpoint, or all
//     of it when nothing was read or written.
//
// An entry expires at the server's clock, which [Options].Now sets; a
// [Clock] lets a test move it on instead of waiting. The server fills in
// the cache and the usage for every request it answers with a message,
// also when the Reply sets Usage, which then is what the message reports.
// usage.cache_creation is sent only when cache_creation_input_tokens is not
// 0, so that messages without cache writes are as they always were.
//
// # Compaction and context management
//
// A request with the compaction field and the compact-2026-09-04 beta is a
// compaction request, which the server answers itself, using up no reply
// and calling no responder: with a message whose only block is
// {"type":"compaction","content":summary,"signature":...}, stop reason
// "compaction", and usage 0, what the compaction cost being in
// usage.iterations, in an entry of type "compaction" (its input counted and
// cached as any prompt, its output the summary). The summary says how many
// messages it summarizes, quotes the last user text (at most 100 bytes),
// and the instructions, if any. The server rejects compaction together with
// context_management, stop_sequences, a tool_choice of type any or tool, or
// an output format, as the API does, and a compaction request, or a request
// with a compaction block, without the beta. A conversation may start with
// an assistant message whose first block is a compaction block.
//
// context_management (with the context-management-2025-06-27 beta) applies
// its edits before the prompt is counted, and the message reports them in
// context_management.applied_edits:
//
//   - clear_tool_uses_20250919, once its trigger is reached (by default
//     100,000 input tokens; or a number of tool uses), clears the oldest
//     tool uses but the keep most recent ones (3 by default), except those
//     of exclude_tools: their results' content becomes "[tool result
//     cleared by context management]", and with clear_tool_inputs their
//     inputs become {}. It does nothing if less than clear_at_least input
//     tokens would go.
//   - clear_thinking_20251015 drops the thinking blocks of all but the keep
//     most recent assistant messages that have them (1 by default; "all"
//     keeps them all).
//   - compact_20260112 (with the compact-2026-01-12 beta), once the prompt
//     reaches its trigger (150,000 tokens by default, at least 50,000),
//     puts a compaction block before the reply's content. usage.iterations
//     then has the compaction and the model's turn, which reads the tools,
//     system prompt and compaction block only, and which the top-level usage
//     is. With pause_after_compaction the server answers with the
//     compaction block alone, stop reason "compaction", using up no reply.
//
// # Message threads
//
// A request with the thread field and the message-threads-2026-08-12 beta
// runs on a message thread. The server stores the turn of a create under
// the id of its reply, with the request's model, system and tools and the
// whole conversation (cache_control members taken out) ending with the
// reply. A continue sends only the new messages and previous_message_id;
// the server puts the thread's history before them, validates and counts
// the whole conversation ([Request].Conversation), and stores the new turn.
// Like the API, it answers a continue with the error code, in
// error.details.error_code, that the SDK's thread helper acts on:
// thread_not_found (HTTP 404) for an id it does not hold or whose thread
// expired, 5 minutes after its last turn was stored; thread_already_continued
// for an id that a request has already continued; thread_continue_in_flight
// while one is being answered; thread_fingerprint_mismatch for another model,
// or a system prompt or tools that differ from the thread's. A turn whose
// reply a fault cut short is not stored. With [Options].ThreadUnsupported,
// every thread request is answered with HTTP 400 and the error code
// thread_unsupported_request, so that a test can see a client fall back to
// sending the whole history without a thread. [Server.Errors] leaves out
// the thread_not_found and thread_unsupported_request answers, which a
// client meets in the normal course.
//
// # Thinking block binding
//
// With [Options].BindThinking the server binds each thinking block it sends
// to the conversation it was made in, as the API does for accounts created
// on or after 2026-08-31: it records a hash of everything before the block
// (the system prompt, the tools, the earlier messages of the whole
// conversation, a thread's history included, and the blocks of its own
// message before it), written as canonical JSON: object keys sorted, null
// members and cache_control members left out (a moving cache breakpoint
// changes nothing), a string system prompt or content as the text block it
// stands for; numbers are kept as written. A later request that sends a
// thinking block back behind anything else, or one the server never sent,
// fails the check: with the request's
// thinking.block_binding.prefix_mismatch_behavior "error" (the default)
// the server answers HTTP 400 naming the block's path; with "drop_block" it
// leaves the block and the rest of its run of thinking blocks out of what
// the model sees, and lists their paths in [Request].DroppedThinking. A
// test of a runner turns it on to see whether the runner sends history
// back unchanged.
//
// # Sources
//
// The rules above follow the API documentation at platform.claude.com and
// the SDK's own code: "Prompt caching" (build-with-claude/prompt-caching:
// automatic caching, 4 breakpoints, the 20-block lookback, the minimum
// cacheable lengths, 5-minute and 1-hour TTLs refreshed on use, writes at
// 1.25× or 2× and reads at 0.1× the input price); "Context editing"
// (build-with-claude/context-editing); "Compaction", "On-demand compaction"
// and "Compaction at a token threshold" (build-with-claude/compaction,
// compaction-on-demand, compaction-threshold); "Message threads"
// (build-with-claude/message-threads). The shapes of the compaction block,
// usage.iterations, context_management.applied_edits and the thread error
// codes are those of anthropic-sdk-go v2.15.0 (betamessage.go,
// betamessagethread.go, betatoolrunner.go, tools.md). Where the
// documentation leaves a detail open, such as the wording of an error, the
// placeholder of a cleared tool result or the text of a summary, the
// server's choice is its own.
//
// # Concurrency
//
// A Server is safe for concurrent use: parallel tests and concurrent runs
// can share one. The clients from [Server.Client] share one pool of
// connections, which [Server.Close] cleans up.
package toolruntest
