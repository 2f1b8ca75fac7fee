// build.mjs bundles src/app.jsx with esbuild into dist/. The browser gets
// the @ag-ui/client CopilotKit pins (0.0.59): @copilotkit/react-core 1.74
// imports the zod schemas (ActivityDeltaEventSchema, …) from
// @ag-ui/client itself, which 1.0.0 moved to @ag-ui/core/schemas, so it
// cannot be bundled with 1.0.0. The @ag-ui/client version that talks to
// toolrun is the runtime's HttpAgent (server.mjs, AGUI_CLIENT).
import * as esbuild from "esbuild";
import { dirname } from "node:path";

const here = dirname(new URL(import.meta.url).pathname);

export async function build() {
  await esbuild.build({
    entryPoints: [here + "/src/app.jsx"],
    bundle: true,
    outdir: here + "/dist",
    format: "esm",
    platform: "browser",
    jsx: "automatic",
    define: { "process.env.NODE_ENV": '"production"' },
    loader: { ".woff": "file", ".woff2": "file", ".ttf": "file", ".svg": "file", ".png": "file" },
    absWorkingDir: here,
    logLevel: "warning",
    minify: true,
  });
}

if (import.meta.url === `file://${process.argv[1]}`) await build();
