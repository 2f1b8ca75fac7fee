#!/usr/bin/env bash
# CI for the nested module github.com/toolrun/toolrun/temporal:
#
#   1. builds the Temporal dev server of .ci/temporaldev (Temporal server
#      v1.32 in one program, as the CLI's `server start-dev` runs it; the
#      CLI that embeds it cannot be built with go install) into
#      $(go env GOPATH)/bin/toolrun-temporaldev (cold: about 5 to 15
#      minutes on 2 cores, most of it downloading and compiling the
#      server's modules; warm: a link, seconds);
#   2. starts it (in memory, no UI) on 127.0.0.1, with the module's search
#      attributes registered in two namespaces: "default", where the server
#      ends a stopping worker's polls at once
#      (frontend.enableCancelWorkerPollsOnShutdown), so an idle worker
#      stops in milliseconds, and "polls-kept", where it does not (as
#      servers before 1.32 do, and later ones by default), with a long
#      poll of 10 s, where the tests of what a worker does on such a server
#      run; and waits until it serves, at most 60 s;
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

bin="$(go env GOPATH)/bin/toolrun-temporaldev"
echo "== temporal: the dev server of .ci/temporaldev (Temporal server v1.32)"
start=$SECONDS
# Its own module, outside go.work: the server's requirements must not
# change the versions the workspace's modules build with.
(cd ../.ci/temporaldev && GOWORK=off go build -o "$bin" . && GOWORK=off go vet .)
echo "built and vetted in $((SECONDS - start)) s"

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
# The search attributes the workflow upserts (temporal.SearchAttributes),
# in both namespaces. In "polls-kept" a stopping worker lets its polls
# under way end (temporal.NewWorker), which on a server that does not end
# them takes up to the long poll: 10 s there rather than a minute, as the
# tests there stop many idle workers. The SDK's polls still leave the
# server 60 s to answer.
"$bin" -ip 127.0.0.1 -port "$port" -log-level warn \
  -namespace polls-kept \
  -dynamic-config-value 'frontend.enableCancelWorkerPollsOnShutdown=true' \
  -dynamic-config-value 'polls-kept:frontend.enableCancelWorkerPollsOnShutdown=false' \
  -dynamic-config-value 'polls-kept:matching.longPollExpirationInterval="10s"' \
  -search-attribute ToolrunStatus=Keyword \
  -search-attribute ToolrunAwaitingApproval=Bool \
  -search-attribute ToolrunModel=Keyword \
  -search-attribute ToolrunTurns=Int \
  -search-attribute ToolrunCostUSD=Double \
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

# The server prints "ready" once its frontend answers health checks.
ready=
for _ in $(seq 1 120); do
  if ! kill -0 "$server" 2>/dev/null; then
    break
  fi
  if grep -qx ready "$log"; then
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
