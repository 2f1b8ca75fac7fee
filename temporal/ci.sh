#!/usr/bin/env bash
# CI for the nested module github.com/toolrun/toolrun/temporal:
#
#   1. builds the Temporal CLI from the Go module proxy, once: the binary is
#      kept in $(go env GOPATH)/bin and rebuilt only if it is not the pinned
#      version (cold: about 15 minutes on 2 cores, most of it downloading
#      the server's modules; warm: nothing);
#   2. starts its dev server (in memory, no UI) on 127.0.0.1, with the
#      module's search attributes registered, and waits until it serves, at
#      most 60 s;
#   3. runs go vet and go test -race in this module, with TEMPORAL_ADDRESS
#      set, so the tests against the server run (a worker killed mid-run, a
#      worker stopped with SIGTERM, approvals and search attributes, a
#      cancelled run's search attributes,
#      pending approvals read and decided with no worker running, the
#      scale smoke test, a rolling restart of 8 workers, an upgrade from
#      the previous release's recorded workers, which it builds with go
#      build, to this tree's as Worker Deployment Versions, the golden
#      histories replayed): with CI set they fail rather than skip when
#      the server or the go command is missing. Worker versioning needs no
#      dynamic config on this server;
#   4. runs, against the same server, the tests of "toolrun serve
#      --temporal" in cmd/toolrun (go test -race -run TestServeTemporal):
#      the Node AG-UI client's every scenario (drive.mjs, with @ag-ui/client
#      that .ci/serve.sh installs) and the approval inbox in headless
#      Chromium, a call listed and approved while no worker runs; with CI
#      set they fail rather than skip when node, the client or Chromium is
#      missing;
#   5. stops the server, whatever happened.
#
# Run from anywhere: bash temporal/ci.sh
set -euo pipefail
cd "$(dirname "$0")"

cli_version=v1.5.1 # the newest CLI the proxy serves that `go install` can build (no replace directives); Temporal server 1.29.1
bin="$(go env GOPATH)/bin/temporal"

echo "== temporal: Temporal CLI $cli_version"
if ! go version -m "$bin" 2>/dev/null | grep -Eq "^\s+mod\s+github.com/temporalio/cli\s+$cli_version\s"; then
  echo "building it (cold: ~15 min; cached afterwards in $bin)"
  start=$SECONDS
  go install "github.com/temporalio/cli/cmd/temporal@$cli_version"
  echo "built in $((SECONDS - start)) s"
fi

# A free port: 7233 unless something (another dev server, say) holds it.
port=
for p in 7233 17233 27233 37233; do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    port=$p
    break
  fi
done
if [ -z "$port" ]; then
  echo "temporal/ci.sh: no free port for the dev server" >&2
  exit 1
fi

log="$(mktemp -t temporal-dev.XXXXXX.log)"
echo "== temporal: dev server on 127.0.0.1:$port (log: $log)"
# The search attributes the workflow upserts (temporal.SearchAttributes).
# The long poll is 10 s rather than a minute: a stopping worker lets its
# polls under way end (temporal.NewWorker), which on this server, that does
# not complete them on shutdown, takes up to the long poll; the tests stop
# many idle workers. The SDK's polls still leave the server 60 s to answer.
"$bin" server start-dev --headless --ip 127.0.0.1 --port "$port" --log-level warn \
  --dynamic-config-value 'matching.longPollExpirationInterval="10s"' \
  --search-attribute ToolrunStatus=Keyword \
  --search-attribute ToolrunAwaitingApproval=Bool \
  --search-attribute ToolrunModel=Keyword \
  --search-attribute ToolrunTurns=Int \
  --search-attribute ToolrunCostUSD=Double \
  >"$log" 2>&1 &
server=$!
stop_server() {
  status=$?
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  if [ "$status" -eq 0 ]; then
    rm -f "$log"
  else
    echo "temporal/ci.sh: failed; the dev server's log is $log" >&2
  fi
}
trap stop_server EXIT

ready=
for _ in $(seq 1 120); do
  if ! kill -0 "$server" 2>/dev/null; then
    break
  fi
  if "$bin" operator cluster health --address "127.0.0.1:$port" >/dev/null 2>&1; then
    ready=1
    break
  fi
  sleep 0.5
done
if [ -z "$ready" ]; then
  echo "temporal/ci.sh: the dev server did not start; its log:" >&2
  tail -n 50 "$log" >&2
  exit 1
fi

export TEMPORAL_ADDRESS="127.0.0.1:$port"
echo "== temporal: go vet ./..."
go vet ./...
echo "== temporal: go test -race ./..."
# The race detector and a busy machine slow the tests against the server;
# the default 10-minute timeout is too tight for them.
go test -race -timeout 30m ./...
echo "== temporal: toolrun serve --temporal (cmd/toolrun: go test -race -run TestServeTemporal)"
(cd ../cmd/toolrun && go test -race -timeout 30m -run 'TestServeTemporal' .)
