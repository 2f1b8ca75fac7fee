#!/usr/bin/env bash
# Tidies every nested module's go.mod and go.sum as a user's build would
# resolve them: each module alone (GOWORK=off), the repository's own modules
# served at the release version from a file proxy of this checkout
# (.ci/consumer/mkproxy), everything else from the configured proxy.
#
#   bash .ci/tidy.sh                        # go mod tidy in every nested module
#   bash .ci/tidy.sh go get example.com/m@v1 # that command, then tidy, in each
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
# Nested modules in dependency order: a module's requirements come first.
nested=(sqlitestore toolrunotel serve temporal cmd/toolrun bench)
version=$(awk '$1 == "require" && $2 == "github.com/toolrun/toolrun" {print $3} $1 == "github.com/toolrun/toolrun" {print $2}' cmd/toolrun/go.mod | head -1)
work=$(mktemp -d -t toolrun-tidy.XXXXXX)
cleanup_cache() {
  modcache=$(go env GOMODCACHE)
  chmod -R u+w "$modcache/github.com/toolrun" "$modcache/cache/download/github.com/toolrun" 2>/dev/null || true
  rm -rf "$modcache/github.com/toolrun" "$modcache/cache/download/github.com/toolrun"
}
trap 'cleanup_cache; rm -rf "$work"' EXIT
(cd .ci/consumer && GOWORK=off go build -o "$work/mkproxy" ./mkproxy)
upstream=$(go env GOPROXY)
for m in "${nested[@]}"; do
  [ -f "$m/go.mod" ] || continue
  # The proxy is written anew for each module, so that a module tidied
  # before is served with its tidied go.mod.
  cleanup_cache
  rm -rf "$work/proxy"
  mods=(.)
  for n in "${nested[@]}"; do [ -f "$n/go.mod" ] && mods+=("$n"); done
  "$work/mkproxy" -repo "$repo" -version "$version" -o "$work/proxy" "${mods[@]}" >/dev/null
  echo "== tidy $m"
  (
    cd "$m"
    export GOWORK=off GOFLAGS=-mod=mod GOPROXY="file://$work/proxy,$upstream" GONOSUMDB=github.com/toolrun GODEBUG=goindex=0
    if [ $# -gt 0 ]; then "$@"; fi
    go mod tidy
    # The repository's own modules are checksummed per checkout, not per
    # release: their lines in go.sum would name this test version's hash.
    sed -i '/^github.com\/toolrun\/toolrun/d' go.sum
  )
done
