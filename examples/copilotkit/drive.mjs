// drive.mjs drives the example in headless Chromium (Debian's, through
// puppeteer-core) against a running "toolrun serve --script scenes.jsonl
// --workdir FILES --require-approval read_file": for each @ag-ui/client
// version of the runtime's HttpAgent (1.0.0, and 0.0.59 as CopilotKit
// pins it; the browser has CopilotKit's own, see build.mjs), the chat through a plain message, an approval
// approved, denied and edited, two parallel approvals, the next message
// after an approval, useFrontendTool and useHumanInTheLoop.
//
// Every request the runtime's HttpAgent makes to toolrun, and its
// response, is recorded (a wrapper around fetch in this process), so a
// flow that fails says what went to toolrun and what came back; and a
// screenshot of each flow's end is written to $TOOLRUN_SCREENSHOTS (or
// the temporary folder).
//
// Output: one JSON line per flow, {"flow", "client", "ok", "detail"};
// then "copilotkit: N flows, M failed". Exit status 0 whatever failed:
// the Go test judges.
//
// Usage: node drive.mjs TOOLRUN_URL [CLIENT...]   (CLIENT: 0.0.59, 1.0.0)
import { tmpdir } from "node:os";
import { mkdirSync } from "node:fs";
import puppeteer from "puppeteer-core";
import { startApp } from "./server.mjs";
import { build } from "./build.mjs";

const toolrunURL = process.argv[2];
const clients = process.argv.length > 3 ? process.argv.slice(3) : ["1.0.0", "0.0.59"];
if (!toolrunURL) {
  console.error("usage: node drive.mjs TOOLRUN_URL [CLIENT...]");
  process.exit(2);
}
const shots = process.env.TOOLRUN_SCREENSHOTS || tmpdir();
mkdirSync(shots, { recursive: true });

// The traffic to toolrun, as the runtime's HttpAgent sends it.
const traffic = [];
const realFetch = globalThis.fetch;
globalThis.fetch = async (url, init) => {
  const u = String(url?.url ?? url);
  if (!u.startsWith(toolrunURL.replace(/\/$/, ""))) return realFetch(url, init);
  const entry = { url: u, request: typeof init?.body === "string" ? JSON.parse(init.body) : undefined };
  traffic.push(entry);
  const res = await realFetch(url, init);
  entry.status = res.status;
  entry.done = res.clone().text().then((t) => { entry.response = t; }, (e) => { entry.response = "(read failed: " + e + ")"; });
  return res;
};

// events parses the SSE events of a recorded response.
const events = (t) => (t.response ?? "").split(/\n\n/).map((b) => b.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("")).filter(Boolean).map((d) => { try { return JSON.parse(d); } catch { return { unparsed: d }; } });
// resultOf is the content of call id's TOOL_CALL_RESULT in the traffic
// since since, read once every response of it has been read whole (the
// chat may show the answer before the proxy has the stream's end).
const resultOf = async (since, id) => {
  await Promise.all(traffic.slice(since).map((t) => t.done));
  return traffic.slice(since).flatMap(events).find((e) => e.type === "TOOL_CALL_RESULT" && e.toolCallId === id)?.content;
};

// brief shortens the recorded traffic for a failure's detail.
function brief(since) {
  return traffic.slice(since).map((t) => ({
    request: t.request ? { runId: t.request.runId, protocolVersion: t.request.protocolVersion, messages: t.request.messages?.map((m) => `${m.role}${m.toolCallId ? "(" + m.toolCallId + ")" : ""}${m.toolCalls ? "[" + m.toolCalls.map((c) => c.id).join(",") + "]" : ""}: ${typeof m.content === "string" ? m.content.slice(0, 60) : JSON.stringify(m.content ?? "").slice(0, 60)}`), resume: t.request.resume, tools: t.request.tools?.map((x) => x.name) } : t.url,
    status: t.status,
    response: t.status === 200 ? events(t).map((e) => (["RUN_FINISHED", "RUN_ERROR", "TOOL_CALL_RESULT", "TOOL_CALL_START"].includes(e.type) ? e : e.type)) : t.response,
  }));
}

class Fail extends Error {}
function check(cond, what) {
  if (!cond) throw new Fail(what);
}

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});

await build();
const results = [];
for (const client of clients) {
  const app = await startApp({ toolrunURL, client });
  const flow = async (name, fn) => {
    const since = traffic.length;
    const page = await browser.newPage();
    page.client = client;
    page.flow = name.replace(/\W+/g, "-");
    await page.setViewport({ width: 1000, height: 900 });
    const consoleErrors = [];
    page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text().slice(0, 400)); });
    page.on("pageerror", (e) => consoleErrors.push(String(e).slice(0, 400)));
    const r = { flow: name, client, ok: true };
    try {
      await page.goto(app.url + "/", { waitUntil: "load", timeout: 60000 });
      await page.waitForSelector("textarea", { timeout: 20000 });
      await fn(page, since);
    } catch (e) {
      r.ok = false;
      r.detail = { what: e instanceof Fail ? e.message : String(e).slice(0, 500), page: (await page.evaluate(() => document.body.innerText).catch(() => "")).slice(-1500), consoleErrors: consoleErrors.slice(0, 8) };
    }
    await Promise.all(traffic.slice(since).map((t) => t.done));
    if (!r.ok) r.detail.toolrun = brief(since);
    await page.screenshot({ path: `${shots}/copilotkit-${client}-${name.replace(/\W+/g, "-")}.png` }).catch(() => {});
    await page.close().catch(() => {});
    results.push(r);
    console.log(JSON.stringify(r));
  };

  const say = async (page, text) => {
    await page.focus("textarea");
    await page.keyboard.type(text);
    await page.keyboard.press("Enter");
  };
  const see = (page, text, n = 1) => page.waitForFunction((t, n) => document.body.innerText.split(t).length - 1 >= n, { timeout: 20000 }, text, n).catch(() => { throw new Fail(`the chat shows ${JSON.stringify(text)}${n > 1 ? " " + n + " times" : ""}`); });
  // click clicks the element of testid once the chat shows it, with a
  // screenshot of what the user saw (the approval, the confirmation).
  const click = async (page, testid) => {
    const el = await page.waitForSelector(`[data-testid="${testid}"]`, { timeout: 20000 }).catch(() => { throw new Fail(`the chat shows ${testid}`); });
    await page.screenshot({ path: `${shots}/copilotkit-${page.client}-${page.flow}-before-${testid}.png` }).catch(() => {});
    await el.click();
  };

  await flow("chat", async (page) => {
    await say(page, "hi");
    await see(page, "hello from the script");
  });

  await flow("approve, then the next message", async (page, since) => {
    await say(page, "read it");
    await click(page, "approve-call_read");
    await see(page, "it says hello");
    const res = await resultOf(since, "call_read");
    check(JSON.stringify(res ?? "").includes("hello from a.txt"), "toolrun ran the approved call (TOOL_CALL_RESULT of call_read has a.txt)");
    await say(page, "hi");
    await see(page, "hello from the script");
  });

  await flow("deny", async (page, since) => {
    await say(page, "read secret");
    await click(page, "deny-call_secret");
    await see(page, "I may not read it");
    const res = JSON.stringify((await resultOf(since, "call_secret")) ?? "");
    check(!res.includes("top secret"), "the denied call did not run");
  });

  await flow("edit", async (page, since) => {
    await say(page, "read wrong");
    await click(page, "edit-call_wrong");
    await see(page, "read the edited file");
    check(JSON.stringify((await resultOf(since, "call_wrong")) ?? "").includes("hello from a.txt"), "the call ran with the edited input (a.txt)");
  });

  await flow("two parallel approvals", async (page, since) => {
    await say(page, "read both");
    await click(page, "approve-call_b");
    await click(page, "deny-call_a");
    await see(page, "read b, not a");
    check(JSON.stringify((await resultOf(since, "call_b")) ?? "").includes("hello from b.txt"), "b's approval reached b");
    check(!JSON.stringify((await resultOf(since, "call_a")) ?? "").includes("hello from a.txt"), "a's denial reached a");
  });

  // Caught up: the call is approved over toolrun's JSON API (as the
  // inbox does) while the chat shows it; the user then approves in the
  // chat too. decidedElsewhere does that much.
  const decidedElsewhere = async (page, since) => {
    await say(page, "read it");
    await page.waitForSelector('[data-testid="approve-call_read"]', { timeout: 20000 }).catch(() => { throw new Fail("the chat shows approve-call_read"); });
    await Promise.all(traffic.slice(since).map((t) => t.done));
    const it = traffic.slice(since).flatMap(events).find((e) => e.type === "RUN_FINISHED" && e.outcome?.type === "interrupt")?.outcome.interrupts[0];
    check(it, "toolrun ended the run with an interrupt");
    const d = await realFetch(new URL(`api/interrupts/${encodeURIComponent(it.id)}/decision`, toolrunURL), { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ decision: "approve" }) });
    check(d.status === 200, `the JSON API takes the decision (HTTP ${d.status}: ${await d.text()})`);
    await click(page, "approve-call_read");
  };

  // The chat is not stuck: its next message is taken.
  await flow("approved elsewhere, then the next message", async (page, since) => {
    await decidedElsewhere(page, since);
    await say(page, "hi");
    await see(page, "hello from the script");
  });

  // The chat is told what happened: it shows what the run that went on
  // said.
  await flow("approved elsewhere, the chat shows the run that went on", async (page, since) => {
    await decidedElsewhere(page, since);
    await see(page, "it says hello");
  });

  await flow("useFrontendTool", async (page) => {
    await say(page, "where am i");
    await see(page, "you are in Paris");
  });

  await flow("useHumanInTheLoop", async (page) => {
    await say(page, "order it");
    await click(page, "confirm-order-yes");
    await see(page, "ordered");
  });

  await app.close();
}
await browser.close();
console.log(`copilotkit: ${results.length} flows, ${results.filter((r) => !r.ok).length} failed`);
process.exit(0);
