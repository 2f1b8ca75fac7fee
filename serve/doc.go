// Package serve offers the toolrun runner over HTTP to programs in any
// language, as the AG-UI protocol (1.1, and 1.0 and the 0.0.x clients
// for a client that declares it or none; @ag-ui/core and @ag-ui/client on
// npm) defines it: a client POSTs a RunAgentInput and reads the run back
// as server-sent events. [Handler] is an http.Handler; the command
// "toolrun serve" runs one. RUN_STARTED declares the protocolVersion the
// run's stream speaks ([ProtocolVersion], or what an older client
// declared); an input that could be read two ways or that AG-UI's schema
// rejects is refused with 400, and what the schema does not describe is
// stripped with a warning (a CUSTOM "toolrun.warning" event).
//
// # Threads and runs
//
// A threadId is a conversation the server keeps: its toolrun State, saved
// at every step in the database of [Config.DB], is the whole thread. A new
// run on the thread continues it with the messages the client adds (those
// whose ids the thread does not have); where the client's history leaves
// the thread's (an earlier user message edited or dropped, an answer
// dropped to have it again), the run goes on from the client's, and a
// client's tool message never stands in for a result the server made.
// User messages and client tools' results may carry image and document
// parts, which reach the model as Claude's blocks. A client's system and developer
// messages and its RunAgentInput context (sent again on every run; given
// to the model when it differs from the thread's last) go before the
// run's first new user message, as text of that message headed as the
// client application's: the system prompt stays the operator's. A run
// that brings them with no user message to carry them is refused. Events map one to one onto toolrun's:
// RUN_STARTED; STEP_STARTED and STEP_FINISHED around each turn; a
// response's thinking as REASONING_* events (its signature as
// REASONING_ENCRYPTED_VALUE), its text as TEXT_MESSAGE_START/CONTENT/END
// and each server tool call as TOOL_CALL_START/ARGS/END, once the response
// has arrived whole;
// TOOL_CALL_RESULT for each result; and one terminal event with the run's
// token usage: RUN_FINISHED with the outcome success (the model's answer),
// interrupt (calls awaiting a person) or cancelled, or RUN_ERROR for a
// limit or an error, with toolrun's StopReason as its code. A client that
// declares no protocolVersion (@ag-ui/client 0.0.x, whose schema knows no
// cancelled outcome) gets RUN_ERROR with code "cancelled" for a cancelled
// run. When the client's history differs from the thread's (a changed
// result of a call the server ran, an interrupt decided elsewhere whose
// run went on), the run sends a MESSAGES_SNAPSHOT of the conversation the
// model is sent, bounded by [MaxSnapshotMessages] and [MaxSnapshotBytes].
//
// Every event is recorded before it is sent, with an SSE id; GET
// /runs/{run}/events with Last-Event-ID sends the rest of the stream,
// nothing lost and nothing twice. A client that goes away does not end
// its run, unless the run's forwardedProps say {"cancelOnDisconnect":
// true}; POST /runs/{run}/cancel ends one.
//
// # Approvals and client tools
//
// A call that the approval policy ([Config.Options].Policy) defers is an
// interrupt {id, reason:"tool_call", toolCallId, message, responseSchema,
// expiresAt}. The next run answers it with a resume entry whose payload is
// {"decision":"approve"}, {"decision":"deny","reason":…} or
// {"decision":"edit","input":{…}} (checked against the tool's schema), or
// AG-UI's {"approved":…, "editedArgs":…}; it may reuse the runId of the
// run it resumes, whose events it continues. The first decision wins; an
// entry for another thread's interrupt is refused and the request changes
// nothing, one for an interrupt the server never raised is ignored, and
// one for an interrupt decided already is told to the client (a CUSTOM
// "toolrun.decided" event naming the decision, who took it and the run
// that went on). An approval is an approver's (a token with the approve
// scope, the inbox) unless [Config.UserApproves] makes it the user's,
// which the thread's client may give. Each decision is recorded with the
// name of the token that made it. GET /api/pending and POST /api/interrupts/{id}/decision
// take the same decisions outside a run; the decision that leaves a thread
// with no call waiting continues it at once, in a run the answer names
// (nextRun), as a decision in the inbox does.
//
// Tools the client declares in RunAgentInput.tools are run by the client:
// a call is announced (TOOL_CALL_*) at the end of the run that hands it
// over, once no approval of it waits, which stops with the outcome success
// and pendingToolCallIds, and the next run brings the results as tool
// messages. They are validated,
// decided and logged as the server's own tools are. The model is offered
// the client tools of the run's own RunAgentInput and no other (a run
// that declares tools: [] offers none; one a decision starts offers those
// of the thread's last client run); a result for an earlier run's call is
// still taken, and a call of a tool the run does not offer is answered as
// an unknown tool's. A run on a thread whose run in flight is one a
// decision started waits for it, up to [DecidedRunWait], rather than
// being refused with 409 thread_busy.
//
// # Runs elsewhere: Temporal
//
// [Config.Executor] hands the runs to an [Executor] instead of running
// them in process; package github.com/toolrun/toolrun/temporal/servetemporal
// ("toolrun serve --temporal") runs each thread as a Temporal workflow,
// on workers that may be on other machines. The API stays the same. The
// server keeps its database in every mode, for threads, runs, the events
// it sent (so Last-Event-ID works as always), interrupts and decisions
// (where the first decision wins, with its identity); what moves is who
// runs a run and where its State lives. That split is why the seam is
// small: an Executor runs a thread's run from its new messages and the
// decisions recorded, reports its progress as toolrun's own events (so
// one mapper makes the AG-UI events, in process or not), lists the calls
// awaiting a person and takes a decision. It knows nothing of HTTP,
// AG-UI, tokens or the server's tables, and the server knows nothing of
// Temporal. A decision is recorded first and then sent, and every run of
// a thread sends again the decisions its run still awaits, so one
// recorded before a crash is never lost. The calls awaiting a person are
// the executor's to list (servetemporal reads the workflows' search
// attributes and memo, with no worker running), and the database's
// records of them are matched by call: a call the database lacks is
// recorded, one it has decided is not listed while the run catches up.
//
// # The database, and what a run costs
//
// The server's tables hold its threads' States (serve_states, with a
// compare-and-swap on their version: the store passes storetest as the
// server opens it) and what the protocol needs beside them: threads and
// their owners and client tools, runs, the message ids a thread has,
// interrupts and their decisions, and the events sent. The States stay in
// the server's own tables rather than in package sqlitestore because a
// profile of the bench's serve rows put most of a run's cost in what a
// general Store cannot skip: a transaction and a sync per save, and the
// whole conversation encoded at every save. The server instead
//
//   - makes every write (a run's events, a State, a run's end) on the
//     database's one connection, queued, committing those that arrive
//     together in one transaction: one sync for all the runs in flight;
//   - records a response's events and a tool result's in the transaction
//     that saves the State that has them, and a step's STEP_FINISHED with
//     the State that ends its turn, rather than in a write of their own
//     before it: a turn waits for two commits fewer;
//   - saves a turn's intermediate States (a call started, a call answered)
//     as their skeleton (see [github.com/toolrun/toolrun/driver.Skeleton])
//     beside the whole State saved with the turn's response, and encodes
//     each message of a run's history once however many saves carry it
//     (the bytes are those of json.Marshal);
//   - prepares its statements once, on that connection;
//   - gives the streams that follow a run live its last events from
//     memory (a bounded tail shared by the run's streams), reading the
//     database only for a stream that falls behind or comes back.
//
// Config.DB is set up by [New] (one connection kept open, WAL, synchronous
// FULL so a committed step survives a power cut, a busy timeout), whatever
// it was opened with.
//
// # The turn limit
//
// A thread is one toolrun run, over many AG-UI runs, and the runner counts
// its turns in its State. Each AG-UI run may take Options.MaxTurns turns
// ([toolrun.DefaultMaxTurns] when zero, no limit when negative): the run
// sets the State's limit that many turns past the count it starts at, and
// the runner stops it there (RUN_ERROR max_turns), its last turn's calls
// left pending. An [Executor] gets the same number as ExecutorRun.MaxTurns.
//
// # Safe to expose
//
// Without [Config.Tokens] only loopback clients are served. Tokens carry
// the scopes run, approve and read, and a cap on their concurrent runs
// (and 64 event streams each); bodies are size-limited and must arrive
// within [Config.BodyReadTimeout]; a client that stops reading its event
// stream is dropped after [Config.StreamWriteTimeout], holding no database
// connection meanwhile; a decision that could be read two ways (a key
// given twice) is refused; a thread has at most [MaxClientTools] client
// tools; CORS headers are sent only to named origins;
// errors, logs and events are redacted as toolrun redacts its logs.
// /healthz answers without a token and /metrics shows runs, pending
// approvals and turn latency.
//
//	db, _ := sql.Open("sqlite", "serve.db") // modernc.org/sqlite
//	h, err := serve.New(ctx, serve.Config{Client: client, Params: params, DB: db})
//	if err != nil { … }
//	http.ListenAndServe("127.0.0.1:8080", h)
package serve
