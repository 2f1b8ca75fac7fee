#!/usr/bin/env bash
# staticcheck over every module of the repository, at a pinned version:
# its findings outside tests fail CI; those in tests are printed and pass.
# Run from anywhere:
#   bash .ci/staticcheck.sh
set -euo pipefail
cd "$(dirname "$0")/.."

version=v0.8.2
bin="$(go env GOPATH)/bin/staticcheck"
if ! [ -x "$bin" ] || ! "$bin" -version 2>/dev/null | grep -q "${version#v}"; then
  echo "== installing staticcheck $version"
  # Installed outside the workspace, so go.work's modules do not take part.
  (cd / && GOWORK=off go install "honnef.co/go/tools/cmd/staticcheck@$version")
fi

fail=0
# .ci/temporaldev (CI's Temporal dev server) is a module outside go.work.
for mod in . bench cmd/toolrun serve sqlitestore temporal toolrunotel .ci/temporaldev; do
  echo "== staticcheck ($mod)"
  gowork=
  [ "$mod" = .ci/temporaldev ] && gowork=off
  out="$(cd "$mod" && GOWORK=$gowork "$bin" ./... 2>&1)" || true
  [ -z "$out" ] && continue
  printf '%s\n' "$out"
  # A finding is "path:line:col: message"; one in a _test.go file is
  # reported but does not fail the run.
  if printf '%s\n' "$out" | grep -v '_test\.go:' | grep -q .; then
    fail=1
  fi
done
if [ "$fail" -ne 0 ]; then
  echo "staticcheck: findings outside tests" >&2
  exit 1
fi
