// conformance.mjs checks a running "toolrun serve" against the AG-UI 1.1
// specification (docs/spec/1.1 of ag-ui-protocol/ag-ui; see README.md):
// every event it sends, and every input it accepts, is validated against
// the spec's schema.json (../agui-spec, with ajv) and against the zod
// EventSchemas of @ag-ui/core 1.0.0 and 0.0.59; and each MUST and SHOULD
// testable from outside is a case named by its spec file and section.
//
// The server runs with: --script scenes.jsonl --workdir ../agui-client/files
// --require-approval read_file --require-approval confirm_order
// (cmd/toolrun's TestServeAGUIConformance starts it so).
//
// Two clients are played: "1.0" declares protocolVersion "1.0", as
// @ag-ui/client 1.0.0 does, and its events must satisfy schema.json and
// @ag-ui/core 1.0.0; "legacy" declares none, as @ag-ui/client 0.0.59
// (the version CopilotKit pins) does, and its events must satisfy
// @ag-ui/core 0.0.59 as well (versioning.mdx: a client on an older version
// gets nothing its schema refuses).
//
// Output: one JSON line per case, {"case", "ok", "detail"}, where detail
// says what was sent and what came back; then a line "conformance: N
// cases, M failed". The exit status is 0 whatever failed: the Go test
// decides, against its list of known failures.
//
// Usage: node conformance.mjs http://127.0.0.1:PORT [PREFIX]
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";
import { EventSchemas as Events100 } from "@ag-ui/core/schemas";
import { EventSchemas as Events0059 } from "@ag-ui/core-0.0.59";

const base = process.argv[2];
const prefix = process.argv[3] ?? "";
if (!base) {
  console.error("usage: node conformance.mjs URL [PREFIX]");
  process.exit(2);
}

const schema = JSON.parse(readFileSync(new URL("../agui-spec/schema.json", import.meta.url)));
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(schema);
const validEvent = ajv.getSchema(schema.$id);
const validInput = ajv.getSchema(schema.$id + "#/$defs/RunAgentInput");

const PROFILES = [
  { name: "1.0", version: "1.0", zod: Events100, zodName: "@ag-ui/core 1.0.0" },
  { name: "legacy", version: undefined, zod: Events0059, zodName: "@ag-ui/core 0.0.59" },
];

// Schema violations, gathered over every run and reported as cases of
// their own at the end, so that one shape defect does not hide the
// behaviour each case checks.
const violations = { schema: [], zod: { "1.0": [], legacy: [] }, inputs: [], identity: [], open: [] };

class Fail extends Error {
  constructor(what, detail) {
    super(what);
    this.detail = detail;
  }
}

function check(cond, what, detail) {
  if (!cond) throw new Fail(what, detail);
}

const results = [];
async function kase(name, fn) {
  try {
    await fn();
    results.push({ case: name, ok: true });
  } catch (e) {
    results.push({ case: name, ok: false, detail: e instanceof Fail ? { what: e.message, ...e.detail } : { what: "harness error: " + (e?.stack ?? String(e)) } });
  }
  console.log(JSON.stringify(results[results.length - 1]));
}

function input(p, threadId, messages, extra = {}) {
  const inp = { threadId: prefix + p.name + "-" + threadId, runId: randomUUID(), state: {}, messages, tools: [], context: [], forwardedProps: {}, ...extra };
  if (p.version !== undefined && !("protocolVersion" in extra)) inp.protocolVersion = p.version;
  return inp;
}

const user = (id, content) => ({ id, role: "user", content });
const LOCATION = { name: "get_location", description: "where the user is", parameters: { type: "object", properties: { precise: { type: "boolean" } } } };
const ORDER = { name: "confirm_order", description: "order an item, after the user confirms", parameters: { type: "object", properties: { item: { type: "string" } } } };
const SCREENSHOT = { name: "take_screenshot", description: "a screenshot of the page", parameters: { type: "object", properties: {} } };
// A 1x1 transparent PNG and a minimal PDF.
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
const PDF = Buffer.from("%PDF-1.1\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj 2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n").toString("base64");

// summary shortens a run for a failure's detail.
function summary(r) {
  if (r.status !== 200) return { status: r.status, body: r.body };
  return { status: 200, events: r.events.map((e) => (e.type === "RUN_FINISHED" || e.type === "RUN_ERROR" || e.type === "RUN_STARTED" || e.type === "TOOL_CALL_RESULT" || e.type === "TOOL_CALL_START" ? e : e.type)) };
}

function request(inp) {
  const s = JSON.stringify(inp);
  return s.length > 1500 ? s.slice(0, 1500) + "…" : s;
}

// send posts inp and reads the stream, validating each event; onEvent is
// told of each as it comes. wellFormed says inp is a valid RunAgentInput
// (checked, so that a case cannot send what it believes valid and is not).
async function send(p, inp, { wellFormed = true, onEvent } = {}) {
  if (wellFormed && !validInput(inp)) {
    violations.inputs.push({ input: request(inp), errors: validInput.errors.slice(0, 5) });
  }
  const res = await fetch(base + "/", { method: "POST", headers: { "Content-Type": "application/json", Accept: "text/event-stream" }, body: JSON.stringify(inp) });
  const out = { status: res.status, contentType: res.headers.get("content-type"), events: [], input: inp };
  if (res.status !== 200) {
    out.body = await res.text();
    return out;
  }
  const dec = new TextDecoder();
  let buf = "";
  for await (const chunk of res.body) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i).replace(/^\r?\n\r?\n/, "");
      const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      if (!data) continue;
      const ev = JSON.parse(data);
      out.events.push(ev);
      validate(p, ev, inp);
      if (onEvent) await onEvent(ev);
    }
  }
  lifecycle(out);
  return out;
}

function validate(p, ev, inp) {
  if (!validEvent(ev)) violations.schema.push({ client: p.name, event: ev, errors: validEvent.errors.slice(0, 5), input: request(inp) });
  const z = p.zod.safeParse(ev);
  if (!z.success) violations.zod[p.name].push({ event: ev, errors: JSON.stringify(z.error.issues ?? z.error).slice(0, 800), input: request(inp) });
}

// lifecycle checks what every run owes: run-input.mdx §Identity (the
// boundary events carry the input's threadId and agree on its runId) and
// the streaming rules (tool-calls.mdx §Error Handling: a call left open
// when the run finishes is a violation; likewise a text message).
function lifecycle(r) {
  const ev = r.events;
  if (ev.length === 0) return;
  const first = ev[0];
  const last = ev[ev.length - 1];
  if (first.type !== "RUN_STARTED" || first.threadId !== r.input.threadId || first.runId !== r.input.runId) {
    violations.identity.push({ input: request(r.input), first });
  }
  if (last.type === "RUN_FINISHED" && (last.threadId !== r.input.threadId || last.runId !== r.input.runId)) {
    violations.identity.push({ input: request(r.input), last });
  }
  if (last.type !== "RUN_FINISHED" && last.type !== "RUN_ERROR") violations.identity.push({ input: request(r.input), last, what: "the stream does not end with RUN_FINISHED or RUN_ERROR" });
  const open = new Set();
  for (const e of ev) {
    if (e.type === "TOOL_CALL_START") open.add("call " + e.toolCallId);
    if (e.type === "TOOL_CALL_END") open.delete("call " + e.toolCallId);
    if (e.type === "TEXT_MESSAGE_START") open.add("text " + e.messageId);
    if (e.type === "TEXT_MESSAGE_END") open.delete("text " + e.messageId);
    if (e.type === "RUN_FINISHED" && open.size > 0) violations.open.push({ input: request(r.input), open: [...open] });
  }
}

const finished = (r) => r.events.find((e) => e.type === "RUN_FINISHED");
const outcomeType = (r) => {
  const f = finished(r);
  if (!f) return r.status === 200 ? (r.events.find((e) => e.type === "RUN_ERROR") ? "error" : "none") : "http " + r.status;
  return f.outcome?.type ?? "success";
};
const text = (r) => r.events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");
const resultOf = (r, id) => r.events.find((e) => e.type === "TOOL_CALL_RESULT" && e.toolCallId === id);
const resultText = (res) => (res === undefined ? undefined : typeof res.content === "string" ? res.content : JSON.stringify(res.content));
const started = (r, id) => r.events.some((e) => (e.type === "TOOL_CALL_START" || e.type === "TOOL_CALL_ARGS" || e.type === "TOOL_CALL_END" || e.type === "TOOL_CALL_RESULT") && e.toolCallId === id);

// history builds the messages a client holds after run r: what it sent
// plus what the events made (the text and the tool calls of the run).
function history(sent, r) {
  const msgs = [...sent];
  const byId = new Map();
  for (const e of r.events) {
    if (e.type === "MESSAGES_SNAPSHOT") {
      msgs.length = 0;
      msgs.push(...e.messages);
      byId.clear();
    }
    if (e.type === "TEXT_MESSAGE_START") {
      const m = { id: e.messageId, role: "assistant", content: "" };
      byId.set(e.messageId, m);
      msgs.push(m);
    }
    if (e.type === "TEXT_MESSAGE_CONTENT") byId.get(e.messageId).content += e.delta;
    if (e.type === "TOOL_CALL_START") {
      const pid = e.parentMessageId ?? e.toolCallId + "-msg";
      let m = byId.get(pid);
      if (!m) {
        m = { id: pid, role: "assistant" };
        byId.set(pid, m);
        msgs.push(m);
      }
      (m.toolCalls ??= []).push({ id: e.toolCallId, type: "function", function: { name: e.toolCallName, arguments: "" } });
      byId.set("call " + e.toolCallId, m.toolCalls[m.toolCalls.length - 1]);
    }
    if (e.type === "TOOL_CALL_ARGS") byId.get("call " + e.toolCallId).function.arguments += e.delta;
    if (e.type === "TOOL_CALL_RESULT") msgs.push({ id: e.messageId, role: "tool", toolCallId: e.toolCallId, content: e.content });
  }
  for (const m of msgs) if (m.role === "assistant" && m.content === "") delete m.content;
  return msgs;
}

// interrupted runs prompt on a fresh thread and returns the interrupted run.
async function interrupted(p, thread, prompt, extra = {}) {
  const msgs = [user("u1", prompt)];
  const inp = input(p, thread, msgs, extra);
  const r = await send(p, inp);
  check(outcomeType(r) === "interrupt", `"${prompt}" ends with the interrupt outcome`, { request: request(inp), response: summary(r) });
  return { inp, r, msgs: history(msgs, r), interrupts: finished(r).outcome.interrupts };
}

// resume answers run's interrupts on its thread.
async function resume(p, first, entries, extra = {}) {
  const inp = input(p, "", first.msgs, { threadId: first.inp.threadId, resume: entries, ...extra });
  return { inp, r: await send(p, inp) };
}

const ok = (r) => outcomeType(r) === "success";

for (const p of PROFILES) {
  const c = (name) => `${name} [client ${p.name}]`;

  await kase(c("versioning.mdx §Version negotiation: RUN_STARTED declares the producer's protocolVersion (MUST)"), async () => {
    const inp = input(p, "version", [user("u1", "hi")]);
    const r = await send(p, inp);
    const rs = r.events[0];
    check(rs?.type === "RUN_STARTED" && typeof rs.protocolVersion === "string" && /^\d+\.\d+$/.test(rs.protocolVersion), "RUN_STARTED.protocolVersion is MAJOR.MINOR", { request: request(inp), response: summary(r) });
  });

  await kase(c("http-sse: a run answers 200 text/event-stream and finishes with success"), async () => {
    const inp = input(p, "plain", [user("u1", "hi")]);
    const r = await send(p, inp);
    check(r.status === 200 && /^text\/event-stream/.test(r.contentType ?? "") && ok(r) && text(r) === "hello from the script", "plain run", { request: request(inp), response: summary(r) });
  });

  await kase(c("interrupt-resume.mdx §Interrupting: an approval ends the run with the interrupt outcome, ids unique (MUST)"), async () => {
    const first = await interrupted(p, "interrupting", "read both");
    const ids = first.interrupts.map((i) => i.id);
    check(ids.length === 2 && new Set(ids).size === 2, "two interrupts with distinct ids", { interrupts: first.interrupts });
    check(first.interrupts.every((i) => i.toolCallId && i.responseSchema && i.reason), "each interrupt names its call, reason and responseSchema", { interrupts: first.interrupts });
  });

  await kase(c("interrupt-resume.mdx §Resuming: an approved call runs, a denied one does not"), async () => {
    const first = await interrupted(p, "resuming", "read both");
    const by = Object.fromEntries(first.interrupts.map((i) => [i.toolCallId, i]));
    const { inp, r } = await resume(p, first, [
      { interruptId: by.call_b.id, status: "resolved", payload: { decision: "approve" } },
      { interruptId: by.call_a.id, status: "resolved", payload: { decision: "deny", reason: "not a" } },
    ]);
    const a = resultText(resultOf(r, "call_a"));
    const b = resultText(resultOf(r, "call_b"));
    check(ok(r) && b?.includes("hello from b.txt") && a?.includes("not a") && !a.includes("hello from a.txt"), "b approved ran, a denied did not", { request: request(inp), response: summary(r) });
  });

  await kase(c("interrupt-resume.mdx §Resuming: an unrecognised resume entry is ignored and the run proceeds (SHOULD)"), async () => {
    const first = await interrupted(p, "unrecognised", "read it");
    const { inp, r } = await resume(p, first, [
      { interruptId: first.interrupts[0].id, status: "resolved", payload: { decision: "approve" } },
      { interruptId: "no-such-interrupt", status: "resolved", payload: { decision: "approve" } },
    ]);
    check(ok(r) && resultText(resultOf(r, "call_read"))?.includes("hello from a.txt"), "the run proceeds without the unknown entry", { request: request(inp), response: summary(r) });
  });

  await kase(c("interrupt-resume.mdx §Resuming: an absent entry never performs the interrupted action nor ends in success (MUST NOT)"), async () => {
    const first = await interrupted(p, "absent", "read it");
    const msgs = [...first.msgs, user("u2", "hi")];
    const inp = input(p, "", msgs, { threadId: first.inp.threadId });
    const r = await send(p, inp);
    check(!resultText(resultOf(r, "call_read"))?.includes("hello from a.txt"), "the gated call did not run", { request: request(inp), response: summary(r) });
    check(r.status >= 400 || outcomeType(r) === "interrupt", "the input is refused or ends with the interrupt again", { request: request(inp), response: summary(r) });
  });

  await kase(c("run-input.mdx §Error Handling: a resume with no messages is refused before RUN_STARTED and runs nothing (MUST)"), async () => {
    const first = await interrupted(p, "nomessages", "read it");
    const bad = { threadId: first.inp.threadId, runId: randomUUID(), resume: [{ interruptId: first.interrupts[0].id, status: "resolved", payload: { decision: "approve" } }] };
    if (p.version) bad.protocolVersion = p.version;
    check(!validInput(bad), "harness: the input is malformed by schema.json", {});
    const r = await send(p, bad, { wellFormed: false });
    check(r.status >= 400 && r.status < 500, "refused with 4xx", { request: request(bad), response: summary(r) });
    // The interrupt is still open: a proper resume runs the call once.
    const { inp, r: r2 } = await resume(p, first, [{ interruptId: first.interrupts[0].id, status: "resolved", payload: { decision: "approve" } }]);
    check(ok(r2) && resultText(resultOf(r2, "call_read"))?.includes("hello from a.txt"), "the proper resume then runs the call", { request: request(inp), response: summary(r2) });
  });

  // run-input.mdx §Error Handling: "An input ... that is malformed — a
  // known field carrying a value the schema rejects — is rejected before
  // RUN_STARTED, through the transport's error path".
  const malformed = {
    "state null": (i) => ({ ...i, state: null }),
    "forwardedProps null": (i) => ({ ...i, forwardedProps: null }),
    "a tool without a description": (i) => ({ ...i, tools: [{ name: "nodesc", parameters: { type: "object" } }] }),
    "a context entry without a value": (i) => ({ ...i, context: [{ description: "the user's name" }] }),
    "a number where a string belongs (user content)": (i) => ({ ...i, messages: [user("u1", 42)] }),
    "a number where a string belongs (threadId)": (i) => ({ ...i, threadId: 42 }),
    "an assistant toolCalls entry without function": (i) => ({ ...i, messages: [user("u0", "earlier"), { id: "a0", role: "assistant", toolCalls: [{ id: "call_x", type: "function" }] }, { id: "t0", role: "tool", toolCallId: "call_x", content: "x" }, user("u1", "hi")] }),
    "a resume entry with an unknown status": (i) => ({ ...i, resume: [{ interruptId: "x", status: "maybe" }] }),
  };
  for (const [what, make] of Object.entries(malformed)) {
    await kase(c(`run-input.mdx §Error Handling: a malformed input is refused before RUN_STARTED: ${what} (MUST)`), async () => {
      const bad = make(input(p, "malformed-" + what.replace(/\W+/g, "-"), [user("u1", "hi")]));
      check(!validInput(bad), "harness: the input is malformed by schema.json", {});
      const r = await send(p, bad, { wellFormed: false });
      check(r.status >= 400 && r.status < 500, "refused with 4xx, no stream", { request: request(bad), response: summary(r) });
    });
  }

  await kase(c("run-input.mdx §Error Handling: an unrecognised input member is stripped and the run proceeds (MUST)"), async () => {
    const inp = { ...input(p, "unknown-member", [user("u1", "hi")]), someFutureField: { x: 1 } };
    const r = await send(p, inp, { wellFormed: false });
    check(ok(r) && text(r) === "hello from the script", "the run proceeds", { request: request(inp), response: summary(r) });
  });

  await kase(c("processing.mdx: an unknown content part type is stripped, the run proceeds (MUST)"), async () => {
    const inp = input(p, "unknown-part", [user("u1", [{ type: "text", text: "look at this" }, { type: "hologram", source: { type: "data", value: "AA==", mimeType: "x/holo" } }])]);
    const r = await send(p, inp, { wellFormed: false });
    check(ok(r) && text(r) === "I see it", "the run proceeds", { request: request(inp), response: summary(r) });
  });

  for (const [what, part] of Object.entries({
    "an inline image": { type: "image", source: { type: "data", value: PNG, mimeType: "image/png" } },
    "an image by URL": { type: "image", source: { type: "url", value: "https://example.com/cat.png", mimeType: "image/png" } },
    "an inline PDF document": { type: "document", source: { type: "data", value: PDF, mimeType: "application/pdf" } },
    "another provider's file handle": { type: "image", source: { type: "file", value: "file-abc123", provider: "openai" } },
  })) {
    await kase(c(`run-input.mdx §messages: ${what} in a user message does not fail the run (MUST NOT fail)`), async () => {
      const inp = input(p, "part-" + what.replace(/\W+/g, "-"), [user("u1", [{ type: "text", text: "look at this" }, part])]);
      const r = await send(p, inp);
      check(ok(r) && text(r) === "I see it", "the run finishes with success", { request: request(inp), response: summary(r) });
    });
  }

  await kase(c("tool-calls.mdx §Frontend tools: the producer does not answer a frontend call, finishes with success and names it in pendingToolCallIds (MUST, SHOULD)"), async () => {
    const msgs = [user("u1", "where am i")];
    const inp = input(p, "frontend", msgs, { tools: [LOCATION] });
    const r = await send(p, inp);
    check(!resultOf(r, "call_loc"), "no TOOL_CALL_RESULT for the frontend call", { request: request(inp), response: summary(r) });
    check(ok(r), "success outcome, not interrupt", { request: request(inp), response: summary(r) });
    if (p.version) check(JSON.stringify(finished(r).outcome?.pendingToolCallIds) === '["call_loc"]', "pendingToolCallIds is exactly the unanswered call", { response: summary(r) });
    const next = [...history(msgs, r), { id: "t1", role: "tool", toolCallId: "call_loc", content: "Paris" }];
    const inp2 = input(p, "", next, { threadId: inp.threadId, tools: [LOCATION] });
    const r2 = await send(p, inp2);
    check(ok(r2) && text(r2) === "you are in Paris", "the next run with the client's answer goes on", { request: request(inp2), response: summary(r2) });
  });

  await kase(c("run-input.mdx §tools: a run that declares tools: [] is offered no frontend tool of an earlier run (SHOULD)"), async () => {
    // The first run declares get_location; the second declares none, and
    // the scripted model calls get_location anyway. Offered only the
    // run's own tools, the producer answers the call as an unknown tool's
    // and goes on; offered the earlier run's, it hands the call to the
    // client, which declared no such tool.
    const msgs = [user("u1", "hi")];
    const inp = input(p, "tools-earlier", msgs, { tools: [LOCATION] });
    const r = await send(p, inp);
    check(ok(r), "the first run", { request: request(inp), response: summary(r) });
    const inp2 = input(p, "", [...history(msgs, r), user("u2", "where am i")], { threadId: inp.threadId, tools: [] });
    const r2 = await send(p, inp2);
    const res = resultOf(r2, "call_loc");
    check(ok(r2) && res && !(finished(r2).outcome?.pendingToolCallIds ?? []).length, "the call is answered by the producer, not left to the client", { request: request(inp2), response: summary(r2) });
    check(text(r2) === "you are in Paris", "the run goes on after the answer", { response: summary(r2) });
  });

  await kase(c("tool-calls.mdx §Result content: a frontend tool's result with an image part does not fail the run (MUST NOT fail)"), async () => {
    const msgs = [user("u1", "screenshot")];
    const inp = input(p, "shot", msgs, { tools: [SCREENSHOT] });
    const r = await send(p, inp);
    check(ok(r) && started(r, "call_shot"), "the frontend call is made", { request: request(inp), response: summary(r) });
    const next = [...history(msgs, r), { id: "t1", role: "tool", toolCallId: "call_shot", content: [{ type: "text", text: "the page" }, { type: "image", source: { type: "data", value: PNG, mimeType: "image/png" } }] }];
    const inp2 = input(p, "", next, { threadId: inp.threadId, tools: [SCREENSHOT] });
    const r2 = await send(p, inp2);
    check(ok(r2) && text(r2) === "got the screenshot", "the run with the image result finishes", { request: request(inp2), response: summary(r2) });
  });

  await kase(c("tool-calls.mdx §Frontend tools: pendingToolCallIds names exactly the calls this run started and left unanswered (MUST)"), async () => {
    const first = await interrupted(p, "mixed", "read and locate", { tools: [LOCATION] });
    const { inp, r } = await resume(p, first, [{ interruptId: first.interrupts[0].id, status: "resolved", payload: { decision: "approve" } }], { tools: [LOCATION] });
    check(ok(r), "the resumed run finishes with success", { request: request(inp), response: summary(r) });
    const startedIds = r.events.filter((e) => e.type === "TOOL_CALL_START").map((e) => e.toolCallId);
    const unanswered = startedIds.filter((id) => !resultOf(r, id));
    const pending = finished(r).outcome?.pendingToolCallIds;
    if (pending && pending.length) check(JSON.stringify(pending) === JSON.stringify(unanswered), "pendingToolCallIds = started and unanswered in this run", { startedIds, unanswered, pending, response: summary(r) });
    const all = [...first.r.events, ...r.events].filter((e) => e.type === "TOOL_CALL_START").map((e) => e.toolCallId);
    check(all.includes("call_mix_loc"), "the frontend call reaches the client in one of the two runs", { response: summary(r) });
  });

  await kase(c("approval-gated frontend tool: not announced before its approval, announced after it"), async () => {
    const first = await interrupted(p, "gated-frontend", "order it", { tools: [ORDER] });
    check(!started(first.r, "call_order"), "no TOOL_CALL_* for the gated call in the interrupted run", { response: summary(first.r) });
    const { inp, r } = await resume(p, first, [{ interruptId: first.interrupts[0].id, status: "resolved", payload: { decision: "approve" } }], { tools: [ORDER] });
    check(ok(r) && started(r, "call_order") && !resultOf(r, "call_order"), "announced after approval, left for the client", { request: request(inp), response: summary(r) });
  });

  await kase(c("approval-gated frontend tool: a denied call is never announced"), async () => {
    const first = await interrupted(p, "gated-frontend-deny", "order it", { tools: [ORDER] });
    const { inp, r } = await resume(p, first, [{ interruptId: first.interrupts[0].id, status: "resolved", payload: { decision: "deny", reason: "no" } }], { tools: [ORDER] });
    check(ok(r) && !started(first.r, "call_order") && !started(r, "call_order"), "never announced", { request: request(inp), first: summary(first.r), response: summary(r) });
  });

  await kase(c("lifecycle.mdx #cancelled-runs: a cancelled run ends with the cancelled outcome and no invented usage"), async () => {
    const inp = input(p, "cancel", [user("u1", "slow")]);
    let cancel;
    const r = await send(p, inp, {
      onEvent: async (e) => {
        if (e.type === "RUN_STARTED") cancel = await fetch(`${base}/runs/${encodeURIComponent(inp.runId)}/cancel`, { method: "POST" });
      },
    });
    check(cancel?.status === 202, "the cancel is accepted", { cancel: cancel?.status });
    const f = finished(r);
    if (p.version) check(f?.outcome?.type === "cancelled", "the outcome is cancelled", { response: summary(r) });
    else check(f && f.outcome?.type !== "success" || r.events.some((e) => e.type === "RUN_ERROR") || f?.outcome === undefined, "the run ends", { response: summary(r) });
    const zero = (f?.usage ?? []).some((u) => !u.inputTokens && !u.outputTokens);
    check(!zero, "usage is absent rather than zero when unknown", { response: summary(r) });
  });

  await kase(c("run-input.mdx §messages: the client's history is the complete history: an edited earlier message reaches the model (MUST)"), async () => {
    const msgs = [user("u1", "edit me: one")];
    const inp = input(p, "edit", msgs);
    const r = await send(p, inp);
    check(ok(r) && text(r) === "answer one", "the first run", { request: request(inp), response: summary(r) });
    // The client edits its message and regenerates (CopilotKit's edit):
    // the same id, new text, and the answer dropped.
    const inp2 = input(p, "", [user("u1", "edit me: two")], { threadId: inp.threadId });
    const r2 = await send(p, inp2);
    check(ok(r2) && text(r2) === "answer to the edit", "the model answers the edited history", { request: request(inp2), response: summary(r2) });
  });

  await kase(c("snapshots.mdx §Snapshots: a MESSAGES_SNAPSHOT when the client's history differs from what the model is sent (SHOULD)"), async () => {
    // The client alters the result of a call the server ran: the server
    // keeps its own (a client message never stands in for it), so the
    // baselines differ and the run should resynchronise the client.
    const first = await interrupted(p, "snapshot", "read it");
    const { r } = await resume(p, first, [{ interruptId: first.interrupts[0].id, status: "resolved", payload: { decision: "approve" } }]);
    const msgs = history(first.msgs, r).map((m) => (m.role === "tool" && m.toolCallId === "call_read" ? { ...m, content: "tampered" } : m));
    check(msgs.some((m) => m.content === "tampered"), "harness: the client's history has the call's result", { messages: msgs });
    const inp2 = input(p, "", [...msgs, user("u2", "hi")], { threadId: first.inp.threadId });
    const r2 = await send(p, inp2);
    const snap = r2.events.find((e) => e.type === "MESSAGES_SNAPSHOT");
    check(ok(r2) && snap, "a MESSAGES_SNAPSHOT in the run", { request: request(inp2), response: summary(r2) });
    const tool = snap.messages.find((m) => m.role === "tool" && m.toolCallId === "call_read");
    check(JSON.stringify(tool?.content ?? "").includes("hello from a.txt"), "the snapshot carries the server's result, not the client's", { snapshot: snap });
  });

  // What CopilotKit sends (react-core v2 with the runtime): see
  // examples/copilotkit. Not spec rules, but what CopilotKit needs.
  await kase(c("copilotkit: a resume that reuses the interrupted run's runId is accepted"), async () => {
    const first = await interrupted(p, "ck-runid", "read it");
    const { inp, r } = await resume(p, first, [{ interruptId: first.interrupts[0].id, status: "resolved", payload: { decision: "approve" } }], { runId: first.inp.runId });
    check(ok(r) && resultText(resultOf(r, "call_read"))?.includes("hello from a.txt"), "the call runs", { request: request(inp), response: summary(r) });
  });

  await kase(c("copilotkit: the tool message echoing the decision beside the resume entry is not taken as the result"), async () => {
    const first = await interrupted(p, "ck-echo", "read it");
    const it = first.interrupts[0];
    const msgs = [...first.msgs];
    if (!msgs.some((m) => m.toolCalls?.some((t) => t.id === it.toolCallId))) {
      msgs.push({ id: "a-echo", role: "assistant", toolCalls: [{ id: it.toolCallId, type: "function", function: { name: "read_file", arguments: '{"path":"a.txt"}' } }] });
    }
    msgs.push({ id: "t-echo", role: "tool", toolCallId: it.toolCallId, content: JSON.stringify({ approved: true }) });
    // toolrun's own payload, so that this case checks the echo alone.
    const inp = input(p, "", msgs, { threadId: first.inp.threadId, resume: [{ interruptId: it.id, status: "resolved", payload: { decision: "approve" } }] });
    const r = await send(p, inp);
    check(ok(r) && resultText(resultOf(r, "call_read"))?.includes("hello from a.txt"), "the call runs and its real result is sent", { request: request(inp), response: summary(r) });
  });

  for (const [what, payload, want, not] of [
    ["{approved: true}", { approved: true }, "hello from a.txt", null],
    ["{approved: false}", { approved: false }, null, "hello from a.txt"],
    ["{approved: true, editedArgs}", { approved: true, editedArgs: { path: "b.txt" } }, "hello from b.txt", "hello from a.txt"],
  ]) {
    await kase(c(`interrupts.mdx (concepts): the ${what} payload is accepted`), async () => {
      const first = await interrupted(p, "ck-payload-" + what.replace(/\W+/g, "-"), "read it");
      const { inp, r } = await resume(p, first, [{ interruptId: first.interrupts[0].id, status: "resolved", payload }]);
      const res = resultText(resultOf(r, "call_read"));
      check(ok(r) && (want === null || res?.includes(want)) && (not === null || !res?.includes(not)), "the decision is applied", { request: request(inp), response: summary(r) });
    });
  }

  await kase(c("copilotkit: a tool_call interrupt's responseSchema advertises the {approved, editedArgs} payload"), async () => {
    const first = await interrupted(p, "ck-schema", "read it");
    const rs = JSON.stringify(first.interrupts[0].responseSchema);
    check(rs.includes('"approved"') && rs.includes('"editedArgs"'), "responseSchema names approved and editedArgs", { responseSchema: first.interrupts[0].responseSchema });
  });

  await kase(c("catching up: after a decision over the JSON API, the chat's next message is taken"), async () => {
    const first = await interrupted(p, "elsewhere", "read it");
    const it = first.interrupts[0];
    const d = await fetch(`${base}/api/interrupts/${encodeURIComponent(it.id)}/decision`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ decision: "approve" }) });
    check(d.status === 200, "the decision is taken", { status: d.status, body: await d.text() });
    // At once, as a chat that learns of the decision does: the run the
    // decision started may still be in flight, and the message waits for it.
    const inp = input(p, "", [...first.msgs, user("u2", "hi")], { threadId: first.inp.threadId });
    const r = await send(p, inp);
    check(ok(r), "the next message runs", { request: request(inp), response: summary(r) });
  });

  if (p.version) await kase(c("versioning.mdx §Version negotiation: a newer minor is served, answered with the producer's own version (MUST)"), async () => {
    const inp = input(p, "newer", [user("u1", "hi")], { protocolVersion: "1.9" });
    const r = await send(p, inp);
    check(ok(r), "served", { request: request(inp), response: summary(r) });
    check(r.events[0]?.protocolVersion && r.events[0].protocolVersion !== "1.9", "its own version, not an echo", { response: summary(r) });
  });
}

// The schema cases: every event of every run above, and every input the
// cases sent as well-formed.
const report = (name, list) => results.push({ case: name, ok: list.length === 0, detail: list.length ? { what: `${list.length} violation(s)`, first: list.slice(0, 3) } : undefined });
report("schema.json: every event validates (Event) [both clients]", violations.schema);
report("@ag-ui/core 1.0.0 EventSchemas: every event of the 1.0 client validates", violations.zod["1.0"]);
report("@ag-ui/core 0.0.59 EventSchemas: every event of the client without protocolVersion validates (versioning.mdx §Downgrading)", violations.zod.legacy);
report("harness: every input sent as well-formed validates against schema.json RunAgentInput", violations.inputs);
report("run-input.mdx §Identity: RUN_STARTED and RUN_FINISHED carry the input's threadId and runId (MUST)", violations.identity);
report("tool-calls.mdx §Error Handling: no tool call or text message is left open at RUN_FINISHED (MUST)", violations.open);
for (const r of results.slice(-6)) console.log(JSON.stringify(r));

const failed = results.filter((r) => !r.ok).length;
console.log(`conformance: ${results.length} cases, ${failed} failed`);
