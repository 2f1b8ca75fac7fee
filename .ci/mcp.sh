#!/usr/bin/env bash
# Installs the third-party MCP server that package mcptool's integration
# tests run: @modelcontextprotocol/server-everything, pinned, from npm, into
# mcptool/testdata/everything/node_modules (git-ignored). Needs node >= 18
# and npm. Idempotent: a second run with the same version does nothing.
#   bash .ci/mcp.sh
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=2026.8.31
DIR=mcptool/testdata/everything
PKG=$DIR/node_modules/@modelcontextprotocol/server-everything

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "== installing node and npm"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

if [ -f "$PKG/package.json" ] && grep -q "\"version\": \"$VERSION\"" "$PKG/package.json"; then
  echo "== server-everything $VERSION already installed"
  exit 0
fi
echo "== npm install @modelcontextprotocol/server-everything@$VERSION"
mkdir -p "$DIR"
npm install --prefix "$DIR" --no-save --no-audit --no-fund --ignore-scripts \
  "@modelcontextprotocol/server-everything@$VERSION" >/dev/null
test -f "$PKG/dist/index.js"
