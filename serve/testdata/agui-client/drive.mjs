// drive.mjs drives "toolrun serve --script scenes.jsonl --workdir files
// --require-approval read_file" with @ag-ui/client, as a third-party
// client would: a plain run, a client tool (answered alone, and with a
// new user message in the same run), approvals approved, denied and
// edited, two parallel approvals answered in the opposite order, a
// cancelled run, and a reconnect with Last-Event-ID. It exits non-zero on
// the first scenario that goes wrong.
//
// Usage: node drive.mjs http://127.0.0.1:PORT [PREFIX]
//
// PREFIX, if given, starts every thread and run id the program makes, so
// that it can run again against a server that keeps what it ran before
// (a Temporal namespace, where a thread is a workflow and its id stays
// taken until the namespace forgets it).
import { HttpAgent, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";

const base = process.argv[2];
const prefix = process.argv[3] ?? "";
if (!base) {
  console.error("usage: node drive.mjs URL [PREFIX]");
  process.exit(2);
}

let n = 0;
function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
    process.exit(1);
  }
}

// run runs one run of agent and returns what the subscriber saw.
async function run(agent, params = {}) {
  const seen = { events: [], finished: null, error: null };
  await agent.runAgent(params, {
    onEvent: ({ event }) => { seen.events.push(event); },
    onRunFinishedEvent: (e) => { seen.finished = e; },
    onRunErrorEvent: ({ event }) => { seen.error = event; },
  });
  return seen;
}

function agent(threadId) {
  return new HttpAgent({ url: base + "/", threadId: prefix + threadId });
}

function user(a, id, content) {
  a.addMessage({ id, role: "user", content });
}

function results(seen) {
  const out = {};
  for (const e of seen.events) if (e.type === "TOOL_CALL_RESULT") out[e.toolCallId] = e.content;
  return out;
}

function lastText(a) {
  const msgs = a.messages.filter((m) => m.role === "assistant" && typeof m.content === "string" && m.content);
  return msgs.length ? msgs[msgs.length - 1].content : "";
}

async function scenario(name, fn) {
  await fn();
  n++;
  console.log(`ok ${name}`);
}

await scenario("plain run", async () => {
  const a = agent("plain");
  user(a, "u1", "hi");
  const seen = await run(a);
  check(seen.finished?.outcome === "success", "plain run finishes with success", seen.finished?.outcome);
  check(lastText(a) === "hello from the script", "the assistant's text reaches the client's messages", a.messages);
  const usage = seen.finished.event.usage?.[0];
  check(usage && usage.inputTokens > 0 && usage.outputTokens > 0, "usage on RUN_FINISHED", usage);
  const types = seen.events.map((e) => e.type);
  check(JSON.stringify(types) === JSON.stringify(["RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"]), "plain run's events in order", types);
  // The thread goes on.
  user(a, "u2", "hi");
  const again = await run(a);
  check(again.finished?.outcome === "success", "a second run continues the thread", again.finished?.outcome);
});

await scenario("client tool", async () => {
  const a = agent("client");
  const tools = [{ name: "get_location", description: "where the user is", parameters: { type: "object", properties: { precise: { type: "boolean" } } } }];
  user(a, "u1", "where am i");
  const first = await run(a, { tools });
  check(first.finished?.outcome === "success", "a client tool's call ends the run with success", first.finished?.outcome);
  check(JSON.stringify(first.finished.pendingToolCallIds) === JSON.stringify(["call_loc"]), "pendingToolCallIds names the call", first.finished.pendingToolCallIds);
  a.addMessage({ id: "tool1", role: "tool", toolCallId: "call_loc", content: "Paris" });
  const second = await run(a, { tools });
  check(second.finished?.outcome === "success", "the run with the client's result finishes", second.finished?.outcome);
  check(lastText(a) === "you are in Paris", "the model answers from the client's result", lastText(a));
});

await scenario("client tool answered with a new message", async () => {
  const a = agent("client-message");
  const tools = [{ name: "get_location", description: "where the user is", parameters: { type: "object", properties: { precise: { type: "boolean" } } } }];
  user(a, "u1", "where am i");
  const first = await run(a, { tools });
  check(JSON.stringify(first.finished?.pendingToolCallIds) === JSON.stringify(["call_loc"]), "pendingToolCallIds names the call", first.finished);
  // The client's result and the user's next words, in one run.
  a.addMessage({ id: "tool1", role: "tool", toolCallId: "call_loc", content: "Paris" });
  user(a, "u2", "and the weather there?");
  const second = await run(a, { tools });
  check(second.finished?.outcome === "success", "the run with the result and a message finishes", second.finished?.outcome ?? second.error);
  check(lastText(a) === "sunny in Paris", "the model answers the message", lastText(a));
});

// approval runs a scene whose read_file call needs approval, answers the
// interrupt with payload and returns the second run.
async function approval(thread, prompt, payload) {
  const a = agent(thread);
  user(a, "u1", prompt);
  const first = await run(a);
  check(first.finished?.outcome === "interrupt", `${thread}: the call is an interrupt`, first.finished?.outcome);
  const [it] = first.finished.interrupts;
  check(it.reason === "tool_call" && it.toolCallId && it.expiresAt && it.responseSchema, `${thread}: the interrupt has its fields`, it);
  check(a.pendingInterrupts.length === 1, `${thread}: the client holds the pending interrupt`, a.pendingInterrupts);
  const second = await run(a, { resume: [{ interruptId: it.id, status: "resolved", payload }] });
  check(second.finished?.outcome === "success", `${thread}: the resumed run finishes`, second.finished?.outcome ?? second.error);
  return { a, it, second };
}

await scenario("approval approved", async () => {
  const { it, second } = await approval("approve", "read it", { decision: "approve" });
  check(results(second)[it.toolCallId]?.includes("hello from a.txt"), "an approved call runs", results(second));
});

await scenario("approval denied", async () => {
  const { it, second } = await approval("deny", "read secret", { decision: "deny", reason: "not that file" });
  const r = results(second)[it.toolCallId];
  check(r?.includes("not that file") && !r.includes("top secret"), "a denied call never runs and the model gets the reason", r);
});

await scenario("approval edited", async () => {
  const { it, second } = await approval("edit", "read wrong", { decision: "edit", input: { path: "a.txt" } });
  check(results(second)[it.toolCallId]?.includes("hello from a.txt"), "an edited call runs with the edited input", results(second));
});

await scenario("parallel approvals answered in the opposite order", async () => {
  const a = agent("parallel");
  user(a, "u1", "read both");
  const first = await run(a);
  const its = first.finished?.interrupts ?? [];
  check(its.length === 2, "two parallel calls are two interrupts", its);
  const byCall = Object.fromEntries(its.map((it) => [it.toolCallId, it]));
  // b's first, then a's: each decision must reach its own call.
  const second = await run(a, {
    resume: [
      { interruptId: byCall.call_b.id, status: "resolved", payload: { decision: "approve" } },
      { interruptId: byCall.call_a.id, status: "resolved", payload: { decision: "deny", reason: "not a" } },
    ],
  });
  const r = results(second);
  check(r.call_b?.includes("hello from b.txt"), "b's approval reached b", r);
  check(r.call_a?.includes("not a") && !r.call_a.includes("hello"), "a's denial reached a", r);
});

await scenario("cancelled run", async () => {
  const a = agent("cancel");
  user(a, "u1", "slow");
  const runId = prefix + "cancel-run-1";
  const seen = { finished: null };
  await a.runAgent({ runId }, {
    onRunStartedEvent: async () => {
      const res = await fetch(`${base}/runs/${runId}/cancel`, { method: "POST" });
      check(res.status === 202, "the cancel is accepted", res.status);
    },
    onRunFinishedEvent: (e) => { seen.finished = e; },
  });
  check(seen.finished?.outcome === "cancelled", "a cancelled run finishes with the outcome cancelled", seen.finished?.outcome);
});

await scenario("reconnect with Last-Event-ID", async () => {
  const a = agent("reconnect");
  user(a, "u1", "list then wait");
  const runId = prefix + "reconnect-run-1";
  let got = 0;
  // The first connection goes away after the first turn: the run goes on.
  await a.runAgent({ runId }, {
    onEvent: ({ event }) => {
      got++;
      if (event.type === "STEP_FINISHED") a.abortRun();
    },
  }).catch(() => {});
  check(got > 0, "the first connection saw events", got);
  const stream = (lastEventId) => new Promise((resolve, reject) => {
    const events = [];
    const headers = { Accept: "text/event-stream" };
    if (lastEventId !== undefined) headers["Last-Event-ID"] = String(lastEventId);
    transformHttpEventStream(runHttpRequest(() => fetch(`${base}/runs/${runId}/events`, { headers }))).subscribe({
      next: (e) => events.push(e),
      error: reject,
      complete: () => resolve(events),
    });
  });
  // SSE ids count the run's events from 1, so the last one seen is got.
  const rest = await stream(got);
  const all = await stream();
  check(rest.length > 0 && rest[rest.length - 1].type === "RUN_FINISHED", "the rest of the stream reaches the run's end", rest.map((e) => e.type));
  check(all.length === got + rest.length, "nothing lost, nothing twice", { got, rest: rest.length, all: all.length });
  check(JSON.stringify(all.slice(got)) === JSON.stringify(rest), "the rest is the stream after the last event seen", {});
});

console.log(`agui-client: ${n} scenarios ok`);
