#!/usr/bin/env bash
# A toolrun serve client with curl. It asks for a file to be read, which
# the server runs with --require-approval read_file, so the run ends with
# an interrupt; it approves the call and streams the run that goes on.
# curl --fail-with-body prints an error's JSON body ({"error": {"code",
# "message"}}) and fails. New thread and run ids each time, so it can run
# again and again.
#
#   toolrun serve --script serve/testdata/agui-client/scenes.jsonl \
#       --workdir serve/testdata/agui-client/files --require-approval read_file &
#   bash docs/clients/client.sh http://127.0.0.1:8080/
set -euo pipefail
URL="${1:-http://127.0.0.1:8080/}"
THREAD="sh-$RANDOM$RANDOM-$(date +%s%N)"

post() {
  curl -sS -N --fail-with-body -H 'Content-Type: application/json' -H 'Accept: text/event-stream' --data-binary "$1" "$URL"
}

echo "run 1: ask"
OUT=$(post '{"threadId":"'"$THREAD"'","runId":"'"$THREAD"'-1","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"read it"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}')
echo "$OUT"
# The interrupt's id, from RUN_FINISHED's outcome.
INTERRUPT=$(printf '%s\n' "$OUT" | grep '"RUN_FINISHED"' | grep -o '"interrupts":\[{[^]]*' | grep -o '"id":"[^"]*"' | head -1 | cut -d'"' -f4)
if [ -z "$INTERRUPT" ]; then
  echo "no interrupt" >&2
  exit 1
fi
echo "interrupt $INTERRUPT"

echo "run 2: approve"
post '{"threadId":"'"$THREAD"'","runId":"'"$THREAD"'-2","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"read it"}],"tools":[],"context":[],"state":{},"forwardedProps":{},"resume":[{"interruptId":"'"$INTERRUPT"'","status":"resolved","payload":{"decision":"approve"}}]}'

echo "an error, on purpose: a body that is not JSON"
if post '{"threadId":'; then
  echo "the server took a body that is not JSON" >&2
  exit 1
fi
echo
