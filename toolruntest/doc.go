// Package toolruntest provides a fake Anthropic Messages API for tests, in
// the manner of [net/http/httptest].
//
// A [Server] listens on loopback and answers POST /v1/messages the way the
// real API does: with a JSON message, or with server-sent events when the
// request asks for a stream, byte for byte in the API's wire format. Tests
// talk to it through the real SDK client that [Server.Client] returns, so
// what they exercise is the code that runs in production:
//
//	s := toolruntest.NewServer(
//		toolruntest.Message(toolruntest.ToolUse("toolu_01", "get_weather", map[string]string{"city": "Paris"})),
//		toolruntest.Message(toolruntest.Text("It is sunny in Paris.")),
//	)
//	defer s.Close()
//	client := s.Client()
//	// ... run the code under test with client ...
//	for _, err := range s.Errors() {
//		t.Error(err)
//	}
//
// # Scripted replies
//
// [NewServer] takes a script: it answers the first valid request with the
// first [Reply], the second with the second, and so on. Build replies with
// [Message] and the block constructors [Text], [ToolUse] and [Thinking], or
// fill in a Reply to choose its stop reason, usage, id or model. A request
// that fails validation uses up no reply. A request past the end of the
// script is answered with HTTP 500 and recorded in [Server.Errors] as
// [ErrScriptEnded].
//
// # Replies from a function
//
// [NewServerFunc] calls a function with each valid request instead, which
// suits replies that depend on the request (echoing a tool result back, say)
// and concurrent runs whose requests arrive in no fixed order.
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
//     from the user.
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
//
// Block types the rules do not mention, such as image and document, pass
// unchecked. A reply may call a tool the request did not define: the server
// sends what the script says, so tests can check how a runner copes.
//
// # Usage
//
// Unless a Reply sets [Usage], the server computes a deterministic
// approximation of it, at about four bytes a token: input_tokens is the
// length in bytes of the system, messages and tools fields as sent, divided
// by four and rounded up; output_tokens is the length of the reply's text
// and thinking text and of its tool_use inputs as JSON, divided by four and
// rounded up, and at least 1. Cache token counts are 0.
//
// # Concurrency
//
// A Server is safe for concurrent use: parallel tests and concurrent runs
// can share one. The clients from [Server.Client] share one pool of
// connections, which [Server.Close] cleans up.
package toolruntest
