#!/usr/bin/env bash
# Installs the AG-UI client that the serve tests drive "toolrun serve"
# with: @ag-ui/client, pinned in serve/testdata/agui-client/package.json
# and its package-lock.json, into serve/testdata/agui-client/node_modules
# (git-ignored). Needs node >= 18 and npm, which it installs from Debian if
# missing. Idempotent.
#   bash .ci/serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=serve/testdata/agui-client

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "== installing node and npm"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

if [ -f "$DIR/node_modules/@ag-ui/client/package.json" ] && grep -q '"version": "1.0.0"' "$DIR/node_modules/@ag-ui/client/package.json"; then
  echo "== @ag-ui/client 1.0.0 already installed"
  exit 0
fi
echo "== npm ci in $DIR (@ag-ui/client 1.0.0)"
npm ci --prefix "$DIR" --no-audit --no-fund --ignore-scripts >/dev/null
test -f "$DIR/node_modules/@ag-ui/client/package.json"
