// server.mjs is the CopilotKit runtime of the example: @copilotkit/runtime's
// v2 CopilotRuntime with toolrun serve registered as an AG-UI HttpAgent,
// unchanged, under /api/copilotkit, and the bundled chat of build.mjs at /.
//
//   node build.mjs
//   toolrun serve --addr 127.0.0.1:8080 &
//   TOOLRUN_URL=http://127.0.0.1:8080/ node server.mjs
//
// AGUI_CLIENT=1.0.0 registers toolrun with @ag-ui/client 1.0.0's HttpAgent; the default
// is 0.0.59, the version CopilotKit pins. PORT (default 3000) is where it
// listens.
import http from "node:http";
import { readFile } from "node:fs/promises";
import { dirname, extname, join } from "node:path";
import { CopilotRuntime, InMemoryAgentRunner } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";
import { HttpAgent as HttpAgent100 } from "@ag-ui/client";
import { HttpAgent as HttpAgent0059 } from "@ag-ui/client-0.0.59";

const here = dirname(new URL(import.meta.url).pathname);
const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".woff2": "font/woff2", ".woff": "font/woff", ".ttf": "font/ttf", ".svg": "image/svg+xml" };

// startApp serves the app for the toolrun serve at toolrunURL with the
// @ag-ui/client version given, on port (0: any), and returns its URL and
// a function that closes it.
export async function startApp({ toolrunURL, client = "0.0.59", port = 0 }) {
  // The example makes no call home: CopilotKit's telemetry is off unless asked for.
  process.env.COPILOTKIT_TELEMETRY_DISABLED ??= "true";
  const HttpAgent = client === "1.0.0" ? HttpAgent100 : HttpAgent0059;
  const runtime = new CopilotRuntime({
    agents: { default: new HttpAgent({ url: toolrunURL }) },
    runner: new InMemoryAgentRunner(),
  });
  const api = createCopilotNodeListener({ runtime, basePath: "/api/copilotkit" });
  const server = http.createServer(async (req, res) => {
    if (req.url.startsWith("/api/copilotkit")) return api(req, res);
    const path = req.url === "/" ? "/index.html" : req.url.split("?")[0];
    try {
      const file = path === "/index.html" ? join(here, "index.html") : join(here, "dist", path.replace(/\.\.+/g, ""));
      const body = await readFile(file);
      res.writeHead(200, { "Content-Type": types[extname(file)] ?? "application/octet-stream" });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { url } = await startApp({ toolrunURL: process.env.TOOLRUN_URL ?? "http://127.0.0.1:8080/", client: process.env.AGUI_CLIENT ?? "0.0.59", port: Number(process.env.PORT ?? 3000) });
  console.log(`copilotkit example: listening on ${url}`);
}
