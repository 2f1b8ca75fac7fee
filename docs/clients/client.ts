// A toolrun serve client in TypeScript, with fetch only (Node 18+ or a
// browser). It asks for a file to be read, which the server runs with
// --require-approval read_file, so the run ends with an interrupt; it
// approves the call and streams the run that goes on. Every HTTP error
// prints its JSON body ({"error": {"code", "message"}}). New thread and
// run ids each time, so it can run again and again.
//
//   toolrun serve --script serve/testdata/agui-client/scenes.jsonl \
//       --workdir serve/testdata/agui-client/files --require-approval read_file &
//   npx esbuild docs/clients/client.ts --outfile=/tmp/client.mjs && node /tmp/client.mjs http://127.0.0.1:8080/
//
// With @ag-ui/client instead, see serve/testdata/agui-client/drive.mjs.

type AGUIEvent = { type: string; delta?: string; outcome?: { type: string; interrupts?: Interrupt[] } };
type Interrupt = { id: string; toolCallId?: string; message?: string };

const url = process.argv[2] ?? "http://127.0.0.1:8080/";

// post POSTs body and returns the SSE events, or null after printing the
// error body.
async function post(body: unknown): Promise<AGUIEvent[] | null> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  if (!res.ok) {
    console.log(`  HTTP ${res.status}: ${(await res.text()).trim()}`);
    return null;
  }
  const events: AGUIEvent[] = [];
  for (const line of (await res.text()).split("\n")) {
    if (!line.startsWith("data:")) continue;
    const ev = JSON.parse(line.slice(5)) as AGUIEvent;
    events.push(ev);
    console.log("  event", ev.type, ev.delta ?? "");
  }
  return events;
}

const thread = "ts-" + crypto.randomUUID();
const messages = [{ id: "u1", role: "user", content: "read it" }];
const base = { threadId: thread, messages, tools: [], context: [], state: {}, forwardedProps: {}, protocolVersion: "1.0" };

console.log("run 1: ask");
const first = await post({ ...base, runId: crypto.randomUUID() });
const outcome = first?.[first.length - 1]?.outcome;
if (!first || outcome?.type !== "interrupt" || !outcome.interrupts) {
  console.log("no interrupt");
  process.exit(1);
}
const it = outcome.interrupts[0];
console.log("interrupt", it.id, "for call", it.toolCallId, "-", it.message ?? "");

console.log("run 2: approve");
const second = await post({ ...base, runId: crypto.randomUUID(), resume: [{ interruptId: it.id, status: "resolved", payload: { decision: "approve" } }] });
if (!second) process.exit(1);
console.log("answer:", second.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join(""));

console.log("an error, on purpose: a body that is not JSON");
await post('{"threadId":');
