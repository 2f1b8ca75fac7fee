// build.mjs bundles src/app.jsx with esbuild into dist/, once per
// @ag-ui/client version: dist/0.0.59/ as CopilotKit pins it, and
// dist/1.0.0/ with @ag-ui/client and @ag-ui/core 1.0.0 in its place (what
// an app gets with npm "overrides" on @ag-ui/client 1.0.0).
import * as esbuild from "esbuild";
import { createRequire } from "node:module";
import { dirname } from "node:path";

const require = createRequire(import.meta.url);
const here = dirname(new URL(import.meta.url).pathname);

export async function build(version) {
  const alias = {};
  if (version === "1.0.0") {
    alias["@ag-ui/client"] = dirname(require.resolve("@ag-ui/client/package.json")) + "/dist/index.mjs";
    alias["@ag-ui/core"] = dirname(require.resolve("@ag-ui/core/package.json")) + "/dist/index.mjs";
  }
  await esbuild.build({
    entryPoints: [here + "/src/app.jsx"],
    bundle: true,
    outdir: `${here}/dist/${version}`,
    format: "esm",
    platform: "browser",
    jsx: "automatic",
    define: { "process.env.NODE_ENV": '"production"' },
    loader: { ".woff": "file", ".woff2": "file", ".ttf": "file", ".svg": "file", ".png": "file" },
    alias,
    logLevel: "warning",
    minify: true,
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const v of ["0.0.59", "1.0.0"]) await build(v);
}
