#!/usr/bin/env bash
# Installs what the AG-UI conformance test and the CopilotKit browser test
# need: the npm packages pinned by the package-lock.json of
# serve/testdata/agui-conformance (@ag-ui/client and @ag-ui/core 1.0.0 and
# 0.0.59, ajv) and of examples/copilotkit (@copilotkit/runtime,
# @copilotkit/react-core, both @ag-ui/client versions, esbuild,
# puppeteer-core), each into its folder's node_modules (git-ignored), and
# Chromium from Debian. Idempotent, and fast when already installed: a
# folder is installed again only when its package-lock.json changed.
#   bash .ci/copilotkit.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "== installing node and npm"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

for dir in serve/testdata/agui-conformance examples/copilotkit; do
  stamp="$dir/node_modules/.toolrun-lock.sha256"
  want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "== $dir: packages already installed"
    continue
  fi
  echo "== npm ci in $dir"
  # npm's warnings (engines some transitive packages ask for) go to a log,
  # shown only if the install fails.
  log=$(mktemp)
  if ! npm ci --prefix "$dir" --no-audit --no-fund --ignore-scripts >"$log" 2>&1; then
    cat "$log"
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
  echo "$want" > "$stamp"
done
